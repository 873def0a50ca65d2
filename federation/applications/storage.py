"""KubeVela's ``storage`` trait, rendered as vela-core's definition renders it
(vela-templates/definitions/internal/trait/storage.cue).

Five lists, each entry a volume named ``<kind>-<name>`` on the pod (the first of a name
wins) and a mount on the workload's first container:

- ``pvc``: a PersistentVolumeClaim ``name`` (unless ``mountOnly``; ``accessModes``
  ReadWriteOnce, ``volumeMode`` Filesystem, ``resources.requests.storage`` 8Gi by default);
  a ``Block`` claim is a ``volumeDevices`` entry instead of a mount;
- ``configMap``, ``secret``: the ConfigMap or Secret ``name`` (unless ``mountOnly``; with
  ``data``/``stringData`` when given), mounted where a ``mountPath`` is given, and keys as
  environment variables by ``mountToEnv``/``mountToEnvs``;
- ``emptyDir`` (``medium`` "" or Memory) and ``hostPath`` (``path``, ``type`` Directory
  by default).

Two differences, both refusing or honouring what the definition would silently drop:
``readOnly`` (which the definition accepts and never uses) sets the mount read-only, and a
``pvc``'s ``selector`` (which the definition writes into ``dataSource``) is refused. A
``hostPath`` volume mounts a member node's directory; see :mod:`.pods` on who decides that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from federation.applications import fields
from federation.applications.model import AppError

JSON = dict[str, Any]

_KINDS = ("pvc", "configMap", "secret", "emptyDir", "hostPath")
_QUANTITY = re.compile(r"^([1-9][0-9]{0,63})(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$")
_HOST_PATH_TYPES = ("Directory", "DirectoryOrCreate", "FileOrCreate", "File", "Socket",
                    "CharDevice", "BlockDevice")
_ALLOWED = {
    "pvc": {"name", "mountOnly", "mountPath", "subPath", "volumeMode", "volumeName",
            "accessModes", "storageClassName", "resources", "dataSourceRef", "dataSource"},
    "configMap": {"name", "mountOnly", "mountToEnv", "mountToEnvs", "mountPath", "subPath",
                  "defaultMode", "readOnly", "data", "items"},
    "secret": {"name", "mountOnly", "mountToEnv", "mountToEnvs", "mountPath", "subPath",
               "defaultMode", "readOnly", "stringData", "data", "items"},
    "emptyDir": {"name", "mountPath", "subPath", "medium"},
    "hostPath": {"name", "path", "mountPath", "type"},
}


def render(props: Mapping[str, Any], pod: JSON, where: str) -> list[JSON]:
    """Patch ``pod`` (volumes, the first container's mounts, devices and env) and return
    the objects the trait adds (claims, ConfigMaps, Secrets)."""
    fields.allowed(props, set(_KINDS), where)
    volumes: list[JSON] = []
    mounts: list[JSON] = []
    devices: list[JSON] = []
    env: list[JSON] = []
    objects: list[JSON] = []
    for kind in _KINDS:
        singles: list[JSON] = []  # the definition lists every mountToEnv of a kind first
        many: list[JSON] = []
        for index, entry in enumerate(fields.maps(props.get(kind), f"{where}.{kind}")):
            here = f"{where}.{kind}[{index}]"
            fields.allowed(entry, _ALLOWED[kind], here)
            _entry(kind, entry, here, volumes, mounts, devices, objects)
            if kind in ("configMap", "secret"):
                one, more = _env(kind, str(entry["name"]), entry, here)
                singles += one
                many += more
        env += singles + many
    containers = pod.setdefault("containers", [])
    if not containers:
        raise AppError(f"{where}: the workload has no container to mount into")
    container = containers[0]
    for key, items in (("env", env), ("volumeDevices", devices), ("volumeMounts", mounts)):
        if items:
            _merge(container.setdefault(key, []), items)
    if volumes:
        _merge(pod.setdefault("volumes", []), volumes)
    return objects


def _merge(current: list[JSON], added: list[JSON]) -> None:
    """``+patchKey=name``: an entry of a name already there is left as it is."""
    names = {str(item.get("name")) for item in current}  # a tenant's manifest: any value
    for item in added:
        if item["name"] not in names:
            names.add(item["name"])
            current.append(item)


def _entry(kind: str, entry: Mapping[str, Any], where: str, volumes: list[JSON],
           mounts: list[JSON], devices: list[JSON], objects: list[JSON]) -> None:
    name = fields.string(entry, "name", where, required=True)
    assert name is not None
    volume = f"{kind.lower()}-{name}"
    mount_path = fields.string(entry, "mountPath", where, required=kind != "configMap")
    if mount_path is not None:
        volumes.append({"name": volume, **_source(kind, name, entry, where)})
        mount: JSON = {"name": volume, "mountPath": mount_path}
        if entry.get("subPath") is not None and kind != "hostPath":
            mount["subPath"] = fields.string(entry, "subPath", where)
        if fields.boolean(entry.get("readOnly", False), f"{where}.readOnly"):
            mount["readOnly"] = True
        if kind == "pvc" and _volume_mode(entry, where) == "Block":
            devices.append({"name": volume, "devicePath": mount_path,
                            **({"subPath": mount["subPath"]} if "subPath" in mount else {})})
        else:
            mounts.append(mount)
    if kind in ("pvc", "configMap", "secret") and \
            not fields.boolean(entry.get("mountOnly", False), f"{where}.mountOnly"):
        objects.append(_object(kind, name, entry, where))


def _volume_mode(entry: Mapping[str, Any], where: str) -> str:
    return fields.string(entry, "volumeMode", where) or "Filesystem"


def _source(kind: str, name: str, entry: Mapping[str, Any], where: str) -> JSON:
    if kind == "pvc":
        return {"persistentVolumeClaim": {"claimName": name}}
    if kind in ("configMap", "secret"):
        source: JSON = {"defaultMode": fields.integer(entry.get("defaultMode", 420),
                                                      f"{where}.defaultMode", 0, 511),
                        ("name" if kind == "configMap" else "secretName"): name}
        if entry.get("items") is not None:
            source["items"] = fields.key_items(entry["items"], f"{where}.items")
        return {kind: source}
    if kind == "emptyDir":
        medium = entry.get("medium", "")
        if medium not in ("", "Memory"):
            raise AppError(f"{where}.medium: must be \"\" or Memory")
        return {"emptyDir": {"medium": medium}}
    type_ = entry.get("type", "Directory")
    if type_ not in _HOST_PATH_TYPES:
        raise AppError(f"{where}.type: must be one of {', '.join(_HOST_PATH_TYPES)}")
    return {"hostPath": {"path": fields.string(entry, "path", where, required=True),
                         "type": type_}}


def _env(kind: str, name: str, entry: Mapping[str, Any], where: str
         ) -> tuple[list[JSON], list[JSON]]:
    """``mountToEnv`` and ``mountToEnvs``: environment variables from the object's keys."""
    key_field, ref = ("configMapKey", "configMapKeyRef") if kind == "configMap" else \
        ("secretKey", "secretKeyRef")

    def variable(raw: Any, here: str) -> JSON:
        if not isinstance(raw, dict):
            raise AppError(f"{here}: must be a map of envName and {key_field}")
        fields.allowed(raw, {"envName", key_field}, here)
        return {"name": fields.string(raw, "envName", here, required=True),
                "valueFrom": {ref: {"name": name, "key": fields.string(
                    raw, key_field, here, required=True)}}}

    one = [variable(entry["mountToEnv"], f"{where}.mountToEnv")] \
        if entry.get("mountToEnv") is not None else []
    more = [variable(item, f"{where}.mountToEnvs[{index}]") for index, item in
            enumerate(fields.maps(entry.get("mountToEnvs"), f"{where}.mountToEnvs"))]
    return one, more


def _object(kind: str, name: str, entry: Mapping[str, Any], where: str) -> JSON:
    if kind == "pvc":
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name}, "spec": _claim(entry, where)}
    body: JSON = {"apiVersion": "v1", "kind": "ConfigMap" if kind == "configMap" else "Secret",
                  "metadata": {"name": name}}
    for key in ("data", "stringData") if kind == "secret" else ("data",):
        if entry.get(key) is not None:
            body[key] = fields.string_map(entry[key], f"{where}.{key}")
    return body


def _claim(entry: Mapping[str, Any], where: str) -> JSON:
    spec: JSON = {"accessModes": fields.strings(entry.get("accessModes", ["ReadWriteOnce"]),
                                                f"{where}.accessModes"),
                  "volumeMode": _volume_mode(entry, where)}
    for key in ("volumeName", "storageClassName"):
        if entry.get(key) is not None:
            spec[key] = fields.string(entry, key, where)
    spec["resources"] = _claim_resources(entry.get("resources"), f"{where}.resources")
    for key in ("dataSourceRef", "dataSource"):
        if entry.get(key) is not None:
            ref = entry[key]
            if not isinstance(ref, dict):
                raise AppError(f"{where}.{key}: must be a map of name, kind and apiGroup")
            fields.allowed(ref, {"name", "kind", "apiGroup"}, f"{where}.{key}")
            spec[key] = {k: fields.string(ref, k, f"{where}.{key}", required=True)
                         for k in ("name", "kind", "apiGroup")}
    return spec


def _claim_resources(raw: Any, where: str) -> JSON:
    """``requests.storage`` (default 8Gi) and ``limits.storage``, quantities like 8Gi."""
    if raw is None:
        return {"requests": {"storage": "8Gi"}}
    if not isinstance(raw, dict):
        raise AppError(f"{where}: must be a map of requests and limits")
    fields.allowed(raw, {"requests", "limits"}, where)
    out: JSON = {}
    for key in ("requests", "limits"):
        if raw.get(key) is None:
            continue
        amounts = raw[key]
        if not isinstance(amounts, dict):
            raise AppError(f"{where}.{key}: must be a map with storage")
        fields.allowed(amounts, {"storage"}, f"{where}.{key}")
        storage = amounts.get("storage")
        if not isinstance(storage, str) or not _QUANTITY.match(storage):
            raise AppError(f"{where}.{key}.storage: must be a quantity such as 8Gi")
        out[key] = {"storage": storage}
    out.setdefault("requests", {"storage": "8Gi"})
    return {"requests": out["requests"], **({"limits": out["limits"]} if "limits" in out
                                            else {})}
