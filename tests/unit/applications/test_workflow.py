"""The workflow state machine and the tracker diff, including property tests."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.applications import tracker, workflow
from federation.applications.workflow import Observations, StepSpec

CANARY = StepSpec("canary", "deploy", ("member1",), 1, timeout=30.0)
APPROVE = StepSpec("approve", "suspend")
REST = StepSpec("rest", "deploy", ("member2", "member3"), 1)
NOTIFY = StepSpec("notify", "notification", always=True, message="done")
SPECS = (CANARY, APPROVE, REST, NOTIFY)


def healthy(*pairs: tuple[str, str]) -> Observations:
    return Observations(health={p: ("healthy", "") for p in pairs})


def test_canary_suspend_resume_one_cluster_at_a_time() -> None:
    state = workflow.initial(2, SPECS, 0.0)
    state, actions = workflow.evaluate(state, SPECS, Observations(), 1.0)
    assert workflow.assignments(state) == {"canary": ("member1",)}
    assert workflow.Deploy("canary", ("member1",)) in actions
    state, _ = workflow.evaluate(state, SPECS, healthy(("canary", "member1")), 2.0)
    assert state.phase == "suspended" and state.current is not None
    assert state.current.name == "approve"
    state, _ = workflow.evaluate(state, SPECS, Observations(), 50.0)
    assert state.phase == "suspended"  # no timeout on the suspend, canary done in time
    state, actions = workflow.evaluate(state, SPECS, Observations(resume=True), 60.0)
    assert workflow.assignments(state)["rest"] == ("member2",)  # parallelism 1
    state, _ = workflow.evaluate(state, SPECS, Observations(), 61.0)
    assert workflow.assignments(state)["rest"] == ("member2",)  # member2 not healthy yet
    state, actions = workflow.evaluate(state, SPECS, healthy(("rest", "member2")), 62.0)
    assert workflow.assignments(state)["rest"] == ("member2", "member3")
    state, actions = workflow.evaluate(
        state, SPECS, healthy(("rest", "member2"), ("rest", "member3")), 63.0)
    assert state.phase == "succeeded" and state.end == 63.0
    assert workflow.Notify("notify", "done") in actions
    steps = {s.name: s for s in state.steps}
    assert steps["canary"].first_execute == 1.0 and steps["canary"].finished == 2.0
    assert steps["approve"].finished == 60.0 and steps["rest"].finished == 63.0


def test_canary_timeout_fails_and_skips_all_but_always_steps() -> None:
    state = workflow.initial(2, SPECS, 0.0)
    state, _ = workflow.evaluate(state, SPECS, Observations(), 0.0)
    state, _actions = workflow.evaluate(state, SPECS, Observations(), 31.0)
    phases = {s.name: s.phase for s in state.steps}
    assert phases == {"canary": "failed", "approve": "skipped", "rest": "skipped",
                      "notify": "succeeded"}
    assert state.phase == "failed" and state.steps[0].reason == "Timeout"
    assert "member1" in state.steps[0].message
    assert workflow.assignments(state) == {"canary": ("member1",)}  # stays, no rollback


def test_failed_health_with_rollback_on_failure_asks_for_rollback() -> None:
    spec = dataclasses.replace(CANARY, rollback_on_failure=True)
    specs = (spec, APPROVE)
    state = workflow.initial(2, specs, 0.0)
    state, _ = workflow.evaluate(state, specs, Observations(), 0.0)
    obs = Observations(health={("canary", "member1"): ("failed", "ProgressDeadlineExceeded")})
    state, actions = workflow.evaluate(state, specs, obs, 1.0)
    assert workflow.Rollback("canary", ("member1",)) in actions
    assert state.steps[0].reason == "Unhealthy" and "ProgressDeadline" in state.steps[0].message


def test_suspend_duration_and_health_window() -> None:
    specs = (StepSpec("wait", "suspend", duration=10.0), StepSpec("d", "deploy", ("m",), 1))
    state = workflow.initial(1, specs, 0.0)
    state, actions = workflow.evaluate(state, specs, Observations(), 0.0)
    assert state.phase == "suspended" and workflow.Wait(10.0) in actions
    state, _ = workflow.evaluate(state, specs, Observations(window=5.0), 10.0)
    assert state.steps[0].reason == "DurationElapsed"
    obs = Observations(health={("d", "m"): ("healthy", "")}, window=5.0)
    state, _ = workflow.evaluate(state, specs, obs, 11.0)
    assert state.phase == "running"  # healthy since 11, window 5
    state, _ = workflow.evaluate(state, specs, obs, 16.0)
    assert state.phase == "succeeded"


def test_state_round_trips_through_status() -> None:
    state = workflow.initial(3, SPECS, 0.0)
    state, _ = workflow.evaluate(state, SPECS, Observations(), 4.0)
    state, _ = workflow.evaluate(state, SPECS, healthy(("canary", "member1")), 5.0)
    status = workflow.to_status(state, lambda t: f"t{t}")
    assert workflow.from_status(status) == state
    # JSON data as the hub keeps it (its merge patch drops null fields): read back, the
    # same status and the same state, so writing it again would change nothing
    assert as_kept(status) == status
    assert workflow.from_status(as_kept(status)) == state
    assert status["currentStep"] == "approve" and status["suspend"] is True


CLUSTERS = ("a", "b", "c", "d")
observation = st.builds(
    Observations,
    health=st.dictionaries(st.tuples(st.sampled_from(["d1", "d2"]), st.sampled_from(CLUSTERS)),
                           st.tuples(st.sampled_from(["healthy", "progressing", "failed"]),
                                     st.just(""))),
    resume=st.booleans(), window=st.sampled_from([0.0, 3.0]))


@settings(max_examples=200, deadline=None)
@given(parallelism=st.integers(1, 4), steps=st.lists(observation, max_size=25),
       gaps=st.lists(st.floats(0, 20), min_size=25, max_size=25),
       timeout=st.sampled_from([None, 30.0]), always=st.booleans())
def test_state_machine_invariants(parallelism: int, steps: list[Observations],
                                  gaps: list[float], timeout: float | None,
                                  always: bool) -> None:
    specs = (StepSpec("d1", "deploy", CLUSTERS[:3], parallelism, timeout),
             StepSpec("s", "suspend"),
             StepSpec("d2", "deploy", CLUSTERS, parallelism, always=always))
    now = 0.0
    state = workflow.initial(1, specs, now)
    previous = state
    for obs, gap in zip(steps, gaps, strict=False):
        now += gap
        state, actions = workflow.evaluate(state, specs, obs, now)
        for spec, step, before in zip(specs, state.steps, previous.steps, strict=True):
            # never more clusters in flight than the parallelism allows
            assert len([c for c in step.started if c not in step.done]) <= spec.parallelism
            # started only grows, in the targets' order; done is a subset of started
            assert step.started[:len(before.started)] == before.started
            assert list(step.started) == [c for c in spec.targets if c in step.started]
            assert set(step.done) <= set(step.started)
            # a finished step stays finished, with the same outcome
            if before.phase in workflow.FINISHED:
                assert step == before
            if step.phase in workflow.FINISHED:
                assert step.finished is not None and step.finished <= now
        # steps run in order: a step has run only once every step before it finished
        for index, step in enumerate(state.steps):
            if step.first_execute is not None:
                assert all(s.phase in workflow.FINISHED for s in state.steps[:index])
        if state.phase in ("succeeded", "failed"):
            assert state.current is None and state.end is not None
        if state.phase == "succeeded":
            assert all(s.phase == "succeeded" for s in state.steps)
        # a deploy step succeeds only when every target is done
        for spec, step in zip(specs, state.steps, strict=True):
            if spec.type == "deploy" and step.phase == "succeeded":
                assert set(step.done) == set(spec.targets)
        assert all(not isinstance(a, workflow.Wait) or a.seconds >= 0 for a in actions)
        # the stored status, read back (after a restart), is what the state gives again:
        # a restart computing it from the same state writes nothing
        status = workflow.to_status(state, str)
        assert as_kept(status) == status
        assert workflow.from_status(as_kept(status)) == state
        previous = state


def as_kept(value: Any) -> Any:
    """``value`` written to the hub and read back: JSON (tuples become arrays), and the
    API server's merge patch keeps no null field, at any depth."""
    def no_nulls(found: Any) -> Any:
        if isinstance(found, dict):
            return {k: no_nulls(v) for k, v in found.items() if v is not None}
        if isinstance(found, list):
            return [no_nulls(v) for v in found]
        return found
    return no_nulls(json.loads(json.dumps(value)))


def manifest(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}}


def test_tracker_diff_deletes_only_where_reached_and_keeps_legacy_on_request() -> None:
    tracked = [tracker.Entry("m1", "v1", "ConfigMap", "ns", "old", 1, "d"),
               tracker.Entry("m1", "v1", "ConfigMap", "ns", "web", 1, "d"),
               tracker.Entry("m2", "v1", "ConfigMap", "ns", "old", 1, "d")]
    desired = {("m1", "d"): [(manifest("web"), 2), (manifest("new"), 2)]}
    diff = tracker.diff(tracked, desired)
    assert [str(e) for e in diff.delete] == ["ConfigMap ns/old in m1"]
    assert [e.name for e, _ in diff.write] == ["web", "new"]
    assert [str(e) for e in diff.keep] == ["ConfigMap ns/old in m2"]  # m2 not reached yet
    kept = tracker.diff(tracked, desired, keep_legacy=True)
    assert not kept.delete
    after = tracker.record(tracked, [e for e, _ in diff.write], diff.delete)
    assert {(e.cluster, e.name, e.revision) for e in after} == {
        ("m1", "web", 2), ("m1", "new", 2), ("m2", "old", 1)}
    final = tracker.diff(tracked, desired, final=["m1", "m2"])
    assert {str(e) for e in final.delete} == {"ConfigMap ns/old in m1",
                                              "ConfigMap ns/old in m2"}


def test_a_later_step_in_the_same_cluster_keeps_its_objects_until_reached() -> None:
    """KubeVela's first steps: `default` then (after approval) `prod`, both in one cluster.
    A new release reaching the cluster through the first step leaves prod alone."""
    tracked = [tracker.Entry("m1", "v1", "ConfigMap", "default", "app", 1, "deploy2default"),
               tracker.Entry("m1", "v1", "ConfigMap", "prod", "app", 1, "deploy2prod")]
    diff = tracker.diff(tracked, {("m1", "deploy2default"): [(manifest("app", "default"), 2)]})
    assert not diff.delete and [str(e) for e in diff.keep] == ["ConfigMap prod/app in m1"]


PAIRS = st.tuples(st.sampled_from(["m1", "m2"]), st.sampled_from(["s1", "s2"]))


@settings(max_examples=100, deadline=None)
@given(tracked=st.sets(st.tuples(PAIRS, st.sampled_from("abcd"))),
       desired=st.dictionaries(PAIRS, st.sets(st.sampled_from("abcd"))),
       final=st.sets(st.sampled_from(["m1", "m2"])))
def test_tracker_diff_partitions_what_is_tracked(
        tracked: set[tuple[tuple[str, str], str]], desired: dict[tuple[str, str], set[str]],
        final: set[str]) -> None:
    entries = [tracker.Entry(c, "v1", "ConfigMap", "ns", n, 1, s) for (c, s), n in tracked]
    wanted = {pair: [(manifest(n), 2) for n in sorted(names)]
              for pair, names in desired.items()}
    diff = tracker.diff(entries, wanted, final=final)
    written = {(e.cluster, e.name) for e, _ in diff.write}
    deleted = {(e.cluster, e.name, e.step) for e in diff.delete}
    kept = {(e.cluster, e.name, e.step) for e in diff.keep}
    assert written == {(c, n) for (c, _), names in desired.items() for n in names}
    assert not {(c, n) for c, n, _ in deleted} & written
    assert not deleted & kept
    for (cluster, step), name in tracked:
        if (cluster, name) not in written:
            assert (cluster, name, step) in deleted | kept
    # deleted only where reached or final; kept only where neither
    assert all((c, s) in desired or c in final for c, _, s in deleted)
    assert all((c, s) not in desired and c not in final for c, _, s in kept)


def test_an_apply_component_step_deploys_and_waits_like_a_deploy_step() -> None:
    """KubeVela's apply-component: the state machine puts it on its cluster and waits for
    health (it raised "unknown step type" before it was a step here)."""
    specs = (StepSpec("db", "apply-component", ("member1",)),)
    state = workflow.initial(1, specs, 0.0)
    state, actions = workflow.evaluate(state, specs, Observations(), 1.0)
    assert workflow.Deploy("db", ("member1",)) in actions
    assert workflow.assignments(state) == {"db": ("member1",)}
    state, _ = workflow.evaluate(state, specs, healthy(("db", "member1")), 2.0)
    assert state.phase == "succeeded"


def test_tracker_diff_holds_what_an_ordered_deploy_has_not_put_there_yet() -> None:
    """The previous release's copy of a component waiting for its dependencies stays."""
    tracked = [tracker.Entry("m1", "v1", "ConfigMap", "ns", "db", 1, "d"),
               tracker.Entry("m1", "v1", "ConfigMap", "ns", "web", 1, "d")]
    desired = {("m1", "d"): [(manifest("db"), 2)]}
    web = tracker.Entry("m1", "v1", "ConfigMap", "ns", "web", 2, "d").key
    held = tracker.diff(tracked, desired, hold={web})
    assert not held.delete and [str(e) for e in held.keep] == ["ConfigMap ns/web in m1"]
    assert [str(e) for e in tracker.diff(tracked, desired).delete] == ["ConfigMap ns/web in m1"]
