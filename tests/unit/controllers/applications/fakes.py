"""Fakes for the applications controller's tests: a view over plain dicts, a recorder,
an outbox, a status writer, and the reconciler over the in-memory fleet.

:class:`FakeView` is an :class:`~federation.controllers.applications.ApplicationView`
over objects keyed by (cluster, kind, namespace, name), a fixed clock and the members it
is given; reads hand out frozen objects, as the caches hand out shared ones. It has no
writer. :func:`reconciler` builds the real reconciler over ``tests.unit.controllers.fakes``'
multi-cluster client for tests of a whole reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from federation.applications import workflow
from federation.applications.render import APP_LABEL
from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClusterUnavailable, Resource
from federation.contexts.clusters import ClusterSet, UnknownCluster
from federation.contexts.multicluster import ListView, MultiCluster
from federation.controllers import applications
from federation.controllers.applications import calls, notifications
from federation.controllers.applications.build import Build, marked
from federation.controllers.applications.definitions import Evaluations, inline
from federation.controllers.applications.reconciler import STEPS
from federation.controllers.applications.view import ApplicationView, CacheView, HubStatus
from federation.controllers.kit import executor
from federation.controllers.kit.chain import Step
from federation.controllers.kit.events import EventType
from federation.controllers.kit.view import Member
from federation.hub import api
from federation.runtime.reconcile import Request
from tests.unit.controllers.fakes import merge_patch
from tests.unit.controllers.frozen import freeze

JSON = dict[str, Any]
SERVICES = Resource("", "v1", "services", "Service")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGURATIONS = Resource("terraform.core.oam.dev", "v1beta2", "configurations",
                          "Configuration")
PROVIDERS = Resource("terraform.core.oam.dev", "v1beta1", "providers", "Provider")
KINDS = {r.kind: r for r in (kube.CONFIGMAPS, SECRETS, kube.NAMESPACES, kube.DEPLOYMENTS, SERVICES,
                             api.APPLICATIONS, api.APPLICATION_REVISIONS,
                             api.RESOURCE_TRACKERS, api.OAM_POLICIES, api.OAM_WORKFLOWS,
                             api.MEMBER_CLUSTERS, CONFIGURATIONS, PROVIDERS)}


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
"""The member Namespace the test app deploys into."""


class FakeView:
    """An ApplicationView over plain dicts; ``down`` members answer ClusterUnavailable."""

    def __init__(self, objects: Sequence[tuple[str, JSON]] = (),
                 members: Sequence[str] = ("member1", "member2", "member3"),
                 now: float = 1000.0,
                 settings: applications.ApplicationSettings | None = None) -> None:
        self.objects: dict[tuple[str, str, str, str], JSON] = {}
        for cluster, obj in objects:
            self.put(cluster, obj)
        self._members = [Member(m, False, True) for m in members]
        self._settings = settings or applications.ApplicationSettings()
        self.clock = now
        self.down: set[str] = set()
        self.unserved: set[str] = set()
        """Kinds no member serves (discovery fails)."""
        self.evaluations = Evaluations(inline)
        """CUE evaluations, answered in process (a test may give another runner)."""
        self.caller = calls.Caller({}, self.now)
        """The HTTP steps' answers (a test may give one with outboxes)."""

    hub = "hub"

    def put(self, cluster: str, obj: JSON) -> JSON:
        meta = obj["metadata"]
        self.objects[(cluster, obj["kind"], meta.get("namespace") or "", meta["name"])] = obj
        return obj

    @property
    def settings(self) -> applications.ApplicationSettings:
        return self._settings

    def now(self) -> float:
        return self.clock

    def members(self) -> list[Member]:
        return list(self._members)

    def _check(self, cluster: str) -> None:
        if cluster != self.hub and cluster not in {m.name for m in self._members}:
            raise UnknownCluster(cluster, "no such cluster")
        if cluster in self.down:
            raise ClusterUnavailable(cluster, "unavailable")

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        self._check(cluster)
        found = self.objects.get((cluster, resource.kind, namespace or "", name))
        return cast(ReadOnly, freeze(found)) if found is not None else None

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        return [freeze(o) for (c, kind, ns, _), o in sorted(self.objects.items())
                if c == self.hub and kind == resource.kind
                and (namespace is None or ns == namespace)]

    async def resource(self, cluster: str, obj: JSON) -> Resource:
        self._check(cluster)
        if obj.get("kind") in self.unserved:
            raise kube.ApiError(cluster, 404, "NotFound", f"{obj.get('kind')} not served")
        return KINDS[str(obj.get("kind"))]

    def evaluated(self, key: str) -> JSON | None:
        return self.evaluations.get(key)

    async def evaluate(self, requests: Mapping[str, JSON]) -> None:
        await self.evaluations.evaluate(requests)

    def answered(self, key: calls.Key, step_type: str) -> JSON | None:
        return self.caller.answered(key, step_type)


class Recorder:
    """Every Event emitted, as (type, reason, message), and on what (kind); with a
    ``journal``, each also as ("event", reason, kind) in the order of all writes."""

    def __init__(self, journal: list[tuple[str, str, str]] | None = None) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.on: list[str] = []
        self.journal = journal if journal is not None else []

    async def emit(self, obj: Mapping[str, Any], kind: EventType, reason: str,
                   message: str) -> None:
        self.events.append((kind, reason, message))
        self.on.append(str(obj.get("kind")))
        self.journal.append(("event", reason, str(obj.get("kind"))))


class Failure(Exception):
    """What a fake write that was told to fail raises."""


class JournalWriter:
    """The executor's writer (``plan.Writer``) as a journal: each write is recorded as
    (verb, cluster, kind/name) and answered with a resourceVersion; those listed in
    ``fail`` raise instead (an ApiError of ``status``)."""

    def __init__(self, journal: list[tuple[str, str, str]]) -> None:
        self.journal = journal
        self.fail: dict[tuple[str, str], int] = {}
        """(verb, kind) -> the HTTP status of the error that write gets."""
        self.sent: list[JSON] = []
        """Every object a write was asked for, as given."""

    async def _write(self, verb: str, cluster: str, obj: JSON) -> JSON:
        kind, name = str(obj.get("kind")), str(obj["metadata"]["name"])
        self.sent.append(obj)
        status = self.fail.get((verb, kind))
        if status is not None:
            raise kube.ApiError(cluster, status, "Refused", f"{verb} {kind} refused")
        self.journal.append((verb, cluster, f"{kind}/{name}"))
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "77"}}

    async def create(self, cluster: str, obj: JSON) -> JSON:
        return await self._write("create", cluster, obj)

    async def update(self, cluster: str, obj: JSON) -> JSON:
        return await self._write("update", cluster, obj)

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        return await self._write("apply", cluster, obj)

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        return await self._write("status", cluster, obj)

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        return await self._write("delete", cluster, obj)


class JournalStatus:
    """The Application status writer as a journal; ``fail`` makes it raise."""

    def __init__(self, journal: list[tuple[str, str, str]]) -> None:
        self.journal = journal
        self.written: list[JSON] = []
        self.fail = False

    async def application_status(self, namespace: str, name: str, status: JSON) -> None:
        if self.fail:
            raise Failure("status write refused")
        self.journal.append(("status", "hub", f"Application/{name}"))
        self.written.append(status)


def status_after(world: World, doc: JSON, sent: int) -> JSON:
    """``doc``'s status as the hub keeps it once the status patches written since the
    ``sent``-th are merged into it (the controller sends what changed)."""
    status: JSON = doc.get("status") or {}
    for patch in world.status.written[sent:]:
        status = merge_patch(status, patch)
    doc["status"] = status
    return status


class World:
    """A reconciler over a :class:`FakeView`, journalling every write and Event."""

    def __init__(self, view: FakeView | None = None) -> None:
        self.view = view or FakeView()
        self.journal: list[tuple[str, str, str]] = []
        self.writer = JournalWriter(self.journal)
        self.status = JournalStatus(self.journal)
        self.recorder = Recorder(self.journal)
        self.outbox = Outbox()
        self.reconciler = applications.Reconciler(self.view, self.writer, self.status,
                                                  self.recorder, self.outbox)

    async def reconcile(self) -> Any:
        return await self.reconciler.reconcile(Request("hub", applications.APP_KIND,
                                                       "shop", "shop"))

    def verbs(self) -> list[tuple[str, str, str]]:
        return list(self.journal)


class Outbox:
    """The notification sender's stand-in: every message submitted is queued."""

    def __init__(self) -> None:
        self.messages: list[notifications.Message] = []

    def submit(self, message: notifications.Message) -> notifications.Admission:
        self.messages.append(message)
        return notifications.Admission(True)


class Fleet(MultiCluster, Protocol):
    """The in-memory fleet's client (``tests.unit.controllers.fakes``) and its members:
    the kit's writer takes it as a multi-cluster client, the view and the status writer as
    their narrower :class:`Client`."""

    clusters: ClusterSet

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> ReadOnly | None: ...

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None,
                        label_selector: str | Mapping[str, str] | None = None,
                        allow_stale: bool = False) -> ListView: ...


def reconciler(mc: Fleet, recorder: Recorder | None = None,
               settings: applications.ApplicationSettings | None = None,
               clock: Callable[[], float] = lambda: 1000.0,
               outbox: notifications.Outbox | None = None,
               caller: calls.Caller | None = None) -> applications.Reconciler:
    """The real reconciler (cache view, kit executor, status writer) over a fake client;
    ``caller``: the HTTP steps' calls (the view reads its answers)."""
    settings = settings or applications.ApplicationSettings()
    writer = executor.Writer(mc, "hub")
    caller = caller or calls.Caller({}, clock)
    return applications.Reconciler(CacheView(mc, mc.clusters, settings, clock,
                                             caller=caller), writer,
                                   HubStatus(mc, "hub"), recorder or Recorder(),
                                   outbox or Outbox(), caller)



def app(image: str = "web:1", steps: list[JSON] | None = None, uid: str = "uid-app",
        status: JSON | None = None, annotations: dict[str, str] | None = None) -> JSON:
    """The Application most tests use: a web service, a canary on member1, an approval,
    then member2 and member3 one at a time."""
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": "shop", "uid": uid,
                     "annotations": annotations or {}},
        "spec": {
            "components": [{"name": "web", "type": "webservice",
                            "properties": {"image": image}}],
            "policies": [
                {"name": "canary", "type": "topology", "properties": {"clusters": ["member1"]}},
                {"name": "rest", "type": "topology",
                 "properties": {"clusters": ["member2", "member3"]}}],
            "workflow": {"steps": steps if steps is not None else [
                {"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}},
                {"name": "approval", "type": "approve"},
                {"name": "rollout", "type": "deploy",
                 "properties": {"policies": ["rest"], "parallelism": 1}}]}},
        "status": status or {}}


def build_of(doc: JSON, rt: JSON | None = None) -> Build:
    return Build(cast(ReadOnly, freeze(doc)), cast(ReadOnly, freeze(rt)) if rt else None)


async def run_through(view: FakeView, build: Build, last: Step[ApplicationView, Build]
                      ) -> None:
    """The chain's steps up to and including ``last``."""
    for step in STEPS.steps:
        await step(view, build)
        if step is last:
            return
    raise AssertionError(f"{last} is not a step")


def revision_doc(number: int, succeeded: bool | None = None, app_name: str = "shop",
                 spec: JSON | None = None) -> JSON:
    """A kept ApplicationRevision (its snapshot ``spec``: default the test app's)."""
    status = {} if succeeded is None else {"succeeded": succeeded, "workflowFinished": True}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "ApplicationRevision",
            "metadata": {"name": f"{app_name}-v{number}", "namespace": "shop",
                         "uid": f"uid-rev-{number}", "resourceVersion": f"{number}0",
                         "labels": {APP_LABEL: app_name}},
            "spec": {"application": {"metadata": {"name": app_name, "namespace": "shop"},
                                     "spec": spec if spec is not None else app()["spec"]},
                     "externalPolicies": {}, "revision": number,
                     "revisionHash": f"hash-{number}"},
            "status": status}


def live_copy(manifest: JSON, ready: bool = True, uid: str = "uid-app",
              owner: str = "shop/shop") -> JSON:
    """A member object as we wrote it (our marks, the applied-hash); a workload with all
    its replicas ready, or none."""
    body = marked(manifest, uid, owner)
    body["metadata"]["uid"] = f"uid-{body['kind']}-{body['metadata']['name']}"
    if body["kind"] == "Deployment":
        replicas = body.get("spec", {}).get("replicas", 1)
        count = replicas if ready else 0
        body["status"] = {"observedGeneration": 0, "readyReplicas": count,
                          "updatedReplicas": count}
    return body


def running(revision: int, start: float = 500.0) -> JSON:
    """A stored ``status.workflow`` of the test app at ``revision`` (nothing run yet)."""
    specs = [workflow.StepSpec("canary", "deploy", ("member1",)),
             workflow.StepSpec("approval", "approve"),
             workflow.StepSpec("rollout", "deploy", ("member2", "member3"), 1)]
    return workflow.to_status(workflow.initial(revision, specs, start), str)


def canary_started(revision: int = 1, start: float = 500.0, steps: int = 3) -> JSON:
    """A stored ``status.workflow`` whose canary step has put ``revision`` on member1
    (of the test app's three steps, or of its first ``steps``)."""
    found = (workflow.StepState("canary", "deploy", "running", first_execute=start,
                                started=("member1",)),
             workflow.StepState("approval", "approve"),
             workflow.StepState("rollout", "deploy"))[:steps]
    return workflow.to_status(workflow.State(revision, found, "running", start), str)


async def kept(view: FakeView, doc: JSON) -> None:
    """Put the revision ``doc``'s content hash in the view, as if made before."""
    probe = build_of(doc)
    await STEPS.steps[0](view, probe)
    body = revision_doc(probe.number)
    body["spec"]["revisionHash"] = probe.digest
    view.put("hub", body)
