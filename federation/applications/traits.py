"""vela-core's pod and scaling traits, rendered as their definitions render them
(vela-templates/definitions/internal/trait/<name>.cue), each a function of the rendered
objects like the traits of :mod:`.render`.

Parameters are read through :mod:`.shapes` (closed, defaults filled in, an unknown key
refused by its path). Each trait patches the workloads of the kinds its definition's
``appliesToWorkloads`` names and refuses a component that has none. Where a definition
declares a field that its template drops, or writes a field Kubernetes does not have,
the field is refused by name rather than accepted and lost:

- ``affinity``: a pod affinity term's ``namespace`` (no such field in Kubernetes'
  PodAffinityTerm: ``namespaces`` is);
- ``k8s-update-strategy``: a ``targetKind`` other than the workload's, a strategy its kind
  does not have (a Deployment's ``OnDelete``, a StatefulSet's or DaemonSet's
  ``Recreate``), a ``targetAPIVersion`` other than ``apps/v1``; a ``RollingUpdate``
  without ``rollingStrategy`` gets the definition's defaults (25%, 25%, partition 0);
- ``resource``: ``cpu`` without ``memory`` or the reverse (the definition renders
  neither alone), or either with ``requests``/``limits`` (which it uses instead);
- ``service-account``: ``privileges`` (Roles and bindings are RBAC objects, which no
  Application writes: the deny list, docs/propagation.md);
- ``startup-probe``: ``probes[]`` entries need a ``containerName``.

``securitycontext`` may ask for ``privileged`` or added capabilities, as a ``k8s-objects``
Deployment always could: the member's Pod Security admission decides (as for hostPath).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.applications import pods, shapes
from federation.applications.model import AppError, Component, Trait
from federation.applications.shapes import LABEL_SELECTOR, Default, Either, Enum

JSON = dict[str, Any]
TraitFn = Callable[[list[JSON], Trait, Component, str, str], list[JSON]]

POD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
"""The ``appliesToWorkloads`` of most pod traits: deployments, statefulsets, daemonsets and
jobs (a CronJob's pod is deeper, under its job template)."""


def _trait_path(where: str) -> str:
    return where.removesuffix(".properties")


def workloads(objects: Sequence[JSON], trait: Trait, kinds: Sequence[str], where: str
              ) -> list[JSON]:
    found = [o for o in objects if o.get("kind") in kinds]
    if not found:
        raise AppError(f"{_trait_path(where)}: trait {trait.type!r} applies to "
                       f"{', '.join(kinds)}; the component renders none")
    return found


def sub(node: JSON, key: str, where: str, kind: type = dict) -> Any:
    """``node[key]``, made empty when absent; of another shape (a tenant's manifest may
    hold anything there) a refusal naming it rather than a TypeError."""
    value = node.setdefault(key, kind())
    if not isinstance(value, kind):
        raise AppError(f"{where}: the workload's {key} is not a "
                       f"{'map' if kind is dict else 'list'}")
    return value


def pod_of(workload: JSON, where: str = "trait") -> JSON:
    spec = sub(workload, "spec", where)
    if workload.get("kind") == "CronJob":
        spec = sub(sub(spec, "jobTemplate", where), "spec", where)
    return sub(sub(spec, "template", where), "spec", where)  # type: ignore[no-any-return]


def _container(pod: JSON, name: str, where: str) -> JSON:
    found = next((c for c in pod.get("containers") or [] if c.get("name") == name), None)
    if found is None:
        raise AppError(f"{where}.containerName: container {name} not found")
    return found  # type: ignore[no-any-return]


def _per_container(props: Mapping[str, Any], shape: JSON, main: str, where: str,
                   list_key: str = "containers") -> list[tuple[JSON, str, str]]:
    """KubeVela's ``#PatchParams`` or ``containers[]`` of them: (params, container, path);
    ``containerName`` "" means the component's container, and is required in a list."""
    if list_key not in props:
        params = shapes.check(props, shape, where)
        return [(params, params["containerName"] or main, where)]
    entries = shapes.check(props, {list_key: [shape]}, where)[list_key]
    out = []
    for index, params in enumerate(entries):
        here = f"{where}.{list_key}[{index}]"
        if not params["containerName"]:
            raise AppError(f"{here}.containerName: required in {list_key}")
        out.append((params, params["containerName"], here))
    return out


def pod_trait(kinds: Sequence[str], patch: Callable[[JSON, JSON, str, str], None],
              shape: Any = None) -> TraitFn:
    """A trait that checks its parameters (``shape``: once) and patches each pod."""
    def apply(objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]:
        params = shapes.check(trait.properties, shape, where) if shape is not None \
            else dict(trait.properties)
        for workload in workloads(objects, trait, kinds, where):
            patch(params, pod_of(workload, where), component.name, where)
        return objects
    return apply


# -- affinity --------------------------------------------------------------------------------

_POD_TERM = {"labelSelector?": LABEL_SELECTOR, "namespaces?": [str], "topologyKey": str,
             "namespaceSelector?": LABEL_SELECTOR}
_POD_AFFINITY = {"required?": [_POD_TERM], "preferred?": [
    {"weight": shapes.Range(1, 100), "podAffinityTerm": _POD_TERM}]}
_NODE_SELECTOR = {"key": str, "values?": [str], "operator": Default(
    Enum("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"), "In")}
_NODE_TERM = {"matchExpressions?": [_NODE_SELECTOR], "matchFields?": [_NODE_SELECTOR]}
AFFINITY = {
    "podAffinity?": _POD_AFFINITY, "podAntiAffinity?": _POD_AFFINITY,
    "nodeAffinity?": {"required?": {"nodeSelectorTerms": [_NODE_TERM]},
                      "preferred?": [{"weight": shapes.Range(1, 100), "preference": _NODE_TERM}]},
    "tolerations?": [{"key?": str, "operator": Default(Enum("Equal", "Exists"), "Equal"),
                      "value?": str, "effect?": Enum("NoSchedule", "PreferNoSchedule",
                                                     "NoExecute"),
                      "tolerationSeconds?": int}]}
_SCHEDULING = {"required": "requiredDuringSchedulingIgnoredDuringExecution",
               "preferred": "preferredDuringSchedulingIgnoredDuringExecution"}


def _no_term_namespace(props: Mapping[str, Any], where: str) -> None:
    for kind in ("podAffinity", "podAntiAffinity"):
        block = props.get(kind)
        if not isinstance(block, dict):
            continue
        terms = [(f"required[{i}]", t) for i, t in enumerate(block.get("required") or [])]
        terms += [(f"preferred[{i}].podAffinityTerm", (p or {}).get("podAffinityTerm"))
                  for i, p in enumerate(block.get("preferred") or []) if isinstance(p, dict)]
        for path, term in terms:
            if isinstance(term, dict) and "namespace" in term:
                raise AppError(f"{where}.{kind}.{path}.namespace: not supported (Kubernetes' "
                               "PodAffinityTerm has no such field: use namespaces)")


def affinity(params: JSON, pod: JSON, main: str, where: str) -> None:
    _no_term_namespace(params, where)
    params = shapes.check(params, AFFINITY, where)
    current = sub(pod, "affinity", where)
    for kind in ("podAffinity", "podAntiAffinity", "nodeAffinity"):
        if kind in params:
            block = {_SCHEDULING[k]: v for k, v in params[kind].items()}
            current[kind] = block
    if "tolerations" in params:
        pod["tolerations"] = params["tolerations"]
    if not current:
        pod.pop("affinity")


# -- container ports -------------------------------------------------------------------------

_PORTS = {"containerName": Default(str, ""), "ports": Default([{
    "containerPort": shapes.Range(1, 65535),
    "protocol": Default(Enum("TCP", "UDP", "SCTP"), "TCP"),
    "hostPort?": shapes.Range(1, 65535), "hostIP?": str}], [])}


def container_ports(params: JSON, pod: JSON, main: str, where: str) -> None:
    """Host ports of the container's ports (matched by protocol and number), and ports it
    did not have appended; the container's port names kept."""
    for chosen, name, here in _per_container(params, _PORTS, main, where):
        container = _container(pod, name, here)
        wanted = {(p["protocol"], p["containerPort"]): p for p in chosen["ports"]}
        ports = []
        for base in sub(container, "ports", here, list):
            if not isinstance(base, dict):
                raise AppError(f"{here}: the container's ports are not maps")
            key = (base.get("protocol", "TCP"), base.get("containerPort"))
            port = {k: base[k] for k in ("containerPort", "protocol", "name") if k in base}
            port.update({k: v for k, v in wanted.pop(key, {}).items()
                         if k in ("hostPort", "hostIP")})
            ports.append(port)
        container["ports"] = ports + list(wanted.values())


# -- lifecycle, security contexts, startup probe ---------------------------------------------

_PORT = shapes.Range(1, 65535)
_HANDLER = {"exec?": {"command": [str]},
            "httpGet?": {"path?": str, "port": _PORT, "host?": str,
                         "scheme": Default(Enum("HTTP", "HTTPS"), "HTTP"),
                         "httpHeaders?": [{"name": str, "value": str}]},
            "tcpSocket?": {"port": _PORT, "host?": str}}
LIFECYCLE = {"postStart?": _HANDLER, "preStop?": _HANDLER}


def lifecycle(params: JSON, pod: JSON, main: str, where: str) -> None:
    """Every container of the pod gets the hooks (the definition patches ``[...]``)."""
    for container in pod.get("containers") or []:
        sub(container, "lifecycle", where).update(params)


_PROFILE = {"type": Enum("RuntimeDefault", "Unconfined", "Localhost"), "localhostProfile?": str}
POD_SECURITY = {"appArmorProfile?": _PROFILE, "fsGroup?": int, "runAsGroup?": int,
                "runAsUser?": int, "runAsNonRoot": Default(bool, True),
                "seccompProfile?": _PROFILE}


def pod_security(params: JSON, pod: JSON, main: str, where: str) -> None:
    sub(pod, "securityContext", where).update(params)


_SECURITY = {"containerName": Default(str, ""), "addCapabilities?": [str],
             "allowPrivilegeEscalation": Default(bool, False), "dropCapabilities?": [str],
             "privileged": Default(bool, False), "readOnlyRootFilesystem": Default(bool, False),
             "runAsNonRoot": Default(bool, True), "runAsUser?": int, "runAsGroup?": int}


def security(params: JSON, pod: JSON, main: str, where: str) -> None:
    for chosen, name, here in _per_container(params, _SECURITY, main, where):
        container = _container(pod, name, here)
        context: JSON = {"capabilities": {k: chosen[f"{k}Capabilities"] for k in ("add", "drop")
                                          if f"{k}Capabilities" in chosen}}
        context.update({k: chosen[k] for k in ("runAsUser", "runAsGroup",
                                                "allowPrivilegeEscalation",
                                                "readOnlyRootFilesystem", "privileged",
                                                "runAsNonRoot") if k in chosen})
        sub(container, "securityContext", here).update(context)


_STARTUP = {"containerName": Default(str, ""), "initialDelaySeconds": Default(int, 0),
            "periodSeconds": Default(int, 10), "timeoutSeconds": Default(int, 1),
            "successThreshold": Default(int, 1), "failureThreshold": Default(int, 3),
            "terminationGracePeriodSeconds?": int, "exec?": {"command": [str]},
            "httpGet?": {"path?": str, "port": int, "host?": str,
                         "scheme?": Enum("HTTP", "HTTPS"),
                         "httpHeaders?": [{"name": str, "value": str}]},
            "grpc?": {"port": int, "service?": str}, "tcpSocket?": {"port": int, "host?": str}}


def startup_probe(params: JSON, pod: JSON, main: str, where: str) -> None:
    for chosen, name, here in _per_container(params, _STARTUP, main, where, "probes"):
        container = _container(pod, name, here)
        container["startupProbe"] = {k: v for k, v in chosen.items() if k != "containerName"}


TOPOLOGY_SPREAD = {"constraints": [{
    "maxSkew": int, "topologyKey": str, "labelSelector": LABEL_SELECTOR,
    "whenUnsatisfiable": Default(Enum("DoNotSchedule", "ScheduleAnyway"), "DoNotSchedule"),
    "minDomains?": int, "matchLabelKeys?": [str], "nodeAffinityPolicy?": Enum("Honor", "Ignore"),
    "nodeTaintsPolicy?": Enum("Honor", "Ignore")}]}


def topology_spread(params: JSON, pod: JSON, main: str, where: str) -> None:
    pod["topologySpreadConstraints"] = params["constraints"]


# -- resource --------------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([1-9][0-9]{0,63})(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$")
_CPU = Either((float, str), "a number or a string such as 500m")
_AMOUNTS = {"cpu": Default(_CPU, 1), "memory": Default(str, "2048Mi")}
RESOURCE = {"cpu?": _CPU, "memory?": str, "requests?": _AMOUNTS, "limits?": _AMOUNTS}


def _memory(params: Mapping[str, Any], where: str) -> None:
    for path, value in (("memory", params.get("memory")),
                        ("requests.memory", (params.get("requests") or {}).get("memory")),
                        ("limits.memory", (params.get("limits") or {}).get("memory"))):
        if value is not None and not _QUANTITY.match(value):
            raise AppError(f"{where}.{path}: must be a quantity such as 2048Mi or 1Gi")


def resource(params: JSON, pod: JSON, main: str, where: str) -> None:
    """Requests and limits of the pod's first container (``requests``/``limits`` replace
    the container's, as ``retainKeys``); ``cpu`` with ``memory`` set both."""
    _memory(params, where)
    both = {k: params[k] for k in ("cpu", "memory") if k in params}
    if both and {"requests", "limits"} & set(params):
        raise AppError(f"{where}.{next(iter(both))}: not supported with requests or limits "
                       "(the definition uses those and drops it)")
    if len(both) == 1:
        raise AppError(f"{where}.{'memory' if 'cpu' in both else 'cpu'}: required with "
                       f"{next(iter(both))} (the definition renders neither alone)")
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers or \
            not isinstance(containers[0], dict):
        raise AppError(f"{where}: the workload has no container")
    resources = sub(containers[0], "resources", where)
    if both:
        resources["requests"] = dict(both)
        resources["limits"] = dict(both)
    for key in ("requests", "limits"):
        if key in params:
            resources[key] = dict(params[key])


# -- service account, service binding --------------------------------------------------------

SERVICE_ACCOUNT = {"name": str, "create": Default(bool, False)}


def service_account(objects: list[JSON], trait: Trait, component: Component, namespace: str,
                    where: str) -> list[JSON]:
    """``serviceAccountName`` of the pods, and the ServiceAccount with ``create``."""
    if "privileges" in trait.properties:
        raise AppError(f"{where}.privileges: not supported (Roles and RoleBindings are RBAC "
                       "objects, which no Application writes into a member; an "
                       "administrator grants the ServiceAccount's rights there)")
    params = shapes.check(trait.properties, SERVICE_ACCOUNT, where)
    for workload in workloads(objects, trait, POD_KINDS, where):
        pod_of(workload, where)["serviceAccountName"] = params["name"]
    if not params["create"]:
        return objects
    return [*objects, {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": params["name"]}}]


def service_binding(params: JSON, pod: JSON, main: str, where: str) -> None:
    """Environment variables of the component's container from Secret keys
    (``envMappings``: name -> ``secret``, ``key`` default the name). The member's kubelet
    reads the Secret, in the pod's own namespace; the control plane reads nothing."""
    mappings = params.get("envMappings")
    if set(params) != {"envMappings"} or not isinstance(mappings, dict):
        raise AppError(f"{where}.envMappings: required, a map of variable name to "
                       "{secret, key}")
    env = []
    for name, raw in mappings.items():
        here = f"{where}.envMappings.{name}"
        ref = shapes.check(raw, {"secret": str, "key?": str}, here)
        env.append({"name": name, "valueFrom": {"secretKeyRef": {
            "name": ref["secret"], "key": ref.get("key", name)}}})
    container = _container(pod, main, where)
    current = sub(container, "env", where, list)
    for entry in env:
        same = next((e for e in current if e.get("name") == entry["name"]), None)
        if same is None:
            current.append(entry)
        elif same != entry:
            raise AppError(f"{where}.envMappings.{entry['name']}: the container already sets "
                           "this variable, differently")


# -- k8s-update-strategy, hpa, pure-ingress --------------------------------------------------

_ROLLING = {"maxSurge": Default(str, "25%"), "maxUnavailable": Default(str, "25%"),
            "partition": Default(int, 0)}
UPDATE_STRATEGY = {"targetAPIVersion": Default(Enum("apps/v1"), "apps/v1"),
                   "targetKind": Default(Enum("Deployment", "StatefulSet", "DaemonSet"),
                                         "Deployment"),
                   "strategy": Default({"type": Default(Enum("RollingUpdate", "Recreate",
                                                             "OnDelete"), "RollingUpdate"),
                                        "rollingStrategy?": _ROLLING},
                                       {"type": "RollingUpdate"})}
_NOT_A_STRATEGY = {"Deployment": "OnDelete", "StatefulSet": "Recreate",
                   "DaemonSet": "Recreate"}


def update_strategy(objects: list[JSON], trait: Trait, component: Component, namespace: str,
                    where: str) -> list[JSON]:
    params = shapes.check(trait.properties, UPDATE_STRATEGY, where)
    kind = params["targetKind"]
    strategy = params["strategy"]
    if strategy["type"] == _NOT_A_STRATEGY[kind]:
        raise AppError(f"{where}.strategy.type: a {kind} has no {strategy['type']} strategy")
    rolling = strategy.get("rollingStrategy") or shapes.check({}, _ROLLING, where)
    body: JSON = {"type": strategy["type"]}
    if strategy["type"] == "RollingUpdate":
        body["rollingUpdate"] = {"partition": rolling["partition"]} if kind == "StatefulSet" \
            else {"maxSurge": rolling["maxSurge"], "maxUnavailable": rolling["maxUnavailable"]}
    for workload in workloads(objects, trait, ("Deployment", "StatefulSet", "DaemonSet"), where):
        if workload["kind"] != kind:
            raise AppError(f"{where}.targetKind: {kind}, but the component's workload is a "
                           f"{workload['kind']}")
        field = "strategy" if kind == "Deployment" else "updateStrategy"
        sub(workload, "spec", where)[field] = body
    return objects


_TARGET = {"type": Default(Enum("Utilization", "AverageValue"), "Utilization"),
           "value": Default(int, 50)}
HPA = {"min": Default(int, 1), "max": Default(int, 10),
       "targetAPIVersion": Default(str, "apps/v1"), "targetKind": Default(str, "Deployment"),
       "cpu": Default(_TARGET, {"type": "Utilization", "value": 50}), "mem?": _TARGET,
       "podCustomMetrics?": [{"name": str, "value": str}]}


def _resource_metric(name: str, target: Mapping[str, Any]) -> JSON:
    key = "averageUtilization" if target["type"] == "Utilization" else "averageValue"
    return {"type": "Resource", "resource": {"name": name, "target": {
        "type": target["type"], key: target["value"]}}}


def hpa(objects: list[JSON], trait: Trait, component: Component, namespace: str,
        where: str) -> list[JSON]:
    """An ``autoscaling/v2`` HorizontalPodAutoscaler (the definition's API from 1.23)."""
    params = shapes.check(trait.properties, HPA, where)
    metrics = [_resource_metric("cpu", params["cpu"])]
    if "mem" in params:
        metrics.append(_resource_metric("memory", params["mem"]))
    metrics += [{"type": "Pods", "pods": {"metric": {"name": m["name"]}, "target": {
        "type": "AverageValue", "averageValue": m["value"]}}}
        for m in params.get("podCustomMetrics") or []]
    spec = {"scaleTargetRef": {"apiVersion": params["targetAPIVersion"],
                               "kind": params["targetKind"], "name": component.name},
            "minReplicas": params["min"], "maxReplicas": params["max"], "metrics": metrics}
    return [*objects, {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": component.name}, "spec": spec}]


def pure_ingress(objects: list[JSON], trait: Trait, component: Component, namespace: str,
                 where: str) -> list[JSON]:
    """An Ingress to the component's Service (``networking.k8s.io/v1beta1``, as the
    deprecated definition writes it), no Service of its own."""
    props = trait.properties
    http = props.get("http")
    if not isinstance(http, dict) or not http or not all(
            isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535
            for p in http.values()):
        raise AppError(f"{where}.http: must be a map of path to port, such as {{/: 80}}")
    shapes.check({k: v for k, v in props.items() if k != "http"}, {"domain": str}, where)
    paths = [{"path": str(path), "backend": {"serviceName": component.name,
                                             "servicePort": port}}
             for path, port in http.items()]
    return [*objects, {"apiVersion": "networking.k8s.io/v1beta1", "kind": "Ingress",
                       "metadata": {"name": component.name},
                       "spec": {"rules": [{"host": props["domain"],
                                           "http": {"paths": paths}}]}}]


# -- deprecated: volumes, pvc, configmap ------------------------------------------------------

_VOLUME_FIELDS = {"emptyDir": {"medium"}, "pvc": {"claimName"},
                  "configMap": {"cmName", "defaultMode", "items"},
                  "secret": {"secretName", "defaultMode", "items"}}


def old_volumes(params: JSON, pod: JSON, main: str, where: str) -> None:
    """deprecated/volumes.cue: pod volumes only (``type`` emptyDir by default), merged by
    name; mounting them is another trait's or the component's."""
    if set(params) - {"volumes"}:
        raise AppError(f"{where}.{sorted(set(params) - {'volumes'})[0]}: not supported "
                       "(volumes)")
    raw = params.get("volumes") or []
    if not isinstance(raw, list):
        raise AppError(f"{where}.volumes: must be a list")
    for index, entry in enumerate(raw):
        here = f"{where}.volumes[{index}]"
        if not isinstance(entry, dict):
            raise AppError(f"{here}: must be a map")
        kind = entry.get("type", "emptyDir")
        if kind not in _VOLUME_FIELDS:
            raise AppError(f"{here}.type: must be emptyDir, pvc, configMap or secret")
        shapes.check({k: v for k, v in entry.items() if k not in _VOLUME_FIELDS[kind]},
                     {"name": str, "type?": str}, here)
        _merge_named(sub(pod, "volumes", where, list), pods.volume(kind, entry, here), here)


def _merge_named(items: list[JSON], item: JSON, where: str) -> None:
    """``+patchKey=name``: appended, or there already the same (CUE unifies; a different
    entry of that name is a conflict)."""
    same = next((i for i in items if isinstance(i, dict) and i.get("name") == item["name"]),
                None)
    if same is None:
        items.append(item)
    elif same != item:
        raise AppError(f"{where}: {item['name']!r} is already in the pod, differently")


_STORAGE = {"requests": {"storage": str}, "limits?": {"storage": str}}
PVC = {"claimName": str, "volumeMode": Default(Enum("Filesystem", "Block"), "Filesystem"),
       "volumeName?": str, "accessModes": [str], "storageClassName?": str,
       "resources": _STORAGE,
       "dataSourceRef?": {"name": str, "kind": str, "apiGroup": str},
       "dataSource?": {"name": str, "kind": str, "apiGroup": str},
       "volumesToMount": [{"name": str, "mountPath?": str, "devicePath?": str}]}


def pvc(objects: list[JSON], trait: Trait, component: Component, namespace: str,
        where: str) -> list[JSON]:
    """deprecated/pvc.cue: a claim, mounted (or a device, ``Block``) on the first
    container under each ``volumesToMount`` name. Its ``selector``, which the definition
    writes into ``dataSource``, is refused (as the storage trait's)."""
    if "selector" in trait.properties:
        raise AppError(f"{where}.selector: not supported (the definition writes it into "
                       "dataSource, which is not a selector)")
    params = shapes.check(trait.properties, PVC, where)
    for key in ("requests", "limits"):
        amount = (params["resources"].get(key) or {}).get("storage")
        if amount is not None and not _QUANTITY.match(amount):
            raise AppError(f"{where}.resources.{key}.storage: must be a quantity such as 8Gi")
    block = params["volumeMode"] == "Block"
    field, path = ("volumeDevices", "devicePath") if block else ("volumeMounts", "mountPath")
    for workload in workloads(objects, trait, ("Deployment",), where):
        pod = pod_of(workload, where)
        containers = pod.get("containers") or []
        if not containers:
            raise AppError(f"{where}: the workload has no container")
        for index, mount in enumerate(params["volumesToMount"]):
            here = f"{where}.volumesToMount[{index}]"
            if path not in mount or set(mount) - {"name", path}:
                raise AppError(f"{here}: {path} (only) with volumeMode "
                               f"{params['volumeMode']}")
            _merge_named(sub(containers[0], field, here, list), dict(mount), here)
            _merge_named(sub(pod, "volumes", here, list), {
                "name": mount["name"],
                "persistentVolumeClaim": {"claimName": params["claimName"]}}, here)
    spec = {k: params[k] for k in ("accessModes", "volumeMode", "volumeName",
                                   "storageClassName") if k in params}
    spec["resources"] = params["resources"]
    spec.update({k: params[k] for k in ("dataSourceRef", "dataSource") if k in params})
    return [*objects, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": params["claimName"]}, "spec": spec}]


CONFIGMAP = {"volumes": [{"name": str, "mountPath": str, "readOnly": Default(bool, False),
                          "data?": shapes.STRINGS_MAP}]}


def configmap(objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]:
    """deprecated/configmap.cue: each ConfigMap mounted (``volume-<name>``) on the first
    container, and created when ``data`` is given."""
    params = shapes.check(trait.properties, CONFIGMAP, where)
    for workload in workloads(objects, trait, POD_KINDS, where):
        pod = pod_of(workload, where)
        containers = pod.get("containers") or []
        if not containers:
            raise AppError(f"{where}: the workload has no container")
        for index, volume in enumerate(params["volumes"]):
            here = f"{where}.volumes[{index}]"
            name = f"volume-{volume['name']}"
            _merge_named(sub(containers[0], "volumeMounts", here, list), {
                "name": name, "mountPath": volume["mountPath"],
                "readOnly": volume["readOnly"]}, here)
            _merge_named(sub(pod, "volumes", here, list),
                         {"name": name, "configMap": {"name": volume["name"]}}, here)
    return [*objects, *({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": v["name"]}, "data": v["data"]}
                        for v in params["volumes"] if "data" in v)]


# -- nocalhost -------------------------------------------------------------------------------

_DEV_IMAGES = {language: f"nocalhost-docker.pkg.coding.net/nocalhost/dev-images/{image}:latest"
               for language, image in (("go", "golang"), ("java", "java"),
                                       ("python", "python"), ("node", "node"),
                                       ("ruby", "ruby"))}
_AMOUNTS_DEV = {"memory": Default(str, "2Gi"), "cpu": Default(str, "2")}
NOCALHOST = {
    "port": shapes.Range(1, 65535), "serviceType": Default(str, "deployment"),
    "gitUrl?": str, "image": str, "shell": Default(str, "bash"),
    "workDir": Default(str, "/home/nocalhost-dev"), "storageClass?": str,
    "command": Default({"run": Default([str], ["sh", "run.sh"]),
                        "debug": Default([str], ["sh", "debug.sh"])},
                       {"run": ["sh", "run.sh"], "debug": ["sh", "debug.sh"]}),
    "debug?": {"remoteDebugPort?": int}, "hotReload": Default(bool, True),
    "sync": Default({"type": Default(str, "send"), "filePattern": Default([str], ["./"]),
                     "ignoreFilePattern": Default([str], [".git", ".vscode", ".idea",
                                                          ".gradle", "build"])},
                    {"type": "send", "filePattern": ["./"],
                     "ignoreFilePattern": [".git", ".vscode", ".idea", ".gradle", "build"]}),
    "env?": [{"name": str, "value": str}], "portForward?": [str],
    "persistentVolumeDirs?": [{"path": str, "capacity": str}],
    "resources": Default({"limits": Default(_AMOUNTS_DEV, {"memory": "2Gi", "cpu": "2"}),
                          "requests": Default({"memory": Default(str, "512Mi"),
                                               "cpu": Default(str, "0.5")},
                                              {"memory": "512Mi", "cpu": "0.5"})},
                         {"limits": {"memory": "2Gi", "cpu": "2"},
                          "requests": {"memory": "512Mi", "cpu": "0.5"}})}


def _dev(params: Mapping[str, Any]) -> JSON:
    """The ``dev`` block of nocalhost's configuration, keys in the definition's order."""
    dev: JSON = {"gitUrl": params["gitUrl"]} if "gitUrl" in params else {}
    dev["image"] = _DEV_IMAGES.get(params["image"], params["image"])
    dev.update(shell=params["shell"], workDir=params["workDir"])
    if "storageClass" in params:
        dev["storageClass"] = params["storageClass"]
    dev["resources"] = {"limits": params["resources"]["limits"],
                        "requests": params["resources"]["requests"]}
    for key in ("persistentVolumeDirs", "command", "debug"):
        if key in params:
            dev[key] = params[key]
    dev["hotReload"] = params["hotReload"]
    for key in ("sync", "env"):
        if key in params:
            dev[key] = params[key]
    dev["portForward"] = params.get("portForward") or [f"{params['port']}:{params['port']}"]
    return dev


def nocalhost(objects: list[JSON], trait: Trait, component: Component, app: str,
              namespace: str, where: str) -> list[JSON]:
    """trait/nocalhost.cue: the workload annotated with Nocalhost's development
    configuration (read by the developer's Nocalhost plugin, with their own credentials;
    the control plane runs nothing of it), and a ClusterIP Service of ``port``."""
    params = shapes.check(trait.properties, NOCALHOST, where)
    config = {"name": component.name, "serviceType": params["serviceType"],
              "containers": [{"name": component.name, "dev": _dev(params)}]}
    workload = workloads(objects, trait, POD_KINDS, where)[0]
    sub(sub(workload, "metadata", where), "annotations", where).update({
        "dev.nocalhost/application-name": app,
        "dev.nocalhost/application-namespace": namespace,
        "dev.nocalhost": json.dumps(config, separators=(",", ":"))})
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": component.name},
               "spec": {"selector": {"app.oam.dev/component": component.name},
                        "ports": [{"port": params["port"], "targetPort": params["port"]}],
                        "type": "ClusterIP"}}
    kept = [o for o in objects if not (o.get("kind") == "Service" and str(
        (o.get("metadata") or {}).get("name")) == component.name)]
    return [*kept, service]
