"""Pod-level parameters of KubeVela's ``webservice`` and ``worker``, and the ``sidecar`` trait.

Rendered as vela-core's CUE definitions render them (vela-templates/definitions/internal/
component/webservice.cue, worker.cue; trait/sidecar.cue):

- ``volumeMounts``: ``pvc``, ``configMap``, ``secret``, ``emptyDir``, ``hostPath`` lists;
  each entry a mount on the main container (in that order of kinds) and a pod volume of the
  entry's ``name`` (the first of a name wins, as the definition's ``deDupVolumesArray``);
- ``volumes`` (the older form, honoured only without ``volumeMounts``, as in KubeVela):
  entries of ``type`` ``emptyDir`` (the default), ``pvc``, ``configMap``, ``secret``;
- ``livenessProbe``/``readinessProbe``: the definition's ``#HealthProbe`` with its defaults
  filled in (periodSeconds 10, timeoutSeconds 1, successThreshold 1, failureThreshold 3,
  initialDelaySeconds 0; ``httpGet.scheme`` HTTP), unknown keys refused (it is closed);
- ``hostAliases``: ``ip`` and ``hostnames``;
- ``addRevisionLabel`` (webservice, statefulset and daemon; worker.cue has none): the pod
  template labelled ``app.oam.dev/revision`` with ``context.revision``
  (:meth:`~.model.Component.revision`), so a changed component rolls its pods;
- ``sidecar``: a container appended to the workload's pod (``name``, ``image``, ``cmd``,
  ``args``, ``env``, ``volumes`` of ``name``/``path`` mounts, probes).

A ``hostPath`` volume mounts a member node's directory: KubeVela allows it and so does a
``k8s-objects`` Deployment here, so whether a namespace may is the member's Pod Security
admission to decide (docs/applications.md), not a rule this renderer could enforce alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import fields
from federation.applications.model import AppError, Component

JSON = dict[str, Any]

POD_PROPS = {"volumeMounts", "volumes", "livenessProbe", "readinessProbe", "hostAliases"}
_MOUNT_KINDS = ("pvc", "configMap", "secret", "emptyDir", "hostPath")
_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                   "successThreshold": 1, "failureThreshold": 3}


REVISION_LABEL = "app.oam.dev/revision"
"""KubeVela's pod label of the component's revision (``addRevisionLabel``)."""


def revision_label(component: Component, where: str) -> dict[str, str]:
    """``addRevisionLabel: true`` (default false): the pod template's label of
    ``context.revision``, as webservice.cue, statefulset.cue and daemon.cue write it."""
    wanted = fields.boolean(component.properties.get("addRevisionLabel", False),
                            f"{where}.addRevisionLabel")
    return {REVISION_LABEL: component.revision()} if wanted else {}


def apply(props: Mapping[str, Any], container: JSON, pod: JSON, where: str,
          host_mount_options: bool = False) -> None:
    """The pod-level parameters of ``props`` onto the main ``container`` and ``pod`` spec
    (``host_mount_options``: ``daemon``'s hostPath entries take ``mountPropagation`` and
    ``readOnly``, which its definition declares but drops; here they are set on the
    mount, as the storage trait's ``readOnly``, rather than accepted and lost)."""
    mounts: list[JSON] = []
    volumes: list[JSON] = []
    if props.get("volumeMounts") is not None:
        mounts, volumes = _volume_mounts(props["volumeMounts"], f"{where}.volumeMounts",
                                         host_mount_options)
    elif props.get("volumes") is not None:
        mounts, volumes = _old_volumes(props["volumes"], f"{where}.volumes")
    if mounts:
        container["volumeMounts"] = mounts
        pod["volumes"] = _first_of_each_name(volumes)
    for key in ("livenessProbe", "readinessProbe"):
        if props.get(key) is not None:
            container[key] = probe(props[key], f"{where}.{key}")
    if props.get("hostAliases") is not None:
        pod["hostAliases"] = _host_aliases(props["hostAliases"], f"{where}.hostAliases")


def _first_of_each_name(volumes: list[JSON]) -> list[JSON]:
    seen: set[str] = set()
    out = []
    for volume in volumes:
        if volume["name"] not in seen:
            seen.add(volume["name"])
            out.append(volume)
    return out


def _volume_mounts(raw: Any, where: str, host_mount_options: bool = False
                   ) -> tuple[list[JSON], list[JSON]]:
    if not isinstance(raw, dict):
        raise AppError(f"{where}: must be a map of {', '.join(_MOUNT_KINDS)} lists")
    fields.allowed(raw, set(_MOUNT_KINDS), where)
    mounts: list[JSON] = []
    volumes: list[JSON] = []
    for kind in _MOUNT_KINDS:
        for index, entry in enumerate(fields.maps(raw.get(kind), f"{where}.{kind}")):
            here = f"{where}.{kind}[{index}]"
            extra = {"pvc": {"claimName"}, "configMap": {"cmName", "defaultMode", "items"},
                     "secret": {"secretName", "defaultMode", "items"},
                     "emptyDir": {"medium"}, "hostPath": {"path"}}[kind]
            if kind == "hostPath" and host_mount_options:
                extra = extra | {"mountPropagation", "readOnly"}
            fields.allowed(entry, {"name", "mountPath", "subPath"} | extra, here)
            mounts.append(_mount(entry, here))
            volumes.append(_source(kind, entry, here))
    return mounts, volumes


def _mount(entry: Mapping[str, Any], where: str) -> JSON:
    mount: JSON = {"mountPath": fields.string(entry, "mountPath", where, required=True)}
    if entry.get("subPath") is not None:
        mount["subPath"] = fields.string(entry, "subPath", where)
    mount["name"] = fields.string(entry, "name", where, required=True)
    if entry.get("mountPropagation") is not None:
        if entry["mountPropagation"] not in ("None", "HostToContainer", "Bidirectional"):
            raise AppError(f"{where}.mountPropagation: must be None, HostToContainer or "
                           "Bidirectional")
        mount["mountPropagation"] = entry["mountPropagation"]
    if fields.boolean(entry.get("readOnly", False), f"{where}.readOnly"):
        mount["readOnly"] = True
    return mount


def _source(kind: str, entry: Mapping[str, Any], where: str) -> JSON:
    """The pod volume of one ``volumeMounts`` (or ``volumes``) entry."""
    name = fields.string(entry, "name", where, required=True)
    if kind == "pvc":
        return {"name": name, "persistentVolumeClaim": {
            "claimName": fields.string(entry, "claimName", where, required=True)}}
    if kind in ("configMap", "secret"):
        key, ref = ("name", "cmName") if kind == "configMap" else ("secretName", "secretName")
        source: JSON = {"defaultMode": fields.integer(entry.get("defaultMode", 420),
                                                      f"{where}.defaultMode", 0, 511),
                        key: fields.string(entry, ref, where, required=True)}
        if entry.get("items") is not None:
            source["items"] = fields.key_items(entry["items"], f"{where}.items")
        return {"name": name, kind: source}
    if kind == "emptyDir":
        medium = entry.get("medium", "")
        if medium not in ("", "Memory"):
            raise AppError(f"{where}.medium: must be \"\" or Memory")
        return {"name": name, "emptyDir": {"medium": medium}}
    return {"name": name, "hostPath": {"path": fields.string(entry, "path", where,
                                                             required=True)}}


def volume(kind: str, entry: Mapping[str, Any], where: str) -> JSON:
    """The pod volume of one entry of kind ``pvc``, ``configMap``, ``secret`` or
    ``emptyDir`` (the fields of webservice's ``volumes`` list)."""
    return _source(kind, entry, where)


def _old_volumes(raw: Any, where: str) -> tuple[list[JSON], list[JSON]]:
    """The deprecated ``volumes`` list: a ``type`` per entry, mounted without subPath."""
    mounts: list[JSON] = []
    volumes: list[JSON] = []
    extra = {"emptyDir": {"medium"}, "pvc": {"claimName"},
             "configMap": {"cmName", "defaultMode", "items"},
             "secret": {"secretName", "defaultMode", "items"}}
    for index, entry in enumerate(fields.maps(raw, where)):
        here = f"{where}[{index}]"
        kind = entry.get("type", "emptyDir")
        if not isinstance(kind, str) or kind not in extra:
            raise AppError(f"{here}.type: must be emptyDir, pvc, configMap or secret")
        fields.allowed(entry, {"name", "mountPath", "type"} | extra[kind], here)
        mounts.append({"mountPath": fields.string(entry, "mountPath", here, required=True),
                       "name": fields.string(entry, "name", here, required=True)})
        volumes.append(_source(kind, entry, here))
    return mounts, volumes


def probe(raw: Any, where: str, scheme: bool = True) -> JSON:
    """KubeVela's ``#HealthProbe`` with its defaults (``scheme``: webservice's and
    worker's have ``httpGet.host``/``scheme``, the sidecar's not)."""
    if not isinstance(raw, dict):
        raise AppError(f"{where}: must be a map (exec, httpGet or tcpSocket, and timings)")
    fields.allowed(raw, {"exec", "httpGet", "tcpSocket", *_PROBE_DEFAULTS}, where)
    out: JSON = {}
    if raw.get("exec") is not None:
        exec_ = raw["exec"]
        if not isinstance(exec_, dict):
            raise AppError(f"{where}.exec: must be a map with command")
        fields.allowed(exec_, {"command"}, f"{where}.exec")
        out["exec"] = {"command": fields.strings(exec_.get("command"),
                                                 f"{where}.exec.command")}
    if raw.get("httpGet") is not None:
        out["httpGet"] = _http_get(raw["httpGet"], f"{where}.httpGet", scheme)
    if raw.get("tcpSocket") is not None:
        socket = raw["tcpSocket"]
        if not isinstance(socket, dict):
            raise AppError(f"{where}.tcpSocket: must be a map with port")
        fields.allowed(socket, {"port"}, f"{where}.tcpSocket")
        out["tcpSocket"] = {"port": fields.integer(socket.get("port"),
                                                   f"{where}.tcpSocket.port", 1)}
    for key, default in _PROBE_DEFAULTS.items():
        out[key] = fields.integer(raw.get(key, default), f"{where}.{key}", 0, 2**31 - 1)
    return out


def _http_get(raw: Any, where: str, scheme: bool) -> JSON:
    if not isinstance(raw, dict):
        raise AppError(f"{where}: must be a map with path and port")
    allowed = {"path", "port", "httpHeaders"} | ({"host", "scheme"} if scheme else set())
    fields.allowed(raw, allowed, where)
    out: JSON = {"path": fields.string(raw, "path", where, required=True),
                 "port": fields.integer(raw.get("port"), f"{where}.port", 1)}
    if scheme and raw.get("host") is not None:
        out["host"] = fields.string(raw, "host", where)
    if scheme:
        out["scheme"] = fields.string(raw, "scheme", where) or "HTTP"
    if raw.get("httpHeaders") is not None:
        headers = []
        for index, header in enumerate(fields.maps(raw["httpHeaders"],
                                                   f"{where}.httpHeaders")):
            here = f"{where}.httpHeaders[{index}]"
            fields.allowed(header, {"name", "value"}, here)
            headers.append({"name": fields.string(header, "name", here, required=True),
                            "value": _text(header.get("value"), f"{here}.value")})
        out["httpHeaders"] = headers
    return out


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise AppError(f"{where}: must be a string")
    return value


def _host_aliases(raw: Any, where: str) -> list[JSON]:
    out = []
    for index, entry in enumerate(fields.maps(raw, where)):
        here = f"{where}[{index}]"
        fields.allowed(entry, {"ip", "hostnames"}, here)
        out.append({"ip": fields.string(entry, "ip", here, required=True),
                    "hostnames": fields.strings(entry.get("hostnames"), f"{here}.hostnames")})
    return out


def sidecar(props: Mapping[str, Any], pod: JSON, where: str) -> None:
    """KubeVela's ``sidecar`` trait: one more container in ``pod`` (its ``+patchKey=name``
    merges a container of the same name; here that is refused, not merged)."""
    fields.allowed(props, {"name", "image", "cmd", "args", "env", "volumes", "livenessProbe",
                           "readinessProbe"}, where)
    name = fields.string(props, "name", where, required=True)
    container: JSON = {"name": name, "image": fields.string(props, "image", where,
                                                            required=True)}
    for key, field in (("cmd", "command"), ("args", "args")):
        if props.get(key) is not None:
            container[field] = fields.strings(props[key], f"{where}.{key}")
    if props.get("env") is not None:
        container["env"] = fields.env_list(props["env"], f"{where}.env")
    if props.get("volumes") is not None:
        mounts = []
        for index, entry in enumerate(fields.maps(props["volumes"], f"{where}.volumes")):
            here = f"{where}.volumes[{index}]"
            fields.allowed(entry, {"name", "path"}, here)
            mounts.append({"mountPath": fields.string(entry, "path", here, required=True),
                           "name": fields.string(entry, "name", here, required=True)})
        container["volumeMounts"] = mounts
    for key in ("livenessProbe", "readinessProbe"):
        if props.get(key) is not None:
            container[key] = probe(props[key], f"{where}.{key}", scheme=False)
    containers = pod.setdefault("containers", [])
    if any(c.get("name") == name for c in containers):
        raise AppError(f"{where}.name: the pod already has a container {name!r}")
    containers.append(container)


def init_container(props: Mapping[str, Any], pod: JSON, main: str, where: str) -> None:
    """KubeVela's ``init-container`` trait: an init container sharing an emptyDir volume
    (``mountName``, default ``workdir``) with the main container (named after the
    component), mounted at ``initMountPath`` and ``appMountPath``; lists merge by name
    (``+patchKey=name``): an entry already there must be the same, else it is refused."""
    fields.allowed(props, {"name", "image", "imagePullPolicy", "cmd", "args", "env",
                           "mountName", "appMountPath", "initMountPath",
                           "extraVolumeMounts"}, where)
    volume = fields.string(props, "mountName", where) or "workdir"
    policy = props.get("imagePullPolicy", "IfNotPresent")
    if policy not in ("IfNotPresent", "Always", "Never"):
        raise AppError(f"{where}.imagePullPolicy: must be IfNotPresent, Always or Never")
    init: JSON = {"name": fields.string(props, "name", where, required=True),
                  "image": fields.string(props, "image", where, required=True),
                  "imagePullPolicy": policy}
    for key, field in (("cmd", "command"), ("args", "args")):
        if props.get(key) is not None:
            init[field] = fields.strings(props[key], f"{where}.{key}")
    if props.get("env") is not None:
        init["env"] = fields.env_list(props["env"], f"{where}.env")
    extra = []
    for index, entry in enumerate(fields.maps(props.get("extraVolumeMounts"),
                                              f"{where}.extraVolumeMounts")):
        here = f"{where}.extraVolumeMounts[{index}]"
        fields.allowed(entry, {"name", "mountPath"}, here)
        extra.append({"name": fields.string(entry, "name", here, required=True),
                      "mountPath": fields.string(entry, "mountPath", here, required=True)})
    init["volumeMounts"] = [{"name": volume, "mountPath": fields.string(
        props, "initMountPath", where, required=True)}, *extra]
    container = next((c for c in pod.get("containers") or [] if c.get("name") == main), None)
    if container is None:
        raise AppError(f"{where}: the pod has no container {main!r} (the component's)")
    _merge_by_name(container.setdefault("volumeMounts", []), {
        "name": volume, "mountPath": fields.string(props, "appMountPath", where,
                                                   required=True)}, f"{where}.appMountPath")
    _merge_by_name(pod.setdefault("initContainers", []), init, f"{where}.name")
    _merge_by_name(pod.setdefault("volumes", []), {"name": volume, "emptyDir": {}},
                   f"{where}.mountName")


def _merge_by_name(items: list[JSON], item: JSON, where: str) -> None:
    """``+patchKey=name``: appended, or already there the same; a different entry of the
    same name is a conflict (CUE's unification fails on it too)."""
    same = next((i for i in items if i.get("name") == item["name"]), None)
    if same is None:
        items.append(item)
    elif same != item:
        raise AppError(f"{where}: {item['name']!r} is already in the pod, differently")


def _patch_targets(props: Mapping[str, Any], main: str, keys: set[str], where: str
                   ) -> list[tuple[Mapping[str, Any], str, str]]:
    """The ``#PatchParams`` of ``command`` and ``container-image``: one set (its
    ``containerName`` defaulting to the component's container) or ``containers[]`` (each
    naming its container): (params, container name, path)."""
    if "containers" not in props:
        fields.allowed(props, keys | {"containerName"}, where)
        return [(props, fields.string(props, "containerName", where) or main, where)]
    fields.allowed(props, {"containers"}, where)
    out: list[tuple[Mapping[str, Any], str, str]] = []
    for index, entry in enumerate(fields.maps(props["containers"], f"{where}.containers")):
        here = f"{where}.containers[{index}]"
        fields.allowed(entry, keys | {"containerName"}, here)
        name = fields.string(entry, "containerName", here)
        if not name:
            raise AppError(f"{here}.containerName: required in containers")
        out.append((entry, name, here))
    return out


def _container_named(pod: JSON, name: str, where: str) -> JSON:
    found = next((c for c in pod.get("containers") or [] if c.get("name") == name), None)
    if found is None:
        raise AppError(f"{where}.containerName: container {name} not found")
    return found  # type: ignore[no-any-return]


def command(props: Mapping[str, Any], pod: JSON, main: str, where: str) -> None:
    """KubeVela's ``command`` trait: ``command`` replaces the container's; ``args``
    replaces its arguments, or ``addArgs``/``delArgs`` edit them (not both); the
    definition always writes ``args``, an empty list included."""
    keys = {"command", "args", "addArgs", "delArgs"}
    for params, name, here in _patch_targets(props, main, keys, where):
        container = _container_named(pod, name, here)
        lists = {k: fields.strings(params[k], f"{here}.{k}") for k in keys
                 if params.get(k) is not None}
        if "args" in lists and ("addArgs" in lists or "delArgs" in lists):
            raise AppError(f"{here}.args: cannot set addArgs/delArgs and args at the same "
                           "time")
        if "command" in lists:
            container["command"] = lists["command"]
        base = lists.get("args", list(container.get("args") or []))
        drop = set(lists.get("delArgs", []))
        added = [a for a in lists.get("addArgs", []) if a not in drop and a not in base]
        container["args"] = [a for a in base if a not in drop] + added


def container_image(props: Mapping[str, Any], pod: JSON, main: str, where: str) -> None:
    """KubeVela's ``container-image``: ``image`` and (when not "") ``imagePullPolicy``."""
    for params, name, here in _patch_targets(props, main, {"image", "imagePullPolicy"},
                                             where):
        container = _container_named(pod, name, here)
        container["image"] = fields.string(params, "image", here, required=True)
        policy = params.get("imagePullPolicy", "")
        if policy not in ("", "IfNotPresent", "Always", "Never"):
            raise AppError(f"{here}.imagePullPolicy: must be IfNotPresent, Always or Never")
        if policy:
            container["imagePullPolicy"] = policy


def host_alias(props: Mapping[str, Any], pod: JSON, where: str) -> None:
    """KubeVela's ``hostalias``: entries merged by ``ip`` (``+patchKey=ip``)."""
    fields.allowed(props, {"hostAliases"}, where)
    current = pod.setdefault("hostAliases", [])
    for entry in _host_aliases(props.get("hostAliases"), f"{where}.hostAliases"):
        same = next((a for a in current if a.get("ip") == entry["ip"]), None)
        if same is None:
            current.append(entry)
        elif same != entry:
            raise AppError(f"{where}.hostAliases: {entry['ip']} is already an alias of "
                           "other hostnames")
