"""KubeVela's ``apply-once``, ``read-only`` and ``shared-resource`` policies: which member
objects, or parts of them, the controller leaves as they are, a pure decision (apply-once:
vela-templates/definitions/internal/policy/apply-once.cue; what honours it in KubeVela:
``ApplyOncePolicySpec.FindStrategy`` in apis/core.oam.dev/v1alpha1 and
``ApplyStrategies``/``StateKeep`` in pkg/resourcekeeper).

- ``enable: false`` (the default): nothing changes;
- ``enable: true`` without ``rules``: an object is written when the Application's content
  for it changes, never to undo a change made in the member since (KubeVela skips its
  state-keep), and an object deleted there is not created again until the content
  changes;
- ``enable: true`` with ``rules[]``: the first rule whose ``selector`` matches the object
  decides; its ``strategy.path`` names the fields whose live values are kept (``*``: the
  whole object) when ``strategy.affect`` says so: ``onUpdate`` (a new revision writes
  it), ``onStateKeep`` (the same revision again, undoing drift), ``always`` or "" (both).
  A rule without ``strategy`` keeps nothing.

``read-only`` (policy/read-only.cue; ``isReadOnly`` and ``apply.ReadOnly`` in KubeVela):
the objects its ``rules[].selector`` match are never written nor deleted, only read for
health; one that is not in the member is an error (``... is marked as read-only but does
not exist``), whoever placed one that is.

``shared-resource`` (policy/shared-resource.cue; ``SharedByApp`` in KubeVela's apply and
``DeleteManagedResourceInApplication``): the objects its ``rules[].selector`` match carry
:data:`SHARED_ANNOTATION`; the first Application to create one owns it (writes it), and
another Application *of the same hub namespace* whose own policy selects it shares it:
reads it for health, writes nothing, records it in its tracker as shared. When the owner
stops rendering it, or is deleted, the object goes to a sharer instead of being deleted
(:mod:`federation.controllers.applications.prune`); the last one deletes it.

``take-over`` (policy/take-over.cue; ``TakeOverPolicySpec.FindStrategy`` and the
``TakeOver`` apply option of KubeVela's ``MustBeControlledByApp``): the objects its
``rules[].selector`` match (the rules of every take-over policy, as KubeVela
concatenates them) may be *adopted* when the member already holds an object of that
identity that no one placed: it is written over (a full update carrying the version read)
and from then on is this Application's, with our marks, tracked and deleted with it as any
of its objects. :func:`not_taken_over` says what is never adopted whatever the rules say
(KubeVela's own rule: an object another Application manages is refused; ours adds another
placer of ours, another namespace, the hub, a member's namespace governance, an object a
member controller owns, one being deleted).

A selector matches as KubeVela's ``ResourcePolicyRuleSelector``: each list given must hold
the object's value, and at least one is given: ``componentNames`` (its component),
``componentTypes`` (the type of the component whose workload it is: a component's first
object, KubeVela's ``output``), ``oamTypes`` (``WORKLOAD`` for that object, ``TRAIT`` for
the others), ``traitTypes`` (the trait that added it; ``AuxiliaryWorkload`` for a
component's other objects, its ``outputs``), ``resourceTypes`` (kinds) and
``resourceNames``. KubeVela reads the middle three from labels it puts on what it renders
(``workload.oam.dev/type``, ``app.oam.dev/resourceType``, ``trait.oam.dev/type``); here
the render records them beside the objects (:class:`MadeBy`, by :func:`object_key`),
which the selectors read, so the objects written are unchanged.

``resource-update`` (policy/resource-update.cue; ``ResourceUpdatePolicySpec.FindStrategy``
and ``needRecreate`` in pkg/utils/apply): the first rule (of every resource-update policy,
in order, as KubeVela concatenates them) whose ``selector`` matches an object gives its
``strategy``: ``recreateFields``, paths whose value in the member's object differing from
the rendered one makes the write a delete and a create instead of an update (an
immutable field: a Secret's data with ``immutable: true``, a Deployment's selector), and
``op``: ``replace`` (a full update: how every object of an Application is written here)
or ``patch``, KubeVela's default, a three-way merge keeping fields others set in the
member, which no write here is: refused by name. A rule without ``op`` leaves the
update as it is (here a full update; in KubeVela its default, ``patch``). A path either
object lacks is an error for that object, as KubeVela's (it fails the apply), so a
misspelt path never silently disables the recreate.

A path is dotted field names with ``[N]`` list indexes or ``[key]`` map keys
(``spec.template.spec.containers[0].resources``); a field the live object lacks is left
as rendered (KubeVela fails the reconcile there).

``garbage-collect``'s ``rules`` (policy/garbage-collect.cue; ``FindStrategy`` and
``FindDeleteOption`` of ``GarbageCollectPolicySpec``): the first rule whose ``selector``
matches a rendered object gives it a ``strategy``, recorded with the object in the tracker
when it is written (as KubeVela records it in its ResourceTracker at dispatch):
``onAppUpdate`` (the default: deleted once no longer rendered), ``onAppDelete`` (kept
until the Application is deleted) or ``never`` (never deleted: released, left in the
member, once no longer rendered or when the Application is deleted). The first matching
rule with a ``propagation`` gives it: ``orphan`` (released instead of deleted, its
dependents with it) or ``cascading`` (deleted in the background, its dependents after it,
which is how every delete of ours is sent). A rule only ever keeps what would have been
deleted: what may be deleted at all is decided elsewhere (only what this Application
placed, :mod:`federation.controllers.applications.prune`).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from federation.applications import shapes
from federation.applications.model import AppError, PolicySpec
from federation.hub import manifests

JSON = dict[str, Any]
Stage = Literal["onUpdate", "onStateKeep"]
WHOLE = "*"
_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\[\]]+)\]|(\.)")

_SELECTOR = {"componentNames?": [str], "componentTypes?": [str],
             "oamTypes?": [shapes.Enum("WORKLOAD", "TRAIT")],
             "traitTypes?": [str], "resourceTypes?": [str], "resourceNames?": [str]}
_SELECTOR_KEYS = ("componentNames", "componentTypes", "oamTypes", "traitTypes",
                  "resourceTypes", "resourceNames")
WORKLOAD = "WORKLOAD"
TRAIT = "TRAIT"
AUXILIARY = "AuxiliaryWorkload"
ObjectKey = tuple[str, str, str, str, str]


@dataclasses.dataclass(frozen=True)
class MadeBy:
    """What rendered an object: KubeVela's ``workload.oam.dev/type`` (the component's
    type, on its workload only), ``app.oam.dev/resourceType`` and ``trait.oam.dev/type``."""

    component_type: str = ""
    oam_type: str = ""
    trait_type: str = ""


Provenance = Mapping[ObjectKey, MadeBy]


def object_key(manifest: Mapping[str, Any]) -> ObjectKey:
    """A rendered object's identity among a revision's: its component, API group, kind,
    namespace and name."""
    meta = manifest.get("metadata") or {}
    return (str((meta.get("labels") or {}).get("app.oam.dev/component") or ""),
            str(manifest.get("apiVersion") or "").rpartition("/")[0],
            str(manifest.get("kind") or ""), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""))
APPLY_ONCE = {"enable": shapes.Default(bool, False), "rules?": [{
    "selector?": _SELECTOR, "strategy?": {
        "path": [str], "affect": shapes.Default(shapes.Enum("", "always", "onUpdate",
                                                             "onStateKeep"), "")}}]}


@dataclasses.dataclass(frozen=True)
class Selector:
    component_names: tuple[str, ...] = ()
    component_types: tuple[str, ...] = ()
    oam_types: tuple[str, ...] = ()
    trait_types: tuple[str, ...] = ()
    resource_types: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    made_by: Provenance = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """What rendered each object of the revision (read by the three type lists)."""

    def match(self, manifest: Mapping[str, Any]) -> bool:
        meta = manifest.get("metadata") or {}
        made = self.made_by.get(object_key(manifest), MadeBy())
        values = (str((meta.get("labels") or {}).get("app.oam.dev/component") or ""),
                  made.component_type, made.oam_type, made.trait_type,
                  str(manifest.get("kind") or ""), str(meta.get("name") or ""))
        given = [(names, value) for names, value in zip(
            (self.component_names, self.component_types, self.oam_types, self.trait_types,
             self.resource_types, self.resource_names), values, strict=True) if names]
        return bool(given) and all(value and value in names for names, value in given)


@dataclasses.dataclass(frozen=True)
class Rule:
    selector: Selector
    paths: tuple[str, ...] | None
    """None: the rule has no strategy (it matches, and keeps nothing)."""
    affect: str = ""


@dataclasses.dataclass(frozen=True)
class ApplyOnce:
    enabled: bool = False
    rules: tuple[Rule, ...] | None = None

    def kept(self, manifest: Mapping[str, Any], stage: Stage) -> tuple[str, ...]:
        """The paths of ``manifest`` whose live values stay (``("*",)``: all of it)."""
        if not self.enabled:
            return ()
        if self.rules is None:
            return (WHOLE,) if stage == "onStateKeep" else ()
        for rule in self.rules:
            if rule.selector.match(manifest):
                if rule.paths is None or rule.affect not in ("", "always", stage):
                    return ()
                return rule.paths
        return ()


def _selector(raw: Mapping[str, Any] | None, made_by: Provenance) -> Selector:
    raw = raw or {}
    names, types, oam, traits_, kinds, resources = (tuple(raw.get(k) or ())
                                                    for k in _SELECTOR_KEYS)
    return Selector(names, types, oam, traits_, kinds, resources, made_by)


GC_RULES = [{"selector": _SELECTOR,
             "strategy": shapes.Default(shapes.Enum("onAppUpdate", "onAppDelete", "never"),
                                        "onAppUpdate"),
             "propagation?": shapes.Enum("orphan", "cascading")}]
ON_APP_UPDATE = "onAppUpdate"


@dataclasses.dataclass(frozen=True)
class GcRule:
    selector: Selector
    strategy: str = ON_APP_UPDATE
    propagation: str = ""


def gc_rules_of(policy: PolicySpec, where: str, made_by: Provenance | None = None
                ) -> tuple[GcRule, ...]:
    """A ``garbage-collect`` policy's ``rules`` (none: an empty tuple); ``made_by``: what
    rendered each object of the revision."""
    rules = shapes.check(policy.properties.get("rules", []), GC_RULES, f"{where}.rules")
    return tuple(GcRule(_selector(rule["selector"], made_by or {}), rule["strategy"],
                        rule.get("propagation", "")) for rule in rules)


def gc_strategy(rules: Sequence[GcRule], manifest: Mapping[str, Any]) -> tuple[str, str]:
    """The object's (strategy, propagation): the first matching rule's strategy, and the
    first matching rule's propagation that has one (KubeVela reads them apart)."""
    matching = [rule for rule in rules if rule.selector.match(manifest)]
    strategy = matching[0].strategy if matching else ON_APP_UPDATE
    propagation = next((rule.propagation for rule in matching if rule.propagation), "")
    return strategy, propagation


_PATCH_REFUSED = ("KubeVela's op patch is a three-way merge that keeps fields others set "
                  "in the member; every write of an Application's object here is a full "
                  "update, which is op replace: write replace, or leave op out")
RESOURCE_UPDATE = {"rules?": [{"selector": _SELECTOR, "strategy?": {
    "op?": shapes.Enum("patch", "replace"), "recreateFields?": [str]}}]}


@dataclasses.dataclass(frozen=True)
class UpdateRule:
    selector: Selector
    recreate_fields: tuple[str, ...] = ()
    op: str = ""
    """"" (not given) or ``replace``: the same full update."""


@dataclasses.dataclass(frozen=True)
class Recreate:
    """Whether the write of an object over its live version is a delete and a create."""

    changed: tuple[str, ...] = ()
    """The recreate fields whose live value differs from the rendered one."""
    missing: str = ""
    """Why the decision cannot be made (a path one of the objects lacks), or ""."""


@dataclasses.dataclass(frozen=True)
class ResourceUpdate:
    rules: tuple[UpdateRule, ...] = ()

    def rule(self, manifest: Mapping[str, Any]) -> UpdateRule | None:
        return next((r for r in self.rules if r.selector.match(manifest)), None)

    def recreate(self, desired: Mapping[str, Any], live: Mapping[str, Any]) -> Recreate:
        """``needRecreate``: the recreate fields of the first matching rule compared
        between ``live`` and ``desired`` (equal JSON values), each path read in both."""
        rule = self.rule(desired)
        changed: list[str] = []
        for path in rule.recreate_fields if rule is not None else ():
            parts = parse_path(path, "recreateFields")
            (in_live, old), (in_desired, new) = _get(live, parts), _get(desired, parts)
            if not (in_live and in_desired):
                where = "the member's object" if not in_live else "the rendered object"
                return Recreate(missing=f"resource-update recreateFields {path!r}: not in "
                                        f"{where} (nothing can say whether it changed)")
            if old != new:
                changed.append(path)
        return Recreate(tuple(changed))


def resource_update_of(policies: Sequence[PolicySpec], made_by: Provenance | None = None
                       ) -> ResourceUpdate:
    """The rules of the Application's ``resource-update`` policies, in order."""
    rules: list[UpdateRule] = []
    for policy in policies:
        if policy.type != "resource-update":
            continue
        where = f"policy {policy.name} properties"
        params = shapes.check(policy.properties, RESOURCE_UPDATE, where)
        for index, rule in enumerate(params.get("rules") or ()):
            here = f"{where}.rules[{index}].strategy"
            strategy = rule.get("strategy") or {}
            if strategy.get("op") == "patch":
                raise AppError(f"{here}.op: 'patch' is not supported ({_PATCH_REFUSED})")
            paths = tuple(strategy.get("recreateFields") or ())
            for number, path in enumerate(paths):
                if path == WHOLE or not parse_path(path, f"{here}.recreateFields[{number}]"):
                    raise AppError(f"{here}.recreateFields[{number}]: {path!r} is not a "
                                   "field path such as data.key or spec.selector")
            rules.append(UpdateRule(_selector(rule["selector"], made_by or {}), paths,
                                    strategy.get("op", "")))
    return ResourceUpdate(tuple(rules))


@dataclasses.dataclass(frozen=True)
class ReadOnly:
    selectors: tuple[Selector, ...] = ()

    def match(self, manifest: Mapping[str, Any]) -> bool:
        return any(selector.match(manifest) for selector in self.selectors)


def read_only_of(policies: Sequence[PolicySpec], made_by: Provenance | None = None
                 ) -> ReadOnly:
    """The Application's ``read-only`` policies (every one's rules)."""
    return _selection(policies, "read-only", made_by)


def shared_of(policies: Sequence[PolicySpec], made_by: Provenance | None = None
              ) -> ReadOnly:
    """The Application's ``shared-resource`` policies (every one's rules): the objects it
    shares with the other Applications of its namespace (see :func:`mark_shared`)."""
    return _selection(policies, "shared-resource", made_by)


def _selection(policies: Sequence[PolicySpec], kind: str, made_by: Provenance | None
               ) -> ReadOnly:
    selectors: list[Selector] = []
    for policy in policies:
        if policy.type == kind:
            where = f"policy {policy.name} properties"
            params = shapes.check(policy.properties, {"rules?": [{"selector": _SELECTOR}]},
                                  where)
            selectors += [_selector(rule["selector"], made_by or {})
                          for rule in params.get("rules") or []]
    return ReadOnly(tuple(selectors))


SHARED_ANNOTATION = "federation.io/shared-resource"
"""On a member object a ``shared-resource`` policy of its owner selects: the other
Applications of the owner's hub namespace whose own policy selects it may share it."""


def mark_shared(manifest: Mapping[str, Any]) -> JSON:
    """``manifest`` marked as shareable (part of its content: the owner writes it)."""
    body = copy.deepcopy(dict(manifest))
    body.setdefault("metadata", {}).setdefault("annotations", {})[SHARED_ANNOTATION] = "true"
    return body


def shareable(live: Mapping[str, Any]) -> bool:
    return ((live.get("metadata") or {}).get("annotations") or {}).get(
        SHARED_ANNOTATION) == "true"


def not_shared(live: Mapping[str, Any], namespace: str) -> str | None:
    """Why an Application of hub namespace ``namespace`` whose ``shared-resource`` policy
    selects ``live`` (placed by someone else) may not share it; None when it may. Only an
    object another Application *of the same namespace* placed and marked shareable: a
    tenant's namespace is the boundary, so an Application elsewhere never shares (and so
    never inherits) it, whatever its policy says."""
    owner = manifests.application_of(live) if manifests.is_ours(live) else None
    if owner is None:
        return "only an object an Application placed is shared"
    if owner.partition("/")[0] != namespace:
        return (f"its owner is of another namespace than {namespace}: only Applications of "
                "one namespace share an object")
    if not shareable(live):
        return "its owner's shared-resource policy does not select it"
    return None


def take_over_of(policies: Sequence[PolicySpec], made_by: Provenance | None = None
                 ) -> ReadOnly:
    """The Application's ``take-over`` policies (every one's rules): the objects it may
    adopt from the member when no one placed them (see :func:`not_taken_over`)."""
    return _selection(policies, "take-over", made_by)


_IDENTITY_FIELDS = frozenset({"apiVersion", "kind", "metadata"})
_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def bare(manifest: Mapping[str, Any]) -> bool:
    """Given by its identity and metadata only: how KubeVela's own take-over example names
    the object to adopt, its three-way merge keeping the member's content."""
    return not set(manifest) - _IDENTITY_FIELDS


def member_fields(live: Mapping[str, Any]) -> tuple[str, ...]:
    """The top-level fields of ``live`` that are its content (``spec``, ``data``...), as
    paths to keep (:func:`keep_live`) where a ``take-over`` rule selects a :func:`bare`
    object: every write here is a full update, so keeping them is how the member's content
    stays as KubeVela's merge leaves it (status is the member's anyway)."""
    return tuple(key for key in live if key not in _IDENTITY_FIELDS and key != "status"
                 and _FIELD_NAME.fullmatch(key))


GOVERNANCE_KINDS = frozenset({"ResourceQuota", "LimitRange"})
"""Core kinds a member's administrator sets on a namespace to bound what runs there: an
Application may create its own, but adopting one would let a tenant rewrite (or, by
deleting the Application, remove) the limits put on its own namespace."""
KEPT_BY_THE_MEMBER = frozenset({("ConfigMap", "kube-root-ca.crt"),
                                ("ServiceAccount", "default")})
"""Core objects the member's own controllers keep in every namespace (its API server's CA
bundle, the default ServiceAccount): adopted, the Application and that controller would
rewrite them in turn."""
KUBEVELA_NAME_LABEL = "app.oam.dev/name"
KUBEVELA_NAMESPACE_LABEL = "app.oam.dev/namespace"
"""KubeVela's ``GetControlledBy``: both set, the object is that Application's."""


def ownership_marks(live: Mapping[str, Any]) -> tuple[str, ...]:
    """The marks of ours ``live`` carries: who placed it, in part or whole."""
    meta = live.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return tuple(
        [key for key in (manifests.MANAGED_BY_LABEL,) if key in labels] +
        [key for key in (manifests.TEMPLATE_UID_ANNOTATION, manifests.APPLIED_HASH_ANNOTATION,
                         manifests.APPLICATION_ANNOTATION, SHARED_ANNOTATION)
         if key in annotations])


def not_taken_over(live: Mapping[str, Any], owner: str, on_hub: bool = False) -> str | None:
    """Why the Application ``owner`` (``namespace/name``), whose ``take-over`` policy
    selects an object it renders, may not adopt ``live``, the member's object of that
    identity that it did not place; None when it may. The refusals name the kind of
    placer only, never another tenant's Application."""
    meta = live.get("metadata") or {}
    namespace = owner.partition("/")[0]
    placed_by = _placed_by(live, owner)
    if placed_by:
        return f"{placed_by}; take-over adopts only an object no one placed"
    if on_hub:
        return "an Application never writes on the hub: only member objects are adopted"
    if str(meta.get("namespace") or "") != namespace:
        return (f"take-over adopts objects only in the Application's own namespace "
                f"({namespace}): a target-namespaces grant lets it place new objects "
                "elsewhere, not adopt what others put there")
    if "/" not in str(live.get("apiVersion") or "") and live.get("kind") in GOVERNANCE_KINDS:
        return (f"a {live.get('kind')} bounds the namespace and is its administrator's: "
                "an Application may create its own, never adopt one")
    if "/" not in str(live.get("apiVersion") or "") and \
            (live.get("kind"), meta.get("name")) in KEPT_BY_THE_MEMBER:
        return (f"the member's own controllers keep {live.get('kind')} {meta.get('name')} "
                "in every namespace and would write it back")
    controller = next((ref for ref in meta.get("ownerReferences") or ()
                       if isinstance(ref, Mapping) and ref.get("controller") is True), None)
    if controller is not None:
        return (f"a {controller.get('kind') or 'controller'} in the member controls it "
                "(ownerReferences) and would write it back")
    if meta.get("deletionTimestamp"):
        return "it is being deleted"
    return None


def _placed_by(live: Mapping[str, Any], owner: str) -> str:
    """Which other placer's marks ``live`` carries ("": none, or only this
    Application's)."""
    labels = (live.get("metadata") or {}).get("labels") or {}
    kubevela = (labels.get(KUBEVELA_NAMESPACE_LABEL), labels.get(KUBEVELA_NAME_LABEL))
    if all(kubevela) and f"{kubevela[0]}/{kubevela[1]}" != owner:
        return "another KubeVela Application manages it (app.oam.dev/namespace and name)"
    marks = ownership_marks(live)
    application = manifests.application_of(live)
    if not marks or application == owner:
        return ""
    if application is not None or SHARED_ANNOTATION in marks:
        return "another Application placed it"
    return f"a propagated template placed it (our marks: {', '.join(marks)})"


def apply_once_of(policies: Sequence[PolicySpec], made_by: Provenance | None = None
                  ) -> ApplyOnce:
    """The Application's ``apply-once`` policy (the first; none: nothing kept)."""
    policy = next((p for p in policies if p.type == "apply-once"), None)
    if policy is None:
        return ApplyOnce()
    where = f"policy {policy.name} properties"
    params = shapes.check(policy.properties, APPLY_ONCE, where)
    if "rules" not in params:
        return ApplyOnce(params["enable"])
    rules = []
    for index, rule in enumerate(params["rules"]):
        strategy = rule.get("strategy")
        if strategy is not None:
            for number, path in enumerate(strategy["path"]):
                parse_path(path, f"{where}.rules[{index}].strategy.path[{number}]")
        rules.append(Rule(_selector(rule.get("selector"), made_by or {}),
            tuple(strategy["path"]) if strategy is not None else None,
            strategy["affect"] if strategy is not None else ""))
    return ApplyOnce(params["enable"], tuple(rules))


def parse_path(path: str, where: str) -> list[str | int]:
    """``a.b[0].c`` as ``["a", "b", 0, "c"]`` (``*`` alone: the whole object)."""
    if path == WHOLE:
        return []
    parts: list[str | int] = []
    position = 0
    for match in _SEGMENT.finditer(path):
        if match.start() != position:
            break
        position = match.end()
        if match[1] is not None:
            parts.append(match[1])
        elif match[2] is not None:
            parts.append(int(match[2]) if match[2].isdigit() else match[2])
    if position != len(path) or not parts or path.startswith(".") or ".." in path \
            or path.endswith("."):
        raise AppError(f"{where}: {path!r} is not a field path such as spec.replicas or "
                       "spec.template.spec.containers[0].resources")
    return parts


def keep_live(desired: JSON, live: Mapping[str, Any], paths: Sequence[str]) -> JSON:
    """``desired`` with the live values at ``paths`` (a path ``live`` lacks, or that
    ``desired`` cannot hold, is left as rendered)."""
    result = copy.deepcopy(desired)
    for path in paths:
        parts = parse_path(path, "path")
        found, value = _get(live, parts)
        if found:
            _set(result, parts, copy.deepcopy(value))
    return result


def _get(node: Any, parts: Sequence[str | int]) -> tuple[bool, Any]:
    for part in parts:
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(node, Mapping) and str(part) in node:
            node = node[str(part)]
        else:
            return False, None
    return True, node


def _set(node: Any, parts: Sequence[str | int], value: Any) -> None:
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if isinstance(part, int) and isinstance(node, list):
            if not 0 <= part < len(node):
                return
            if last:
                node[part] = value
                return
            node = node[part]
        elif isinstance(node, dict):
            if last:
                node[str(part)] = value
                return
            node = node.setdefault(str(part), {} if isinstance(parts[index + 1], str)
                                   else [])
        else:
            return
