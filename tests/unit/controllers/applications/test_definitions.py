"""User definitions in the controller: the catalog from the hub, revisions, the memo, the
sandbox, the watch that wakes Applications, and the reports on definitions not used."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, cast

import yaml

from federation.applications import definition_revisions
from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache, Event
from federation.controllers.applications import (
    compilation,
    definition_reports,
    definitions,
    revisions,
    wiring,
)
from federation.controllers.kit import executor, plan, sandbox
from federation.hub import api
from federation.runtime.reconcile import Request, group_kind
from tests.unit.controllers import fakes
from tests.unit.controllers.applications.fakes import (
    FakeView,
    JournalWriter,
    Recorder,
    World,
    build_of,
    revision_doc,
    run_through,
)

JSON = dict[str, Any]
FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "kubevela" / "definitions.yaml"


def docs_definitions() -> list[JSON]:
    return [d for d in yaml.safe_load_all(FIXTURE.read_text()) if d]


def docs_app(component_type: str = "docs-worker", uid: str = "uid-app") -> JSON:
    """An Application of KubeVela's example definitions, to member1 in one deploy step."""
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": "shop", "uid": uid},
        "spec": {"components": [{
            "name": "backend", "type": component_type, "properties": {"image": "busybox"},
            "traits": [{"type": "docs-sidecar", "properties": {"name": "log", "image": "b"}},
                       {"type": "kservice", "properties": {"http": {"web": 80}}}]}],
            "policies": [{"name": "one", "type": "topology",
                          "properties": {"clusters": ["member1"]}}]},
        "status": {}}


def world_with(*objects: JSON) -> World:
    world = World()
    for obj in [*docs_definitions(), *objects]:
        world.view.put("hub", obj)
    return world


async def test_an_application_of_definitions_deploys_their_render() -> None:
    world = world_with(docs_app())
    await world.reconcile()
    assert ("create", "member1", "Deployment/backend") in world.journal
    assert ("create", "member1", "Service/backend") in world.journal
    assert world.status.written[-1]["status"] == "runningWorkflow"


async def test_the_revision_records_the_definitions_and_a_change_makes_a_new_one() -> None:
    """A definition the Application uses changed: a new revision (its content is the
    definitions too), whose render has the change."""
    view = FakeView()
    defs = docs_definitions()
    for doc in [*defs, docs_app()]:
        view.put("hub", doc)
    build = build_of(docs_app())
    await run_through(view, build, compilation.compile_app)
    assert build.number == 1 and build.revision_vertex is not None
    recorded = build.revision_vertex.obj["spec"]["definitions"]
    assert set(recorded) == {"ComponentDefinition/docs-worker",
                             "TraitDefinition/docs-sidecar", "TraitDefinition/kservice"}
    old = revision_doc(1, spec=docs_app()["spec"])
    old["spec"]["revisionHash"] = build.digest
    view.put("hub", old)
    again = build_of(docs_app())
    await revisions.load_revision(view, again)
    assert (again.number, again.revision_vertex) == (1, None)  # nothing changed
    changed = copy.deepcopy(defs[0])
    template = changed["spec"]["schematic"]["cue"]["template"]
    changed["spec"]["schematic"]["cue"]["template"] = template.replace(
        "output: {", 'output: {\n  metadata: labels: release: "two"', 1)
    view.put("hub", changed)
    new = build_of(docs_app())
    await run_through(view, new, compilation.compile_app)
    assert new.number == 2 and new.revision_vertex is not None
    assert new.compiled is not None
    [deployment, _] = new.compiled.targets["deploy"].clusters["member1"]
    assert deployment["metadata"]["labels"]["release"] == "two"


async def test_a_tenants_definition_is_refused_naming_the_type() -> None:
    """Attack: a tenant writes a ComponentDefinition in its own namespace and names it:
    renderFailed naming the type and why; nothing is written to any member."""
    mine = copy.deepcopy(docs_definitions()[0])
    mine["metadata"] = {"name": "mine", "namespace": "shop"}
    world = world_with(mine, docs_app("mine"))
    await world.reconcile()
    status = world.status.written[-1]
    assert status["status"] == "renderFailed"
    assert "'mine': the ComponentDefinition 'mine' in namespace shop is not used" in \
        status["conditions"][0]["message"]
    assert not [w for w in world.journal if w[1].startswith("member")]


async def test_evaluations_are_memoised_across_reconciles() -> None:
    world = world_with(docs_app())
    await world.reconcile()
    asked = world.view.evaluations.asked
    assert asked == 3  # the component, then its two traits
    await world.reconcile()
    assert world.view.evaluations.asked == asked


HOSTILE = """
parameter: n: [...int]
output: {
  apiVersion: "v1"
  kind: "ConfigMap"
  data: {for a in parameter.n for b in parameter.n for c in parameter.n {"\\(a)-\\(b)-\\(c)": "x"}}
}
"""


async def test_a_hostile_parameter_is_evaluated_off_the_loop_and_refused() -> None:
    """Attack: a tenant's parameter makes an administrator's template do unbounded work.
    The evaluation runs in a worker process, killed at its deadline; the event loop keeps
    running meanwhile (a ticker counts), and the Application gets renderFailed, one line."""
    hostile = {"apiVersion": "core.oam.dev/v1beta1", "kind": "ComponentDefinition",
               "metadata": {"name": "hostile", "namespace": "vela-system"},
               "spec": {"schematic": {"cue": {"template": HOSTILE}}}}
    body = docs_app("hostile")
    body["spec"]["components"][0] = {"name": "x", "type": "hostile",
                                     "properties": {"n": list(range(400))}}
    world = world_with(hostile, body)
    pool = sandbox.Sandbox(definitions.WORK, workers=1, timeout=0.5, ready_timeout=120.0)
    world.view.evaluations = definitions.Evaluations(pool.ask)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        await world.reconcile()
    finally:
        task.cancel()
        await pool.close()
    status = world.status.written[-1]
    assert status["status"] == "renderFailed"
    message = status["conditions"][0]["message"]
    assert "ComponentDefinition vela-system/hostile" in message
    assert "took longer than 0.5s" in message or "budget" in message
    assert ticks >= 10


def test_a_definition_change_wakes_the_applications_naming_its_type() -> None:
    clusters = fakes.cluster_set("member1")
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.APPLICATIONS).store
    store.put(docs_app())
    other = docs_app("webservice")
    other["metadata"] = {"name": "other", "namespace": "bank"}
    other["spec"]["components"][0]["traits"] = []
    store.put(other)
    worker = docs_definitions()[0]

    def woken(doc: JSON) -> list[tuple[str, str]]:
        found = wiring.apps_using(clusters, "hub", ("vela-system",),
                                  Event("MODIFIED", "hub", api.COMPONENT_DEFINITIONS, doc))
        return [(r.namespace, r.name) for r in found]
    assert woken(worker) == [("shop", "shop")]
    tenant = {**worker, "metadata": {"name": "docs-worker", "namespace": "bank"}}
    assert woken(tenant) == []  # only Applications of its own namespace


async def test_a_definition_not_used_gets_a_warning_event() -> None:
    mine = copy.deepcopy(docs_definitions()[0])
    mine["metadata"] = {"name": "mine", "namespace": "shop", "uid": "u1"}
    refused = copy.deepcopy(docs_definitions()[0])
    refused["metadata"] = {"name": "bad", "namespace": "vela-system", "uid": "u2"}
    refused["spec"]["status"] = {"details": "x: 1"}
    view, recorder = FakeView(), Recorder()
    view.put("hub", mine)
    view.put("hub", refused)
    kind = group_kind(api.COMPONENT_DEFINITIONS)
    journal: list[tuple[str, str, str]] = []
    execute = executor_of(journal)
    await definition_reports.report(view, recorder, execute,
                                    Request("hub", kind, "shop", "mine"))
    await definition_reports.report(view, recorder, execute,
                                    Request("hub", kind, "vela-system", "bad"))
    assert [(r, m.split(":")[0]) for _, r, m in recorder.events] == [
        ("DefinitionNotUsed", "not used"),
        ("DefinitionRefused", "ComponentDefinition vela-system/bad")]
    assert "spec.status.details" in recorder.events[1][2]
    assert journal == []  # no revision of a tenant's or a refused definition


def executor_of(journal: list[tuple[str, str, str]]) -> definition_reports.Execute:
    writer = JournalWriter(journal)

    async def execute(dag: plan.Plan) -> plan.Report:
        return await executor.execute(dag, writer)
    return execute


def mydef(greeting: str, namespace: str = "vela-system") -> JSON:
    template = ('parameter: {}\noutput: {apiVersion: "v1", kind: "ConfigMap", '
                f'data: greeting: "{greeting}"}}')
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "ComponentDefinition",
            "metadata": {"name": "mydef", "namespace": namespace, "uid": "u-mydef"},
            "spec": {"schematic": {"cue": {"template": template}}}}


async def reconcile_definition(view: FakeView, doc: JSON, recorder: Recorder | None = None
                               ) -> list[JSON]:
    """The definition controller on ``doc`` (put on the hub first); what it created is
    put on the hub, what it deleted taken off. Returns the writes' objects."""
    view.put("hub", doc)
    journal: list[tuple[str, str, str]] = []
    writer = JournalWriter(journal)
    meta = doc["metadata"]

    async def execute(dag: plan.Plan) -> plan.Report:
        return await executor.execute(dag, writer)
    await definition_reports.report(view, recorder or Recorder(), execute, Request(
        "hub", group_kind(api.COMPONENT_DEFINITIONS), meta["namespace"], meta["name"]))
    for (verb, _, _), obj in zip(journal, writer.sent, strict=True):
        if verb == "create":
            view.put("hub", obj)
        elif verb == "status":
            doc["status"] = obj["status"]
        else:
            gone = obj["metadata"]
            del view.objects[("hub", obj["kind"], gone["namespace"], gone["name"])]
    return list(writer.sent)


def revision_names(view: FakeView) -> list[str]:
    return sorted(name for (_, kind, _, name) in view.objects if kind == "DefinitionRevision")


async def test_the_definition_controller_writes_a_revision_per_new_spec() -> None:
    view, recorder = FakeView(), Recorder()
    first, status = await reconcile_definition(view, mydef("old"), recorder)
    assert status["status"] == {"latestRevision": {
        "name": "mydef-v1", "revision": 1, "revisionHash": first["spec"]["revisionHash"]}}
    assert first["metadata"] == {
        "name": "mydef-v1", "namespace": "vela-system",
        "labels": {"componentdefinition.oam.dev/name": "mydef"},
        "ownerReferences": [{"apiVersion": "core.oam.dev/v1beta1",
                             "kind": "ComponentDefinition", "name": "mydef", "uid": "u-mydef"}]}
    assert recorder.events[-1][1:] == ("DefinitionRevisionCreated",
                                       "revision 1: DefinitionRevision mydef-v1")
    old = mydef("old")
    old["status"] = status["status"]
    assert await reconcile_definition(view, old) == []  # nothing new
    _, mark = await reconcile_definition(view, mydef("new"))
    assert revision_names(view) == ["mydef-v1", "mydef-v2"]
    assert mark["status"]["latestRevision"]["name"] == "mydef-v2"


async def test_the_definition_controller_keeps_the_history_limit() -> None:
    view = FakeView()
    for number in range(definition_revisions.HISTORY_LIMIT + 2):
        await reconcile_definition(view, mydef(str(number)))
    kept = revision_names(view)
    assert len(kept) == definition_revisions.HISTORY_LIMIT
    assert "mydef-v1" not in kept and "mydef-v2" not in kept and "mydef-v22" in kept


async def test_no_revision_for_a_tenants_definition_or_in_another_namespace() -> None:
    """Attack: a tenant's ComponentDefinition in its namespace gets no revision (which
    would then be in a system namespace's name); a system namespace's definition gets its
    revision in its own namespace only."""
    view = FakeView()
    assert await reconcile_definition(view, mydef("evil", namespace="shop")) == []
    written = await reconcile_definition(view, mydef("fine", namespace="federation-system"))
    assert [(w["kind"], w["metadata"]["namespace"]) for w in written] == [
        ("DefinitionRevision", "federation-system"),
        ("ComponentDefinition", "federation-system")]  # its status.latestRevision


async def test_a_revision_name_another_definition_holds_is_not_replaced() -> None:
    """A TraitDefinition ``mydef`` beside the ComponentDefinition ``mydef``: both would be
    ``mydef-v1``; the second gets a Warning Event and no write (a later Application's
    ``mydef@v1`` trait is not the component's revision: its copy's kind says so)."""
    view, recorder = FakeView(), Recorder()
    await reconcile_definition(view, mydef("old"))
    trait = {**mydef("t"), "kind": "TraitDefinition"}
    view.put("hub", trait)
    journal: list[tuple[str, str, str]] = []
    await definition_reports.report(view, recorder, executor_of(journal), Request(
        "hub", group_kind(api.TRAIT_DEFINITIONS), "vela-system", "mydef"))
    assert journal == []
    assert recorder.events[-1][1] == "DefinitionRevisionConflict"
    assert "DefinitionRevision mydef-v1 exists and is not this TraitDefinition's" in \
        recorder.events[-1][2]


def versioned_app(type_: str) -> JSON:
    doc = docs_app()
    doc["spec"]["components"] = [{"name": "web", "type": type_}]
    return doc


async def test_an_application_at_v1_deploys_the_old_render_from_the_cache() -> None:
    view = FakeView()
    await reconcile_definition(view, mydef("old"))
    await reconcile_definition(view, mydef("new"))
    world = World(view)
    view.put("hub", versioned_app("mydef@v1"))
    await world.reconcile()
    [created] = [o for o in world.writer.sent if o["kind"] == "ConfigMap"]
    assert created["data"] == {"greeting": "old"}
    revision = next(o for o in world.writer.sent if o["kind"] == "ApplicationRevision")
    assert list(revision["spec"]["definitions"]) == ["ComponentDefinition/mydef@v1"]


async def test_a_missing_revision_is_render_failed_in_one_line() -> None:
    view = FakeView()
    await reconcile_definition(view, mydef("old"))
    world = World(view)
    view.put("hub", versioned_app("mydef@v3"))
    await world.reconcile()
    status = world.status.written[-1]
    assert status["status"] == "renderFailed"
    assert status["conditions"][0]["message"] == (
        "spec.components[0].type: 'mydef@v3': no revision v3 of ComponentDefinition mydef "
        "(no DefinitionRevision mydef-v3 in vela-system, federation-system; its revisions "
        "here: v1)")
    assert not [w for w in world.journal if w[1].startswith("member")]


def test_a_revision_event_wakes_the_applications_naming_it() -> None:
    clusters = fakes.cluster_set("member1")
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.APPLICATIONS).store
    store.put(versioned_app("mydef@v1"))
    revision, _ = definition_revisions.planned(mydef("old"), [])
    assert revision is not None
    found = wiring.apps_using(clusters, "hub", ("vela-system",),
                              Event("ADDED", "hub", api.DEFINITION_REVISIONS, revision))
    assert [(r.namespace, r.name) for r in found] == [("shop", "shop")]
