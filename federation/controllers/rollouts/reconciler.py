"""The rollout reconciler: read (view) -> decide (pure) -> call reloaders -> one status patch.

One reconcile handles one ReconfigurePolicy, level-triggered:

1. Load: the spec (``InvalidSpec``), older policies governing the same objects
   (``Conflict``), the ConfigConstraints (``ConstraintNotFound``, ``InvalidConstraint``) and
   the hub's ConfigMap/Secret (``ConfigNotFound``); V is its :func:`config_version`.
2. The clusters are those the config's ResourceBinding places it on, in ``clusterOrder``
   then by name. A new V or a new policy generation begins a new rollout: each cluster's
   live copy is diffed against the hub's content (:mod:`.changes`), never on the event loop
   (:class:`~.sandbox.Analyses`: worker processes with a deadline, each content once); any
   refusal refuses it all, and a refused plan is not planned again until its inputs change.
3. Each ``Updating`` cluster (as the status last recorded it) is looked at: the copy at V,
   then by action: restart first pushes online what a constraint asks to push before a
   restart (KubeBlocks' ``mergeReloadAndRestart: false``,
   ``reloadStaticParamsBeforeRestart``), then waits for every governed workload there to
   carry the restart stamp V and be ready; online calls every reloader of every governed
   workload with the changed dynamic parameters (each address through the outbound
   policy, each call once per version, ``finishedAt`` after the last); none waits for the
   copy only. Past ``progressDeadlineSeconds``, or on a reloader's failure, the cluster
   fails and the rollout stops.
4. :func:`.rollout.start` releases the next clusters, and the status is written in one
   merge patch (conditional on the resourceVersion read) when it changed.

The status patch is the only write; propagation does the rest from ``releasedVersion`` and
``restartVersion``. Values never reach the status, a log line or an error message: names
only, and what a reloader answers is stripped of the values it was sent.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from federation.contexts import egress
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError, ClusterUnavailable
from federation.controllers.rollouts import changes, load, rollout
from federation.controllers.rollouts.rollout import ClusterState, Rollout, WorkloadVersion
from federation.controllers.rollouts.sandbox import Analyses, Sandbox
from federation.controllers.rollouts.settings import ReconfigureSettings
from federation.controllers.rollouts.view import (
    CallerNotReady,
    OnlineUpgrade,
    RolloutView,
    StatusWriter,
)
from federation.hub import rollouts as hub_api
from federation.rollouts.constraint import ConfigConstraintSpec
from federation.rollouts.diff import Action
from federation.runtime.reconcile import Request, Result

log = logging.getLogger("federation.rollouts")


class Loaded:
    """A policy whose spec, constraints and config loaded: what the rollout acts on."""

    def __init__(self, policy: ReadOnly, spec: hub_api.ReconfigurePolicySpec,
                 constraints: dict[str, ConfigConstraintSpec], files: dict[str, str | bytes],
                 version: str, clusters: list[str]) -> None:
        self.policy = policy
        self.spec = spec
        self.constraints = constraints
        self.files = files
        self.version = version
        self.clusters = clusters
        meta = policy["metadata"]
        self.namespace = str(meta.get("namespace") or "")
        self.name = str(meta["name"])
        self.uid = str(meta.get("uid") or f"{self.namespace}/{self.name}")
        generation = meta.get("generation")
        self.generation = generation if isinstance(generation, int) else 0


MEMORY = 4096
"""Policies (refused plans) and (policy, version, cluster) triples (reloader calls made)
remembered: far more than are ever rolling at once, and a bound on what deleted policies
leave behind."""


class Reconciler:
    def __init__(self, view: RolloutView, writer: StatusWriter,
                 settings: ReconfigureSettings | None = None,
                 analyses: Analyses | None = None) -> None:
        self.view = view
        self.writer = writer
        self.settings = settings or ReconfigureSettings()
        self.analyses = analyses or Analyses(Sandbox(self.settings.parse_workers,
                                                     self.settings.parse_timeout).ask)
        self._refused: collections.OrderedDict[tuple[str, str], tuple[str, load.Refusal,
                                                                     tuple[str, ...]]] = \
            collections.OrderedDict()
        """Per policy: the inputs of its last refused plan, the refusal and the changed
        names. Planning again the same inputs would refuse again: it is skipped."""
        self._called: collections.OrderedDict[tuple[str, str, str], set[tuple[str, ...]]] = \
            collections.OrderedDict()
        """Per (policy uid, config version, cluster): the (workload, address, file) calls
        that succeeded, so a reconcile that read a cache behind our own last status write
        (the cluster still Updating there) does not call them again."""

    async def reconcile(self, request: Request) -> Result | None:
        policy = await self.view.policy(request.namespace, request.name)
        if policy is None:
            return None
        status = policy.get("status") or {}
        previous = rollout.from_status(status)
        loaded = await self._load(policy)
        if isinstance(loaded, Rollout):
            return await self._write(policy, loaded, None)
        if previous.version != loaded.version or previous.generation != loaded.generation \
                or not status.get("phase") or status.get("phase") == rollout.REFUSED:
            current = await self._begin(loaded, previous)
        else:
            known = {c.name for c in previous.clusters}
            new = [c for c in loaded.clusters if c not in known]
            current = rollout.reshape(previous, loaded.clusters, await self._plans(loaded, new))
        if current.refusal is None:
            for cluster in current.clusters:
                if cluster.state == rollout.UPDATING:
                    try:
                        progressed = await self._progress(loaded, cluster, current.changed)
                    except ClusterUnavailable as exc:
                        progressed = self._unanswered(loaded, cluster, exc)
                    current = current.replace(progressed)
            current = rollout.start(current, loaded.spec.max_unavailable_clusters,
                                    self.view.now())
        return await self._write(policy, current, loaded)

    # -- load -----------------------------------------------------------------------------

    async def _load(self, policy: ReadOnly) -> Loaded | Rollout:
        """The loaded policy, or the refused rollout saying why it cannot load."""
        meta = policy["metadata"]
        namespace = str(meta.get("namespace") or "")
        generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
        previous = rollout.from_status(policy.get("status"))

        def refuse(refusal: load.Refusal, version: str | None = None) -> Rollout:
            return rollout.refused(version, generation, refusal, previous)

        spec = load.spec(policy)
        if isinstance(spec, load.Refusal):
            return refuse(spec)
        typo = load.unknown_clusters(spec, self.view.member_names())
        if typo is not None:
            return refuse(typo)
        rival = load.conflict(policy, spec, await self.view.policies(namespace))
        if rival is not None:
            return refuse(rival)
        docs = {load.constraint_key(f): await self.view.constraint(*load.constraint_key(f))
                for f in spec.files}
        constraints = load.constraints(spec, docs)
        if isinstance(constraints, load.Refusal):
            return refuse(constraints)
        ref = spec.config_ref
        hub_object = await self.view.config(ref.kind.value, namespace, ref.name)
        files = load.config_files(spec, hub_object)
        if isinstance(files, load.Refusal):
            return refuse(files)
        assert hub_object is not None
        version = hub_api.config_version(hub_object)
        placed = await self.view.placement(ref.kind.value, namespace, ref.name)
        clusters = rollout.ordered(placed, spec.cluster_order)
        return Loaded(policy, spec, constraints, files, version, clusters)

    async def _begin(self, loaded: Loaded, previous: Rollout) -> Rollout:
        """A new rollout of ``loaded``, or the same refusal as last time when nothing it
        was planned from changed (the policy's generation, the hub's content, the
        constraints, the placement and every member copy)."""
        copies = await self._copies(loaded, loaded.clusters)
        inputs = _inputs(loaded, copies)
        known = self._refused.get((loaded.namespace, loaded.name))
        if known is not None and known[0] == inputs:
            self._refused.move_to_end((loaded.namespace, loaded.name))
            return rollout.refused(loaded.version, loaded.generation, known[1], previous,
                                   known[2])
        plans = await self._plan(loaded, copies)
        current = rollout.begin(loaded.version, loaded.generation, plans, loaded.clusters,
                                previous)
        if current.refusal is not None:
            _remember(self._refused, (loaded.namespace, loaded.name),
                      (inputs, current.refusal, current.changed))
        else:
            self._refused.pop((loaded.namespace, loaded.name), None)
        return current

    async def _copies(self, loaded: Loaded, clusters: Sequence[str]
                      ) -> dict[str, ReadOnly | None]:
        ref = loaded.spec.config_ref
        return {name: await self.view.config(ref.kind.value, loaded.namespace, ref.name, name)
                for name in clusters}

    async def _plan(self, loaded: Loaded, copies: Mapping[str, ReadOnly | None]
                    ) -> dict[str, changes.ClusterPlan]:
        return {name: await changes.plan_cluster(name, loaded.spec, loaded.constraints,
                                                 loaded.files, copy, self.analyses)
                for name, copy in copies.items()}

    async def _plans(self, loaded: Loaded, clusters: Sequence[str]
                     ) -> dict[str, changes.ClusterPlan]:
        return await self._plan(loaded, await self._copies(loaded, clusters))

    # -- progress of an Updating cluster ----------------------------------------------------

    async def _progress(self, loaded: Loaded, cluster: ClusterState,
                        changed: tuple[str, ...]) -> ClusterState:
        now = self.view.now()
        waiting_for = await self._copy_wait(loaded, cluster.name)
        if waiting_for is None and cluster.action == Action.RESTART.value:
            if cluster.restart_version != loaded.version:
                # KubeBlocks' mergeReloadAndRestart false / reloadStaticParamsBeforeRestart:
                # first the online push (when a constraint asks for one), then the restart.
                waiting_for, failure = await self._push_before_restart(loaded, cluster.name,
                                                                       changed)
                if failure is not None:
                    return self._failed(loaded, cluster, failure)
                if waiting_for is None:
                    return rollout.restart(cluster, loaded.version)
            else:
                waiting_for = await self._restart_wait(loaded, cluster.name)
        if waiting_for is None and cluster.action == Action.ONLINE.value:
            waiting_for = await self._reloaders_wait(loaded, cluster.name)
            if waiting_for is None:
                failure = await self._call_reloaders(loaded, cluster.name, changed)
                if failure is not None:
                    return self._failed(loaded, cluster, failure)
        if waiting_for is None:
            workloads = [WorkloadVersion(w.kind.value, w.name, loaded.version)
                         for w in await self._placed_workloads(loaded, cluster.name)]
            # Read the clock now, after the reloader calls returned: the cluster's
            # [startedAt, finishedAt] must hold every call made for it.
            return rollout.finish(cluster, self.view.now(), workloads,
                                  f"config version {loaded.version} ({cluster.action})")
        deadline = loaded.spec.progress_deadline_seconds
        if rollout.overdue(cluster, now, deadline):
            message = f"not done after {deadline}s: waiting for {waiting_for}"
            log.warning("reconfigure %s/%s: cluster %s failed: %s", loaded.namespace,
                        loaded.name, cluster.name, message)
            return rollout.fail(cluster, now, f"ProgressDeadlineExceeded: {message}")
        return rollout.waiting(cluster, f"waiting for {waiting_for}")

    def _failed(self, loaded: Loaded, cluster: ClusterState, failure: str) -> ClusterState:
        log.warning("reconfigure %s/%s: cluster %s failed: %s", loaded.namespace,
                    loaded.name, cluster.name, failure)
        return rollout.fail(cluster, self.view.now(), failure)

    async def _push_before_restart(self, loaded: Loaded, cluster: str,
                                   changed: tuple[str, ...]) -> tuple[str | None, str | None]:
        """The online push a restart waits for: (what it waits for, why it failed), both
        None once every reloader took it or when no constraint asks for one."""
        calls = await changes.online_params(cluster, loaded.constraints, loaded.files, changed,
                                            self.analyses, before_restart=True)
        if isinstance(calls, load.Refusal):
            return None, f"{calls.reason}: {calls.message}"
        if not calls:
            return None, None
        waiting_for = await self._reloaders_wait(loaded, cluster)
        if waiting_for is not None:
            return waiting_for, None
        return None, await self._send(loaded, cluster, calls)

    def _unanswered(self, loaded: Loaded, cluster: ClusterState,
                    exc: ClusterUnavailable) -> ClusterState:
        """An Updating cluster that cannot be read: still waiting, and its deadline still
        runs (a member gone for good fails the rollout instead of stalling it)."""
        now = self.view.now()
        waiting_for = f"the cluster to answer ({exc})"
        deadline = loaded.spec.progress_deadline_seconds
        if rollout.overdue(cluster, now, deadline):
            log.warning("reconfigure %s/%s: cluster %s failed: not done after %ss, "
                        "unreachable", loaded.namespace, loaded.name, cluster.name, deadline)
            return rollout.fail(cluster, now, f"ProgressDeadlineExceeded: not done after "
                                              f"{deadline}s: waiting for {waiting_for}")
        return rollout.waiting(cluster, f"waiting for {waiting_for}")

    async def _copy_wait(self, loaded: Loaded, cluster: str) -> str | None:
        ref = loaded.spec.config_ref
        copy = await self.view.config(ref.kind.value, loaded.namespace, ref.name, cluster)
        if copy is not None and hub_api.config_version(copy) == loaded.version:
            return None
        return f"the {ref.kind.value} {ref.name} of version {loaded.version} in the cluster"

    async def _placed_workloads(self, loaded: Loaded,
                                cluster: str) -> list[hub_api.WorkloadRef]:
        return [w for w in loaded.spec.workloads
                if cluster in await self.view.placement(w.kind.value, loaded.namespace, w.name)]

    async def _restart_wait(self, loaded: Loaded, cluster: str) -> str | None:
        for ref in await self._placed_workloads(loaded, cluster):
            live = await self.view.workload(ref.kind.value, loaded.namespace, ref.name, cluster)
            found = restart_wait(live, loaded.version)
            if found is not None:
                return f"{ref.kind.value} {ref.name}: {found}"
        return None

    async def _reloaders_wait(self, loaded: Loaded, cluster: str) -> str | None:
        for ref in await self._placed_workloads(loaded, cluster):
            if not await self.view.reloaders(cluster, loaded.namespace, ref.service):
                return (f"a reloader of {ref.kind.value} {ref.name} (EndpointSlices of "
                        f"service {ref.service}, port {hub_api.RELOADER_PORT_NAME!r})")
        return None

    async def _call_reloaders(self, loaded: Loaded, cluster: str,
                              changed: tuple[str, ...]) -> str | None:
        """Every reloader of every governed workload in ``cluster``, each changed file, each
        once per config version (:attr:`_called`); the first failure (named by workload and
        address), or None when all answered ok."""
        calls = await changes.online_params(cluster, loaded.constraints, loaded.files, changed,
                                            self.analyses)
        if isinstance(calls, load.Refusal):
            return f"{calls.reason}: {calls.message}"
        return await self._send(loaded, cluster, calls)

    async def _send(self, loaded: Loaded, cluster: str,
                    calls: Mapping[str, Mapping[str, str]]) -> str | None:
        """``calls`` (file key -> parameters) to every reloader of every governed workload
        in ``cluster``, each once per config version; the first failure, or None."""
        caller = self.settings.caller
        if caller is None:
            return "no reloader client is configured in this control plane"
        secrets = [v for params in calls.values() for v in params.values()]
        done = _remember(self._called, (loaded.uid, loaded.version, cluster), set())
        for ref in await self._placed_workloads(loaded, cluster):
            for address in await self.view.reloaders(cluster, loaded.namespace, ref.service):
                for key, params in calls.items():
                    call = (ref.kind.value, ref.name, address, key)
                    if call in done:
                        continue  # called for this version already (a stale cache's replay)
                    where = f"{ref.kind.value} {ref.name} reloader {address} ({key})"
                    failure = await self._call(caller, loaded, address, key, params, where)
                    if failure is not None:
                        return redact(failure, secrets)
                    done.add(call)
                    log.info("reconfigure %s/%s: %s applied %s", loaded.namespace, loaded.name,
                             where, ", ".join(sorted(params)))
        return None

    async def _call(self, caller: OnlineUpgrade, loaded: Loaded, address: str, key: str,
                    params: Mapping[str, str], where: str) -> str | None:
        """One call through the outbound policy; why it failed, or None.

        A tenant writes the EndpointSlice, so its failures are told apart only as the
        policy's refusal, "unreachable" and what a reloader (a server our CA signed)
        answered: "connection refused", a TLS alert or a timeout would tell the tenant what
        listens at an address of the control plane's network. The log keeps the detail."""
        try:
            target = await self._permitted(address)
            answer = await caller(target, namespace=loaded.namespace,
                                  config_spec=loaded.spec.config_ref.name, config_file=key,
                                  params=params, timeout=self.settings.call_timeout)
        except CallerNotReady as exc:
            return f"ReloaderFailed: {where}: {exc}"
        except Exception as exc:  # any failure of the call fails the cluster
            log.warning("reconfigure %s/%s: %s: %s", loaded.namespace, loaded.name, where,
                        exc)
            return f"ReloaderFailed: {where}: {egress.tenant_message(exc)}"
        if not answer.ok:
            return f"ReloaderFailed: {where}: {answer.message}"
        return None

    async def _permitted(self, address: str) -> str:
        """``address`` (an EndpointSlice's ``host:port``) as the ``ip:port`` to dial, once
        the outbound policy permits every address the host resolves to."""
        host, _, port = address.rpartition(":")
        resolved = await self.settings.egress.resolve(host.strip("[]"), int(port))
        first = resolved[0]
        return f"[{first}]:{port}" if ":" in first else f"{first}:{port}"

    # -- write ----------------------------------------------------------------------------

    async def _write(self, policy: ReadOnly, current: Rollout,
                     loaded: Loaded | None) -> Result | None:
        now = self.view.now()
        before = policy.get("status") or {}
        wanted = rollout.to_status(current, before, now)
        if not rollout.same(before, wanted):
            meta = policy["metadata"]
            try:
                await self.writer.policy_status(str(meta.get("namespace") or ""),
                                                str(meta["name"]),
                                                rollout.patch(before, wanted),
                                                meta.get("resourceVersion"))
            except ApiError as exc:
                if exc.status != 409:
                    raise
                # Our cache is behind our own last write: read again shortly.
                log.debug("reconfigure %s: stale status, retrying: %s", meta["name"], exc)
                return Result(requeue_after=self.settings.poll_interval / 4)
            if current.phase != (before.get("phase") or ""):
                log.info("reconfigure %s/%s: %s (config version %s)",
                         meta.get("namespace"), meta["name"], current.phase, current.version)
        return self._requeue(current, loaded)

    def _requeue(self, current: Rollout, loaded: Loaded | None) -> Result | None:
        updating = [c for c in current.clusters if c.state == rollout.UPDATING]
        if loaded is None or current.refusal is not None or not updating:
            return None
        deadline = loaded.spec.progress_deadline_seconds
        left = min(rollout.seconds_left(c, self.view.now(), deadline) for c in updating)
        return Result(requeue_after=max(0.05, min(self.settings.poll_interval, left + 0.01)))


def _remember(memory: collections.OrderedDict[Any, Any], key: Any, value: Any) -> Any:
    """``memory[key]`` (set to ``value`` when absent), most recent last, at most
    :data:`MEMORY` kept."""
    if key not in memory:
        memory[key] = value
    memory.move_to_end(key)
    while len(memory) > MEMORY:
        memory.popitem(last=False)
    return memory[key]


def _inputs(loaded: Loaded, copies: Mapping[str, ReadOnly | None]) -> str:
    """What a plan is computed from, as one digest: the policy generation, the hub's
    content, each constraint and each member copy (by resourceVersion: the cache's objects
    change only through new versions)."""
    parts = {
        "generation": loaded.generation, "version": loaded.version,
        "constraints": {key: c.model_dump(mode="json", by_alias=True)
                        for key, c in loaded.constraints.items()},
        "copies": {name: _copy_version(copy) for name, copy in copies.items()},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _copy_version(copy: ReadOnly | None) -> str | None:
    if copy is None:
        return None
    # The resourceVersion when there is one (cheap); the content's digest otherwise.
    found = (copy.get("metadata") or {}).get("resourceVersion")
    return f"rv:{found}" if found else hub_api.config_version(copy)


def restart_wait(live: Mapping[str, Any] | None, version: str) -> str | None:
    """What a restarted workload still lacks (None: restarted with ``version`` and ready)."""
    if live is None:
        return "its copy to appear"
    spec = _map(live, "spec")
    annotations = _map(_map(_map(spec, "template"), "metadata"), "annotations")
    if annotations.get(hub_api.CONFIG_VERSION_ANNOTATION) != version:
        return f"the pod template stamp {hub_api.CONFIG_VERSION_ANNOTATION}={version}"
    status = _map(live, "status")
    if _int(status.get("observedGeneration")) < _int(_map(live, "metadata").get("generation")):
        return "the new generation to be observed"
    # kubectl rollout status's checks: every replica updated, no old one left, every
    # updated one available (ready, for kinds that report no availability).
    replicas = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1
    updated = _int(status.get("updatedReplicas"))
    available = _int(status.get("availableReplicas", status.get("readyReplicas")))
    if updated < replicas:
        return f"{updated}/{replicas} replicas updated"
    if _int(status.get("replicas")) > updated:
        return f"{_int(status.get('replicas')) - updated} old replicas to go"
    if min(available, _int(status.get("readyReplicas"))) < updated:
        return f"{min(available, _int(status.get('readyReplicas')))}/{updated} updated " \
               "replicas ready"
    return None


def _map(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def redact(text: str, values: Sequence[str]) -> str:
    """``text`` with every value we sent replaced where it stands as a word of its own (a
    reloader's output may echo them; ``1`` in ``member1`` is left alone)."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", "<redacted>",
                      text)
    return text[:512]
