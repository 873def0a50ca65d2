"""KubeVela's workflow model: ``dependsOn``, ``mode`` (DAG / StepByStep), ``step-group``
with ``subSteps``, on the pure state machine and the compile.

Fixtures marked *KubeVela docs* are the examples of kubevela/kubevela.io
(``docs/end-user/workflow/dependency.md``, ``step-group.md``; Apache-2.0), shortened to
what the behaviour needs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.applications import compile as compile_
from federation.applications import model, workflow
from federation.applications.workflow import Observations, StepSpec
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
WEB = {"name": "express-server", "type": "webservice",
       "properties": {"image": "oamdev/hello-world", "ports": [{"port": 8000}]}}


def compiled(steps: list[dict[str, Any]], components: list[dict[str, Any]] | None = None,
             mode: dict[str, str] | None = None, **extra: Any) -> compile_.Compiled:
    workflow_: dict[str, Any] = {"steps": steps}
    if mode is not None:
        workflow_["mode"] = mode
    spec = {"components": components if components is not None else [WEB],
            "workflow": workflow_, **extra}
    return compile_.compile_app(spec, "app", "ns", {}, FLEET, local_cluster="member1")


def refused(words: str, steps: list[dict[str, Any]], **kwargs: Any) -> None:
    with pytest.raises(model.AppError) as caught:
        compiled(steps, **kwargs)
    assert words in str(caught.value), str(caught.value)


def run(specs: tuple[StepSpec, ...], rounds: list[Observations], start: float = 0.0
        ) -> list[workflow.State]:
    state = workflow.initial(1, specs, start)
    states = []
    for number, obs in enumerate(rounds):
        state, _ = workflow.evaluate(state, specs, obs, start + number + 1)
        states.append(state)
    return states


def phases(state: workflow.State) -> dict[str, str]:
    return {s.name: s.phase for s in state.steps}


def comp_step(name: str, component: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "apply-component", "properties": {"component": component},
            **extra}


NOTE = {"type": "notification", "properties": {"message": "hi"}}


# -- the compile: what is honoured, what is refused by path --------------------------------


def test_kubevela_docs_depends_on_app_compiles_with_its_wait() -> None:
    """KubeVela docs, dependency.md: ``slack-message`` dependsOn ``comp``."""
    found = compiled([comp_step("comp", "express-server"),
                      {"name": "slack-message", "type": "notification", "dependsOn": ["comp"],
                       "properties": {"slack": {"url": {"value": "https://hooks.example.com/x"},
                                                "message": {"text": "depends on comp"}}}}])
    by_name = {s.name: s for s in found.steps}
    assert by_name["slack-message"].depends_on == ("comp",)
    assert not by_name["comp"].dag  # steps given: StepByStep, KubeVela's default


def test_kubevela_docs_sub_steps_are_flattened_after_their_group_as_a_dag() -> None:
    """KubeVela docs, step-group.md (``sub-success``): sub-steps run together."""
    components = [{**WEB, "name": f"express-server{n}"} for n in (1, 2, 3)]
    found = compiled([comp_step("step1", "express-server1"),
                      {"name": "step2", "type": "step-group", "subSteps": [
                          comp_step("step2-sub1", "express-server2"),
                          comp_step("step2-sub2", "express-server3")]}], components)
    assert [(s.name, s.group, s.dag) for s in found.steps] == [
        ("step1", "", False), ("step2", "", False), ("step2-sub1", "step2", True),
        ("step2-sub2", "step2", True)]
    assert set(found.targets) == {"step1", "step2-sub1", "step2-sub2"}


def test_modes_are_taken_from_the_workflow() -> None:
    found = compiled([{"name": "a", **NOTE}, {"name": "g", "type": "step-group", "subSteps": [
        {"name": "s1", **NOTE}, {"name": "s2", **NOTE}]}],
        mode={"steps": "DAG", "subSteps": "StepByStep"})
    assert [(s.name, s.dag) for s in found.steps] == [("a", True), ("g", True),
                                                       ("s1", False), ("s2", False)]


def test_a_component_name_in_depends_on_stands_for_the_step_applying_it() -> None:
    """KubeVela's additional name: the status map also holds a step under its component."""
    found = compiled([comp_step("apply-db", "express-server"),
                      {"name": "n", **NOTE, "dependsOn": ["express-server"]}])
    assert found.steps[1].depends_on == ("apply-db",)


@pytest.mark.parametrize(("words", "steps", "kwargs"), [
    ("steps[1].dependsOn[0]: 'nope' names no step", [{"name": "a", **NOTE},
                                                     {"name": "b", **NOTE, "dependsOn": ["nope"]}],
     {}),
    ("steps[0].dependsOn[0]: a step cannot wait for itself",
     [{"name": "a", **NOTE, "dependsOn": ["a"]}], {}),
    ("steps[0].dependsOn[0]: waits for ever: step 'b'",
     [{"name": "a", **NOTE, "dependsOn": ["b"]}, {"name": "b", **NOTE}], {}),
    ("steps[1].dependsOn[0]: waits for ever: step 'a'",
     [{"name": "a", **NOTE, "dependsOn": ["b"]}, {"name": "b", **NOTE, "dependsOn": ["a"]}],
     {"mode": {"steps": "DAG"}}),
    ("steps[0].dependsOn[0]: waits for ever: step 's'",
     [{"name": "g", "type": "step-group", "dependsOn": ["s"],
       "subSteps": [{"name": "s", **NOTE}]}], {}),
    ("steps[1].subSteps[0].name: 'a' is used twice",
     [{"name": "a", **NOTE}, {"name": "g", "type": "step-group",
                              "subSteps": [{"name": "a", **NOTE}]}], {}),
    ("steps[0].subSteps[0].type: a step group's sub-step cannot be a step group",
     [{"name": "g", "type": "step-group", "subSteps": [
         {"name": "h", "type": "step-group"}]}], {}),
    ("steps[0].subSteps: only a step-group step has sub-steps",
     [{"name": "a", **NOTE, "subSteps": [{"name": "b", **NOTE}]}], {}),
    ("steps[0].properties.x: not supported for a step-group step",
     [{"name": "g", "type": "step-group", "properties": {"x": 1}}], {}),
    ("workflow.mode.steps: Input should be 'DAG' or 'StepByStep'",
     [{"name": "a", **NOTE}], {"mode": {"steps": "Parallel"}}),
    ("workflow.ref: not supported", [{"name": "a", **NOTE}], {"ref": "x"}),
])
def test_refused_by_path(words: str, steps: list[dict[str, Any]], kwargs: dict[str, Any]
                         ) -> None:
    if "ref" in kwargs:
        with pytest.raises(model.AppError, match=words):
            compile_.compile_app({"components": [WEB], "workflow": {"steps": steps, **kwargs}},
                                 "app", "ns", {}, FLEET)
        return
    refused(words, steps, **kwargs)


def test_sub_steps_count_against_the_step_cap() -> None:
    subs = [{"name": f"s{n}", **NOTE} for n in range(model.MAX_STEPS)]
    refused("51 steps with their sub-steps", [{"name": "g", "type": "step-group",
                                                "subSteps": subs}])


def test_component_depends_on_in_a_deploy_step_orders_components_per_cluster() -> None:
    """KubeVela's deploy step: in each cluster a component goes once the ones it depends
    on are healthy there; the step knows what each cluster places."""
    components = [{**WEB, "name": "web", "dependsOn": ["db"]},
                  {"name": "db", "type": "config", "properties": {"data": {"a": "b"}}}]
    found = compile_.compile_app({"components": components, "policies": [
        {"name": "t", "type": "topology", "properties": {"clusters": ["member1", "member2"]}}]},
        "app", "ns", {}, FLEET)
    (deploy,) = found.steps
    assert deploy.component_deps == {"web": ("db",)}
    assert deploy.components == {"member1": ("db", "web"), "member2": ("db", "web")}


def test_a_dependency_the_deploy_step_does_not_deploy_is_refused() -> None:
    """It would wait for ever (KubeVela's deploy would say "waiting dependents" for ever)."""
    components = [{**WEB, "name": "web", "dependsOn": ["db"]},
                  {"name": "db", "type": "config", "properties": {"data": {"a": "b"}}}]
    with pytest.raises(model.AppError, match=r"components\[0\].dependsOn\[0\]: 'db' is not "
                                             "deployed by step deploy"):
        compile_.compile_app({"components": components, "policies": [
            {"name": "t", "type": "topology", "properties": {"clusters": ["member1"]}},
            {"name": "o", "type": "override", "properties": {"selector": ["web"]}}]},
            "app", "ns", {}, FLEET)


def test_component_inputs_with_a_deploy_step_are_refused_not_ignored() -> None:
    components = [{**WEB, "inputs": [{"from": "x", "parameterKey": "image"}]}]
    with pytest.raises(model.AppError, match=r"components\[0\].inputs: honoured only when "
                                             "an apply-component step"):
        compile_.compile_app({"components": components, "policies": [
            {"name": "t", "type": "topology", "properties": {"clusters": ["member1"]}}]},
            "app", "ns", {}, FLEET)


def test_a_cycle_of_component_dependencies_is_refused() -> None:
    components = [{**WEB, "name": "a", "dependsOn": ["b"]}, {**WEB, "name": "b",
                                                            "dependsOn": ["a"]}]
    with pytest.raises(model.AppError, match=r"components\[0\].dependsOn\[0\]: waits for "
                                             "ever"):
        compile_.compile_app({"components": components}, "app", "ns", {}, FLEET, "member1")


def test_an_ordered_deploy_releases_components_cluster_by_cluster() -> None:
    spec = StepSpec("d", "deploy", ("member1", "member2"), 5,
                    component_deps={"web": ("db",)},
                    components={"member1": ("db", "web"), "member2": ("db", "web")})
    state = workflow.initial(1, (spec,), 0.0)
    state, _ = workflow.evaluate(state, (spec,), Observations(), 1.0)
    assert state.steps[0].released == (("member1", "db"), ("member2", "db"))
    assert "member1: web waits for db" in state.steps[0].message
    # db healthy in member1 only: web goes there, not to member2; member1 is healthy for
    # what it holds, but not done while web is not there
    obs = Observations(health={("d", "member1"): ("healthy", "")},
                       component_health={("d", "member1", "db"): ("healthy", "")})
    state, _ = workflow.evaluate(state, (spec,), obs, 2.0)
    assert set(state.steps[0].released) == {("member1", "db"), ("member2", "db"),
                                            ("member1", "web")}
    assert state.steps[0].done == ()
    everything = Observations(
        health={("d", c): ("healthy", "") for c in ("member1", "member2")},
        component_health={("d", c, n): ("healthy", "") for c in ("member1", "member2")
                          for n in ("db", "web")})
    state, _ = workflow.evaluate(state, (spec,), everything, 3.0)
    assert state.steps[0].phase == "running"  # member2 got web only now
    state, _ = workflow.evaluate(state, (spec,), everything, 4.0)
    assert state.steps[0].phase == "succeeded"
    assert workflow.from_status(workflow.to_status(state, str)) == state


def test_held_splits_a_clusters_objects_by_released_component() -> None:
    spec = StepSpec("d", "deploy", ("m",), component_deps={"web": ("db",)},
                    components={"m": ("db", "web")})
    step = workflow.StepState("d", "deploy", released=(("m", "db"),))
    objects = [{"metadata": {"name": n, "labels": {"app.oam.dev/component": n}}}
               for n in ("db", "web")]
    now, later = workflow.held(spec, step, "m", objects)
    assert [o["metadata"]["name"] for o in now] == ["db"]
    assert [o["metadata"]["name"] for o in later] == ["web"]
    assert workflow.held(StepSpec("d", "deploy"), step, "m", objects) == (objects, [])


def test_component_depends_on_without_policies_makes_kubevelas_default_dag() -> None:
    """KubeVela docs, component-dependency-parameter.md: ``mysql-cluster`` after
    ``mysql-controller`` and ``mysql-secret`` (types ours)."""
    components = [{"name": "mysql-secret", "type": "config", "properties": {"data": {"a": "b"}}},
                  {**WEB, "name": "mysql-controller"},
                  {**WEB, "name": "mysql-cluster",
                   "dependsOn": ["mysql-controller", "mysql-secret"]}]
    found = compile_.compile_app({"components": components}, "app", "ns", {}, FLEET,
                                 local_cluster="member1")
    assert [(s.name, s.type, s.dag, s.depends_on) for s in found.steps] == [
        ("mysql-secret", "apply-component", True, ()),
        ("mysql-controller", "apply-component", True, ()),
        ("mysql-cluster", "apply-component", True, ("mysql-controller", "mysql-secret"))]
    state = workflow.initial(1, found.steps, 0.0)
    state, actions = workflow.evaluate(state, found.steps, Observations(), 1.0)
    started = {a.step for a in actions if isinstance(a, workflow.Deploy)}
    assert started == {"mysql-secret", "mysql-controller"}
    assert state.steps[2].waiting_for == ("step mysql-controller", "step mysql-secret")
    assert state.steps[2].message == "Pending on DependsOn: mysql-controller"


# -- the state machine --------------------------------------------------------------------


def healthy(*steps: str) -> Observations:
    return Observations(health={(s, "member1"): ("healthy", "") for s in steps})


def test_depends_on_in_dag_mode_waits_then_runs_the_rest_together() -> None:
    specs = (StepSpec("a", "apply-component", ("member1",), dag=True),
             StepSpec("b", "apply-component", ("member1",), dag=True),
             StepSpec("c", "notification", dag=True, depends_on=("a", "b")))
    first, second, third = run(specs, [Observations(), healthy("a"), healthy("a", "b")])
    assert phases(first) == {"a": "running", "b": "running", "c": "pending"}
    assert first.steps[2].waiting_for == ("step a", "step b")
    assert phases(second)["c"] == "pending" and second.steps[2].waiting_for == ("step b",)
    assert phases(third) == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    assert third.phase == "succeeded"


def test_a_dependency_that_failed_skips_the_step_but_not_an_independent_one() -> None:
    specs = (StepSpec("a", "apply-component", ("member1",), dag=True),
             StepSpec("b", "notification", dag=True, depends_on=("a",)),
             StepSpec("c", "apply-component", ("member1",), dag=True))
    fail = Observations(health={("a", "member1"): ("failed", "boom"),
                                ("c", "member1"): ("healthy", "")})
    _, state = run(specs, [Observations(), fail])
    assert phases(state) == {"a": "failed", "b": "skipped", "c": "succeeded"}
    assert state.steps[1].message == "step a did not succeed"
    assert state.phase == "failed"


def test_transitive_depends_on_must_have_succeeded() -> None:
    """KubeVela's findDependsOnPhase: a skipped dependency's dependency counts too."""
    specs = (StepSpec("a", "suspend", dag=True, timeout=1.0),
             StepSpec("b", "notification", dag=True, depends_on=("a",), always=True),
             StepSpec("c", "notification", dag=True, depends_on=("b",)))
    states = run(specs, [Observations(), Observations()])
    assert phases(states[-1]) == {"a": "failed", "b": "succeeded", "c": "skipped"}


def test_step_group_runs_sub_steps_together_and_ends_after_them() -> None:
    specs = (StepSpec("step1", "apply-component", ("member1",)),
             StepSpec("step2", "step-group"),
             StepSpec("sub1", "apply-component", ("member1",), group="step2", dag=True),
             StepSpec("sub2", "apply-component", ("member1",), group="step2", dag=True),
             StepSpec("after", "notification"))
    first, second, third, fourth = run(specs, [
        Observations(), healthy("step1"), healthy("step1", "sub1"),
        healthy("step1", "sub1", "sub2")])
    assert phases(first)["step2"] == "pending" and phases(first)["sub1"] == "pending"
    assert phases(second) == {"step1": "succeeded", "step2": "running", "sub1": "running",
                              "sub2": "running", "after": "pending"}
    assert workflow.assignments(second) == {"step1": ("member1",), "sub1": ("member1",),
                                            "sub2": ("member1",)}
    assert phases(third)["step2"] == "running" and phases(third)["after"] == "pending"
    assert phases(fourth) == dict.fromkeys(phases(fourth), "succeeded")
    groups = {s.name: s for s in fourth.steps}
    assert groups["step2"].finished == groups["after"].first_execute == 4.0


def test_sub_steps_by_step_and_a_failed_sub_step_fails_the_group() -> None:
    specs = (StepSpec("g", "step-group"),
             StepSpec("s1", "apply-component", ("member1",), group="g"),
             StepSpec("s2", "notification", group="g"),
             StepSpec("after", "notification"),
             StepSpec("always", "notification", always=True))
    states = run(specs, [Observations(),
                         Observations(health={("s1", "member1"): ("failed", "x")})])
    assert phases(states[0])["s2"] == "pending"  # StepByStep: after s1
    assert phases(states[1]) == {"g": "failed", "s1": "failed", "s2": "skipped",
                                 "after": "skipped", "always": "succeeded"}
    assert states[1].steps[0].message == "sub-step s1 failed"


def test_a_group_timeout_fails_its_unfinished_sub_steps() -> None:
    specs = (StepSpec("g", "step-group", timeout=5.0),
             StepSpec("s", "apply-component", ("member1",), group="g", dag=True))
    states = run(specs, [Observations()] * 7)
    assert phases(states[-1]) == {"g": "failed", "s": "failed"}
    assert states[-1].steps[1].reason == "Timeout"


def test_a_skipped_group_skips_its_sub_steps() -> None:
    specs = (StepSpec("a", "apply-component", ("member1",)),
             StepSpec("g", "step-group"),
             StepSpec("s", "notification", group="g", always=True))
    states = run(specs, [Observations(), Observations(health={
        ("a", "member1"): ("failed", "x")})])
    assert phases(states[-1]) == {"a": "failed", "g": "skipped", "s": "skipped"}


def test_resume_releases_every_suspended_step_of_a_dag() -> None:
    specs = (StepSpec("s1", "suspend", dag=True), StepSpec("s2", "suspend", dag=True))
    first, second = run(specs, [Observations(), Observations(resume=True)])
    assert first.phase == "suspended"
    assert second.phase == "succeeded"


def test_state_with_sub_steps_and_waits_round_trips_through_status() -> None:
    specs = (StepSpec("g", "step-group"),
             StepSpec("s1", "suspend", group="g", dag=True),
             StepSpec("s2", "notification", group="g", dag=True, depends_on=("s1",)))
    state = run(specs, [Observations()])[0]
    status = workflow.to_status(state, str)
    assert [s["name"] for s in status["steps"]] == ["g"]
    subs = status["steps"][0]["subStepsStatus"]
    assert [s["name"] for s in subs] == ["s1", "s2"]
    assert subs[1]["waitingFor"] == ["step s1"] and subs[1]["phase"] == "pending"
    # JSON data with no null field, as the hub keeps it: read back, the same state
    assert json.loads(json.dumps(status)) == status
    assert "null" not in json.dumps(status)
    assert workflow.from_status(status) == state


# -- properties of the scheduler ------------------------------------------------------------


@st.composite
def workflows(draw: st.DrawFn) -> tuple[StepSpec, ...]:
    """Random workflows: top-level steps and maybe a group, each level DAG or StepByStep,
    dependsOn only on earlier steps of the same level (what the compile accepts)."""
    count = draw(st.integers(1, 6))
    dag = draw(st.booleans())
    specs: list[StepSpec] = []
    for index in range(count):
        kind = draw(st.sampled_from(["deploy", "suspend", "notification", "step-group"]))
        earlier = [s.name for s in specs if not s.group]
        depends = tuple(draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2))) \
            if earlier and dag else ()
        name = f"s{index}"
        specs.append(StepSpec(name, kind, ("member1", "member2") if kind == "deploy" else (),
                              1, timeout=draw(st.sampled_from([None, 4.0])), dag=dag,
                              depends_on=depends, always=draw(st.booleans()),
                              duration=3.0 if kind == "suspend" else None))
        if kind == "step-group":
            sub_dag = draw(st.booleans())
            for number in range(draw(st.integers(0, 3))):
                specs.append(StepSpec(f"{name}-{number}", "deploy", ("member1",), 1,
                                      group=name, dag=sub_dag))
    return tuple(specs)


observation = st.builds(
    Observations,
    health=st.dictionaries(st.tuples(st.sampled_from([f"s{n}" for n in range(6)] + [
        f"s{n}-{m}" for n in range(6) for m in range(3)]), st.sampled_from(
        ["member1", "member2"])), st.tuples(st.sampled_from(["healthy", "progressing",
                                                               "failed"]), st.just(""))),
    resume=st.booleans())


@settings(max_examples=200, deadline=None)
@given(specs=workflows(), rounds=st.lists(observation, max_size=15),
       gaps=st.lists(st.floats(0, 3), min_size=15, max_size=15))
def test_no_step_starts_before_what_it_waits_for_ended(
        specs: tuple[StepSpec, ...], rounds: list[Observations], gaps: list[float]) -> None:
    now = 0.0
    state = workflow.initial(1, specs, now)
    by_name = {s.name: s for s in specs}
    previous = state
    for obs, gap in zip(rounds, gaps, strict=False):
        now += gap
        state, _ = workflow.evaluate(state, specs, obs, now)
        steps = {s.name: s for s in state.steps}
        for spec in specs:
            step = steps[spec.name]
            if step.first_execute is None:
                continue
            # dependsOn ended first (at or before this step's start)
            for name in spec.depends_on:
                ended = steps[name].finished
                assert ended is not None and ended <= step.first_execute
            # StepByStep: the step before it at its level ended first
            level = [s.name for s in specs if s.group == spec.group]
            before = level[level.index(spec.name) - 1] if level.index(spec.name) else None
            if not spec.dag and before is not None:
                ended = steps[before].finished
                assert ended is not None and ended <= step.first_execute
            # a sub-step starts once its group started, and the group ends after it
            if spec.group:
                group = steps[spec.group]
                assert group.first_execute is not None
                assert group.first_execute <= step.first_execute
                if group.finished is not None and group.phase != "failed":
                    assert step.finished is not None and step.finished <= group.finished
        for before_step in previous.steps:
            if before_step.phase in workflow.FINISHED:
                assert steps[before_step.name] == before_step  # an ended step stays
        if state.phase in ("succeeded", "failed"):
            assert all(s.phase in workflow.FINISHED for s in state.steps)
        assert all(by_name[s.name].type == s.type for s in state.steps)
        previous = state


# -- deploy auto: false ----------------------------------------------------------------------


def test_a_deploy_with_auto_false_waits_for_a_resume_before_it_deploys() -> None:
    """KubeVela's deploy.cue: ``auto: false`` suspends the step ("Waiting approval to the
    deploy step") and deploys once resumed (docs' multicluster deploy example)."""
    found = compiled([{"name": "prod", "type": "deploy", "properties": {"auto": False}}])
    (spec,) = found.steps
    assert spec.approval
    state = workflow.initial(1, found.steps, 0.0)
    state, actions = workflow.evaluate(state, found.steps, Observations(), 1.0)
    (step,) = state.steps
    assert (state.phase, step.phase) == ("suspended", "suspended")
    assert step.message == 'Waiting approval to the deploy step "prod"'
    assert not any(isinstance(a, workflow.Deploy) for a in actions)
    state, actions = workflow.evaluate(state, found.steps, Observations(), 2.0)
    assert state.steps[0].phase == "suspended"  # nothing happens without a resume
    state, actions = workflow.evaluate(state, found.steps, Observations(resume=True), 3.0)
    assert state.steps[0].phase == "running"
    assert [a.clusters for a in actions if isinstance(a, workflow.Deploy)] == [("member1",)]
    healthy_now = Observations(health={("prod", "member1"): ("healthy", "")})
    state, _ = workflow.evaluate(state, found.steps, healthy_now, 4.0)
    assert state.steps[0].phase == "succeeded"


def test_auto_must_be_a_boolean() -> None:
    refused("properties.auto: true or false",
            [{"name": "prod", "type": "deploy", "properties": {"auto": "no"}}])
