"""vela-core's ``collect-service-endpoints`` step: the endpoints of the Application's own
Services and Ingresses, as KubeVela's query provider makes them
(pkg/workflow/providers/query/endpoint.go, ``generatorFromService`` and
``generatorFromIngress``), filtered as the step's CUE filters them
(vela-templates/definitions/internal/workflowstep/collect-service-endpoints.cue).

Pure functions over objects the controller read: what is read, and from where, is the
controller's (only objects this Application placed, in the clusters its steps started,
never a Secret: :func:`collectable` says which kinds). Nothing here reads or writes.

Narrower than KubeVela: the Application's own objects only (``name`` and ``namespace``
other than its own are refused: KubeVela reads any Application's); a NodePort endpoint's
host is empty (KubeVela picks a node's address; the control plane reads no Node for a
tenant); HTTPRoutes and Seldon deployments are not collected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import shapes
from federation.applications.model import AppError, Step

JSON = dict[str, Any]
INGRESS_VERSIONS = ("networking.k8s.io/v1", "networking.k8s.io/v1beta1")
"""The Ingresses KubeVela's provider reads (group networking.k8s.io; it logs others)."""
_APP_PROTOCOLS = {80: "http", 8080: "http", 443: "https", 3306: "mysql", 6379: "redis"}
"""KubeVela's ``judgeAppProtocol``: the application protocol a Service port suggests."""
COLLECT = {"name?": str, "namespace?": str, "components?": [str], "port?": int,
           "portName?": str, "outer?": bool,
           "protocal": shapes.Default(shapes.Enum("http", "https"), "http")}


@dataclasses.dataclass(frozen=True)
class Collect:
    """What a ``collect-service-endpoints`` step keeps (KubeVela's filters)."""

    components: tuple[str, ...] | None = None
    port: int | None = None
    port_name: str | None = None
    outer: bool | None = None
    protocol: str = "http"
    """KubeVela's ``protocal`` (sic): the scheme of ``value.url``."""


def collect(step: Step, app: str, namespace: str, components: Sequence[str], where: str
            ) -> Collect:
    """The step's properties: ``name``/``namespace`` may only name this Application (its
    defaults); each of ``components`` must be one of its components (KubeVela would wait
    for ever for an endpoint of a component that does not exist)."""
    props = shapes.check(step.properties, COLLECT, where)
    if props.get("name") not in (None, app):
        raise AppError(f"{where}.name: not supported (the step collects this Application's "
                       "own endpoints; another Application's are not read; leave it out)")
    if props.get("namespace") not in (None, "", namespace):
        raise AppError(f"{where}.namespace: not supported (the step reads the Application's "
                       "own namespace only; leave it out)")
    chosen = props.get("components")
    for index, name in enumerate(chosen or ()):
        if name not in components:
            raise AppError(f"{where}.components[{index}]: names no component of the "
                           "Application")
    return Collect(tuple(chosen) if chosen is not None else None, props.get("port"),
                   props.get("portName"), props.get("outer"), props["protocal"])


def collectable(obj: Mapping[str, Any]) -> bool:
    """A rendered object whose endpoints the step reads: a Service, or an Ingress."""
    kind, version = obj.get("kind"), obj.get("apiVersion")
    return (kind, version) == ("Service", "v1") or (kind == "Ingress"
                                                    and version in INGRESS_VERSIONS)


def of_object(live: Mapping[str, Any], cluster: str, component: str) -> list[JSON]:
    """The endpoints of one live Service or Ingress, as KubeVela lists them."""
    if live.get("kind") == "Service":
        return _of_service(live, cluster, component)
    return _of_ingress(live, cluster, component)


def _entry(live: Mapping[str, Any], cluster: str, component: str, endpoint: JSON) -> JSON:
    meta = live.get("metadata") or {}
    return {"endpoint": endpoint, "cluster": cluster, "component": component,
            "ref": {"apiVersion": live.get("apiVersion"), "kind": live.get("kind"),
                    "namespace": meta.get("namespace"), "name": meta.get("name")}}


def _of_service(live: Mapping[str, Any], cluster: str, component: str) -> list[JSON]:
    spec = live.get("spec") or {}
    meta = live.get("metadata") or {}
    kind = spec.get("type") or "ClusterIP"
    found: list[JSON] = []
    for port in spec.get("ports") or ():
        number = int(port.get("port") or 0)
        base = {"protocol": port.get("protocol") or "TCP",
                "appProtocol": _APP_PROTOCOLS.get(number, ""),
                "portName": port.get("name") or "", "path": ""}
        if kind == "LoadBalancer":
            for ingress in ((live.get("status") or {}).get("loadBalancer") or {}).get(
                    "ingress") or ():
                for host in (ingress.get("hostname"), ingress.get("ip")):
                    if host:
                        found.append(_entry(live, cluster, component, {
                            **base, "host": host, "port": number, "inner": False}))
        elif kind == "NodePort":
            found.append(_entry(live, cluster, component, {
                **base, "host": "", "port": int(port.get("nodePort") or 0),
                "inner": False}))
        elif kind in ("ClusterIP", "ExternalName"):
            found.append(_entry(live, cluster, component, {
                **base, "host": f"{meta.get('name')}.{meta.get('namespace')}",
                "port": number, "inner": True}))
    return found


def _of_ingress(live: Mapping[str, Any], cluster: str, component: str) -> list[JSON]:
    spec = live.get("spec") or {}
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    tls = spec.get("tls") or []
    found: list[JSON] = []
    for rule in spec.get("rules") or ():
        host = rule.get("host") or ""
        secure = any(not t.get("hosts") or host in t["hosts"] for t in tls)
        scheme = "https" if secure else "http"
        port = _port(annotations.get(f"ingress.controller/{scheme}-port"),
                     443 if secure else 80)
        for path in (rule.get("http") or {}).get("paths") or ():
            found.append(_entry(live, cluster, component, {
                "protocol": "TCP", "appProtocol": scheme, "portName": "",
                "host": host or annotations.get("ingress.controller/host", ""),
                "path": path.get("path") or "", "port": port, "inner": False}))
    return found


def _port(annotation: Any, default: int) -> int:
    """KubeVela's ingress controller port annotation, when it is a positive number."""
    try:
        port = int(str(annotation))
    except ValueError:
        return default
    return port if port > 0 else default


def template(chosen: Collect, found: Sequence[JSON]) -> JSON:
    """The step's template fields an output may name (``value.endpoint.host``,
    ``value.url``, ``outputs.endpoints``, ``collect.$returns.list``), as its CUE computes
    them from the endpoints found."""
    by_name = [e for e in found if chosen.port_name is None
               or e["endpoint"]["portName"] == chosen.port_name]
    by_port = [e for e in by_name if chosen.port is None or e["endpoint"]["port"] == chosen.port]
    endpoints = by_port if not chosen.outer else \
        [e for e in by_port if not e["endpoint"].get("inner")]
    value: JSON = {}
    if endpoints:
        first = endpoints[0]["endpoint"]
        value = {"endpoint": first,
                 "url": f"{chosen.protocol}://{first['host']}:{first['port']}"}
    return {"collect": {"$returns": {"list": list(found)}},
            "outputs": {"eps_port_name_filtered": by_name, "eps_port_filtered": by_port,
                        "eps": by_port, "endpoints": endpoints},
            "value": value}
