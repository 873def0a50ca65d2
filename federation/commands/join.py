"""``fedctl join`` and ``fedctl unjoin``: members that come and go while the control plane runs.

``join NAME --kubeconfig FILE [--context CTX]`` stores that one context,
minified (:mod:`federation.contexts.minify`), in the Secret
``federation-system/NAME-kubeconfig`` on the hub and registers the
MemberCluster ``NAME`` pointing at it (labels, region, zone, provider). A
running ``fedctl run`` engages the cluster from the Secret within seconds; the
health controller then reports it. An exec plugin the policy refuses
(:func:`federation.contexts.credentials.check_exec`: not on the allowlist, an
``exec.env`` setting ``PATH`` or another denied variable...) is refused before
anything is written. A bad NAME, label or allowlist entry is one ``error:`` line
and exit status 1, checked before anything is read.

``join --create-service-account`` stores a least-privilege identity instead of
the credentials it was given: with them (an admin of the member) it creates
the ServiceAccount ``federation-system/federation-control-plane`` in the
member, the member ClusterRole of :mod:`federation.rbac.roles` bound to it,
asks the TokenRequest API for a token (``--token-expiration-days``, one year
by default; the server may cap it, and the expiry is printed), and stores a
kubeconfig holding only the server, its CA and that token. Running the same
command again renews the token; the control plane re-engages on the new Secret.

``join NAME --mode pull`` needs no credentials of the member: the hub never dials it.
It makes sure the work CA exists (the hub Secret
``federation-system/federation-work-ca``, :mod:`federation.work.identity`), issues the
agent a client certificate naming exactly NAME, registers the MemberCluster with ``mode:
Pull`` and records the certificate's serial in its ``status.agentCertificate`` (the only
one the work server accepts from then on: joining again revokes the previous certificate),
writes the certificate with its key (mode 0600) and the CA to ``--out-dir``, and prints the
``fedctl agent`` command to start in (or next to) the member. The key is written only to
that directory, never printed.

``join NAME --mode pull --apply-agent --kubeconfig MEMBER.yaml --hub-address HOST:PORT``
deploys the agent too, from its shipped manifests (``config/agent``,
:func:`federation.deploy.manifests.agent_for_member`): with the member's admin credentials
it server-side applies the agent's namespace, ServiceAccount, least-privilege RBAC, the
ConfigMap (NAME and the hub address) and the Secret holding the certificate, key and work
CA, and the Deployment. The key then goes into that Secret alone: no file is written
(``--out-dir`` is refused with it).

``unjoin NAME`` taints the member ``cluster.federation.io/unjoining:NoExecute``
so every workload is placed elsewhere and its copies there deleted (a running
control plane does that), waits until no ResourceBinding names the member,
then deletes the MemberCluster and its Secret. ``--orphan`` skips the move:
our ownership label is removed from the copies in the member (they keep
running, no longer managed) and the registration is deleted at once.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from federation.commands import common, errors
from federation.commands import rbac as rbac_command
from federation.contexts import client as kube
from federation.contexts import credentials, discovery, kubeconfig, minify
from federation.controllers import install as installer
from federation.deploy import apply as deploy_apply
from federation.deploy import manifests as deploy
from federation.hub import api, bindings, manifests
from federation.rbac import roles

NAMESPACE = "federation-system"
SECRETS = kube.Resource("", "v1", "secrets", "Secret")
UNJOIN_TAINT = "cluster.federation.io/unjoining"
FIELD_MANAGER = "fedctl-join"
JSON = dict[str, Any]
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class BadInput(click.ClickException):
    """A bad argument, said in one line (``error: ...``, exit status 1), without the usage
    text click prints for its own usage errors: the line says what to fix."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def check_name(ctx: click.Context | None, param: click.Parameter | None, name: str) -> str:
    """NAME must be a DNS label: it names a MemberCluster and is part of a URL path and a
    Secret name (``../x`` would be a path in both). Checked as soon as NAME is parsed."""
    if not _NAME.fullmatch(name):  # not match: '$' accepts a trailing newline
        raise BadInput(f"NAME {name[:80]!r} is not a DNS label (lowercase a-z, 0-9 and '-', "
                       "starting and ending with a letter or digit, at most 63 characters)")
    return name


def parse_labels(text: str | None) -> dict[str, str]:
    labels = {}
    for part in common.split(text) or []:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--labels: {part[:80]!r} is not key=value")
        labels[key.strip()] = value.strip()
    return labels


def _labels(ctx: click.Context, param: click.Parameter, text: str | None) -> dict[str, str]:
    return parse_labels(text)


def _allowlist(ctx: click.Context, param: click.Parameter,
               entries: tuple[str, ...]) -> tuple[str, ...]:
    try:
        credentials.ExecAllowlist.of(entries)
    except ValueError as exc:
        raise BadInput(f"--allow-exec-command: {exc}") from None
    return entries


def secret_name(name: str) -> str:
    return f"{name}-kubeconfig"


def objects(name: str, document: JSON, labels: dict[str, str], location: dict[str, str],
            namespace: str = NAMESPACE) -> tuple[JSON, JSON]:
    """The Secret and the MemberCluster ``join`` writes."""
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": secret_name(name), "namespace": namespace,
                           "labels": {"federation.io/member-cluster": name}},
              "stringData": {minify.SECRET_KEY: minify.dump(document)}}
    spec: JSON = {"kubeconfigSecretRef": {"name": secret_name(name), "namespace": namespace,
                                          "key": minify.SECRET_KEY}}
    spec.update({k: v for k, v in location.items() if v})
    member = {"apiVersion": api.MEMBER_CLUSTERS.api_version, "kind": "MemberCluster",
              "metadata": {"name": name, "labels": labels}, "spec": spec}
    return secret, member


def _hub(hub_kubeconfig: Path | None, hub_context: str | None) -> kubeconfig.Context:
    return kubeconfig.load(hub_kubeconfig).context(hub_context)


@click.command()
@click.argument("name", callback=check_name)
@click.option("--mode", type=click.Choice(["push", "pull"]), default="push", show_default=True,
              help="push: the control plane dials the member with --kubeconfig; pull: the "
                   "member's `fedctl agent` dials the control plane (docs/agent.md).")
@click.option("--kubeconfig", "member_kubeconfig", type=click.Path(path_type=Path),
              default=None, help="Kubeconfig holding the member's credentials (push mode; "
                                 "pull mode with --apply-agent: an admin of the member).")
@click.option("--apply-agent", is_flag=True,
              help="Pull mode: also apply the agent's shipped manifests (config/agent) to "
                   "the member with --kubeconfig, its certificate in the agent's Secret "
                   "(needs --hub-address; writes no file).")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Pull mode: where the agent's certificate, key and CA are written "
                   "(default: ./NAME-agent).")
@click.option("--hub-address", default=None,
              help="Pull mode: the work server address to print in the agent's command "
                   "(the control plane's --work-bind-address as the member reaches it).")
@click.option("--context", default=None, help="Its context (default: its current context).")
@click.option("--labels", default=None, callback=_labels,
              help="MemberCluster labels, k=v,...")
@click.option("--region", default=None)
@click.option("--zone", default=None)
@click.option("--provider", default=None)
@click.option("--allow-exec-command", "allowed", multiple=True, metavar="COMMAND",
              callback=_allowlist,
              help="Trust this exec plugin command too, with any arguments (a bare name "
                   "found on the control plane's PATH, or an absolute path; repeatable).")
@click.option("--hub-kubeconfig", type=click.Path(path_type=Path), default=None,
              help="Kubeconfig of the hub (default: $KUBECONFIG, else ~/.kube/config).")
@click.option("--hub-context", default=None, help="Context of the hub (default: current).")
@click.option("--create-service-account", is_flag=True,
              help="With the given (admin) credentials, create the control plane's "
                   "ServiceAccount and member RBAC in the member and store a token for it "
                   "instead of those credentials.")
@click.option("--token-expiration-days", type=click.IntRange(1, 3650), default=365,
              show_default=True, help="With --create-service-account: the token's lifetime "
                                      "(join again to renew it).")
@rbac_command.kinds_options
@rbac_command.export_service_option
@common.clear_errors
@errors.clear_errors_for(roles.RBACError)
def join(name: str, mode: str, member_kubeconfig: Path | None, apply_agent: bool,
         out_dir: Path | None, hub_address: str | None, context: str | None, labels: dict[str, str],
         region: str | None, zone: str | None, provider: str | None, allowed: tuple[str, ...],
         hub_kubeconfig: Path | None, hub_context: str | None, create_service_account: bool,
         token_expiration_days: int, propagate_kinds: tuple[str, ...],
         no_default_kinds: bool, export_service: bool) -> None:
    """Register cluster NAME with the hub, with only its own credentials."""
    location = {"region": region or "", "zone": zone or "", "provider": provider or ""}
    if export_service and not (create_service_account or apply_agent):
        raise BadInput("--export-service grants the member role a right: only with "
                       "--create-service-account or --apply-agent, which apply that role")
    if mode == "pull":
        check_pull(apply_agent, member_kubeconfig, context, create_service_account,
                   out_dir, hub_address)
        hub = _hub(hub_kubeconfig, hub_context)
        if apply_agent:
            assert member_kubeconfig is not None and hub_address is not None
            admin = kubeconfig.load(member_kubeconfig).context(context)
            options = deploy.Options(rbac=rbac_command.settings(
                propagate_kinds, no_default_kinds, export_service=export_service))
            join_pull_with_agent(name, labels, location, hub_address, hub, admin, options)
        else:
            join_pull(name, labels, location, out_dir or Path(f"{name}-agent"), hub_address,
                      hub)
        return
    if apply_agent:
        raise BadInput("--apply-agent is for --mode pull (a push member runs no agent)")
    if member_kubeconfig is None:
        raise BadInput("--kubeconfig is required in push mode (or use --mode pull)")
    member_config = kubeconfig.load(member_kubeconfig)
    chosen = member_config.context(context).name
    document = minify.minify(member_config, chosen, name, allowed)  # the exec policy
    if create_service_account:
        settings = rbac_command.settings(propagate_kinds, no_default_kinds,
                                         export_service=export_service)
        token, expires = asyncio.run(_service_account(member_config.context(chosen), settings,
                                                      token_expiration_days * 86400))
        document = with_token(document, token)
        click.echo(f"ServiceAccount {settings.namespace}/{settings.service_account} created "
                   f"in {name} with the member role; its token expires {expires}")
    secret, member = objects(name, document, labels, location)
    hub = _hub(hub_kubeconfig, hub_context)
    reachable = asyncio.run(_join(hub, secret, member,
                                  kubeconfig.merge([(member_kubeconfig, document)])
                                  .context(name)))
    held = (f"a ServiceAccount token for {name}" if create_service_account
            else f"credentials of context {chosen}")
    click.echo(f"joined {name}: MemberCluster {name}, {held} "
               f"only in Secret {NAMESPACE}/{secret_name(name)}")
    if reachable is not None:
        click.echo(f"warning: {name} does not answer now ({reachable}); the control plane "
                   "will report it NotReady until it does", err=True)


def pull_member(name: str, labels: dict[str, str], location: dict[str, str]) -> JSON:
    """The MemberCluster of a pull member: no Secret, ``mode: Pull``."""
    spec: JSON = {"mode": "Pull", **{k: v for k, v in location.items() if v}}
    return {"apiVersion": api.MEMBER_CLUSTERS.api_version, "kind": "MemberCluster",
            "metadata": {"name": name, "labels": labels}, "spec": spec}


def write_agent_files(directory: Path, cert: bytes, key: bytes, ca: bytes) -> dict[str, Path]:
    """The agent's certificate, key (0600, created so: never readable by others) and CA."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"cert": directory / "tls.crt", "key": directory / "tls.key",
             "ca": directory / "ca.crt"}
    paths["cert"].write_bytes(cert)
    paths["ca"].write_bytes(ca)
    paths["key"].unlink(missing_ok=True)
    fd = os.open(paths["key"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return paths


def agent_command(name: str, paths: dict[str, Path], hub_address: str | None) -> str:
    return (f"fedctl agent --hub-address {hub_address or '<work-server-host:port>'} "
            f"--cluster-name {name} --kubeconfig <{name}'s kubeconfig> "
            f"--tls-cert {paths['cert']} --tls-key {paths['key']} --tls-ca {paths['ca']}")


def check_pull(apply_agent: bool, member_kubeconfig: Path | None, context: str | None,
               create_service_account: bool, out_dir: Path | None,
               hub_address: str | None) -> None:
    """Refuse, by name, what pull mode would otherwise accept and ignore."""
    if create_service_account:
        raise BadInput("--mode pull takes no --create-service-account: the hub never dials "
                       "a pull member")
    if not apply_agent:
        if member_kubeconfig is not None or context is not None:
            raise BadInput("--mode pull takes --kubeconfig and --context only with "
                           "--apply-agent: the hub never dials a pull member")
        return
    if member_kubeconfig is None:
        raise BadInput("--apply-agent needs --kubeconfig: an admin of the member, to apply "
                       "the agent's manifests there")
    if hub_address is None:
        raise BadInput("--apply-agent needs --hub-address: the work server as the member "
                       "reaches it (the agent's ConfigMap)")
    if out_dir is not None:
        raise BadInput("--apply-agent writes no file: the agent's key goes into its Secret "
                       "in the member only (leave out --out-dir)")


async def _register_pull(hub: kubeconfig.Context, name: str, labels: dict[str, str],
                         location: dict[str, str]) -> tuple[bytes, bytes, bytes]:
    """The work CA (made once), the MemberCluster in pull mode and the agent's new
    certificate recorded as the one accepted; (certificate, key, CA certificate)."""
    from federation.work import identity

    async with kube.connect(hub) as client:
        ca = await identity.ensure_ca(client)
        cert, key = identity.issue_agent(ca, name)
        await client.apply(api.MEMBER_CLUSTERS, pull_member(name, labels, location),
                           FIELD_MANAGER, force=True)
        record = identity.CertificateRecord(identity.serial_of(cert))
        await client.patch(api.MEMBER_CLUSTERS, name, record.status_patch(),
                           subresource="status")
        return cert, key, ca.cert_pem


def join_pull_with_agent(name: str, labels: dict[str, str], location: dict[str, str],
                         hub_address: str, hub: kubeconfig.Context,
                         member: kubeconfig.Context, options: deploy.Options) -> list[str]:
    """Register ``name`` in pull mode and apply its agent's manifests to the member (the
    certificate in the agent's Secret); ``Kind/name`` of each object applied."""
    cert, key, ca = asyncio.run(_register_pull(hub, name, labels, location))
    objects = deploy.agent_for_member(options, deploy.AgentIdentity(
        name, hub_address, cert, key, ca))

    async def apply_agent() -> list[str]:
        async with kube.connect(member) as client:
            return await deploy_apply.apply_objects(client, objects)

    applied = asyncio.run(apply_agent())
    click.echo(f"joined {name} in pull mode: MemberCluster {name} (mode: Pull); the agent "
               f"{options.image_ref} applied in {name}: {', '.join(applied)} (its "
               f"certificate and key only in Secret {deploy.AGENT_NAMESPACE}/"
               f"{deploy.AGENT_TLS_SECRET} there; it dials {hub_address})")
    return applied


def join_pull(name: str, labels: dict[str, str], location: dict[str, str], out_dir: Path,
              hub_address: str | None, hub: kubeconfig.Context) -> dict[str, Path]:
    cert, key, ca = asyncio.run(_register_pull(hub, name, labels, location))
    paths = write_agent_files(out_dir, cert, key, ca)
    click.echo(f"joined {name} in pull mode: MemberCluster {name} (mode: Pull); the agent's "
               f"certificate for {name} and its key are in {out_dir}/")
    click.echo("start the agent with:")
    click.echo("  " + agent_command(name, paths, hub_address))
    return paths


def with_token(document: JSON, token: str) -> JSON:
    """The minified kubeconfig with its user replaced by a bearer token (the server and CA
    stay): no client certificate, exec plugin or password of the admin is stored."""
    users = [{"name": user["name"], "user": {"token": token}} for user in document["users"]]
    return {**document, "users": users}


async def _service_account(member: kubeconfig.Context, settings: roles.Settings,
                           expiration_seconds: int) -> tuple[str, str]:
    async with kube.connect(member) as client:
        return await installer.install_service_account(client, settings, expiration_seconds)


async def _join(hub: kubeconfig.Context, secret: JSON, member: JSON,
                member_context: kubeconfig.Context) -> str | None:
    async with kube.connect(hub) as client:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await client.apply(kube.NAMESPACES, namespace, FIELD_MANAGER, force=True)
        await client.apply(SECRETS, secret, FIELD_MANAGER, force=True)
        await client.apply(api.MEMBER_CLUSTERS, member, FIELD_MANAGER, force=True)
    try:
        async with kube.connect(member_context) as probe:
            await probe.request_raw("/readyz", timeout=5)
    except kube.ClientError as exc:
        return str(exc).removeprefix(f"{member_context.name}: ")
    return None


# -- unjoin -----------------------------------------------------------------------------------


Held = tuple[Mapping[str, Any], bindings.BindingRecord | None]
"""A binding and its record (None: it cannot be read)."""


def placed_on(items: list[JSON], name: str) -> list[Held]:
    """Bindings whose decision or pending clean-up names cluster ``name``, and those that
    cannot be read (they may: the member is not let go on the word of a record nobody can
    read)."""
    return [(binding, record) for binding, record in bindings.readable(items)
            if record is None or name in record.holders()]


def describe(held: Held) -> str:
    binding, record = held
    if record is not None and record.resource.name:
        return record.resource.describe()
    meta = binding.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    what = "unreadable" if record is None else "template-less"
    return f"{what} {binding.get('kind') or 'binding'} {where}{meta.get('name') or '?'}"


async def _bindings(client: kube.ClusterClient) -> list[JSON]:
    found: list[JSON] = []
    for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
        found += (await client.list(resource)).get("items", [])
    return found


@click.command()
@click.argument("name", callback=check_name)
@click.option("--orphan", is_flag=True,
              help="Leave the member's copies running, unmanaged, instead of moving them away.")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds to wait for workloads to leave the member.")
@click.option("--kubeconfig", "hub_kubeconfig", type=click.Path(path_type=Path), default=None,
              help="Kubeconfig of the hub (default: $KUBECONFIG, else ~/.kube/config).")
@click.option("--hub-context", default=None, help="Context of the hub (default: current).")
@common.clear_errors
def unjoin(name: str, orphan: bool, timeout: float, hub_kubeconfig: Path | None,
           hub_context: str | None) -> None:
    """Remove cluster NAME after its workloads moved away (or orphan them)."""
    config = kubeconfig.load(hub_kubeconfig)
    left = asyncio.run(_unjoin(config, config.context(hub_context), name, orphan, timeout))
    if left:
        raise click.ClickException(
            f"{name} still holds {', '.join(left)} after {timeout:.0f}s (is `fedctl run` "
            "running?); the unjoining taint stays: run again to keep waiting, or --orphan")
    click.echo(f"unjoined {name}" + (" (its copies left running, unmanaged)" if orphan else ""))


async def _unjoin(config: kubeconfig.KubeConfig, hub: kubeconfig.Context, name: str,
                  orphan: bool, timeout: float) -> list[str]:
    async with kube.connect(hub) as client:
        member = await client.get(api.MEMBER_CLUSTERS, name)
        if orphan:
            await _orphan(client, config, member, placed_on(await _bindings(client), name))
        else:
            await _taint(client, member)
            deadline = time.monotonic() + timeout
            while left := placed_on(await _bindings(client), name):
                if time.monotonic() > deadline:
                    return [describe(b) for b in left]
                await asyncio.sleep(1.0)
        ref = (member.get("spec") or {}).get("kubeconfigSecretRef")
        await client.delete(api.MEMBER_CLUSTERS, name)
        if ref:
            try:
                await client.delete(SECRETS, ref["name"], ref["namespace"])
            except kube.ApiError as exc:
                if exc.status != 404:
                    raise
    return []


async def _taint(client: kube.ClusterClient, member: JSON) -> None:
    taints = list((member.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == UNJOIN_TAINT for t in taints):
        return
    taints.append({"key": UNJOIN_TAINT, "effect": "NoExecute"})
    member["spec"] = {**(member.get("spec") or {}), "taints": taints}
    await client.replace(api.MEMBER_CLUSTERS, member)


async def _orphan(hub: kube.ClusterClient, config: kubeconfig.KubeConfig, member: JSON,
                  placed: list[Held]) -> None:
    """Remove our ownership label from each copy in the member, so nothing deletes it."""
    if not placed:
        return
    context = await _member_context(hub, config, member)
    async with kube.connect(context) as client:
        finder = discovery.Discovery(client)
        for held in placed:
            target = held[1].resource if held[1] is not None else None
            if target is None or not (target.api_version and target.kind and target.name):
                click.echo(f"warning: {describe(held)} names no object: its copy in "
                           f"{member['metadata']['name']}, if any, is not orphaned", err=True)
                continue
            resource = await finder.resolve(target.api_version, target.kind)
            patch = {"metadata": {"labels": {manifests.MANAGED_BY_LABEL: None},
                                  "annotations": {manifests.TEMPLATE_UID_ANNOTATION: None,
                                                  manifests.APPLIED_HASH_ANNOTATION: None}}}
            try:
                await client.patch(resource, target.name, patch,
                                   namespace=target.namespace or None)
            except kube.ApiError as exc:
                if exc.status != 404:
                    raise


async def _member_context(hub: kube.ObjectReader, config: kubeconfig.KubeConfig,
                          member: JSON) -> kubeconfig.Context:
    name = member["metadata"]["name"]
    spec = member.get("spec") or {}
    ref = spec.get("kubeconfigSecretRef")
    if ref:
        secret = await hub.get(SECRETS, ref["name"], ref["namespace"])
        text = minify.secret_kubeconfig(secret, ref.get("key") or minify.SECRET_KEY)
        return minify.load(text, name, f"Secret {ref['namespace']}/{ref['name']}").context(name)
    return config.context(spec.get("context") or name)
