"""vela-core's ``export-service`` (workflowstep/export-service.cue), gated by an administrator.

KubeVela applies a selector-less Service (ClusterIP, one TCP port ``port`` to
``targetPort``) and its Endpoints (one address ``ip``, port ``targetPort``), both named
``name`` (default the Application's), in each cluster of the topology policy ``topology``
(default the local cluster). A selector-less Service's Endpoints send the Service's traffic
to any address, which is why Kubernetes' own ``edit`` role lost its right on Endpoints
(CVE-2021-25740): a tenant could point a Service of theirs at another namespace's pods, the
node, or the cloud's metadata service. Endpoints are on the deny list (never written in a
member) and the member role grants none by default.

So the step is honoured only where an administrator allows it, in two places:

- ``fedctl run --export-service-allow CIDR[,CIDR...]`` (:class:`Allow`, default none) names
  the address ranges tenants may export; an ``ip`` outside them is refused by name, with
  the flag in the message, and loopback, link-local (169.254.0.0/16 and fe80::/10: the
  cloud metadata services), unspecified and multicast addresses are refused whatever the
  flag says (an IPv6 form of an IPv4 address, mapped, 6to4, Teredo or NAT64, is judged as
  that address too);
- the member role grants Endpoints only with ``fedctl install|join|rbac --export-service``.

What is written: the Service, and the Endpoints of the same name in the Application's own
namespace (``namespace`` naming another is refused), annotated :data:`ANNOTATION`. The
writer's deny check lets an Endpoints pass only when :func:`writable` says it is that
object (the annotation, one subset of exactly one allowed address); no other step may
render the annotation (:func:`refuse_forged`), so a tenant's own Endpoints (a
``k8s-objects`` manifest) stays refused. Pure: nothing here reads or writes.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.applications import shapes, steps
from federation.applications.model import AppError, AppSpec, PolicySpec, Step
from federation.untrusted import addresses

JSON = dict[str, Any]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

STEP_TYPE = "export-service"
FLAG = "--export-service-allow"
ANNOTATION = "federation.io/export-service"
"""On the step's Endpoints, naming the step: the writer's deny check lets it pass."""
_PORT = shapes.Range(1, 65535)
PARAMETERS = {"name?": str, "namespace?": str, "ip": str, "port": _PORT, "targetPort": _PORT,
              "topology?": str}
_SERVICE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
"""A Service's name: a DNS-1035 label."""


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _carried(address: Address) -> Address | None:
    """The IPv4 address an IPv6 address carries (6to4, Teredo, NAT64; a mapped one is
    unwrapped when parsed), which a gateway may route it to."""
    carried = addresses.unwrap(address)
    return carried if carried != address else None


def never_exported(address: Address) -> str | None:
    """Why ``address`` (or the IPv4 address it carries) is never exported, whatever the
    administrator allows."""
    carried = _carried(address)
    if carried is not None and never_exported(carried) is not None:
        return f"a form of {carried}, {never_exported(carried)}"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (169.254.0.0/16, fe80::/10: the cloud metadata services)"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    return None


@dataclasses.dataclass(frozen=True)
class Allow:
    """The address ranges tenants may export (``fedctl run --export-service-allow``)."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Allow:
        """CIDRs (or bare addresses), comma-separated or repeated; ValueError names the
        flag and the bad one."""
        found: list[Network] = []
        for text in texts:
            for part in (p.strip() for p in text.split(",")):
                if not part:
                    continue
                try:
                    found.append(ipaddress.ip_network(part, strict=False))
                except ValueError:
                    raise ValueError(f"{FLAG}: {part[:80]!r} is not an IP network in CIDR "
                                     "form") from None
        return cls(tuple(found))

    def describe(self) -> str:
        return ", ".join(str(n) for n in self.networks) or "none"

    def refusal(self, text: str) -> str | None:
        """Why ``text`` may not be exported (None: it may)."""
        address = _address(text)
        if address is None:
            return "not an IP address (an Endpoints address is an IP)"
        never = never_exported(address)
        if never is not None:
            return f"{address} is {never}: never exported"
        if not any(address.version == n.version and address in n for n in self.networks):
            return (f"{address} is outside the ranges the administrator lets Applications "
                    f"export (fedctl run {FLAG}: {self.describe()})")
        return None


def objects(step: Step, app: str, namespace: str, allow: Allow, where: str
            ) -> tuple[list[JSON], JSON]:
    """The Service and Endpoints the step writes, and its checked properties."""
    props = shapes.check(step.properties, PARAMETERS, where)
    steps.own_namespace(props, namespace, where)
    name = props.get("name", app)
    if not isinstance(name, str) or not _SERVICE_NAME.match(name):
        raise AppError(f"{where}.name: not a Service name (a DNS label: lower-case letters, "
                       "digits and '-', starting with a letter, at most 63 characters)")
    why = allow.refusal(props["ip"])
    if why is not None:
        raise AppError(f"{where}.ip: {why}")
    address = str(_address(props["ip"]))
    service: JSON = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                     "spec": {"type": "ClusterIP", "ports": [{
                         "protocol": "TCP", "port": props["port"],
                         "targetPort": props["targetPort"]}]}}
    endpoints: JSON = {"apiVersion": "v1", "kind": "Endpoints",
                       "metadata": {"name": name, "annotations": {ANNOTATION: step.name}},
                       "subsets": [{"addresses": [{"ip": address}],
                                    "ports": [{"port": props["targetPort"]}]}]}
    return [service, endpoints], props


def export_service(step: Step, spec: AppSpec, app: str, namespace: str,
                   known: Mapping[str, PolicySpec], allow: Allow, where: str
                   ) -> tuple[AppSpec, PolicySpec]:
    """The step as a deploy step of its Service and Endpoints, placed by ``topology``."""
    here = f"{where}.properties"
    manifests, props = objects(step, app, namespace, allow, here)
    component = steps.step_component(step, manifests, where, "the Service and Endpoints")
    placement = steps.topology_placement(props.get("topology"), known, f"{here}.topology")
    return spec.model_copy(update={"components": (component,)}), PolicySpec(
        name=where, type="topology", properties=placement)


def refuse_forged(clusters: Mapping[str, Sequence[Mapping[str, Any]]], where: str) -> None:
    """An object of another step carrying :data:`ANNOTATION` is refused: the writer lets
    an Endpoints with it pass the deny list, so only this step renders it."""
    for objects_ in clusters.values():
        for obj in objects_:
            meta = obj.get("metadata") or {}
            if ANNOTATION in (meta.get("annotations") or {}):
                raise AppError(f"{where}: {obj.get('kind')} {meta.get('name')}: annotation "
                               f"{ANNOTATION} is written by the export-service step only")


def writable(obj: Mapping[str, Any], allow: Allow) -> bool:
    """Whether a member write of ``obj``, which the deny list's Endpoints rule refuses, is
    an export-service step's own Endpoints: :data:`ANNOTATION`, one subset of exactly one
    address (an IP only: no targetRef, no hostname) that ``allow`` lets out, its ports."""
    meta = obj.get("metadata") or {}
    if (obj.get("apiVersion"), obj.get("kind")) != ("v1", "Endpoints") or \
            ANNOTATION not in (meta.get("annotations") or {}):
        return False
    subsets = obj.get("subsets")
    if not isinstance(subsets, list) or len(subsets) != 1 or \
            not isinstance(subsets[0], dict) or set(subsets[0]) != {"addresses", "ports"}:
        return False
    addresses = subsets[0]["addresses"]
    if not isinstance(addresses, list) or len(addresses) != 1 or \
            not isinstance(addresses[0], dict) or set(addresses[0]) != {"ip"}:
        return False
    ip = addresses[0]["ip"]
    return isinstance(ip, str) and allow.refusal(ip) is None
