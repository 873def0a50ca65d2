"""What a pod template asks of a cluster: replica requirements and dependencies.

Karmada's semantics, for its built-in interpreter and its ``kube`` Lua library: the
resource request of one replica is the sum of its containers' requests (a limit stands in
for a missing request), at least the largest init container's, plus the pod overhead; the
node claim is its node selector, tolerations and required node affinity. Dependencies are
the ConfigMaps, Secrets, ServiceAccount (other than ``default``) and PVCs it names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from federation.interpreter import quantity

JSON = dict[str, Any]

_INTEGER_RESOURCES = {"memory": quantity.BINARY_SI, "ephemeral-storage": quantity.BINARY_SI,
                      "pods": quantity.DECIMAL_SI}


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] \
        if isinstance(value, list) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _scalar(name: str) -> bool:
    """Extended, huge page and attachable-volume resources (Kubernetes' scalar resources)."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


def _requests(container: Mapping[str, Any]) -> dict[str, quantity.Quantity]:
    resources = _map(container.get("resources"))
    found = {**_map(resources.get("limits")), **_map(resources.get("requests"))}
    return {str(name): quantity.Quantity.parse(str(value)) for name, value in found.items()
            if name in ("cpu", *_INTEGER_RESOURCES) or _scalar(str(name))}


def _amount(name: str, value: quantity.Quantity) -> int:
    return value.milli() if name == "cpu" else value.whole()


def resource_request(spec: Mapping[str, Any]) -> JSON | None:
    """One replica's request, as Kubernetes prints quantities; None when it asks nothing."""
    total: dict[str, int] = {}
    for container in _dicts(spec.get("containers")):
        for name, value in _requests(container).items():
            total[name] = total.get(name, 0) + _amount(name, value)
    for container in _dicts(spec.get("initContainers")):
        for name, value in _requests(container).items():
            total[name] = max(total.get(name, 0), _amount(name, value))
    for name, value in _map(spec.get("overhead")).items():
        if name == "cpu" or name in _INTEGER_RESOURCES or _scalar(str(name)):
            parsed = quantity.Quantity.parse(str(value))
            total[str(name)] = total.get(str(name), 0) + _amount(str(name), parsed)
    found: JSON = {}
    for name, amount in total.items():
        if amount <= 0:
            continue
        if name == "cpu":
            found[name] = str(quantity.milli_cpu(amount))
        else:
            form = _INTEGER_RESOURCES.get(name) or (
                quantity.BINARY_SI if name.startswith("hugepages-") else quantity.DECIMAL_SI)
            found[name] = str(quantity.count(amount, form))
    return found or None


def node_claim(spec: Mapping[str, Any]) -> JSON | None:
    claim: JSON = {}
    if spec.get("nodeSelector"):
        claim["nodeSelector"] = spec["nodeSelector"]
    required = _map(_map(_map(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        claim["hardNodeAffinity"] = required
    if spec.get("tolerations"):
        claim["tolerations"] = spec["tolerations"]
    return claim or None


def requirements(template: Mapping[str, Any]) -> JSON | None:
    """Karmada's ReplicaRequirements of a pod template (``nodeClaim``, ``resourceRequest``)."""
    spec = _map(template.get("spec"))
    found: JSON = {}
    claim, request = node_claim(spec), resource_request(spec)
    if claim:
        found["nodeClaim"] = claim
    if request:
        found["resourceRequest"] = request
    return found or None


def dependencies(template: Mapping[str, Any], namespace: str) -> list[JSON]:
    """Karmada's DependentObjectReferences of a pod template in ``namespace``."""
    spec = _map(template.get("spec"))
    found: set[tuple[str, str]] = set()
    found.update(("ConfigMap", name) for name in _names(spec, "configMap"))
    found.update(("Secret", name) for name in _names(spec, "secret"))
    account = spec.get("serviceAccountName")
    if isinstance(account, str) and account not in ("", "default"):
        found.add(("ServiceAccount", account))
    for volume in _dicts(spec.get("volumes")):
        claim = _map(volume.get("persistentVolumeClaim")).get("claimName")
        if isinstance(claim, str) and claim:
            found.add(("PersistentVolumeClaim", claim))
    return [{"apiVersion": "v1", "kind": kind, "namespace": namespace, "name": name}
            for kind, name in sorted(found)]


def _names(spec: Mapping[str, Any], kind: str) -> Iterator[str]:
    """ConfigMap or Secret names a pod spec refers to (kind ``configMap`` or ``secret``)."""
    containers = [*_dicts(spec.get("containers")), *_dicts(spec.get("initContainers")),
                  *_dicts(spec.get("ephemeralContainers"))]
    for container in containers:
        for source in _dicts(container.get("envFrom")):
            yield from _named(_map(source.get(f"{kind}Ref")).get("name"))
        for env in _dicts(container.get("env")):
            ref = _map(_map(env.get("valueFrom")).get(f"{kind}KeyRef"))
            yield from _named(ref.get("name"))
    for volume in _dicts(spec.get("volumes")):
        yield from _volume_names(volume, kind)
    if kind == "secret":
        for pull in _dicts(spec.get("imagePullSecrets")):
            yield from _named(pull.get("name"))


def _volume_names(volume: Mapping[str, Any], kind: str) -> Iterator[str]:
    if kind == "configMap":
        yield from _named(_map(volume.get("configMap")).get("name"))
        for source in _dicts(_map(volume.get("projected")).get("sources")):
            yield from _named(_map(source.get("configMap")).get("name"))
        return
    yield from _named(_map(volume.get("secret")).get("secretName"))
    for source in _dicts(_map(volume.get("projected")).get("sources")):
        yield from _named(_map(source.get("secret")).get("name"))
    yield from _named(_map(volume.get("azureFile")).get("secretName"))
    for plugin in ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"):
        yield from _named(_map(_map(volume.get(plugin)).get("secretRef")).get("name"))
    yield from _named(_map(_map(volume.get("csi")).get("nodePublishSecretRef")).get("name"))


def _named(name: Any) -> Iterator[str]:
    if isinstance(name, str) and name:
        yield name
