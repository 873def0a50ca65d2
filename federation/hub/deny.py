"""The propagation deny list: kinds and objects no policy ever copies to members.

Some objects must never leave the hub whatever a policy selects: our own API
(policies and bindings would propagate themselves, bindings of bindings),
records the API server keeps about itself (Events, Leases, Endpoints), review
and binding kinds that cannot be stored at all, cluster plumbing (Nodes, CSRs,
APIServices), what governs a whole member (admission webhooks and policies,
PodSecurityPolicies, RBAC), KubeVela's API (the control plane runs Applications
itself) and credentials (ServiceAccount token Secrets, every Secret of
``kube-system`` and of our own namespace, where ``fedctl join`` keeps the
members' kubeconfigs). A policy selecting them would otherwise turn namespace
rights on the hub into secrets or control on every member. The whole-kind rules
are :data:`federation.rbac.never.NEVER`, the list ``fedctl rbac --propagate-kinds``
refuses too.

A rule is ``GROUP/KIND`` (``core`` for the core group, ``*`` for every kind of
a group), optionally narrowed by ``:namespace=NS`` or ``:type=TYPE`` (the
object's top-level ``type``, e.g. a Secret's). A rule with no qualifier denies
the whole kind: the control plane starts no informer for it, so its objects
never even reach a reconcile. A qualified rule denies matching objects: they
are skipped with a reason, never rendered or written. Operators extend the
list with ``fedctl run --propagation-deny RULE,...`` and remove a default rule
only by naming it exactly with a leading ``-`` (``-core/Endpoints``); naming a
rule that is not in the list is an error, so a typo never silently re-opens a
kind. The same list is checked three times: when a policy is validated (its
``Denied`` condition), when a template's policy is looked up (the object is
skipped) and by the writer just before any member write (defence in depth).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.rbac import never

OUR_NAMESPACE = "federation-system"
"""Where ``fedctl join`` keeps joined clusters' kubeconfig Secrets (the control plane's
namespace); the same value as :data:`federation.commands.join.NAMESPACE`."""

AGENT_NAMESPACE = "federation-agent"
"""The pull agent's namespace on a member (its ServiceAccount, its certificate Secret);
the same value as :data:`federation.deploy.manifests.AGENT_NAMESPACE`."""

ANY_GROUP = "*"
"""A rule's group that covers every group: only in ``*/*:namespace=NS``."""

SECRET = ("", "Secret")


class DenyError(ValueError):
    """A deny rule cannot be parsed, or a removal names a rule not in the list."""


class Denied(Exception):
    """A write or a watch of a denied kind or object was refused."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One entry of the deny list (see the module docstring for the syntax)."""

    group: str
    kind: str
    namespace: str | None = None
    type: str | None = None
    why: str = dataclasses.field(default="", compare=False)
    """Shown to the policy author; not part of the rule's identity."""

    @classmethod
    def parse(cls, text: str, why: str = "") -> Rule:
        head, *qualifiers = text.strip().split(":")
        group, slash, kind = head.partition("/")
        if not slash or not kind or not group or " " in head:
            raise DenyError(f"deny rule {text!r}: expected GROUP/KIND[:namespace=NS]"
                            "[:type=TYPE] (core/Secret, apps/*, */*:namespace=NS)")
        values: dict[str, str] = {}
        for qualifier in qualifiers:
            key, equals, value = qualifier.partition("=")
            if key not in ("namespace", "type") or not equals or not value or key in values:
                raise DenyError(f"deny rule {text!r}: qualifier {qualifier!r} is not "
                                "namespace=NS or type=TYPE (each at most once)")
            values[key] = value
        if group == "*" and (kind != "*" or "namespace" not in values):
            raise DenyError(f"deny rule {text!r}: every group (*) is allowed only as "
                            "*/*:namespace=NS (every kind in one namespace)")
        return cls("" if group == "core" else group, kind, values.get("namespace"),
                   values.get("type"), why)

    def __str__(self) -> str:
        text = f"{self.group or 'core'}/{self.kind}"
        if self.namespace is not None:
            text += f":namespace={self.namespace}"
        if self.type is not None:
            text += f":type={self.type}"
        return text

    @property
    def whole_kind(self) -> bool:
        return self.namespace is None and self.type is None

    def covers_kind(self, group: str, kind: str) -> bool:
        return self.group in (ANY_GROUP, group) and self.kind in ("*", kind)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        group, kind = group_kind_of(obj)
        return self.covers_kind(group, kind) and self.qualifiers_match(obj)

    def qualifiers_match(self, obj: Mapping[str, Any]) -> bool:
        """The namespace and type qualifiers (the kind already known to be covered)."""
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.type is None or obj.get("type") == self.type

    def describe(self) -> str:
        """What the rule skips, for a policy's condition: ``Secrets in kube-system``."""
        what = "every kind" if self.group == ANY_GROUP else \
            "every kind of " + (self.group or "core") if self.kind == "*" else \
            f"{self.kind} ({self.group or 'core'})"
        if self.type is not None:
            what += f" of type {self.type}"
        if self.namespace is not None:
            what += f" in namespace {self.namespace}"
        return what + (f": {self.why}" if self.why else "")


def _rules(why: str, *texts: str) -> list[Rule]:
    return [Rule.parse(text, why) for text in texts]


DEFAULT_RULES: tuple[Rule, ...] = (
    *(Rule(n.group, n.kind, None, None, n.why) for n in never.NEVER),
    *_rules("credentials", "core/Secret:type=kubernetes.io/service-account-token",
            "core/Secret:type=bootstrap.kubernetes.io/token",
            "core/Secret:namespace=kube-system", f"core/Secret:namespace={OUR_NAMESPACE}"),
    *_rules("the pull agent's namespace on members: a pod there could run as the agent's "
            "ServiceAccount and read the agent's certificate Secret",
            f"*/*:namespace={AGENT_NAMESPACE}"),
)
"""The default deny list (docs/propagation.md lists it with the reasons)."""


@dataclasses.dataclass(frozen=True)
class DenyList:
    rules: tuple[Rule, ...] = DEFAULT_RULES

    @classmethod
    def configured(cls, entries: Iterable[str]) -> DenyList:
        """The default list changed by ``--propagation-deny`` entries (``RULE`` adds,
        ``-RULE`` removes a rule that must be in the list, comma-separated or repeated)."""
        rules = list(DEFAULT_RULES)
        for entry in (e.strip() for chunk in entries for e in chunk.split(",")):
            if not entry:
                continue
            if entry.startswith("-"):
                rule = Rule.parse(entry[1:])
                if rule not in rules:
                    raise DenyError(f"deny rule {entry[1:]!r} is not in the deny list "
                                    f"(rules: {', '.join(str(r) for r in rules)})")
                rules.remove(rule)
            else:
                rule = Rule.parse(entry.removeprefix("+"), "added by the operator")
                if rule not in rules:
                    rules.append(rule)
        return cls(tuple(rules))

    def with_rules(self, extra: Iterable[Rule]) -> DenyList:
        return DenyList(self.rules + tuple(r for r in extra if r not in self.rules))

    def kind_rule(self, group: str, kind: str) -> Rule | None:
        """The rule denying every object of this kind, if any."""
        return next((r for r in self.rules if r.whole_kind and r.covers_kind(group, kind)),
                    None)

    def object_rule(self, obj: Mapping[str, Any]) -> Rule | None:
        """The first rule denying this object (a whole-kind rule or a qualified one).
        Checked before every member write, so only the rules of the object's group are
        looked at (in list order: an object has one group, so the first is the same)."""
        group, kind = group_kind_of(obj)
        return next((r for r in self._for_group(group)
                     if r.kind in ("*", kind) and r.qualifiers_match(obj)), None)

    def _for_group(self, group: str) -> tuple[Rule, ...]:
        """The rules of one group and those of every group, in list order."""
        own, every = self._by_group.get(group, ()), self._by_group.get(ANY_GROUP, ())
        if not every or group == ANY_GROUP:
            return own
        return tuple(sorted((*own, *every), key=self._position.__getitem__))

    @functools.cached_property
    def _by_group(self) -> dict[str, tuple[Rule, ...]]:
        found: dict[str, list[Rule]] = {}
        for rule in self.rules:
            found.setdefault(rule.group, []).append(rule)
        return {group: tuple(rules) for group, rules in found.items()}

    @functools.cached_property
    def _position(self) -> dict[Rule, int]:
        return {rule: index for index, rule in reversed(list(enumerate(self.rules)))}

    def policy_denials(self, policy: Mapping[str, Any]) -> list[str]:
        """What a propagation policy selects that the list denies, one line per rule."""
        namespaced = policy.get("kind") == "PropagationPolicy"
        policy_namespace = (policy.get("metadata") or {}).get("namespace") or "default"
        found: list[str] = []
        for selector in (policy.get("spec") or {}).get("resourceSelectors") or []:
            if not isinstance(selector, dict):
                continue
            group = group_of(str(selector.get("apiVersion") or ""))
            kind = str(selector.get("kind") or "")
            namespace = policy_namespace if namespaced else selector.get("namespace")
            for rule in self.rules:
                if not rule.covers_kind(group, kind):
                    continue
                if rule.namespace is not None and namespace not in (None, rule.namespace):
                    continue
                if rule.group == ANY_GROUP and namespace != rule.namespace:
                    continue  # named only for a policy of that namespace, not every one
                line = f"{rule.describe()} [{rule}]"
                if line not in found:
                    found.append(line)
        return found


def credential_rules(member_clusters: Sequence[Mapping[str, Any]]) -> list[Rule]:
    """Secrets in every namespace a MemberCluster's kubeconfigSecretRef points into."""
    namespaces = set()
    for doc in member_clusters:
        ref = (doc.get("spec") or {}).get("kubeconfigSecretRef")
        if isinstance(ref, dict) and ref.get("namespace"):
            namespaces.add(str(ref["namespace"]))
    return [Rule("", "Secret", namespace, None, "holds joined clusters' credentials")
            for namespace in sorted(namespaces)]


def group_of(api_version: str) -> str:
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def group_kind_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    return group_of(str(obj.get("apiVersion") or "")), str(obj.get("kind") or "")
