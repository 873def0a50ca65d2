"""Kinds that are never propagated, whoever asks: one list for the RBAC generator and the
deny list.

``fedctl rbac``/``fedctl install --propagate-kinds`` refuse to grant any of these
(:func:`federation.rbac.roles.parse_kind`), and they are the whole-kind rules of the
propagation deny list that ``fedctl run`` starts from
(:data:`federation.hub.deny.DEFAULT_RULES`), so a policy selecting one gets a
``Denied`` condition and nothing is ever watched or written. Each entry names the kind
twice, as the two consumers spell it: by ``kind`` (the deny list matches objects) and by
``resource``, the plural (RBAC grants resources); ``*`` in both means every kind of the
group. Operators can still remove a deny-list rule by name (``--propagation-deny
-GROUP/KIND``) when their own RBAC grants the kind; the generator never grants it.

Pure data; no I/O.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Never:
    """One kind (or every kind of a group) no policy may propagate, and why."""

    group: str
    """The API group ("" for core)."""
    kind: str
    """The kind as objects name it; ``*`` for every kind of the group."""
    resource: str
    """The plural as RBAC names it; ``*`` for every resource of the group."""
    why: str

    def covers_resource(self, group: str, resource: str) -> bool:
        return self.group == group and self.resource in ("*", resource)


def _groups(why: str, *groups: str) -> list[Never]:
    return [Never(group, "*", "*", why) for group in groups]


def _kinds(why: str, *kinds: tuple[str, str, str]) -> list[Never]:
    return [Never(group, kind, resource, why) for group, kind, resource in kinds]


NEVER: tuple[Never, ...] = (
    *_groups("our own API (it would propagate itself)", "policy.federation.io",
             "cluster.federation.io", "work.federation.io", "config.federation.io",
             "policy.karmada.io", "work.karmada.io", "cluster.karmada.io"),
    *_kinds("records a cluster keeps about itself", ("", "Event", "events"),
            ("events.k8s.io", "Event", "events"), ("coordination.k8s.io", "Lease", "leases"),
            ("", "Endpoints", "endpoints"),
            ("discovery.k8s.io", "EndpointSlice", "endpointslices"),
            ("", "ComponentStatus", "componentstatuses")),
    *_groups("records a cluster keeps about itself", "metrics.k8s.io"),
    *_groups("create-only review or binding kinds, never stored", "authentication.k8s.io",
             "authorization.k8s.io"),
    *_kinds("create-only review or binding kinds, never stored", ("", "Binding", "bindings")),
    *_kinds("cluster plumbing of each member", ("", "Node", "nodes"),
            ("certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests"),
            ("apiregistration.k8s.io", "APIService", "apiservices")),
    *_groups("admission webhooks and policies see or change every write in a member: a copy "
             "would hand a policy author every member's API traffic",
             "admissionregistration.k8s.io"),
    *_kinds("a PodSecurityPolicy is cluster-wide: it decides which pods every namespace of a "
            "member may run", ("policy", "PodSecurityPolicy", "podsecuritypolicies")),
    *_groups("RBAC: a policy author could grant the control plane's member rights to any "
             "subject", "rbac.authorization.k8s.io"),
    *_groups("KubeVela's API: the control plane runs Applications itself; propagated, a "
             "namespaced policy would create the cluster-scoped core.oam.dev CRDs in members",
             "core.oam.dev"),
)
"""Every kind never propagated (docs/security.md, "The deny list")."""


def refusal(group: str, resource: str) -> Never | None:
    """The entry that keeps resource ``resource`` of ``group`` from ever being granted."""
    return next((n for n in NEVER if n.covers_resource(group, resource)), None)
