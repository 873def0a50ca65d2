"""Where the control plane may read the hub's Secrets: granted namespaces only.

The hub identity is never given Secrets cluster-wide (docs/security.md, "Secrets and
credentials"). ClusterRole ``federation:control-plane:secrets`` holds the rights
(get/list/watch/update, and create/delete for the config store's Secrets), and a
RoleBinding of the same name in a namespace opens that namespace: ``fedctl install
--secret-namespaces`` writes them, and a namespace's own admin may too (Kubernetes lets
them bind a role whose rights they hold there). This module reads those RoleBindings
(:func:`granted_namespace`) and installs the hub's cache of Secrets as a
:class:`~federation.contexts.scoped.ScopedInformer` over them (:func:`restrict`), so every
reader of hub Secrets (templates of a Secret policy, ``propagateDeps`` dependencies,
governed configs, the config store) reads only granted namespaces and gets
:class:`~federation.contexts.scoped.NotGranted` elsewhere.

It never honours a grant in a ``kube-*`` namespace or the control plane's own (the
joined clusters' kubeconfigs and the CA keys live there), nor one that binds another
role or does not name the control plane, whatever RBAC says. A propagation policy that
selects Secrets gets a ``SecretsReadable`` condition (:func:`readable`) saying where its
Secrets are read, so a namespace without a grant is never a silent skip.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from federation.contexts.cache import CachedResource, CacheSettings, ReadOnly
from federation.contexts.client import ObjectReader, Resource
from federation.contexts.clusters import Cluster
from federation.contexts.scoped import Grants, ScopedInformer
from federation.hub import deny
from federation.rbac import roles

log = logging.getLogger("federation.secrets")

SECRETS = Resource("", "v1", "secrets", "Secret")
ROLE_BINDINGS = Resource(roles.RBAC_GROUP, "v1", "rolebindings", "RoleBinding")
CONDITION = "SecretsReadable"
"""The condition of a propagation policy that selects Secrets."""
SHOWN = 20
"""Granted namespaces named in a condition at most (the rest are counted)."""

_SUBJECTS = ({"kind": "User", "name": roles.USER},
             {"kind": "ServiceAccount", "name": roles.SERVICE_ACCOUNT,
              "namespace": roles.NAMESPACE})
"""The control plane's identities, as the generated bindings name them."""


def granted_namespace(binding: ReadOnly) -> str | None:
    """The namespace a RoleBinding opens to the control plane's Secret reads, or None: it
    must bind ClusterRole :data:`~federation.rbac.roles.SECRETS_ROLE` to the control
    plane, outside ``kube-*`` and our own namespace (those are refused and logged)."""
    meta = binding.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    ref = binding.get("roleRef") or {}
    if (ref.get("kind"), ref.get("name"), ref.get("apiGroup")) != \
            ("ClusterRole", roles.SECRETS_ROLE, roles.RBAC_GROUP):
        log.warning("RoleBinding %s/%s binds another role; it grants no Secret reads",
                    namespace, meta.get("name"))
        return None
    if not any(_names_us(s) for s in binding.get("subjects") or [] if isinstance(s, Mapping)):
        log.warning("RoleBinding %s/%s does not name the control plane (%s or ServiceAccount "
                    "%s/%s); it grants no Secret reads", namespace, meta.get("name"),
                    roles.USER, roles.NAMESPACE, roles.SERVICE_ACCOUNT)
        return None
    why = roles.never_granted(namespace)
    if why is not None:
        log.warning("RoleBinding %s/%s ignored: %s; its Secrets are never read", namespace,
                    meta.get("name"), why)
        return None
    return namespace


def _names_us(subject: Mapping[str, Any]) -> bool:
    return any(all(subject.get(k) == v for k, v in us.items()) for us in _SUBJECTS)


def refusal(namespace: str) -> str:
    """Why Secrets of ``namespace`` are not read, and how an admin grants them."""
    why = roles.never_granted(namespace)
    if why is not None:
        return f"Secrets of namespace {namespace} are never read: {why}"
    return (f"Secrets of namespace {namespace} are not readable by the control plane: no "
            f"RoleBinding {roles.SECRETS_ROLE} there grants ClusterRole {roles.SECRETS_ROLE} "
            f"(an admin grants it with `fedctl install --secret-namespaces {namespace}`)")


GRANTS = Grants(ROLE_BINDINGS, f"metadata.name={roles.SECRETS_ROLE}", granted_namespace,
                refusal)


class Granted(Protocol):
    """What policy validation asks of the Secret cache: the namespaces it may read."""

    def granted(self) -> frozenset[str] | str | None: ...


class SecretAccess:
    """The hub's cache of Secrets, restricted to granted namespaces: what is granted, and
    listeners told when that changes."""

    def __init__(self, hub: Cluster) -> None:
        self.hub = hub
        self.informer: ScopedInformer | None = None
        self.listeners: list[Callable[[frozenset[str]], None]] = []

    def make(self, client: ObjectReader, resource: Resource, settings: CacheSettings,
             cluster: str) -> CachedResource:
        """The :data:`~federation.contexts.cache.InformerMaker` of hub Secrets."""
        informer = ScopedInformer(client, resource, GRANTS, settings=settings, cluster=cluster)
        informer.listeners.extend(self.listeners)
        self.informer = informer
        return informer

    def on_change(self, listener: Callable[[frozenset[str]], None]) -> None:
        self.listeners.append(listener)
        if self.informer is not None:
            self.informer.listeners.append(listener)

    def granted(self) -> frozenset[str] | str | None:
        """The granted namespaces; None while the grants are being listed; the reason
        when they cannot be (RoleBindings not readable). Starts following them."""
        if self.hub.cache is None:
            return None
        informer = self.hub.cache.informer(SECRETS)
        self.hub.cache.start()
        assert isinstance(informer, ScopedInformer)
        if informer.known:
            return informer.granted
        if informer.grant_informer.state == "backoff":
            return (f"cannot list RoleBindings {roles.SECRETS_ROLE}: "
                    f"{informer.grant_informer.last_error}")
        return None


def restrict(hub: Cluster) -> SecretAccess:
    """Cache the hub's Secrets only in granted namespaces (before anything reads them)."""
    access = SecretAccess(hub)
    if hub.cache is not None:
        hub.cache.restrict(SECRETS, access.make)
    return access


# -- the policy condition -------------------------------------------------------------------


def selected_namespaces(policy: Mapping[str, Any]) -> set[str | None]:
    """Namespaces whose Secrets a propagation policy selects (None: every namespace);
    empty when it selects no Secret."""
    if policy.get("kind") not in ("PropagationPolicy", "ClusterPropagationPolicy"):
        return set()
    own = (policy.get("metadata") or {}).get("namespace")
    found: set[str | None] = set()
    for selector in (policy.get("spec") or {}).get("resourceSelectors") or []:
        if not isinstance(selector, Mapping) or (
                deny.group_of(str(selector.get("apiVersion") or "")),
                selector.get("kind")) != deny.SECRET:
            continue
        namespace = own if policy.get("kind") == "PropagationPolicy" else \
            selector.get("namespace")
        found.add(str(namespace) if namespace else None)
    return found


def readable(policy: Mapping[str, Any], granted: frozenset[str]) -> tuple[bool, str, str] | None:
    """(status, reason, message) of the policy's :data:`CONDITION`, or None when it selects
    no Secret."""
    wanted = selected_namespaces(policy)
    if not wanted:
        return None
    refused = sorted(ns for ns in wanted if ns is not None and ns not in granted)
    if refused:
        return False, "NotGranted", "; ".join(refusal(ns) for ns in refused)
    if None in wanted:
        names = sorted(granted)
        shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more"
                                            if len(names) > SHOWN else "")
        return False, "GrantedNamespacesOnly", (
            f"Secrets are read only in namespaces granted by a RoleBinding "
            f"{roles.SECRETS_ROLE}: {shown or 'none yet'}; Secrets of other namespaces are "
            "not propagated (`fedctl install --secret-namespaces NS` grants one)")
    return True, "Granted", "Secrets of " + ", ".join(sorted(str(n) for n in wanted)) + \
        " are read"
