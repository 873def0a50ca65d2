"""ClusterRoles, Roles and bindings for the control plane, generated from the propagated kinds.

The hub gets a ClusterRole (policies, MemberClusters, bindings, Events, CRDs,
templates of the propagated kinds but Secrets), a Role in the control plane's namespace
(joined clusters' kubeconfigs and the CA keys, by GET only) and a Role in the
leader-election namespace (its own Lease). Secrets, when propagated, get a ClusterRole
of their own (:data:`SECRETS_ROLE`) that is never bound cluster-wide: a RoleBinding in
each tenant namespace named by ``--secret-namespaces`` (never a ``kube-*`` namespace or
ours) lets the control plane read and update Secrets there (and create and delete the
config store's) and nowhere else; it learns where from those RoleBindings
(:data:`SECRETS_ROLE` is also their name), so the hub ClusterRole may list and watch
RoleBindings, nothing more of RBAC. Each member gets one ClusterRole:
the copies of the propagated kinds, their namespaces and CRDs, nodes and
workloads for capacity. Every binding names two subjects: the user
``federation:control-plane`` (the local fleet's client certificate, or any
identity your authenticator maps to it) and the ServiceAccount
``federation-system/federation-control-plane`` (``fedctl join
--create-service-account``, or the control plane running in the hub).

A kind is given as ``resource.group`` (``deployments.apps``, ``widgets.example.com``)
or just ``resource`` for the core group (``configmaps``), as kubectl spells it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from federation.rbac import never
from federation.untrusted import documents

JSON = dict[str, Any]

RULES_FILE = Path(__file__).resolve().parent / "rules.yaml"

NAMESPACE = "federation-system"
"""The control plane's namespace: joined clusters' Secrets, its ServiceAccount."""
USER = "federation:control-plane"
SERVICE_ACCOUNT = "federation-control-plane"
HUB_ROLE = "federation:control-plane:hub"
MEMBER_ROLE = "federation:control-plane:member"
NAMESPACE_ROLE = "federation:control-plane"
LEADER_ROLE = "federation:control-plane:leader-election"
SECRETS_ROLE = "federation:control-plane:secrets"
"""The ClusterRole of Secrets (templates and propagateDeps dependencies), bound only by
RoleBindings of the same name in the namespaces whose Secrets may be propagated."""
RBAC_GROUP = "rbac.authorization.k8s.io"
LABELS = {"app.kubernetes.io/part-of": "federation", "app.kubernetes.io/managed-by": "fedctl"}

CRD_NAMES = (
    "propagationpolicies.policy.federation.io",
    "clusterpropagationpolicies.policy.federation.io",
    "overridepolicies.policy.federation.io",
    "clusteroverridepolicies.policy.federation.io",
    "memberclusters.cluster.federation.io",
    "resourcebindings.work.federation.io",
    "clusterresourcebindings.work.federation.io",
    "propagationpolicies.policy.karmada.io",
    "clusterpropagationpolicies.policy.karmada.io",
    "overridepolicies.policy.karmada.io",
    "clusteroverridepolicies.policy.karmada.io",
    "applications.core.oam.dev",
    "policies.core.oam.dev",
    "workflows.core.oam.dev",
    "applicationrevisions.core.oam.dev",
    "resourcetrackers.core.oam.dev",
    "componentdefinitions.core.oam.dev",
    "traitdefinitions.core.oam.dev",
    "policydefinitions.core.oam.dev",
    "workflowstepdefinitions.core.oam.dev",
    "definitionrevisions.core.oam.dev",
    "configconstraints.config.federation.io",
    "reconfigurepolicies.config.federation.io",
    "configconstraints.apps.kubeblocks.io",
    "parametersdefinitions.parameters.kubeblocks.io",
    "resourceinterpretercustomizations.config.karmada.io",
    "workloadrebalancers.apps.karmada.io",
)
"""The hub API's CRDs (federation/crds/crds.yaml, karmada.yaml, interpreter.yaml and
rebalancer.yaml; a unit test keeps them equal)."""


class RBACError(ValueError):
    """A kind list that cannot be turned into rules; the message names the option."""


@dataclasses.dataclass(frozen=True, order=True)
class Kind:
    """One propagated resource: its API group ("" for core) and plural."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


SECRETS_KIND = Kind("", "secrets")

DEFAULT_KINDS: tuple[Kind, ...] = (
    Kind("", "namespaces"), Kind("", "configmaps"), Kind("", "secrets"), Kind("", "services"),
    Kind("", "serviceaccounts"), Kind("", "persistentvolumeclaims"),
    Kind("apps", "deployments"), Kind("apps", "statefulsets"), Kind("apps", "daemonsets"),
    Kind("batch", "jobs"), Kind("batch", "cronjobs"),
    Kind("networking.k8s.io", "ingresses"),
)
"""The common workload kinds. No RBAC kinds: see :func:`parse_kind`."""

STATUS_KINDS = frozenset({Kind("apps", "deployments"), Kind("apps", "statefulsets"),
                          Kind("apps", "replicasets")})
"""Kinds whose hub template gets the members' summed status (status.WORKLOAD_KINDS)."""

_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def parse_kind(text: str, option: str = "--propagate-kinds") -> Kind:
    """``resource.group`` or ``resource`` (core) as a :class:`Kind`; refuses wildcards,
    subresources and every kind of :data:`federation.rbac.never.NEVER` (RBAC kinds among
    them: propagating Roles or bindings would let anyone who may write a policy hand the
    control plane's rights in every member to any subject)."""
    resource, _, group = text.strip().partition(".")
    if "*" in text:
        raise RBACError(f"{option}: {text!r}: wildcards are never granted; list the kinds")
    if not _RESOURCE.match(resource) or (group and not _GROUP.match(group)):
        raise RBACError(f"{option}: {text!r} is not resource.group (the lowercase plural, "
                        "as in deployments.apps, configmaps, widgets.example.com)")
    refused = never.refusal(group, resource)
    if refused is not None:
        raise RBACError(f"{option}: {text!r} is never propagated: {refused.why} "
                        "(docs/security.md, the deny list)")
    return Kind(group, resource)


def parse_kinds(texts: Iterable[str], defaults: bool = True,
                option: str = "--propagate-kinds") -> tuple[Kind, ...]:
    """The default kinds (unless ``defaults`` is False) plus ``texts``, sorted, no repeats.
    Each text may hold several kinds separated by commas."""
    found = set(DEFAULT_KINDS) if defaults else set()
    for text in texts:
        found.update(parse_kind(part, option) for part in text.split(",") if part.strip())
    if not found:
        raise RBACError(f"{option}: no kind to propagate")
    return tuple(sorted(found))


SYSTEM_PREFIX = "kube-"
"""Kubernetes reserves ``kube-*`` namespaces (kube-system, kube-public, kube-node-lease)."""


def never_granted(namespace: str, own: str = NAMESPACE) -> str | None:
    """Why the control plane may never read Secrets in ``namespace``, or None."""
    if namespace.startswith(SYSTEM_PREFIX):
        return f"{namespace} is a system namespace (kube-*): its Secrets are the cluster's"
    if namespace == own:
        return (f"{namespace} is the control plane's own namespace: it holds the joined "
                "clusters' kubeconfigs and the CA keys")
    return None


def parse_secret_namespaces(texts: Iterable[str], own: str = NAMESPACE,
                            option: str = "--secret-namespaces") -> tuple[str, ...]:
    """Namespace names (comma-separated, repeatable), sorted, no repeats; a system
    namespace, ours or a malformed name is refused by name."""
    found: set[str] = set()
    for text in texts:
        for name in (part.strip() for part in text.split(",")):
            if not name:
                continue
            if not _RESOURCE.match(name) or len(name) > 63:
                raise RBACError(f"{option}: {name[:80]!r} is not a namespace name")
            why = never_granted(name, own)
            if why is not None:
                raise RBACError(f"{option}: {why}; it is never granted")
            found.add(name)
    return tuple(sorted(found))


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the manifests are generated for."""

    kinds: tuple[Kind, ...] = DEFAULT_KINDS
    """The propagated kinds; the common workload kinds by default, extended per fleet."""
    namespace: str = NAMESPACE
    """Where `fedctl join` keeps kubeconfig Secrets and the ServiceAccount lives."""
    leader_election_namespace: str = "kube-system"
    """`fedctl run --leader-election-namespace`'s default."""
    leader_election_id: str = "federation-controller-manager"
    """`fedctl run --leader-election-id`'s default: the one Lease we may renew."""
    user: str = USER
    """The control plane's user name (the local fleet's certificate CN)."""
    service_account: str = SERVICE_ACCOUNT
    """Its ServiceAccount in ``namespace`` (join --create-service-account, in-cluster)."""
    secret_namespaces: tuple[str, ...] = ()
    """Hub namespaces whose Secrets the control plane may read and update (a RoleBinding
    of :data:`SECRETS_ROLE` in each); only with ``secrets`` among the ``kinds``."""
    export_service: bool = False
    """Members: Endpoints for vela-core's export-service step (``--export-service``), never
    by default (Endpoints are never propagated: :data:`federation.rbac.never.NEVER`)."""

    def __post_init__(self) -> None:
        if self.secret_namespaces and SECRETS_KIND not in self.kinds:
            raise RBACError("--secret-namespaces: secrets is not a propagated kind "
                            "(--propagate-kinds secrets)")
        for name in self.secret_namespaces:
            why = never_granted(name, self.namespace)
            if why is not None:
                raise RBACError(f"--secret-namespaces: {why}; it is never granted")


@dataclasses.dataclass(frozen=True)
class Rule:
    """One PolicyRule and the reason it exists."""

    why: str
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def to_dict(self) -> JSON:
        found: JSON = {}
        if self.non_resource_urls:
            found["nonResourceURLs"] = list(self.non_resource_urls)
        else:
            found["apiGroups"] = list(self.api_groups)
            found["resources"] = list(self.resources)
        if self.resource_names:
            found["resourceNames"] = list(self.resource_names)
        found["verbs"] = list(self.verbs)
        return found


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A Role, ClusterRole or binding; ``rules`` carry the reasons printed as comments."""

    body: JSON
    rules: tuple[Rule, ...] = ()

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


# -- rules -----------------------------------------------------------------------------------


@functools.cache
def _fixed() -> dict[str, dict[str, list[JSON]]]:
    document = yaml.load(RULES_FILE.read_text(), Loader=documents.LOADER)  # libyaml: faster
    assert isinstance(document, dict)
    return document


SHARD_LEASES = 16
"""`fedctl run --shards` takes at most this many shard Leases (federation.runtime.peers)."""


def shard_lease_names(election_id: str) -> tuple[str, ...]:
    """The Leases of `fedctl run --shards`: one per shard, and the one keeping the seed."""
    return (*(f"{election_id}-shard-{index}" for index in range(SHARD_LEASES)),
            f"{election_id}-shard-seed")


def fixed_rules(cluster: str, scope: str, settings: Settings) -> tuple[Rule, ...]:
    """The rules of ``rules.yaml`` for (hub|member, cluster|namespace|leaderElection)."""
    values = {"crd_names": CRD_NAMES,
              "leader_election_id": (settings.leader_election_id,
                                     *shard_lease_names(settings.leader_election_id))}
    rules = []
    for entry in _fixed()[cluster][scope]:
        names = entry.get("resourceNames", ())
        if isinstance(names, str):
            names = values[names.strip("{}")]
        rules.append(Rule(why=" ".join(str(entry["why"]).split()),
                          verbs=tuple(entry["verbs"]),
                          api_groups=tuple(entry.get("apiGroups", ())),
                          resources=tuple(entry.get("resources", ())),
                          resource_names=tuple(names),
                          non_resource_urls=tuple(entry.get("nonResourceURLs", ()))))
    return tuple(rules)


def _by_group(kinds: Iterable[Kind]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for kind in sorted(set(kinds)):
        groups.setdefault(kind.group, []).append(kind.resource)
    return groups


def hub_kind_rules(kinds: Sequence[Kind]) -> tuple[Rule, ...]:
    """Templates: cached and followed; written only to strip an earlier version's marks;
    the summed member status patched onto workloads."""
    rules = _per_group(kinds, ("get", "list", "watch", "update"), (
        "Templates of the propagated kinds: cached and followed. Templates carry no mark of "
        "ours; update is used once per template after an upgrade, to strip the finalizer "
        "and annotations earlier versions wrote (a PUT). Never create or delete."))
    status = [Kind(k.group, f"{k.resource}/status") for k in kinds if k in STATUS_KINDS]
    rules += _per_group(status, ("patch",), (
        "Propagated workloads' status on the hub: replicas summed over the members (a "
        "patch of the status subresource)."))
    custom = [Kind(k.group, f"{k.resource}/status") for k in kinds
              if k not in STATUS_KINDS and k not in DEFAULT_KINDS]
    rules += _per_group(custom, ("patch",), (
        "Kinds given beyond the defaults: the status a ResourceInterpreterCustomization's "
        "AggregateStatus makes of the members' statuses (a patch of the status "
        "subresource; written only for a kind a customization aggregates)."))
    return tuple(rules)


def member_kind_rules(kinds: Sequence[Kind]) -> tuple[Rule, ...]:
    """The copies: cached, created, replaced, deleted; patched by server-side apply and
    `unjoin --orphan`."""
    return tuple(_per_group(
        kinds, ("get", "list", "watch", "create", "update", "patch", "delete"),
        "Copies of the propagated kinds: cached (drift, status), created, replaced and "
        "deleted when no longer placed; patched by server-side apply (a policy's "
        "applyStrategy ServerSideApply) and by `fedctl unjoin --orphan`, which removes our "
        "marks with the stored credentials."))


def _per_group(kinds: Iterable[Kind], verbs: tuple[str, ...], why: str) -> list[Rule]:
    """One rule per API group (one rule naming two groups would grant every resource name
    in both); the reason is given in full on the first."""
    rules: list[Rule] = []
    for group, resources in _by_group(kinds).items():
        reason = why if not rules else f"As above, API group {group or 'core'}."
        rules.append(Rule(why=reason, verbs=verbs, api_groups=(group,),
                          resources=tuple(resources)))
    return rules


# -- manifests -------------------------------------------------------------------------------


def _meta(name: str, namespace: str | None = None) -> JSON:
    meta: JSON = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    return meta


def subjects(settings: Settings) -> list[JSON]:
    return [{"kind": "User", "apiGroup": RBAC_GROUP, "name": settings.user},
            {"kind": "ServiceAccount", "name": settings.service_account,
             "namespace": settings.namespace}]


def _role(kind: str, name: str, rules: Sequence[Rule], namespace: str | None = None
          ) -> Manifest:
    body = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": _meta(name, namespace),
            "rules": [r.to_dict() for r in rules]}
    return Manifest(body, tuple(rules))


def _binding(kind: str, name: str, role_kind: str, settings: Settings,
             namespace: str | None = None) -> Manifest:
    return Manifest({"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind,
                     "metadata": _meta(name, namespace),
                     "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
                     "subjects": subjects(settings)})


def secret_rules() -> tuple[Rule, ...]:
    """The rules of :data:`SECRETS_ROLE`: Secrets as templates and as the namespace's
    config store, but only where bound."""
    return (Rule(why=(
        "Secrets are templates like the other propagated kinds (and propagateDeps "
        "dependencies): cached, followed, updated only to drop an earlier version's marks. "
        "An Application's config-store steps (create-config, delete-config) create, update "
        "and delete Secrets of its own namespace, only those labelled "
        "config.oam.dev/catalog=velacore-config (a Secret without it is never written or "
        "deleted). Granted per namespace by a RoleBinding of this role, "
        "never cluster-wide: the Secrets of kube-* namespaces and of the control plane's "
        "own namespace are never read."),
        verbs=("get", "list", "watch", "create", "update", "delete"), api_groups=("",),
        resources=("secrets",)),)


def grant_rules() -> tuple[Rule, ...]:
    """The hub ClusterRole's one look at RBAC: where :data:`SECRETS_ROLE` is bound."""
    return (Rule(why=(
        f"Where Secrets may be read: the control plane lists and watches the RoleBindings "
        f"named {SECRETS_ROLE} (a field selector on that name; RBAC cannot limit a list "
        "by name, so every RoleBinding is readable). Read only: it never creates, changes "
        "or binds any RBAC object."),
        verbs=("list", "watch"), api_groups=(RBAC_GROUP,), resources=("rolebindings",)),)


def secret_binding(namespace: str, settings: Settings) -> Manifest:
    """The RoleBinding that lets the control plane read and update ``namespace``'s Secrets
    (and write its config store's)."""
    return _binding("RoleBinding", SECRETS_ROLE, "ClusterRole", settings, namespace)


def hub(settings: Settings) -> list[Manifest]:
    """The hub's ClusterRoles, Roles and their bindings, in apply order."""
    secrets = SECRETS_KIND in settings.kinds
    templates = [k for k in settings.kinds if k != SECRETS_KIND]
    cluster = (*fixed_rules("hub", "cluster", settings), *hub_kind_rules(templates),
               *(grant_rules() if secrets else ()))
    own = fixed_rules("hub", "namespace", settings)
    lease = fixed_rules("hub", "leaderElection", settings)
    manifests = [
        _role("ClusterRole", HUB_ROLE, cluster),
        _binding("ClusterRoleBinding", HUB_ROLE, "ClusterRole", settings),
        _role("Role", NAMESPACE_ROLE, own, settings.namespace),
        _binding("RoleBinding", NAMESPACE_ROLE, "Role", settings, settings.namespace),
        _role("Role", LEADER_ROLE, lease, settings.leader_election_namespace),
        _binding("RoleBinding", LEADER_ROLE, "Role", settings,
                 settings.leader_election_namespace),
    ]
    if secrets:  # the role, and a binding only in each namespace the operator named
        manifests.append(_role("ClusterRole", SECRETS_ROLE, secret_rules()))
        manifests += [secret_binding(ns, settings) for ns in settings.secret_namespaces]
    return manifests


def export_service_rules() -> tuple[Rule, ...]:
    """The member rule ``--export-service`` adds: the one exception to the never list."""
    return (Rule(why=(
        "Only with --export-service: the Endpoints of an Application's export-service step "
        "(a selector-less Service's one address, in the Application's namespace), written "
        "only for an address `fedctl run --export-service-allow` lets out and never for any "
        "other object (Endpoints stay on the deny list; CVE-2021-25740). Cached to judge "
        "the step's health, deleted with the Application."),
        verbs=("get", "list", "watch", "create", "update", "patch", "delete"),
        api_groups=("",), resources=("endpoints",)),)


def member(settings: Settings) -> list[Manifest]:
    """A member's ClusterRole and its binding."""
    rules = (*fixed_rules("member", "cluster", settings), *member_kind_rules(settings.kinds),
             *(export_service_rules() if settings.export_service else ()))
    return [_role("ClusterRole", MEMBER_ROLE, rules),
            _binding("ClusterRoleBinding", MEMBER_ROLE, "ClusterRole", settings)]


def namespaces(manifests: Iterable[Manifest]) -> list[str]:
    """The namespaces the manifests need (created first when missing)."""
    found = {str(m.body["metadata"].get("namespace") or "") for m in manifests}
    return sorted(found - {""})


BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def namespace_manifests(manifests: Iterable[Manifest]) -> list[Manifest]:
    """Namespace objects for the namespaces the manifests need, so that the printed
    manifests apply as they are (``kubectl apply -f``); built-in namespaces left out."""
    return [Manifest({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)})
            for name in namespaces(manifests) if name not in BUILT_IN_NAMESPACES]


# -- output ----------------------------------------------------------------------------------


def render(manifests: Sequence[Manifest], heading: str = "") -> str:
    """YAML documents, each rule preceded by its reason as a comment (kubectl-appliable)."""
    parts = []
    for manifest in manifests:
        body = {k: v for k, v in manifest.body.items() if k != "rules"}
        text = yaml.safe_dump(body, sort_keys=False)
        if manifest.rules:
            text += "rules:\n"
            for rule in manifest.rules:
                text += "".join(f"# {line}\n" for line in textwrap.wrap(rule.why, 88))
                text += yaml.safe_dump([rule.to_dict()], sort_keys=False,
                                       default_flow_style=None, width=92)
        parts.append(text)
    prefix = "".join(f"# {line}\n" for line in heading.splitlines())
    return prefix + "---\n".join(parts)


def table(sections: Mapping[str, Sequence[Manifest]]) -> str:
    """A Markdown table: cluster, role, resources, verbs and why, for every rule."""
    lines = ["| cluster | role | resources | verbs | why |", "|---|---|---|---|---|"]
    for cluster, manifests in sections.items():
        for manifest in manifests:
            where = manifest.name + (f" (ns {manifest.body['metadata']['namespace']})"
                                     if manifest.body["metadata"].get("namespace") else "")
            for rule in manifest.rules:
                lines.append(f"| {cluster} | {where} | {_what(rule)} | "
                             f"{', '.join(rule.verbs)} | {rule.why} |")
    return "\n".join(lines) + "\n"


def _what(rule: Rule) -> str:
    if rule.non_resource_urls:
        return " ".join(rule.non_resource_urls)
    group = rule.api_groups[0] if rule.api_groups else ""
    names = f"{group or 'core'}: {', '.join(rule.resources)}"
    if rule.resource_names:
        names += f" (only {', '.join(rule.resource_names)})"
    return names
