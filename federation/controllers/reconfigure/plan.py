"""Per cluster: what changes from the member's live copy to the hub's config, and the action.

The diff is per file key with the key's constraint (:func:`federation.reconfigure.diff.diff`,
then :func:`~federation.reconfigure.diff.choose` with the policy's ``reloadPolicy``); a data
key no file names is compared as a whole and counts as a static change of that key. The
cluster's action is the strongest of its files' (refused, restart, online, none,
unchanged). A cluster with no copy yet gets the config as a first copy, which is no
reconfiguration (``unchanged``).

Parameters are named ``<key>:<parameter>`` (``my.ini:mysqld.max_connections``) and a whole
key by its name. Refusal messages name parameters and rules, never values: the messages of
the pure diff quote a value that breaks a rule, so those are rebuilt here without it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping

from federation.contexts.cache import ReadOnly
from federation.controllers.reconfigure import load
from federation.controllers.reconfigure.load import Refusal
from federation.hub import reconfigure as hub_api
from federation.reconfigure import formats
from federation.reconfigure.constraint import ConfigConstraintSpec, ParameterClass
from federation.reconfigure.diff import Action, ChangeKind, Diff, ReloadPolicy, choose, diff

RANK = (Action.UNCHANGED, Action.NONE, Action.ONLINE, Action.RESTART, Action.REFUSED)
"""Actions from weakest to strongest: a cluster does the strongest any of its files needs."""


@dataclasses.dataclass(frozen=True)
class ClusterPlan:
    action: Action
    changed: tuple[str, ...] = ()
    """Names of the changed parameters (``key:parameter``) and whole keys, sorted."""
    refusal: Refusal | None = None


def strongest(actions: list[Action]) -> Action:
    return max(actions, key=RANK.index, default=Action.UNCHANGED)


def plan_cluster(cluster: str, spec: hub_api.ReconfigurePolicySpec,
                 constraints: Mapping[str, ConfigConstraintSpec],
                 hub_files: Mapping[str, str | bytes], copy: ReadOnly | None) -> ClusterPlan:
    """The action and changed names for ``cluster``, whose live copy is ``copy``."""
    if copy is None:
        return ClusterPlan(Action.UNCHANGED)
    old = load.contents(copy)
    actions: list[Action] = []
    changed: list[str] = []
    for key, constraint in constraints.items():
        try:
            result = diff(constraint, _text(old.get(key)), str(hub_files[key]))
        except formats.FormatError as exc:
            # Which side failed matters: the hub's can be fixed by the author; a copy's
            # was accepted once and has been edited in the member since.
            where = "the hub's" if _parses(constraint, hub_files[key]) is False else \
                f"the copy in {cluster}"
            return ClusterPlan(Action.REFUSED, refusal=Refusal(
                "InvalidFile", f"{key}: {where} does not parse: {exc}"))
        changed += [f"{key}:{c.name}" for c in result.changes]
        refusal = _refusal(cluster, key, constraint, result, spec.reload_policy)
        if refusal is not None:
            return ClusterPlan(Action.REFUSED, tuple(sorted(changed)), refusal)
        actions.append(choose(result, spec.reload_policy).action)
    loose = sorted(k for k in set(old) | set(hub_files)
                   if k not in constraints and old.get(k) != hub_files.get(k))
    if loose and spec.reload_policy is ReloadPolicy.ONLINE:
        return ClusterPlan(Action.REFUSED, tuple(sorted(changed + loose)), Refusal(
            "StaticChangeNeedsRestart",
            f"reloadPolicy online, but data key {', '.join(map(repr, loose))} (no constraint: "
            f"static) changed in {cluster} and needs a restart"))
    if loose:
        actions.append({ReloadPolicy.NONE: Action.NONE}.get(spec.reload_policy, Action.RESTART))
    return ClusterPlan(strongest(actions), tuple(sorted(changed + loose)))


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode(errors="replace")


def _parses(constraint: ConfigConstraintSpec, content: str | bytes) -> bool:
    try:
        formats.parse(constraint.file_format, _text(content))
    except formats.FormatError:
        return False
    return True


def _refusal(cluster: str, key: str, constraint: ConfigConstraintSpec, result: Diff,
             policy: ReloadPolicy) -> Refusal | None:
    bad = [c for c in result.changes if c.kind is not ChangeKind.REMOVED
           and constraint.validate_value(c.name, c.new)]
    if bad:
        return Refusal("InvalidValue", "; ".join(
            f"parameter '{key}:{c.name}': the new value breaks {_rules(constraint, c.name)}"
            for c in bad))
    immutable = result.names(ParameterClass.IMMUTABLE)
    if immutable:
        return Refusal("ImmutableParameterChanged",
                       f"immutable parameter {_named(key, immutable)} changed (from the copy "
                       f"in {cluster})")
    if choose(result, policy).action is Action.REFUSED:
        static = result.names(ParameterClass.STATIC)
        return Refusal("StaticChangeNeedsRestart",
                       f"reloadPolicy online, but static parameter {_named(key, static)} "
                       f"changed in {cluster} and needs a restart")
    return None


def _named(key: str, names: tuple[str, ...]) -> str:
    return ", ".join(f"'{key}:{name}'" for name in names)


def _rules(constraint: ConfigConstraintSpec, name: str) -> str:
    shown = []
    for pattern, rule in constraint.parameters_schema.items():
        if fnmatch.fnmatchcase(name, pattern):
            fields = rule.model_dump(by_alias=True, exclude_defaults=True, mode="json")
            fields.setdefault("type", rule.type.value)
            body = ", ".join(f"{k}: {v}" for k, v in fields.items())
            shown.append(f"parametersSchema[{pattern!r}] ({body})")
    return " and ".join(shown)


def online_params(spec: hub_api.ReconfigurePolicySpec,
                  constraints: Mapping[str, ConfigConstraintSpec],
                  hub_files: Mapping[str, str | bytes],
                  changed: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """File key -> the changed dynamic parameters with their NEW values as strings (what
    ``OnlineUpgradeParams`` carries). A removed parameter has no new value to send."""
    calls: dict[str, dict[str, str]] = {}
    for key, constraint in constraints.items():
        names = [n.partition(":")[2] for n in changed if n.startswith(f"{key}:")]
        new = formats.parse(constraint.file_format, _text(hub_files[key]))
        params = {name: as_text(new[name]) for name in names
                  if name in new and constraint.classify(name) is ParameterClass.DYNAMIC}
        if params:
            calls[key] = params
    return calls


def as_text(value: formats.Value) -> str:
    if isinstance(value, tuple):
        return ",".join(as_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
