"""``fedctl install``: the hub API (CRDs), the control plane's RBAC, and MemberClusters.

Run as an admin of the hub and the members. Besides the CRDs it applies the
control plane's least-privilege RBAC (:mod:`federation.rbac.roles`, what
``fedctl rbac`` prints): the hub's roles on the hub, the member role in every
member it registers from ``--clusters`` and in ``--member-contexts``. The
control plane itself (``fedctl run``) then runs as ``federation:control-plane``
or the ServiceAccount ``federation-system/federation-control-plane``, never
as an admin. ``--no-rbac`` leaves RBAC to your own tools.

Hub Secrets are granted per namespace: ``--secret-namespaces team-a,team-b`` binds
ClusterRole ``federation:control-plane:secrets`` there (a RoleBinding each); the control
plane reads no Secret of any other namespace (never ``kube-*`` or ``federation-system``,
which are refused by name). A grant is revoked by deleting its RoleBinding.

``--control-plane`` also applies the control plane itself, the objects of ``config/default``
(:mod:`federation.deploy.manifests`: its namespace, ServiceAccount, Deployment, Services,
PodDisruptionBudget and NetworkPolicy), after the CRDs and the RBAC, by server-side apply:
run it again with a newer fedctl to upgrade in place. ``--control-plane --print`` prints
those objects, CRDs and RBAC included, as YAML documents and touches no cluster.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click
import yaml

from federation.commands import common, errors
from federation.commands import rbac as rbac_command
from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.controllers import install as installer
from federation.deploy import apply as deploy_apply
from federation.deploy import layout, manifests, tree
from federation.rbac import roles


@click.command()
@common.cluster_options
@click.option("--clusters", "clusters_file", type=click.Path(exists=True, path_type=Path),
              default=None, help="Register MemberClusters from a `fedctl plan --clusters` file "
                                 "(each name is also the member's context).")
@click.option("--rbac/--no-rbac", "with_rbac", default=True, show_default=True,
              help="Apply the control plane's RBAC to the hub and the members.")
@click.option("--member-contexts", default=None,
              help="More member contexts (comma-separated) to apply the member RBAC to, "
                   "besides the --clusters entries.")
@rbac_command.kinds_options
@rbac_command.secret_namespaces_option
@rbac_command.export_service_option
@click.option("--leader-election-namespace", default=roles.Settings.leader_election_namespace,
              show_default=True, help="As given to `fedctl run`.")
@click.option("--leader-election-id", default=roles.Settings.leader_election_id,
              show_default=True, help="As given to `fedctl run`.")
@click.option("--control-plane", is_flag=True,
              help="Also deploy the control plane in the hub (config/default's Deployment, "
                   "ServiceAccount, Services, PodDisruptionBudget, NetworkPolicy); again to "
                   "upgrade in place.")
@click.option("--print", "print_only", is_flag=True,
              help="With --control-plane: print every object as YAML and touch no cluster.")
@common.clear_errors
@errors.clear_errors_for(roles.RBACError)
def install(kubeconfig_path: Path | None, hub_context: str | None,
            clusters_file: Path | None, with_rbac: bool, member_contexts: str | None,
            propagate_kinds: tuple[str, ...], no_default_kinds: bool, export_service: bool,
            secret_namespaces: tuple[str, ...], leader_election_namespace: str,
            leader_election_id: str, control_plane: bool, print_only: bool) -> None:
    """Install the federation CRDs and the control plane's RBAC (idempotent); with
    --control-plane, the control plane too."""
    settings = rbac_command.settings(propagate_kinds, no_default_kinds, secret_namespaces,
                                     export_service=export_service,
                                     leader_election_namespace=leader_election_namespace,
                                     leader_election_id=leader_election_id)
    options = manifests.Options(rbac=settings)
    if print_only:
        if not control_plane:
            raise click.UsageError("--print is only used with --control-plane")
        if clusters_file is not None or member_contexts or not with_rbac:
            raise click.UsageError("--print prints the hub's objects only: no --clusters, "
                                   "--member-contexts or --no-rbac")
        click.echo(layout.dump(manifests.control_plane(options, tree.shipped_crds())), nl=False)
        return
    config = kubeconfig.load(kubeconfig_path)
    context = config.context(hub_context)
    entries = _cluster_entries(clusters_file)
    members: list[kubeconfig.Context] = []
    if with_rbac:
        names = [str(e.get("context") or e["name"]) for e in entries]
        names += common.split(member_contexts) or []
        members = [config.context(name) for name in dict.fromkeys(names)]

    async def go() -> tuple[list[str], list[str], list[str]]:
        deployed: list[str] = []
        async with kube.connect(context) as hub:
            crds = await installer.install_crds(hub)
            if with_rbac:
                await installer.install_rbac(hub, roles.hub(settings))
            if control_plane:
                deployed = await deploy_apply.apply_objects(
                    hub, manifests.workload_objects(options))
                # The Deployment serves the pull agents' work server, which needs its CA
                # at start, and the control plane may only read it: made here, as admin
                # (else every replica exits until a `fedctl join --mode pull` makes it).
                from federation.work import identity

                await identity.ensure_ca(hub)
                deployed.append(f"Secret/{identity.SECRET_NAME} (the work CA)")
            registered = await installer.register_clusters(hub, entries)
        for member in members:
            async with kube.connect(member) as client:
                await installer.install_rbac(client, roles.member(settings))
        return crds, deployed, registered

    crds, deployed, registered = asyncio.run(go())
    click.echo(f"installed {len(crds)} CRDs on {context.name}")
    if deployed:
        click.echo(f"control plane {options.image_ref} applied in {settings.namespace}: "
                   f"{', '.join(deployed)}")
    if with_rbac:
        _report_rbac(settings, context.name, members)
    if registered:
        click.echo(f"registered MemberClusters: {', '.join(registered)}")


def _cluster_entries(clusters_file: Path | None) -> list[dict[str, Any]]:
    """The ``clusters[]`` of a --clusters file (each needs a name); none without one."""
    if clusters_file is None:
        return []
    document = yaml.safe_load(clusters_file.read_text()) or {}
    entries = list(document.get("clusters") or [])
    if not all(isinstance(e, dict) and e.get("name") for e in entries):
        raise click.ClickException(f"{clusters_file}: clusters[] entries need a name")
    return entries


def _report_rbac(settings: roles.Settings, hub: str,
                 members: list[kubeconfig.Context]) -> None:
    where = ", ".join(m.name for m in members) or "no member (none given)"
    click.echo(f"RBAC for {settings.user} applied: hub roles on {hub}, "
               f"member role on {where} ({len(settings.kinds)} propagated kinds)")
    if settings.secret_namespaces:
        click.echo(f"Secrets readable in: {', '.join(settings.secret_namespaces)}")
