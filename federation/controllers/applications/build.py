"""What one reconcile of a live Application gathers: facts, the plan, deferred Events.

The steps (see :mod:`.reconciler`) each read through the view and add here: the first
ones facts (the revision, the compiled spec, the workflow state, health), the last ones
plan vertices (the revision to create, member copies to write and delete). Nothing here
writes; the reconciler hands :attr:`Build.plan` to the executor after the chain, then
records the outcome (:mod:`.record`) and only then posts :attr:`Build.events`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from federation.applications import compile as compile_
from federation.applications import config_store, custom_status, definitions, scope, workflow
from federation.applications.tracker import Diff, Entry
from federation.contexts.cache import ReadOnly
from federation.controllers.kit.events import EventType
from federation.controllers.kit.plan import Plan, Vertex
from federation.hub import manifests
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
Desired = dict[tuple[str, str], list[tuple[JSON, int]]]
"""(cluster, deploy step) -> the manifests it must hold, each with its revision."""
Health = dict[tuple[str, str], tuple[workflow.HealthState, str]]
"""(deploy step, cluster) -> the health of what that step put there, with a message."""
ComponentHealth = dict[tuple[str, str, str], tuple[workflow.HealthState, str]]
"""(deploy step, cluster, component) -> its health there (deploys ordering components)."""
ComponentStatus = dict[tuple[str, str, str], custom_status.Status]
"""(deploy step, cluster, component) -> what its definitions' status said there."""
Targets = dict[tuple[str, str], list[JSON]]
"""(deploy step, cluster) -> the manifests whose health is observed there."""


@dataclasses.dataclass
class Build:
    """One reconcile's facts and plan, filled in by the steps in order."""

    app: ReadOnly
    """The Application as cached (read-only)."""
    tracker: ReadOnly | None
    """Its ResourceTracker as cached, if any."""
    status: JSON = dataclasses.field(init=False)
    """The status being built (a copy of the Application's, changed by the steps)."""
    plan: Plan = dataclasses.field(default_factory=Plan)
    events: list[tuple[EventType, str, str]] = dataclasses.field(default_factory=list)
    """Events about the Application, posted once its status is written."""

    # load revision
    ref_workflow: JSON | None = None
    """The Workflow ``spec.workflow.ref`` names, as the revision keeps it (None without)."""
    resolved: Mapping[str, Any] | None = None
    """The spec with that Workflow's steps in place (:attr:`steps_spec`)."""
    external: dict[str, JSON] = dataclasses.field(default_factory=dict)
    digest: str = ""
    number: int = 0
    revisions: list[ReadOnly] = dataclasses.field(default_factory=list)
    revision_vertex: Vertex | None = None
    """The new revision's create, which every member write waits for."""
    catalog: definitions.Catalog = dataclasses.field(default_factory=definitions.Catalog)
    """The definitions that count (the system namespaces'), read with the revision."""
    # compile
    fleet: list[clusters_.Cluster] = dataclasses.field(default_factory=list)
    grant: scope.Grant | None = None
    compiled: compile_.Compiled | None = None
    # user requests, rollback
    handled: JSON = dataclasses.field(default_factory=dict)
    state: workflow.State | None = None
    resume: bool = False
    restart_asked: bool = False
    """``app.oam.dev/restart-workflow: true`` waits for the running workflow to end."""
    targets: Targets = dataclasses.field(default_factory=dict)
    # health, workflow
    health: Health = dataclasses.field(default_factory=dict)
    actions: list[workflow.Action] = dataclasses.field(default_factory=list)
    desired: Desired = dataclasses.field(default_factory=dict)
    hold: set[tuple[str, str, str, str, str]] = dataclasses.field(default_factory=set)
    """Tracker keys kept as they are: objects of components an ordered deploy has not put
    in a started cluster yet."""
    component_health: ComponentHealth = dataclasses.field(default_factory=dict)
    component_status: ComponentStatus = dataclasses.field(default_factory=dict)
    """Components whose definitions have a status (``healthPolicy``/``customStatus``):
    what it said, per deploy step and cluster."""
    final: set[str] = dataclasses.field(default_factory=set)
    creations: dict[str, JSON] = dataclasses.field(default_factory=dict)
    """depends-on-app step -> the missing Application it would create from its ConfigMap."""
    created: dict[str, str] = dataclasses.field(default_factory=dict)
    """Plan vertex key -> the depends-on-app step whose Application it creates."""
    stores: dict[str, config_store.Decision] = dataclasses.field(default_factory=dict)
    """config-store step -> its decision over the cached store (the steps not ended)."""
    store_writes: dict[str, str] = dataclasses.field(default_factory=dict)
    """Plan vertex key -> the config-store step whose hub write it is."""
    # deploy, prune
    diff: Diff | None = None
    by_vertex: dict[str, Entry] = dataclasses.field(default_factory=dict)
    """Plan vertex key -> the tracker entry the write or delete is about."""
    gone: list[Entry] = dataclasses.field(default_factory=list)
    """Entries to delete that are gone already (or were never ours)."""
    problems: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.status = copy.deepcopy(dict(self.app.get("status") or {}))

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.app.get("metadata") or {}

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @property
    def owner(self) -> str:
        """What our annotation on member objects says: ``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.app.get("spec") or {}

    @property
    def steps_spec(self) -> Mapping[str, Any]:
        """The spec to compile: :attr:`spec` with the steps of the Workflow its
        ``workflow.ref`` names (:mod:`federation.applications.workflow_ref`), once read."""
        return self.resolved if self.resolved is not None else self.spec

    @property
    def annotations(self) -> Mapping[str, Any]:
        return self.meta.get("annotations") or {}

    def entries(self) -> list[Entry]:
        """What the tracker lists as placed (empty without a tracker)."""
        return entries_of(self.tracker)

    def add_member(self, vertex: Vertex, entry: Entry | None = None
                   ) -> Vertex:
        """A member write or delete: after the new revision is recorded, if there is one."""
        vertex = self.plan.add(vertex)
        if self.revision_vertex is not None:
            self.plan.depend(vertex, self.revision_vertex)
        if entry is not None:
            self.by_vertex[vertex.key] = entry
        return vertex

    def compiled_targets(self) -> Targets:
        """This revision's manifests per (deploy step, cluster)."""
        assert self.compiled is not None
        return {(step, cluster): list(objects)
                for step, target in self.compiled.targets.items()
                for cluster, objects in target.clusters.items()}


def entries_of(rt: Mapping[str, Any] | None) -> list[Entry]:
    if rt is None:
        return []
    return [Entry.from_json(e) for e in (rt.get("spec") or {}).get("resources") or []]


def marked(manifest: Mapping[str, Any], uid: str, owner: str) -> JSON:
    """What we write: the rendered object, its owner Application and our marks (health
    compares the live object's applied-hash with the digest of exactly this)."""
    body = copy.deepcopy(dict(manifest))
    body.setdefault("metadata", {}).setdefault("annotations", {})[
        manifests.APPLICATION_ANNOTATION] = owner
    return manifests.mark(body, uid)


def revision_number(doc: Mapping[str, Any]) -> int:
    return int((doc.get("spec") or {}).get("revision") or 0)


def last_good(revisions: list[ReadOnly], current: int) -> int | None:
    """The newest revision before ``current`` whose workflow succeeded."""
    good = [revision_number(r) for r in revisions
            if (r.get("status") or {}).get("succeeded") and revision_number(r) < current]
    return max(good) if good else None
