"""Transformers: configuration rollouts (ReconfigurePolicy), the propagation side.

A ReconfigurePolicy (:mod:`federation.hub.rollouts`) ties a ConfigMap or Secret to
the workloads that mount it; the rollout controller decides, cluster by cluster, when a
new version of the config may go out, and writes that decision to the policy's status.
Propagation stays the one writer of member copies and only obeys two fields of it:

- :func:`hold_config` (after the copies are planned): the update of a governed
  ConfigMap/Secret copy in a cluster is turned into nothing while the config's version
  (:func:`~federation.hub.rollouts.config_version` of the hub object) is not the
  cluster's ``releasedVersion``: the old content stays until that cluster's turn. A
  cluster with no copy yet gets one at once (a first copy reconfigures nothing), and
  deletes (a cluster left, the template deleted) are never held. The same holds for a
  governed ConfigMap/Secret a workload carries with ``propagateDeps``, so the carrier is
  no way around the rollout. The binding says which copies are held by which policy
  (``spec.configHeld``), and the Applied condition does not claim them.
- :func:`stamp_restarts` (before the copies are compared): a governed Deployment or
  StatefulSet gets, in each cluster whose ``restartVersion`` is set, the pod-template
  annotation :data:`~federation.hub.rollouts.CONFIG_VERSION_ANNOTATION` with that
  value, so that changing it restarts the workload in that cluster only.

Only a policy of the template's own namespace counts: a policy's references are bare
names resolved in its own namespace, so a policy in namespace B naming A's ConfigMap's
name governs B's ConfigMap of that name, never A's. Cluster-scoped templates are never
governed. Of several policies naming one object, the oldest governs
(:func:`~federation.hub.rollouts.governing`); a spec that does not parse governs
nothing (the rollout controller's condition says why).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import JSON, Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests, rollouts
from federation.hub.dependencies import KINDS as DEPENDENCY_KINDS

FIELD = "configHeld"
"""The binding spec field listing the held copies: ``[{cluster, kind, name, policy}]``."""


async def stamp_restarts(ctx: TransformContext, build: Build) -> Verdict | None:
    """The restart stamp on a governed workload's rendered copies (see the module doc)."""
    if build.namespace is None or build.resource.group != "apps" or \
            build.resource.kind not in rollouts.WORKLOAD_KINDS:
        return None
    policies = await ctx.list(rollouts.RECONFIGURE_POLICIES, build.namespace)
    policy = rollouts.governing(policies, build.resource.kind, build.name)
    if policy is None:
        return None
    for cluster, desired in build.desired.items():
        version = rollouts.restart_version(policy, cluster)
        if version is not None:
            build.desired[cluster] = stamped(desired, version, build.uid)
    return None


def stamped(desired: JSON, version: str, uid: str) -> JSON:
    """``desired`` with the pod template's config-version annotation set to ``version``.
    Copy-on-write along the path: the rest of the pod template may be shared with the
    cached template (see :func:`federation.hub.manifests.render`); ``desired``
    itself is not changed. Marked again, so the applied hash covers the stamp and a
    changed stamp is a write."""
    spec = dict(desired.get("spec") or {})
    pod = dict(spec.get("template") or {})
    meta = dict(pod.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           rollouts.CONFIG_VERSION_ANNOTATION: version}
    pod["metadata"] = meta
    spec["template"] = pod
    own = desired.get("metadata") or {}  # mark changes its maps: ours, not desired's
    top = {**own, "labels": dict(own.get("labels") or {}),
           "annotations": dict(own.get("annotations") or {})}
    return manifests.mark({**desired, "metadata": top, "spec": spec}, uid)


async def hold_config(ctx: TransformContext, build: Build) -> Verdict | None:
    """Governed config updates not released in their cluster become nothing."""
    held: list[JSON] = []
    if build.namespace is not None:
        policies: list[ReadOnly] | None = None
        for vertex in list(build.dag):
            if not _config_update(vertex, build.namespace):
                continue
            if policies is None:  # listed only when some config copy is to be updated
                policies = await ctx.list(rollouts.RECONFIGURE_POLICIES, build.namespace)
            entry = await _hold(ctx, build, vertex, policies)
            if entry is not None:
                held.append(entry)
    build.record[FIELD] = sorted(held, key=_entry_order) or None
    return None


def _config_update(vertex: plan.Vertex, namespace: str) -> bool:
    obj = vertex.obj
    return vertex.action in (plan.Action.UPDATE, plan.Action.APPLY) and \
        obj.get("apiVersion") == "v1" and \
        obj.get("kind") in rollouts.CONFIG_KINDS and \
        (obj.get("metadata") or {}).get("namespace") == namespace


async def _hold(ctx: TransformContext, build: Build, vertex: plan.Vertex,
                policies: list[ReadOnly]) -> JSON | None:
    """Turn ``vertex`` into nothing when its policy has not released the hub object's
    version in its cluster; the record entry saying so, else None."""
    kind = str(vertex.obj["kind"])
    name = str(vertex.obj["metadata"]["name"])
    policy = rollouts.governing(policies, kind, name)
    if policy is None:
        return None
    source = await _hub_object(ctx, build, kind, name)
    if source is None:
        return None  # a carried dependency gone from the hub since: its carrier requeues
    version = rollouts.config_version(source)
    if rollouts.released_version(policy, vertex.cluster) == version:
        return None
    policy_name = str(policy["metadata"]["name"])
    build.dag.vertices[vertex.key] = dataclasses.replace(
        vertex, action=plan.Action.NOOP,
        reason=f"held by ReconfigurePolicy {policy_name}: version {version} not released "
               f"in {vertex.cluster}")
    return {"cluster": vertex.cluster, "kind": kind, "name": name, "policy": policy_name}


async def _hub_object(ctx: TransformContext, build: Build, kind: str,
                      name: str) -> Mapping[str, Any] | None:
    if build.resource.group == "" and build.resource.kind == kind and build.name == name:
        return build.template
    return await ctx.get(DEPENDENCY_KINDS[kind], name, build.namespace, ctx.hub)


def _entry_order(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(entry["cluster"]), str(entry["kind"]), str(entry["name"])


def held_clusters(build: Build) -> dict[str, str]:
    """Clusters where a copy is held this round, with the policy (for the conditions)."""
    return {str(e["cluster"]): str(e["policy"]) for e in build.record.get(FIELD) or []}
