"""KubeVela's traits that publish a component over HTTP: ``gateway``, ``ingress`` and
``ingress-1-20``, rendered as vela-core's definitions render them (vela-templates/
definitions/internal/trait/gateway.cue; deprecated/ingress.cue and ingress-1-20.cue).

Each renders a Service selecting the component's pods (one port per ``http`` entry) and an
Ingress routing each ``http`` path to it, paths in the order written. ``gateway`` asks the
member's Kubernetes version for its Ingress API (``networking.k8s.io/v1beta1`` before
1.19); a render here is for every member at once, so it renders ``networking.k8s.io/v1``
(every member of this control plane is 1.19 or later). ``ingress`` is the old
``networking.k8s.io/v1beta1`` form, as its definition writes it. A Service of the same name
already rendered (a ``webservice``'s exposed ports) is replaced, as the ``expose`` trait
does, rather than rendered twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import fields
from federation.applications.model import AppError

JSON = dict[str, Any]

_GATEWAY = {"domain", "http", "class", "classInSpec", "secretName", "gatewayHost", "name",
            "pathType", "annotations", "labels", "existingServiceName"}


def _http(props: Mapping[str, Any], where: str) -> dict[str, int]:
    """``http``: path -> port, at least one."""
    raw = props.get("http")
    if not isinstance(raw, dict) or not raw:
        raise AppError(f"{where}.http: must be a map of path to port, such as {{/: 80}}")
    return {str(path): fields.integer(port, f"{where}.http.{path}", 1)
            for path, port in raw.items()}


def _service(name: str, component: str, http: Mapping[str, int], named: bool) -> JSON:
    ports = [{"name": f"port-{port}", "port": port, "targetPort": port} if named
             else {"port": port, "targetPort": port} for port in http.values()]
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app.oam.dev/component": component}, "ports": ports}}


def _replacing(objects: list[JSON], added: list[JSON]) -> list[JSON]:
    names = {(o["kind"], o["metadata"]["name"]) for o in added}
    kept = [o for o in objects  # str(): a patched manifest may hold anything there
            if (str(o.get("kind")), str((o.get("metadata") or {}).get("name"))) not in names]
    return [*kept, *added]


def gateway(objects: list[JSON], props: Mapping[str, Any], component: str,
            where: str) -> list[JSON]:
    fields.allowed(props, _GATEWAY, where)
    http = _http(props, where)
    suffix = f"-{fields.string(props, 'name', where)}" if props.get("name") is not None else ""
    service = fields.string(props, "existingServiceName", where) or f"{component}{suffix}"
    class_ = fields.string(props, "class", where) or "nginx"
    in_spec = fields.boolean(props.get("classInSpec", False), f"{where}.classInSpec")
    path_type = props.get("pathType", "ImplementationSpecific")
    if path_type not in ("ImplementationSpecific", "Prefix", "Exact"):
        raise AppError(f"{where}.pathType: must be ImplementationSpecific, Prefix or Exact")
    annotations: dict[str, Any] = {} if in_spec else {"kubernetes.io/ingress.class": class_}
    if props.get("gatewayHost") is not None:
        annotations["ingress.controller/host"] = fields.string(props, "gatewayHost", where)
    annotations.update(fields.string_map(props.get("annotations") or {},
                                         f"{where}.annotations"))
    rule: JSON = {}
    if props.get("domain") is not None:
        rule["host"] = fields.string(props, "domain", where)
    rule["http"] = {"paths": [{"path": path, "pathType": path_type, "backend": {
        "service": {"name": service, "port": {"number": port}}}} for path, port in http.items()]}
    spec: JSON = {"ingressClassName": class_} if in_spec else {}
    if props.get("secretName") is not None:
        if "host" not in rule:
            raise AppError(f"{where}.domain: required with secretName (the TLS host)")
        spec["tls"] = [{"hosts": [rule.get("host")],
                        "secretName": fields.string(props, "secretName", where)}]
    spec["rules"] = [rule]
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": f"{component}{suffix}", "annotations": annotations,
                            "labels": fields.string_map(props.get("labels") or {},
                                                        f"{where}.labels")},
               "spec": spec}
    added = [] if props.get("existingServiceName") is not None else \
        [_service(service, component, http, named=True)]
    return _replacing(objects, [*added, ingress])


def ingress(objects: list[JSON], props: Mapping[str, Any], component: str, where: str,
            version: str) -> list[JSON]:
    """``ingress`` (``version`` v1beta1) and ``ingress-1-20`` (v1, with the class)."""
    fields.allowed(props, {"domain", "http"} | ({"class"} if version == "v1" else set()),
                   where)
    http = _http(props, where)
    domain = fields.string(props, "domain", where, required=True)
    if version == "v1":
        paths = [{"path": path, "pathType": "ImplementationSpecific", "backend": {
            "service": {"name": component, "port": {"number": port}}}}
            for path, port in http.items()]
        meta: JSON = {"name": component, "annotations": {
            "kubernetes.io/ingress.class": fields.string(props, "class", where) or "nginx"}}
    else:
        paths = [{"path": path, "backend": {"serviceName": component, "servicePort": port}}
                 for path, port in http.items()]
        meta = {"name": component}
    body = {"apiVersion": f"networking.k8s.io/{version}", "kind": "Ingress",
            "metadata": meta, "spec": {"rules": [{"host": domain, "http": {"paths": paths}}]}}
    return _replacing(objects, [_service(component, component, http, named=False), body])
