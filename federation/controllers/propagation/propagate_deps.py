"""Transformer: ``propagateDeps``, Karmada's dependencies distributor.

A workload whose policy says ``propagateDeps: true`` takes along the ConfigMaps,
Secrets, ServiceAccounts and PersistentVolumeClaims its pod template names (as
Karmada's default interpreter reads them: volumes, projected sources, env and envFrom
of every container, init and ephemeral ones included, imagePullSecrets, the service
account other than ``default``, claims other than a StatefulSet's own
volumeClaimTemplates; an Ingress its TLS Secrets) to the same clusters. Each is copied
like a template (hub-only fields dropped, the policy's override policies applied, our
marks with the dependency's own UID, so two workloads sharing a ConfigMap write the
same copy once). The binding records what was carried (``spec.dependencies``); a
dependency no longer named, or on a cluster the workload left, is deleted there unless
another binding of the namespace still carries it there or its own policy places it
there. One named but missing on the hub is recorded apart (``spec.awaitedDependencies``),
so its creation requeues the workload (:class:`Dependents`); no deletion reads that list.

A kind a ``ResourceInterpreterCustomization`` scripts InterpretDependency for (any
kind: a CloneSet, a Flink job...) takes along what the script names instead
(:func:`scripted_references`); the script reads the tenant's object, so its answer is
held to the same rules: v1 ConfigMaps, Secrets, ServiceAccounts and PVCs of the workload's
own namespace, each by name (another namespace, another kind or a label selector is
refused by name), then the deny list as below.

A reference can only ever mean an object of the workload's own namespace: a pod
template has no field naming another namespace, the namespace is never read from the
reference, and a name that is not a valid object name is refused (it could not name
an object and must not reach a URL). A dependency on the deny list (a service account
token, a Secret of ``kube-system``) stops the template with ``DependencyDenied``: it is
never written, and the workload is not propagated without it. So does a Secret of a
namespace the control plane may not read (no RoleBinding grants it:
:mod:`federation.controllers.kit.secrets`), with ``DependencyNotReadable``; it is recorded as
awaited, so the namespace's grant requeues the workload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError
from federation.contexts.scoped import NotGranted
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.kit.copies import copy_vertex, release_vertex
from federation.controllers.propagation import customized
from federation.controllers.propagation.build import JSON, Build, policy_ref
from federation.controllers.propagation.context import TransformContext
from federation.controllers.propagation.lookups import (
    denied_by,
    load_overrides,
    stop_if_invalid_selects,
)
from federation.hub import api, bindings, manifests, overrides
from federation.hub.dependencies import (
    AWAITED,
    KINDS,
    Ref,
    awaited,
    carried_by_another,
    dependencies,
    own_record,
    owned_clusters,
    valid_name,
)
from federation.interpreter import declarative
from federation.interpreter.customizations import Operation
from federation.placement import resources as resources_

_POD_SPEC = {"Pod": ("spec",), "Deployment": ("spec", "template", "spec"),
             "ReplicaSet": ("spec", "template", "spec"),
             "DaemonSet": ("spec", "template", "spec"),
             "StatefulSet": ("spec", "template", "spec"), "Job": ("spec", "template", "spec"),
             "CronJob": ("spec", "jobTemplate", "spec", "template", "spec")}
_WORKLOAD_GROUPS = {"Pod": "", "Deployment": "apps", "ReplicaSet": "apps", "DaemonSet": "apps",
                    "StatefulSet": "apps", "Job": "batch", "CronJob": "batch"}
_SECRET_VOLUMES = ("azureFile", "cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi",
                   "storageos")
"""Volume sources with a secretRef (azureFile names it secretName)."""


def references(template: Mapping[str, Any]) -> set[Ref]:
    """What ``template`` depends on, as Karmada's default interpreter reads it."""
    kind = str(template.get("kind"))
    group = str(template.get("apiVersion") or "").rpartition("/")[0]
    if kind == "Ingress" and group == "networking.k8s.io":
        tls = (template.get("spec") or {}).get("tls") or []
        return {Ref("Secret", str(t["secretName"])) for t in _dicts(tls)
                if t.get("secretName")}
    if kind not in _POD_SPEC or _WORKLOAD_GROUPS[kind] != group:
        return set()
    spec: Any = template
    for key in _POD_SPEC[kind]:
        spec = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return set()
    found = set(_pod_refs(spec))
    if kind == "StatefulSet":
        own = {str((c.get("metadata") or {}).get("name")) for c in
               _dicts((template.get("spec") or {}).get("volumeClaimTemplates"))}
        found = {r for r in found if not (r.kind == "PersistentVolumeClaim" and r.name in own)}
    return found


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _pod_refs(spec: Mapping[str, Any]) -> Iterator[Ref]:
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account and account != "default":
        yield Ref("ServiceAccount", str(account))
    for pull in _dicts(spec.get("imagePullSecrets")):
        if pull.get("name"):
            yield Ref("Secret", str(pull["name"]))
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in _dicts(spec.get(field)):
            yield from _container_refs(container)
    for volume in _dicts(spec.get("volumes")):
        yield from _volume_refs(volume)


def _container_refs(container: Mapping[str, Any]) -> Iterator[Ref]:
    for source in _dicts(container.get("envFrom")):
        for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            ref = source.get(key)
            if isinstance(ref, dict) and ref.get("name"):
                yield Ref(kind, str(ref["name"]))
    for env in _dicts(container.get("env")):
        value_from = env.get("valueFrom")
        if not isinstance(value_from, dict):
            continue
        for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
            ref = value_from.get(key)
            if isinstance(ref, dict) and ref.get("name"):
                yield Ref(kind, str(ref["name"]))


def _volume_refs(volume: Mapping[str, Any]) -> Iterator[Ref]:
    config_map = volume.get("configMap")
    if isinstance(config_map, dict) and config_map.get("name"):
        yield Ref("ConfigMap", str(config_map["name"]))
    secret = volume.get("secret")
    if isinstance(secret, dict) and secret.get("secretName"):
        yield Ref("Secret", str(secret["secretName"]))
    claim = volume.get("persistentVolumeClaim")
    if isinstance(claim, dict) and claim.get("claimName"):
        yield Ref("PersistentVolumeClaim", str(claim["claimName"]))
    projected = volume.get("projected")
    for source in _dicts(projected.get("sources") if isinstance(projected, dict) else None):
        for key, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
            ref = source.get(key)
            if isinstance(ref, dict) and ref.get("name"):
                yield Ref(kind, str(ref["name"]))
    for key in _SECRET_VOLUMES:
        plugin = volume.get(key)
        if not isinstance(plugin, dict):
            continue
        secret_ref = plugin.get("secretRef")
        name = plugin.get("secretName") if key == "azureFile" else \
            secret_ref.get("name") if isinstance(secret_ref, dict) else None
        if name:
            yield Ref("Secret", str(name))
    csi = volume.get("csi")
    publish = csi.get("nodePublishSecretRef") if isinstance(csi, dict) else None
    if isinstance(publish, dict) and publish.get("name"):
        yield Ref("Secret", str(publish["name"]))


# -- a customization's InterpretDependency ---------------------------------------------------


async def scripted_references(ctx: TransformContext, template: Mapping[str, Any],
                              namespace: str) -> set[Ref] | None:
    """What ``template`` depends on by its customization's InterpretDependency (Karmada's
    rule: every customization of the kind that scripts it, united), None when none does
    (the built-in :func:`references` decides). The tenant rules of the built-in hold:
    a reference is of the workload's own namespace and of a kind propagateDeps carries;
    any other is refused by name, never followed, whatever the script (which reads the
    tenant's object) returned."""
    found = await customized.ask(ctx, Operation.INTERPRET_DEPENDENCY, declarative.Arguments(
        desired=customized.as_json(template)), template)
    if found is None:
        return None
    return {_ref(dependency, namespace) for dependency in found["dependencies"]}


def _ref(dependency: Mapping[str, Any], namespace: str) -> Ref:
    kind = str(dependency.get("kind"))
    what = f"InterpretDependency: dependency {kind} {str(dependency.get('name'))[:64]!r}"
    if dependency.get("namespace") not in (None, "", namespace):
        raise Problem("Applied", "DependencyDenied",
                      f"{what} is in namespace {str(dependency['namespace'])[:64]!r}: a "
                      f"dependency is always of the workload's own namespace ({namespace})")
    if dependency.get("apiVersion") != "v1" or kind not in KINDS:
        raise Problem("Applied", "InvalidDependency",
                      f"{what} of {str(dependency.get('apiVersion'))[:64]}: propagateDeps "
                      f"carries only v1 {', '.join(sorted(KINDS))}")
    if "labelSelector" in dependency:
        raise Problem("Applied", "InvalidDependency",
                      f"{what}: a labelSelector dependency is not supported; name each one")
    return Ref(kind, str(dependency.get("name")))  # its name is checked as every name is


# -- the transformer ------------------------------------------------------------------------


async def propagate_deps(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    wanted: list[Ref] = []
    if build.policy.spec.propagate_deps and build.namespace:
        scripted = await scripted_references(ctx, build.template, build.namespace)
        wanted = sorted(scripted if scripted is not None else references(build.template))
        for ref in wanted:
            if not valid_name(ref.name):
                raise Problem("Applied", "InvalidDependency",
                              f"{ref.kind} name {ref.name[:64]!r} is not a valid object name")
    carried: list[str] = []
    awaited: list[str] = []
    chosen, invalid = await load_overrides(ctx, build.namespace) if wanted else ([], [])
    for ref in wanted:
        whole = ctx.deny_list.kind_rule("", ref.kind)
        if whole is not None:  # a kind denied whole is never read, not even on the hub
            raise Problem("Applied", "DependencyDenied",
                          f"{policy_ref(build.policy)}: dependency {ref} is on the propagation "
                          f"deny list ({whole}); the workload is not propagated without it")
        try:
            source = await ctx.get(KINDS[ref.kind], ref.name, build.namespace, ctx.hub)
        except NotGranted as exc:
            build.record[AWAITED] = [*awaited, str(ref)]  # a grant requeues the workload
            raise Problem("Applied", "DependencyNotReadable",
                          f"{policy_ref(build.policy)}: dependency {ref}: {exc}; the workload "
                          "is not propagated without it") from None
        if source is None:
            _explain(build, f"propagateDeps: {ref} not found in {build.namespace}; carried "
                            "once it exists")
            awaited.append(str(ref))
            continue
        rule = await denied_by(ctx, source)
        if rule is not None:
            raise Problem("Applied", "DependencyDenied",
                          f"{policy_ref(build.policy)}: dependency {ref} is on the propagation "
                          f"deny list ({rule}); the workload is not propagated without it")
        stop_if_invalid_selects(invalid, resources_.from_manifest(source))
        carried.append(str(ref))
        await _plan_copies(ctx, build, ref, source, chosen)
    build.record["dependencies"] = carried or None
    # Apart from the carried ones: a name never copied must never look like ours to delete.
    build.record[AWAITED] = awaited or None
    await _plan_removals(ctx, build, {r for r in wanted if str(r) in carried})
    return None


def _explain(build: Build, line: str) -> None:
    """A line for the binding's explanation (placement has written it already)."""
    if build.decision is not None:
        build.decision = dataclasses.replace(
            build.decision, explanation=(*build.decision.explanation, line))


async def _plan_copies(ctx: TransformContext, build: Build, ref: Ref, source: ReadOnly,
                       policies: list[overrides.OverridePolicy]) -> None:
    assert build.policy is not None
    overwrite = build.policy.spec.conflict_resolution == "Overwrite"
    try:
        own = owned_clusters(await _own_record(ctx, ref, build.namespace))
    except bindings.BindingError:
        own = set()  # its own reconcile is stopped by it: the carrier writes the copy
    chosen = overrides.applicable(policies, resources_.from_manifest(source))
    by_name = {c.name: c for c in build.clusters}
    uid = str(source["metadata"].get("uid") or "")
    for cluster, workload in build.desired.items():
        if cluster in build.unreachable or cluster in own:
            continue  # its own policy places it there: its own reconcile writes it
        try:
            manifest = overrides.apply_all(manifests.render(source, None, False),
                                           by_name[cluster], chosen).manifest
            live = await ctx.copy(KINDS[ref.kind], cluster, ref.name, build.namespace)
        except overrides.OverrideError as exc:
            raise Problem("Applied", "OverrideFailed", f"{cluster}: {ref}: {exc}") from None
        except ClientError as exc:
            build.note_unreachable(cluster, exc)
            continue
        vertex = copy_vertex(cluster, manifests.mark(manifest, uid), live, overwrite,
                             expect=plan.Identity.of(source))
        if vertex is None:
            assert live is not None
            found = f"dependency {ref} exists and {manifests.placer(live)} (set " \
                "conflictResolution: Overwrite in the policy to take it over)"
            before = build.conflicts.get(cluster)
            build.conflicts[cluster] = f"{before}; {found}" if before else found
            continue
        added = build.dag.add(vertex)
        for other in list(build.dag):
            if other.cluster == cluster and other.obj.get("kind") == "Namespace":
                build.dag.depend(added, on=other)
        workload_vertex = build.dag.vertices.get(plan.vertex_key(cluster, workload))
        if workload_vertex is not None:
            build.dag.depend(workload_vertex, on=added)  # mounts exist before pods start


async def _plan_removals(ctx: TransformContext, build: Build, now: set[Ref]) -> None:
    """Delete what the last round carried and this one does not (a dependency no longer
    named, or a cluster the workload left), unless still carried there by another."""
    before = dependencies(build.own_record)
    holders = set(build.previous) | set(build.pending_before)
    for ref in before:
        for cluster in sorted(holders):
            if ref in now and cluster in build.desired:
                continue
            vertex = await removal_vertex(ctx, ref, build.namespace, cluster,
                                          records_name(build))
            if vertex is not None:
                build.dag.add(vertex)


def records_name(build: Build) -> str:
    return bindings.binding_name(build.name, build.resource.kind)


async def removal_vertex(ctx: TransformContext, ref: Ref, namespace: str | None, cluster: str,
                         carrier: str, strict: bool = False, release: bool = False
                         ) -> plan.Vertex | None:
    """The delete of dependency ``ref``'s copy in ``cluster`` (its release, our marks
    removed, when ``release``: a preserved workload's deletion), or None when it stays:
    not ours, not there, carried there by another binding, or placed there by its own
    policy. A member that cannot be read gives None too (the workload's copy, read next,
    records the cluster as pending), unless ``strict``: then its error is raised."""
    if namespace is None or cluster not in {m.name for m in ctx.members()}:
        return None
    if await _kept_there(ctx, ref, namespace, cluster, carrier):
        return None
    try:
        live = await ctx.copy(KINDS[ref.kind], cluster, ref.name, namespace)
    except ClientError:
        if strict:
            raise
        return None  # retried with the workload's next reconcile; its copy is what counts
    if live is None or not manifests.is_propagated(live):
        return None
    if release:
        return release_vertex(cluster, live, what=f"dependency {ref}")
    return plan.Vertex(cluster, plan.Action.DELETE, plan.reference(live),
                       reason=f"dependency {ref} not needed")


async def _kept_there(ctx: TransformContext, ref: Ref, namespace: str, cluster: str,
                      carrier: str) -> bool:
    """Whether ``ref``'s copy in ``cluster`` stays for someone else: its own policy places
    it there, or another binding of the namespace carries it there. A binding that cannot
    be read keeps it too (nothing is deleted on the word of a record nobody can read)."""
    try:
        if cluster in owned_clusters(await _own_record(ctx, ref, namespace)):
            return True
    except bindings.BindingError:
        return True
    return carried_by_another(ref, cluster, await ctx.list(api.RESOURCE_BINDINGS, namespace),
                              carrier)


async def _own_record(ctx: TransformContext, ref: Ref, namespace: str | None
                      ) -> bindings.BindingRecord | None:
    """The record of the dependency's own binding (its own policy placing it), if any;
    raises :class:`~federation.hub.bindings.BindingError` when it cannot be read."""
    found = await ctx.get(api.RESOURCE_BINDINGS, bindings.binding_name(ref.name, ref.kind),
                          namespace, ctx.hub)
    return own_record(ref, found)


# -- who carries what (for the wiring) ---------------------------------------------------------


class Dependents:
    """Which templates carry which dependency, from the bindings' ``spec.dependencies``,
    and which await one, from their ``spec.awaitedDependencies``: a changed ConfigMap
    (Secret, ...) on the hub requeues the workloads that carry it, as Karmada's
    distributor does, and one that appears the workloads waiting for it. Fed binding
    events; kept in memory, rebuilt at start from the bindings' first list."""

    def __init__(self) -> None:
        self._by_binding: dict[tuple[str, str], tuple[JSON, set[Ref], set[Ref]]] = {}
        self._index: dict[tuple[str, Ref], set[tuple[str, str]]] = {}

    def binding_changed(self, binding: Mapping[str, Any], deleted: bool) -> None:
        meta = binding.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name")))
        _, carried, waiting = self._by_binding.pop(key, ({}, set(), set()))
        for ref in carried | waiting:
            self._index.get((key[0], ref), set()).discard(key)
        record = None if deleted else bindings.read(binding)
        carried = set(dependencies(record))  # an unreadable one: nothing (it carries nothing)
        waiting = set(awaited(record))
        if record is not None and (carried or waiting):
            target = record.resource.to_obj()
            self._by_binding[key] = (target, carried, waiting)
            for ref in carried | waiting:
                self._index.setdefault((key[0], ref), set()).add(key)

    def carriers(self, namespace: str, kind: str, name: str, awaiting: bool = False
                 ) -> list[JSON]:
        """The ``spec.resource`` of each template that carries ``kind/name`` in
        ``namespace`` (and, with ``awaiting``, of each that waits for it to exist)."""
        ref = Ref.parse(f"{kind}/{name}")
        if ref is None:
            return []
        found = []
        for key in sorted(self._index.get((namespace, ref), set())):
            target, carried, waiting = self._by_binding[key]
            if ref in carried or (awaiting and ref in waiting):
                found.append(target)
        return found
