"""The diff: added/changed/removed parameters with their class, the verdict, the policy choice."""

from __future__ import annotations

import pytest

from federation.rollouts import diff as diffs
from federation.rollouts.constraint import ConfigConstraintSpec, ParameterClass
from federation.rollouts.diff import Action, Change, ChangeKind, ReloadPolicy
from federation.rollouts.formats import FormatError

# The worked example of docs/rollouts.md: one dynamic, one static, one immutable parameter.
SPEC = ConfigConstraintSpec.model_validate({
    "fileFormatConfig": {"format": "ini"},
    "dynamicParameters": ["mysqld.max_connections"],
    "staticParameters": ["mysqld.innodb_buffer_pool_size"],
    "immutableParameters": ["mysqld.server_id"],
    "parametersSchema": {"mysqld.max_connections": {"type": "int", "minimum": 1}},
})
OLD = "[mysqld]\nmax_connections = 100\ninnodb_buffer_pool_size = 1G\nserver_id = 1\n"


def _new(**values: str) -> str:
    params = {"max_connections": "100", "innodb_buffer_pool_size": "1G", "server_id": "1"}
    params.update(values)
    return "[mysqld]\n" + "".join(f"{k} = {v}\n" for k, v in params.items())


def test_changes_carry_kind_class_and_values() -> None:
    """Added, changed and removed parameters are listed with their class and old/new values."""
    new = "[mysqld]\nmax_connections = 200\nserver_id = 1\nlog_bin = ON\n"
    result = diffs.diff(SPEC, OLD, new)
    assert set(result.changes) == {
        Change("mysqld.max_connections", ChangeKind.CHANGED, ParameterClass.DYNAMIC, "100", "200"),
        Change("mysqld.log_bin", ChangeKind.ADDED, ParameterClass.STATIC, None, "ON"),
        Change("mysqld.innodb_buffer_pool_size", ChangeKind.REMOVED, ParameterClass.STATIC,
               "1G", None),
    }


def test_verdicts() -> None:
    """Dynamic only is online; any static is restart; no change is unchanged."""
    assert diffs.diff(SPEC, OLD, _new(max_connections="200")).verdict is Action.ONLINE
    assert diffs.diff(SPEC, OLD, _new(max_connections="200", innodb_buffer_pool_size="2G")
                      ).verdict is Action.RESTART
    assert diffs.diff(SPEC, OLD, OLD).verdict is Action.UNCHANGED
    # Reformatting (spacing, order) is no change: parameters are compared, not text.
    reformatted = "[mysqld]\nserver_id=1\ninnodb_buffer_pool_size  =  1G\nmax_connections=100\n"
    assert diffs.diff(SPEC, OLD, reformatted).changes == ()


def test_immutable_change_is_refused_naming_it() -> None:
    """Changing or removing an immutable parameter refuses the whole change, under every policy."""
    result = diffs.diff(SPEC, OLD, _new(server_id="2", max_connections="200"))
    decision = result.decision()
    assert decision.action is Action.REFUSED
    assert "'mysqld.server_id'" in decision.reason
    for policy in ReloadPolicy:
        assert diffs.choose(result, policy).action is Action.REFUSED
    removed = diffs.diff(SPEC, OLD, "[mysqld]\nmax_connections = 100\n"
                                    "innodb_buffer_pool_size = 1G\n")
    assert removed.verdict is Action.REFUSED


def test_validation_failure_refuses_naming_parameter_and_rule() -> None:
    """A new value that breaks its rule is refused before any rollout, whatever the policy."""
    result = diffs.diff(SPEC, OLD, _new(max_connections="0"))
    for policy in ReloadPolicy:
        decision = diffs.choose(result, policy)
        assert decision.action is Action.REFUSED
        assert decision.reason == "parameter 'mysqld.max_connections': '0' is below minimum 1"


def test_only_changed_values_are_validated() -> None:
    """A value the fleet already runs does not block an unrelated change."""
    old = _new(max_connections="0")
    result = diffs.diff(SPEC, old, _new(max_connections="0", innodb_buffer_pool_size="2G"))
    assert result.problems == ()
    assert result.verdict is Action.RESTART


@pytest.mark.parametrize(
    ("new", "policy", "action", "reason"),
    [
        (_new(max_connections="200"), ReloadPolicy.AUTO, Action.ONLINE, "dynamic"),
        (_new(innodb_buffer_pool_size="2G"), ReloadPolicy.AUTO, Action.RESTART,
         "static parameter 'mysqld.innodb_buffer_pool_size' changed"),
        (_new(max_connections="200"), ReloadPolicy.ONLINE, Action.ONLINE, "dynamic"),
        (_new(innodb_buffer_pool_size="2G"), ReloadPolicy.ONLINE, Action.REFUSED,
         "reloadPolicy online, but static parameter 'mysqld.innodb_buffer_pool_size' changed"),
        (_new(max_connections="200"), ReloadPolicy.RESTART, Action.RESTART, "restart"),
        (_new(innodb_buffer_pool_size="2G"), ReloadPolicy.NONE, Action.NONE, "nothing reloads"),
        (OLD, ReloadPolicy.RESTART, Action.UNCHANGED, "no parameter changed"),
        (OLD, ReloadPolicy.NONE, Action.UNCHANGED, "no parameter changed"),
    ],
)
def test_policy_choice(new: str, policy: ReloadPolicy, action: Action, reason: str) -> None:
    """reloadPolicy none/restart/online/auto against dynamic, static and empty diffs."""
    decision = diffs.choose(diffs.diff(SPEC, OLD, new), policy)
    assert decision.action is action
    assert reason in decision.reason


def test_typed_formats_compare_types() -> None:
    """In yaml, 1 -> "1" and 1 -> true are changes even though Python's == says equal."""
    spec = ConfigConstraintSpec.model_validate({"fileFormatConfig": {"format": "yaml"},
                                                "dynamicParameters": ["*"]})
    assert [c.name for c in diffs.diff(spec, "a: 1\nb: 1\n", "a: '1'\nb: true\n").changes] == [
        "a", "b"]
    assert diffs.diff(spec, "a:\n  b: 1\n", "a: {b: 1}\n").changes == ()


def test_malformed_content_raises_naming_format_and_line() -> None:
    """Unparsable new content is an error, never an empty diff."""
    with pytest.raises(FormatError, match=r"^ini: .*line 2"):
        diffs.diff(SPEC, OLD, "[mysqld]\nno separator here\n")


def test_kubeblocks_section_naming_keeps_a_dynamic_change_online() -> None:
    """Issue 24's attack on the classes: a MySQL constraint lists max_connections bare under
    iniConfig.sectionName mysqld; before, the diff named it mysqld.max_connections, matched
    no list and restarted every cluster. Now it is online, under KubeBlocks' name."""
    spec = ConfigConstraintSpec.model_validate({
        "fileFormatConfig": {"format": "ini", "iniConfig": {"sectionName": "mysqld"}},
        "dynamicParameters": ["max_connections"], "staticParameters": ["innodb_buffer_pool_size"],
        "immutableParameters": ["server_id"]})
    result = diffs.diff(spec, OLD, _new(max_connections="200"))
    assert result.verdict is Action.ONLINE
    assert [c.name for c in result.changes] == ["max_connections"]
    assert diffs.diff(spec, OLD, _new(innodb_buffer_pool_size="2G")).verdict is Action.RESTART
    assert diffs.diff(spec, OLD, _new(server_id="2")).verdict is Action.REFUSED
