"""Rendering: a component and its traits as Kubernetes manifests, a pure function.

The built-in types follow KubeVela's definitions' property names (vela-templates):
``webservice`` (Deployment, plus a Service for the ports marked ``expose``),
``statefulset`` (the same with a StatefulSet), ``worker`` (Deployment), ``config`` (ours:
a ConfigMap, or a Secret with ``secret: true``) and ``k8s-objects`` (``objects``: raw
manifests). Traits patch what the component rendered: ``scaler`` (replicas), ``labels``
and ``annotations`` (every object, and the pod template of workloads), ``env`` (a
container's environment), ``expose`` (a Service for given ports), ``cpuscaler`` (an
HPA), ``json-merge-patch``/``json-patch`` (:mod:`.jsonpatch`); pod-level parameters and
the sidecar, init-container, command, container-image and hostalias traits live in
:mod:`.pods`, ``storage`` in :mod:`.storage`, ``gateway`` and the ingress traits in
:mod:`.ingress`, ``daemon``/``task``/``cron-task`` in :mod:`.workloads`, vela-core's other
traits in :mod:`.traits` (``raw`` and ``ref-objects``, read before the compile by
:mod:`.refs`, are ``k8s-objects``' manifests here), the field checks they share in
:mod:`.fields` and :mod:`.shapes`; :mod:`.vela_core` lists every vela-core definition and
why one is not built in. No CUE engine: each type
is a small Python function, so an unknown property is refused by name
(:class:`~.model.AppError`) instead of being silently dropped by a template that did not
mention it.

Every object carries KubeVela's labels ``app.oam.dev/name`` and
``app.oam.dev/component``; pods are selected by the component label.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from federation.applications import (
    custom_status,
    fields,
    ingress,
    jsonpatch,
    pods,
    resource_policies,
    storage,
    traits,
    workloads,
)
from federation.applications.model import MAX_RENDERED, AppError, Component, Trait, Types

JSON = dict[str, Any]

APP_LABEL = "app.oam.dev/name"
COMPONENT_LABEL = "app.oam.dev/component"
REPLICA_KEY_LABEL = "app.oam.dev/replicaKey"
"""KubeVela's label on what a replication policy's copy of a component renders."""
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
OUTPUT_KEY = "x-federation-output-name"
"""A user-defined component's ``outputs`` key on an auxiliary object while it renders
(:mod:`.definitions`), removed before the object leaves :func:`render_component`."""
MADE_BY_KEY = "x-federation-made-by"
"""What made an object while the traits run: ``WORKLOAD`` on the component's first object
(KubeVela's workload, of the component's type), ``AuxiliaryWorkload`` on its others, a
trait's type on what the trait added (an object without the key after a trait); removed
with ``OUTPUT_KEY``."""


class UserTypes(Protocol):
    """Types an administrator defined (:class:`~.definitions.Rendering`): each renders a
    component, or patches one, in place of a built-in of the same name."""

    def types(self) -> Types: ...

    def has_component(self, name: str) -> bool: ...

    def has_trait(self, name: str) -> bool: ...

    def component(self, component: Component, namespace: str, where: str) -> list[JSON]: ...

    def trait(self, objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]: ...

    def status_checks(self, component: Component, namespace: str, objects: Sequence[JSON]
                      ) -> custom_status.Checks | None:
        """What judges the rendered component once it runs (its definitions' status)."""


def render_component(component: Component, app: str, namespace: str,
                     where: str = "spec.components[0]", user: UserTypes | None = None,
                     made_by: dict[resource_policies.ObjectKey, resource_policies.MadeBy]
                     | None = None) -> list[JSON]:
    """The manifests of one component with its traits applied, in a stable order; a type
    ``user`` defines is rendered by its definition (which wins over a built-in).
    ``made_by``: filled with what rendered each object (the resource policies' type
    selectors read it)."""
    if user is not None and user.has_component(component.type):
        objects = user.component(component, namespace, where)
    else:
        objects = _render_type(component, app, namespace, where)
    objects = [{**obj, MADE_BY_KEY: resource_policies.WORKLOAD if index == 0 else
                resource_policies.AUXILIARY} for index, obj in enumerate(objects)]
    for index, trait in enumerate(component.traits):
        here = f"{where}.traits[{index}].properties"
        if user is not None and user.has_trait(trait.type):
            objects = _mark(user.trait(objects, trait, component, namespace, here), trait)
            continue
        with_app = _APP_TRAITS.get(trait.type)
        if with_app is not None:
            objects = _mark(with_app(objects, trait, component, app, namespace, here), trait)
            continue
        patch = _TRAITS.get(trait.type)
        if patch is None:
            raise AppError(f"{where}.traits[{index}].type: {trait.type!r} is not a built-in "
                           f"trait ({', '.join(_TRAITS)})")
        objects = _mark(patch(objects, trait, component, namespace, here), trait)
    for obj in objects:
        obj.pop(OUTPUT_KEY, None)
        made = obj.pop(MADE_BY_KEY, None)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", namespace)
        labels = meta.setdefault("labels", {})
        labels[APP_LABEL] = app
        labels[COMPONENT_LABEL] = component.name
        if component.replica_key:
            labels[REPLICA_KEY_LABEL] = component.replica_key
        if made_by is not None:
            made_by[resource_policies.object_key(obj)] = _made_by(made, component)
    return objects


def _mark(objects: list[JSON], trait: Trait) -> list[JSON]:
    """An object a trait added has no mark yet: the trait made it."""
    return [obj if MADE_BY_KEY in obj else {**obj, MADE_BY_KEY: trait.type} for obj in objects]


def _made_by(made: Any, component: Component) -> resource_policies.MadeBy:
    if made == resource_policies.WORKLOAD:  # no trait type is upper case
        return resource_policies.MadeBy(component.type, resource_policies.WORKLOAD)
    return resource_policies.MadeBy("", resource_policies.TRAIT, str(made or ""))


def _render_type(component: Component, app: str, namespace: str, where: str) -> list[JSON]:
    with_app = _APP_TYPES.get(component.type)
    if with_app is not None:
        return with_app(component, app, namespace, f"{where}.properties")
    if component.type == "helmchart":  # needs a render by Helm: definitions.Rendering's
        raise AppError(f"{where}.type: 'helmchart' needs Helm, which this renderer lacks")
    renderer = _TYPES.get(component.type)
    if renderer is None:  # an override's patch may bring any type
        raise AppError(f"{where}.type: {component.type!r} is not a built-in type "
                       f"({', '.join([*_TYPES, *_APP_TYPES])})")
    return renderer(component, namespace, f"{where}.properties")


# -- component types ------------------------------------------------------------------------

_CONTAINER_PROPS = {"image", "imagePullPolicy", "imagePullSecrets", "cmd", "args", "env",
                    "cpu", "memory", "limit", "labels", "annotations", "replicas",
                    *pods.POD_PROPS}
_WEBSERVICE_PROPS = frozenset(_CONTAINER_PROPS | {"port", "ports", "exposeType",
                                                   "addRevisionLabel"})
_STATEFULSET_PROPS = _WEBSERVICE_PROPS - {"limit"}
REPLICATED_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")
"""Workload kinds with ``spec.replicas`` (a DaemonSet runs one pod per node)."""


def _container(component: Component, where: str) -> JSON:
    props = component.properties
    container: JSON = {"name": component.name,
                       "image": fields.string(props, "image", where, required=True)}
    policy = props.get("imagePullPolicy")
    if policy is not None:
        if policy not in ("Always", "Never", "IfNotPresent"):
            raise AppError(f"{where}.imagePullPolicy: must be Always, Never or IfNotPresent")
        container["imagePullPolicy"] = policy
    if "cmd" in props:
        container["command"] = fields.strings(props["cmd"], f"{where}.cmd")
    if "args" in props:
        container["args"] = fields.strings(props["args"], f"{where}.args")
    if "env" in props:
        container["env"] = fields.env_list(props["env"], f"{where}.env")
    resources = _resources(props, where)
    if resources:
        container["resources"] = resources
    return container


def _resources(props: Mapping[str, Any], where: str) -> JSON:
    requests = {k: fields.quantity(props[k], f"{where}.{k}") for k in ("cpu", "memory")
                if props.get(k) is not None}
    resources: JSON = {}
    if requests:
        resources["requests"] = requests
        resources["limits"] = dict(requests)
    if "limit" in props:
        limit = props["limit"]
        if not isinstance(limit, dict):
            raise AppError(f"{where}.limit: must be a map of cpu and memory")
        fields.allowed(limit, {"cpu", "memory"}, f"{where}.limit")
        resources["limits"] = {k: fields.quantity(v, f"{where}.limit.{k}")
                               for k, v in limit.items()}
    return resources


def _deployment(component: Component, namespace: str, where: str,
                ports: Sequence[JSON] = (), kind: str = "Deployment") -> JSON:
    props = component.properties
    container = _container(component, where)
    if ports:
        container["ports"] = [{"containerPort": p["containerPort"], "name": p["name"],
                               "protocol": p["protocol"]} for p in ports]
    pod_meta: JSON = {"labels": {COMPONENT_LABEL: component.name}}
    if "labels" in props:
        pod_meta["labels"].update(fields.string_map(props["labels"], f"{where}.labels"))
    if "annotations" in props:
        pod_meta["annotations"] = fields.string_map(props["annotations"],
                                                    f"{where}.annotations")
    pod_meta["labels"].update(pods.revision_label(component, where))
    pod_spec: JSON = {"containers": [container]}
    if "imagePullSecrets" in props:
        pod_spec["imagePullSecrets"] = [
            {"name": n} for n in fields.strings(props["imagePullSecrets"],
                                                f"{where}.imagePullSecrets")]
    pods.apply(props, container, pod_spec, where)
    spec: JSON = {"selector": {"matchLabels": {COMPONENT_LABEL: component.name}},
                  "template": {"metadata": pod_meta, "spec": pod_spec}}
    if kind in REPLICATED_KINDS:
        spec["replicas"] = fields.integer(props.get("replicas", 1), f"{where}.replicas", 0,
                                          100000)
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": component.name, "namespace": namespace}, "spec": spec}


def _ports(props: Mapping[str, Any], where: str) -> list[JSON]:
    """KubeVela's ``ports`` (and the deprecated single ``port``) as normalised entries."""
    entries: list[JSON] = []
    if "port" in props:
        port = fields.integer(props["port"], f"{where}.port", 1)
        entries.append({"port": port, "containerPort": port, "name": f"port-{port}",
                        "protocol": "TCP", "expose": False})
    for index, raw in enumerate(fields.maps(props.get("ports"), f"{where}.ports")):
        here = f"{where}.ports[{index}]"
        fields.allowed(raw, {"port", "containerPort", "name", "protocol", "expose", "nodePort"},
                       here)
        port = fields.integer(raw.get("port"), f"{here}.port", 1)
        entries.append({"port": port,
                        "containerPort": fields.integer(raw.get("containerPort", port),
                                              f"{here}.containerPort", 1),
                        "name": fields.string(raw, "name", here) or f"port-{port}",
                        "protocol": _protocol(raw, here),
                        "expose": fields.boolean(raw.get("expose", False), f"{here}.expose"),
                        "nodePort": _node_port(raw, here)})
    return entries


def _protocol(raw: Mapping[str, Any], where: str) -> str:
    protocol = raw.get("protocol", "TCP")
    if protocol not in ("TCP", "UDP", "SCTP"):
        raise AppError(f"{where}.protocol: must be TCP, UDP or SCTP")
    return str(protocol)


def _node_port(raw: Mapping[str, Any], where: str) -> int | None:
    if raw.get("nodePort") is None:
        return None
    return fields.integer(raw["nodePort"], f"{where}.nodePort", 1)


def _service(name: str, namespace: str, ports: Sequence[JSON], service_type: str) -> JSON:
    spec: JSON = {"selector": {COMPONENT_LABEL: name}, "type": service_type,
                  "ports": [{k: v for k, v in (("name", p["name"]), ("port", p["port"]),
                                               ("targetPort", p.get("containerPort",
                                                                    p["port"])),
                                               ("protocol", p.get("protocol", "TCP")),
                                               ("nodePort", p.get("nodePort")))
                             if v is not None} for p in ports]}
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _webservice(component: Component, namespace: str, where: str,
                kind: str = "Deployment", allowed: frozenset[str] = _WEBSERVICE_PROPS
                ) -> list[JSON]:
    """``webservice``, and ``statefulset``: the same template with another workload kind
    and a parameter fewer (its definition). KubeVela's ``daemon`` is the same with a
    DaemonSet, but the controller's health check reads ``readyReplicas``, which a
    DaemonSet's status does not have: its deploy step would wait for ever, so it is not
    offered until that check reads ``numberReady``."""
    fields.allowed(component.properties, allowed, where)
    ports = _ports(component.properties, where)
    objects = [_deployment(component, namespace, where, ports, kind)]
    exposed = [p for p in ports if p["expose"]]
    service_type = _service_type(component.properties, "exposeType", where)
    if exposed:
        objects.append(_service(component.name, namespace, exposed, service_type))
    return objects


def _service_type(props: Mapping[str, Any], key: str, where: str) -> str:
    service_type = props.get(key, "ClusterIP")
    if service_type not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        raise AppError(f"{where}.{key}: must be ClusterIP, NodePort, LoadBalancer or "
                       "ExternalName")
    return str(service_type)


def _worker(component: Component, namespace: str, where: str) -> list[JSON]:
    fields.allowed(component.properties, _CONTAINER_PROPS, where)
    return [_deployment(component, namespace, where)]


def _config(component: Component, namespace: str, where: str) -> list[JSON]:
    props = component.properties
    fields.allowed(props, {"data", "secret", "type"}, where)
    data = fields.string_map(props.get("data") or {}, f"{where}.data")
    secret = props.get("secret", False)
    if not isinstance(secret, bool):
        raise AppError(f"{where}.secret: must be true or false")
    meta = {"name": component.name, "namespace": namespace}
    if secret:
        body: JSON = {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
                      "stringData": data}
        if props.get("type"):
            body["type"] = fields.string(props, "type", where)
        return [body]
    if "type" in props:
        raise AppError(f"{where}.type: only for a Secret (secret: true)")
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}]


def _objects(component: Component, namespace: str, where: str) -> list[JSON]:
    props = component.properties
    fields.allowed(props, {"objects"}, where)
    objects = props.get("objects")
    if not isinstance(objects, list) or not objects:
        raise AppError(f"{where}.objects: must be a non-empty list of manifests")
    if len(objects) > MAX_RENDERED:
        raise AppError(f"{where}.objects: {len(objects)} manifests; an Application renders "
                       f"at most {MAX_RENDERED} objects")
    return [_manifest(obj, index, component.name, f"{where}.objects[{index}]")
            for index, obj in enumerate(objects)]


def _manifest(obj: Any, index: int, component: str, where: str) -> JSON:
    """One manifest of a tenant's, server fields dropped (the first one's name defaulting
    to the component's)."""
    if not isinstance(obj, dict):
        raise AppError(f"{where}: must be a manifest")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise AppError(f"{where}.{key}: required")
    body = copy.deepcopy(obj)  # its metadata too: the labels added later are the copy's
    body["metadata"] = _object_meta(body.get("metadata"), index, component, where)
    check_shape(body, where)
    body.pop("status", None)
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields",
                  "ownerReferences", "finalizers", "generation"):
        body["metadata"].pop(field, None)
    return body


def _unread_references(component: Component, namespace: str, where: str) -> list[JSON]:
    """``ref-objects`` components are read before the compile (:mod:`.refs`); one here
    came in after that, by an override's patch."""
    raise AppError(f"{where[:-len('.properties')]}.type: a ref-objects component cannot be "
                   "brought in by an override (its objects are read before the compile)")


def _raw(component: Component, namespace: str, where: str) -> list[JSON]:
    """KubeVela's deprecated ``raw``: the properties are the one manifest (``output:
    parameter``), named after the component when they name nothing."""
    return [_manifest(component.properties, 0, component.name, where)]


def _object_meta(meta: Any, index: int, component: str, where: str) -> JSON:
    """A manifest's metadata; the first manifest without a name is named after the
    component, as KubeVela names a component's workload (its later manifests are traits
    to KubeVela, named by a hash of their content: that name is required here)."""
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise AppError(f"{where}.metadata: must be a map")
    if meta.get("name") in (None, "") and index == 0:
        return {**meta, "name": component}
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise AppError(f"{where}.metadata.name: required (KubeVela names only the first "
                       "object after the component)")
    return dict(meta)


def _statefulset(component: Component, namespace: str, where: str) -> list[JSON]:
    return _webservice(component, namespace, where, "StatefulSet", _STATEFULSET_PROPS)


_TYPES: dict[str, Callable[[Component, str, str], list[JSON]]] = {
    "webservice": _webservice, "worker": _worker, "config": _config, "k8s-objects": _objects,
    "statefulset": _statefulset, "raw": _raw, "ref-objects": _unread_references}
_APP_TYPES: dict[str, Callable[[Component, str, str, str], list[JSON]]] = {
    "daemon": workloads.daemon, "task": workloads.task, "cron-task": workloads.cron_task}
"""Types whose render names the Application (a Job's name, the pods' labels)."""


# -- traits ---------------------------------------------------------------------------------

TraitFn = Callable[[list[JSON], Trait, Component, str, str], list[JSON]]


def _workloads(objects: Sequence[JSON], trait: Trait, where: str) -> list[JSON]:
    found = [o for o in objects if o.get("kind") in WORKLOAD_KINDS]
    if not found:
        raise AppError(f"{where[:-len('.properties')]}: trait {trait.type!r} needs a workload "
                       "(Deployment, StatefulSet...) in the component")
    return found


def _pod_spec(workload: JSON) -> JSON:
    template = workload.setdefault("spec", {}).setdefault("template", {})
    return template.setdefault("spec", {})  # type: ignore[no-any-return]


def _scaler(objects: list[JSON], trait: Trait, component: Component, namespace: str,
            where: str) -> list[JSON]:
    fields.allowed(trait.properties, {"replicas"}, where)
    replicas = fields.integer(trait.properties.get("replicas", 1), f"{where}.replicas", 0,
                              100000)
    for workload in _workloads(objects, trait, where):
        if workload.get("kind") not in REPLICATED_KINDS:
            raise AppError(f"{where[:-len('.properties')]}: scaler applies to Deployments and "
                           f"StatefulSets, not a {workload.get('kind')}")
        workload["spec"]["replicas"] = replicas
    return objects


def _metadata_map(field: str) -> TraitFn:
    def patch(objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]:
        values = fields.string_map(trait.properties, where, nulls=True)
        for obj in objects:
            targets = [obj.setdefault("metadata", {})]
            if obj.get("kind") in WORKLOAD_KINDS:
                targets.append(obj["spec"].setdefault("template", {})
                               .setdefault("metadata", {}))
            for meta in targets:
                current = meta.setdefault(field, {})
                for key, value in values.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
        return objects
    return patch


def _env(objects: list[JSON], trait: Trait, component: Component, namespace: str,
         where: str) -> list[JSON]:
    props = trait.properties
    patches = props.get("containers") if "containers" in props else [props]
    if "containers" in props:
        fields.allowed(props, {"containers"}, where)
    if not isinstance(patches, list):
        raise AppError(f"{where}.containers: must be a list")
    for workload in _workloads(objects, trait, where):
        containers = _pod_spec(workload).get("containers") or []
        for index, patch in enumerate(patches):
            here = f"{where}.containers[{index}]" if "containers" in props else where
            if not isinstance(patch, dict):
                raise AppError(f"{here}: must be a map")
            fields.allowed(patch, {"containerName", "replace", "env", "unset"}, here)
            name = patch.get("containerName") or component.name
            target = next((c for c in containers if c.get("name") == name), None)
            if target is None:
                raise AppError(f"{here}.containerName: no container {name!r}")
            env = fields.string_map(patch.get("env") or {}, f"{here}.env")
            unset = set(fields.strings(patch.get("unset") or [], f"{here}.unset"))
            current = [] if patch.get("replace") else list(target.get("env") or [])
            current = [e for e in current if e.get("name") not in unset | set(env)]
            current += [{"name": k, "value": v} for k, v in sorted(env.items())]
            target["env"] = current
    return objects


def _expose(objects: list[JSON], trait: Trait, component: Component, namespace: str,
            where: str) -> list[JSON]:
    props = trait.properties
    fields.allowed(props, {"port", "ports", "type", "annotations", "matchLabels"}, where)
    ports: list[JSON] = []
    numbers = props.get("port") or []
    if not isinstance(numbers, list):
        raise AppError(f"{where}.port: must be a list of port numbers, such as [80]")
    for index, port in enumerate(numbers):
        number = fields.integer(port, f"{where}.port[{index}]", 1)
        ports.append({"name": f"port-{number}", "port": number, "containerPort": number})
    for index, raw in enumerate(fields.maps(props.get("ports"), f"{where}.ports")):
        here = f"{where}.ports[{index}]"
        fields.allowed(raw, {"port", "name", "protocol", "nodePort"}, here)
        number = fields.integer(raw.get("port"), f"{here}.port", 1)
        ports.append({"name": fields.string(raw, "name", here) or f"port-{number}", "port": number,
                      "containerPort": number, "protocol": _protocol(raw, here),
                      "nodePort": _node_port(raw, here)})
    if not ports:
        raise AppError(f"{where}.port: at least one port to expose")
    service = _service(component.name, namespace, ports, _service_type(props, "type", where))
    if props.get("matchLabels"):
        service["spec"]["selector"] = fields.string_map(props["matchLabels"],
                                                        f"{where}.matchLabels")
    if props.get("annotations"):
        service["metadata"]["annotations"] = fields.string_map(props["annotations"],
                                                         f"{where}.annotations")
    kept = [o for o in objects if not (o.get("kind") == "Service" and
                                       (o.get("metadata") or {}).get("name") == component.name)]
    return [*kept, service]


def _storage(objects: list[JSON], trait: Trait, component: Component, namespace: str,
             where: str) -> list[JSON]:
    workload = _workloads(objects, trait, where)[0]
    return [*objects, *storage.render(trait.properties, _pod_spec(workload), where)]


def _sidecar(objects: list[JSON], trait: Trait, component: Component, namespace: str,
             where: str) -> list[JSON]:
    for workload in _workloads(objects, trait, where):
        pods.sidecar(trait.properties, _pod_spec(workload), where)
    return objects


def _pod_trait(patch: Callable[[Mapping[str, Any], JSON, str, str], None]) -> TraitFn:
    """A trait that patches the pod of each workload, given the component's name."""
    def apply(objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]:
        for workload in _workloads(objects, trait, where):
            patch(trait.properties, _pod_spec(workload), component.name, where)
        return objects
    return apply


def _host_alias(objects: list[JSON], trait: Trait, component: Component, namespace: str,
                where: str) -> list[JSON]:
    for workload in _workloads(objects, trait, where):
        pods.host_alias(trait.properties, _pod_spec(workload), where)
    return objects


def check_shape(obj: Any, where: str) -> None:
    """A manifest the renderers and traits may walk: ``metadata`` a map whose labels and
    annotations are maps of strings, and a workload's ``spec``, pod template and
    containers of the shapes Kubernetes gives them (a manifest from a tenant, or one a
    JSON patch changed, could hold anything there)."""
    if not isinstance(obj, dict):
        raise AppError(f"{where}: must be a manifest (a map)")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise AppError(f"{where}.metadata: must be a map")
    if "kind" in obj and (not isinstance(meta.get("name"), str) or not meta["name"]):
        raise AppError(f"{where}.metadata.name: must be a non-empty string")
    for key in ("labels", "annotations"):
        if meta.get(key) is not None:
            fields.string_map(meta[key], f"{where}.metadata.{key}")
    if obj.get("kind") not in WORKLOAD_KINDS:
        return
    path, node = where, obj  # type: str, Any
    for key in ("spec", "template", "spec"):
        node = node.get(key) if isinstance(node, dict) else None
        path += f".{key}"
        if node is None:
            return
        if not isinstance(node, dict):
            raise AppError(f"{path}: must be a map")
    template_meta = obj["spec"]["template"].get("metadata")
    if template_meta is not None:
        check_shape({"metadata": template_meta}, f"{where}.spec.template")
    containers = fields.maps(node.get("containers"), f"{path}.containers")
    fields.maps(node.get("volumes"), f"{path}.volumes")
    for index, container in enumerate(containers):
        for key in ("env", "volumeMounts"):
            fields.maps(container.get(key), f"{path}.containers[{index}].{key}")


def _json_merge_patch(objects: list[JSON], trait: Trait, component: Component,
                      namespace: str, where: str) -> list[JSON]:
    """RFC 7386 on the component's workload (its first object), as the definition."""
    patched = jsonpatch.merge_patch(objects[0], trait.properties)
    check_shape(patched, f"{where[:-len('.properties')]} (the patched object)")
    return [patched, *objects[1:]]


def _json_patch(objects: list[JSON], trait: Trait, component: Component, namespace: str,
                where: str) -> list[JSON]:
    """RFC 6902 ``operations`` on the component's workload (its first object)."""
    fields.allowed(trait.properties, {"operations"}, where)
    patched = jsonpatch.apply(objects[0], trait.properties.get("operations"),
                              f"{where}.operations")
    check_shape(patched, f"{where[:-len('.properties')]} (the patched object)")
    return [patched, *objects[1:]]


def _cpuscaler(objects: list[JSON], trait: Trait, component: Component, namespace: str,
               where: str) -> list[JSON]:
    """KubeVela's ``cpuscaler``: an autoscaling/v1 HorizontalPodAutoscaler of the
    component's workload (``min`` 1, ``max`` 10, ``cpuUtil`` 50 by default)."""
    props = trait.properties
    fields.allowed(props, {"min", "max", "cpuUtil", "targetAPIVersion", "targetKind"}, where)
    spec = {"scaleTargetRef": {
                "apiVersion": fields.string(props, "targetAPIVersion", where) or "apps/v1",
                "kind": fields.string(props, "targetKind", where) or "Deployment",
                "name": component.name},
            "minReplicas": fields.integer(props.get("min", 1), f"{where}.min", 1, 100000),
            "maxReplicas": fields.integer(props.get("max", 10), f"{where}.max", 1, 100000),
            "targetCPUUtilizationPercentage": fields.integer(props.get("cpuUtil", 50),
                                                             f"{where}.cpuUtil", 1, 1000)}
    return [*objects, {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": component.name}, "spec": spec}]


def _gateway(objects: list[JSON], trait: Trait, component: Component, namespace: str,
             where: str) -> list[JSON]:
    return ingress.gateway(objects, trait.properties, component.name, where)


def _ingress(version: str) -> TraitFn:
    def patch(objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]:
        return ingress.ingress(objects, trait.properties, component.name, where, version)
    return patch


_TRAITS: dict[str, TraitFn] = {
    "scaler": _scaler, "labels": _metadata_map("labels"),
    "annotations": _metadata_map("annotations"), "env": _env, "expose": _expose,
    "storage": _storage, "sidecar": _sidecar, "gateway": _gateway,
    "ingress": _ingress("v1beta1"), "ingress-1-20": _ingress("v1"),
    "init-container": _pod_trait(pods.init_container), "cpuscaler": _cpuscaler,
    "command": _pod_trait(pods.command), "container-image": _pod_trait(pods.container_image),
    "hostalias": _host_alias, "json-merge-patch": _json_merge_patch,
    "json-patch": _json_patch,
    "affinity": traits.pod_trait(traits.POD_KINDS, traits.affinity),
    "container-ports": traits.pod_trait(traits.POD_KINDS, traits.container_ports),
    "hpa": traits.hpa, "k8s-update-strategy": traits.update_strategy,
    "lifecycle": traits.pod_trait(traits.POD_KINDS, traits.lifecycle, traits.LIFECYCLE),
    "podsecuritycontext": traits.pod_trait(traits.POD_KINDS, traits.pod_security,
                                           traits.POD_SECURITY),
    "securitycontext": traits.pod_trait(traits.POD_KINDS, traits.security),
    "resource": traits.pod_trait((*traits.POD_KINDS, "CronJob"), traits.resource,
                                 traits.RESOURCE),
    "service-account": traits.service_account,
    "startup-probe": traits.pod_trait(traits.POD_KINDS, traits.startup_probe),
    "topologyspreadconstraints": traits.pod_trait(traits.POD_KINDS, traits.topology_spread,
                                                  traits.TOPOLOGY_SPREAD),
    "service-binding": traits.pod_trait(traits.POD_KINDS, traits.service_binding),
    "pure-ingress": traits.pure_ingress,
    "volumes": traits.pod_trait(("Deployment",), traits.old_volumes), "pvc": traits.pvc,
    "configmap": traits.configmap}
_APP_TRAITS: dict[str, Callable[[list[JSON], Trait, Component, str, str, str], list[JSON]]] = {
    "nocalhost": traits.nocalhost}
"""Traits whose render names the Application (nocalhost's annotations)."""
