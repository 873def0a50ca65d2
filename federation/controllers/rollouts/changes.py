"""Per cluster: what changes from the member's live copy to the hub's config, and the action.

The diff is per file key with the key's constraint (taken by a worker process within
limits, :mod:`.sandbox`; then :func:`~federation.rollouts.diff.choose` with the policy's
``reloadPolicy``); a data
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
from federation.controllers.rollouts import load
from federation.controllers.rollouts.load import Refusal
from federation.controllers.rollouts.sandbox import Analyses
from federation.hub import rollouts as hub_api
from federation.rollouts import analysis
from federation.rollouts.constraint import ConfigConstraintSpec, ParameterClass
from federation.rollouts.diff import Action, ReloadPolicy, choose

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


async def plan_cluster(cluster: str, spec: hub_api.ReconfigurePolicySpec,
                       constraints: Mapping[str, ConfigConstraintSpec],
                       hub_files: Mapping[str, str | bytes], copy: ReadOnly | None,
                       analyses: Analyses) -> ClusterPlan:
    """The action and changed names for ``cluster``, whose live copy is ``copy``. The files
    are diffed and checked by ``analyses`` (a worker process, within limits)."""
    if copy is None:
        return ClusterPlan(Action.UNCHANGED)
    old = load.contents(copy)
    actions: list[Action] = []
    changed: list[str] = []
    for key, constraint in constraints.items():
        result = await analyses.diff(constraint, _text(old.get(key)), str(hub_files[key]))
        if isinstance(result, analysis.Failure):
            return ClusterPlan(Action.REFUSED, refusal=_unreadable(cluster, key, result))
        changed += [f"{key}:{c.name}" for c in result.changes]
        refusal = _refusal(cluster, key, constraint, result, spec.reload_policy)
        if refusal is not None:
            return ClusterPlan(Action.REFUSED, tuple(sorted(changed)), refusal)
        action = choose(result.as_diff(), spec.reload_policy).action
        if action is Action.ONLINE and not constraint.online_reload:
            if spec.reload_policy is ReloadPolicy.ONLINE:
                return ClusterPlan(Action.REFUSED, tuple(sorted(changed)), _offline(key))
            action = Action.RESTART  # nothing applies it online (KubeBlocks: no reloadAction)
        actions.append(action)
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


def _offline(key: str) -> Refusal:
    return Refusal("StaticChangeNeedsRestart",
                   f"reloadPolicy online, but the constraint of {key!r} has no reload action "
                   "(KubeBlocks' reloadAction): every change needs a restart")


def _unreadable(cluster: str, key: str, failure: analysis.Failure) -> Refusal:
    """``InvalidFile`` naming the file, the side and the reason class; the message quotes
    nothing from the file (the worker's messages are built so)."""
    # Which side failed matters: the hub's can be fixed by the author; a copy's was
    # accepted once and has been edited in the member since.
    where = {"new": "the hub's", "old": f"the copy in {cluster}"}.get(
        failure.side, f"the hub's or the copy in {cluster}")
    return Refusal("InvalidFile", f"{key}: {where} cannot be used ({failure.reason}): "
                                  f"{failure.message}")


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode(errors="replace")


def _refusal(cluster: str, key: str, constraint: ConfigConstraintSpec,
             result: analysis.FileDiff, policy: ReloadPolicy) -> Refusal | None:
    bad = [c for c in result.changes if c.name in result.invalid]
    if bad:
        return Refusal("InvalidValue", "; ".join(
            f"parameter '{key}:{c.name}': the new value breaks {_rules(constraint, c.name)}"
            for c in bad))
    diff = result.as_diff()
    immutable = diff.names(ParameterClass.IMMUTABLE)
    if immutable:
        return Refusal("ImmutableParameterChanged",
                       f"immutable parameter {_named(key, immutable)} changed (from the copy "
                       f"in {cluster})")
    if choose(diff, policy).action is Action.REFUSED:
        static = diff.names(ParameterClass.STATIC)
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


async def online_params(cluster: str, constraints: Mapping[str, ConfigConstraintSpec],
                        hub_files: Mapping[str, str | bytes], changed: tuple[str, ...],
                        analyses: Analyses, *, before_restart: bool = False
                        ) -> dict[str, dict[str, str]] | Refusal:
    """File key -> the changed dynamic parameters with their NEW values as strings (what
    ``OnlineUpgradeParams`` carries), or the refusal of a file that cannot be read. A
    removed parameter has no new value to send.

    ``before_restart``: the parameters pushed just before a restart instead, by each
    file's constraint (:attr:`ConfigConstraintSpec.before_restart`: none by default,
    KubeBlocks' ``mergeReloadAndRestart: true``)."""
    calls: dict[str, dict[str, str]] = {}
    for key, constraint in constraints.items():
        names = [n.partition(":")[2] for n in changed if n.startswith(f"{key}:")]
        classes = constraint.before_restart if before_restart \
            else frozenset({ParameterClass.DYNAMIC})
        if not names or not classes:
            continue
        params = await analyses.online(constraint, _text(hub_files[key]), names, classes)
        if isinstance(params, analysis.Failure):
            return _unreadable(cluster, key, params)
        if params:
            calls[key] = params
    return calls
