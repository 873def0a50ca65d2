"""The built-in interpreter: Karmada's default semantics for the core kinds, written here.

Each operation is a table from kind to function; a kind missing from an operation's table
is not interpreted by it (the caller falls back: no replicas, healthy unknown, no
dependencies, status as is). Objects are plain JSON dicts and are never changed in place:
``revise_replica`` and ``retain`` return new objects.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.interpreter import pods

JSON = dict[str, Any]

RETAIN_REPLICAS_LABEL = "resourcetemplate.karmada.io/retain-replicas"
"""On a template (so on its copies): the members own ``spec.replicas`` (an HPA scales it)."""
RETAIN_REPLICAS_VALUE = "true"

_WORKLOADS = ("Deployment", "StatefulSet", "ReplicaSet")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


# --- InterpretReplica -------------------------------------------------------------------

def _workload_replicas(obj: Mapping[str, Any]) -> tuple[int, JSON | None]:
    spec = _map(obj.get("spec"))
    replicas = spec.get("replicas", 1)
    return _int(replicas), pods.requirements(_map(spec.get("template")))


def _job_replicas(obj: Mapping[str, Any]) -> tuple[int, JSON | None]:
    spec = _map(obj.get("spec"))
    parallelism = spec.get("parallelism", 1)
    # A Job that needs fewer completions than its parallelism runs only that many pods.
    completions = spec.get("completions")
    replicas = _int(parallelism)
    if isinstance(completions, int) and completions < replicas:
        replicas = completions
    return replicas, pods.requirements(_map(spec.get("template")))


def _pod_replicas(obj: Mapping[str, Any]) -> tuple[int, JSON | None]:
    return 1, pods.requirements(obj)


REPLICAS: dict[str, Callable[[Mapping[str, Any]], tuple[int, JSON | None]]] = {
    **dict.fromkeys(_WORKLOADS, _workload_replicas), "Job": _job_replicas, "Pod": _pod_replicas}


# --- ReviseReplica ----------------------------------------------------------------------

def _revised(field: str) -> Callable[[Mapping[str, Any], int], JSON]:
    def revise(obj: Mapping[str, Any], replicas: int) -> JSON:
        result = dict(obj)
        result["spec"] = {**_map(obj.get("spec")), field: replicas}
        return result
    return revise


REVISE: dict[str, Callable[[Mapping[str, Any], int], JSON]] = {
    **dict.fromkeys(_WORKLOADS, _revised("replicas")), "Job": _revised("parallelism")}


# --- Retain -----------------------------------------------------------------------------

def _retain_workload_replicas(desired: JSON, observed: Mapping[str, Any]) -> None:
    labels = _map(_map(desired.get("metadata")).get("labels"))
    if labels.get(RETAIN_REPLICAS_LABEL) != RETAIN_REPLICAS_VALUE:
        return
    replicas = _map(observed.get("spec")).get("replicas")
    if isinstance(replicas, int):
        desired.setdefault("spec", {})["replicas"] = replicas


def _retain_service(desired: JSON, observed: Mapping[str, Any]) -> None:
    spec, live = desired.get("spec"), _map(observed.get("spec"))
    if not isinstance(spec, dict):
        return
    for key in ("clusterIP", "clusterIPs", "healthCheckNodePort"):
        if key in live and not spec.get(key):
            spec[key] = copy.deepcopy(live[key])
    live_ports = {(p.get("port"), p.get("protocol", "TCP")): p
                  for p in live.get("ports") or [] if isinstance(p, Mapping)}
    for port in spec.get("ports") or []:
        match = live_ports.get((port.get("port"), port.get("protocol", "TCP")))
        if match and match.get("nodePort") and not port.get("nodePort"):
            port["nodePort"] = match["nodePort"]


def _retain_service_account(desired: JSON, observed: Mapping[str, Any]) -> None:
    if observed.get("secrets"):
        desired["secrets"] = copy.deepcopy(observed["secrets"])


def _retain_pvc(desired: JSON, observed: Mapping[str, Any]) -> None:
    volume = _map(observed.get("spec")).get("volumeName")
    if volume:
        desired.setdefault("spec", {})["volumeName"] = volume


def _retain_pv(desired: JSON, observed: Mapping[str, Any]) -> None:
    claim = _map(observed.get("spec")).get("claimRef")
    if claim is not None:
        desired.setdefault("spec", {})["claimRef"] = copy.deepcopy(claim)


def _retain_job(desired: JSON, observed: Mapping[str, Any]) -> None:
    live = _map(observed.get("spec"))
    spec = desired.setdefault("spec", {})
    # Karmada keeps selector.matchLabels; the whole selector is immutable, so all of it.
    if isinstance(live.get("selector"), Mapping):
        spec["selector"] = copy.deepcopy(live["selector"])
    labels = _map(_map(live.get("template")).get("metadata")).get("labels")
    if isinstance(labels, Mapping):
        spec.setdefault("template", {}).setdefault("metadata", {})["labels"] = dict(labels)


def _retain_pod(desired: JSON, observed: Mapping[str, Any]) -> None:
    live = _map(observed.get("spec"))
    spec = desired.setdefault("spec", {})
    for key in ("nodeName", "serviceAccountName", "volumes"):
        if key in live:
            spec[key] = copy.deepcopy(live[key])
        else:
            spec.pop(key, None)
    for field in ("containers", "initContainers"):
        mounts = {c.get("name"): c.get("volumeMounts") for c in live.get(field) or []
                  if isinstance(c, Mapping)}
        for container in spec.get(field) or []:
            if container.get("name") in mounts:
                container["volumeMounts"] = copy.deepcopy(mounts[container["name"]])


def _retain_token_secret(desired: JSON, observed: Mapping[str, Any]) -> None:
    if desired.get("type") == "kubernetes.io/service-account-token" and \
            isinstance(observed.get("data"), Mapping):
        desired["data"] = dict(observed["data"])


RETAIN: dict[str, Callable[[JSON, Mapping[str, Any]], None]] = {
    "Deployment": _retain_workload_replicas, "Service": _retain_service,
    "ServiceAccount": _retain_service_account, "PersistentVolumeClaim": _retain_pvc,
    "PersistentVolume": _retain_pv, "Job": _retain_job, "Pod": _retain_pod,
    "Secret": _retain_token_secret,
    # Karmada retains replicas for Deployments only; ours is every replicated workload, so
    # an HPA on a StatefulSet copy is not fought either.
    "StatefulSet": _retain_workload_replicas, "ReplicaSet": _retain_workload_replicas}


def retain(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> JSON:
    """``desired`` with the fields the member owns taken from ``observed``: new spec and
    metadata maps, the rest shared with ``desired``."""
    keep = RETAIN.get(str(desired.get("kind")))
    result = dict(desired)
    if keep is None:
        return result
    for key in ("spec", "secrets", "data"):
        if key in result:
            result[key] = copy.deepcopy(result[key])
    keep(result, observed)
    return result


def retained_paths(desired: Mapping[str, Any]) -> tuple[str, ...]:
    """JSON pointers of fields :func:`retain` may take from a member for ``desired``'s kind
    (for messages and for comparisons that must ignore them)."""
    kind = desired.get("kind")
    labels = _map(_map(desired.get("metadata")).get("labels"))
    if kind in _WORKLOADS and labels.get(RETAIN_REPLICAS_LABEL) == RETAIN_REPLICAS_VALUE:
        return ("/spec/replicas",)
    return {"Service": ("/spec/clusterIP", "/spec/clusterIPs", "/spec/healthCheckNodePort"),
            "PersistentVolumeClaim": ("/spec/volumeName",),
            "Job": ("/spec/selector", "/spec/template/metadata/labels"),
            "ServiceAccount": ("/secrets",), "PersistentVolume": ("/spec/claimRef",),
            "Pod": ("/spec/nodeName", "/spec/serviceAccountName", "/spec/volumes",
                    "/spec/containers/*/volumeMounts", "/spec/initContainers/*/volumeMounts"),
            "Secret": ("/data",) if desired.get("type") == "kubernetes.io/service-account-token"
            else ()}.get(str(kind), ())


# --- InterpretHealth --------------------------------------------------------------------

def _generation_observed(obj: Mapping[str, Any]) -> bool:
    return bool(_map(obj.get("status")).get("observedGeneration") ==
                _map(obj.get("metadata")).get("generation"))


def _rollout_health(obj: Mapping[str, Any]) -> bool:
    status, spec = _map(obj.get("status")), _map(obj.get("spec"))
    if not _generation_observed(obj):
        return False
    updated = _int(status.get("updatedReplicas"))
    if "replicas" in spec and updated < _int(spec.get("replicas")):
        return False
    return _int(status.get("availableReplicas")) >= updated


def _replica_set_health(obj: Mapping[str, Any]) -> bool:
    status, spec = _map(obj.get("status")), _map(obj.get("spec"))
    if not _generation_observed(obj):
        return False
    return "replicas" not in spec or \
        _int(status.get("availableReplicas")) >= _int(spec.get("replicas"))


def _daemon_set_health(obj: Mapping[str, Any]) -> bool:
    status = _map(obj.get("status"))
    if not _generation_observed(obj):
        return False
    updated = _int(status.get("updatedNumberScheduled"))
    return updated >= _int(status.get("desiredNumberScheduled")) and \
        _int(status.get("numberAvailable")) >= updated


def _load_balanced(obj: Mapping[str, Any]) -> bool:
    ingress = _map(_map(obj.get("status")).get("loadBalancer")).get("ingress") or []
    return any(isinstance(i, Mapping) and (i.get("ip") or i.get("hostname")) for i in ingress)


def _service_health(obj: Mapping[str, Any]) -> bool:
    return _map(obj.get("spec")).get("type") != "LoadBalancer" or _load_balanced(obj)


def _pod_health(obj: Mapping[str, Any]) -> bool:
    status = _map(obj.get("status"))
    if status.get("phase") == "Succeeded":
        return True
    ready = [c for c in status.get("conditions") or []
             if isinstance(c, Mapping) and c.get("type") == "Ready"]
    return status.get("phase") == "Running" and bool(ready) and ready[0].get("status") == "True"


def _pdb_health(obj: Mapping[str, Any]) -> bool:
    status = _map(obj.get("status"))
    return _int(status.get("currentHealthy")) >= _int(status.get("desiredHealthy"))


HEALTH: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "Deployment": _rollout_health, "StatefulSet": _rollout_health,
    "ReplicaSet": _replica_set_health, "DaemonSet": _daemon_set_health,
    "Service": _service_health, "Ingress": _load_balanced,
    "PersistentVolumeClaim": lambda obj: _map(obj.get("status")).get("phase") == "Bound",
    "Pod": _pod_health, "PodDisruptionBudget": _pdb_health}


# --- InterpretDependency ----------------------------------------------------------------

def _template_dependencies(*path: str) -> Callable[[Mapping[str, Any]], list[JSON]]:
    def found(obj: Mapping[str, Any]) -> list[JSON]:
        template: Mapping[str, Any] = obj
        for key in path:
            template = _map(template.get(key))
        namespace = str(_map(obj.get("metadata")).get("namespace") or "default")
        return pods.dependencies(template, namespace)
    return found


DEPENDENCIES: dict[str, Callable[[Mapping[str, Any]], list[JSON]]] = {
    **dict.fromkeys(("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job"),
                    _template_dependencies("spec", "template")),
    "CronJob": _template_dependencies("spec", "jobTemplate", "spec", "template"),
    "Pod": _template_dependencies()}


# --- InterpretStatus (ReflectStatus) and AggregateStatus --------------------------------

_REFLECTED = {
    "Deployment": ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                   "unavailableReplicas", "observedGeneration"),
    "StatefulSet": ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas",
                    "availableReplicas", "observedGeneration"),
    "ReplicaSet": ("replicas", "readyReplicas", "availableReplicas", "observedGeneration"),
    "DaemonSet": ("currentNumberScheduled", "desiredNumberScheduled", "numberAvailable",
                  "numberMisscheduled", "numberReady", "updatedNumberScheduled",
                  "numberUnavailable", "observedGeneration"),
    "Job": ("active", "succeeded", "failed", "startTime", "completionTime", "conditions"),
}


def reflect_status(obj: Mapping[str, Any]) -> JSON | None:
    """The part of a member copy's status the hub keeps: the counters of the workload
    kinds, the whole status of any other kind (Karmada's default)."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    fields = _REFLECTED.get(str(obj.get("kind")))
    if fields is None:
        return dict(status)
    return {key: status[key] for key in fields if key in status}


_SUMMED = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
           "unavailableReplicas", "currentReplicas", "currentNumberScheduled",
           "desiredNumberScheduled", "numberAvailable", "numberMisscheduled", "numberReady",
           "updatedNumberScheduled", "numberUnavailable", "active", "succeeded", "failed")


def aggregate_status(obj: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> JSON:
    """The template with its status summed over the members' reflected statuses (for the
    workload kinds; other kinds keep their status)."""
    if obj.get("kind") not in _REFLECTED:
        return dict(obj)
    total: JSON = {}
    for item in items:
        for key, value in _map(item.get("status")).items():
            if key in _SUMMED and isinstance(value, int):
                total[key] = total.get(key, 0) + value
    generation = _map(obj.get("metadata")).get("generation")
    if generation is not None and all(
            _map(item.get("status")).get("observedGeneration") is not None for item in items):
        total["observedGeneration"] = generation
    return {**obj, "status": {**_map(obj.get("status")), **total}}
