"""KubeVela's ``daemon``, ``task`` and ``cron-task`` component types, rendered as vela-core's
definitions render them (vela-templates/definitions/internal/component/daemon.cue,
task.cue, cron-task.cue).

- ``daemon``: a DaemonSet (webservice's parameters without ``args``, ``limit``,
  ``replicas``; ports without ``containerPort``/``nodePort``) and a Service for the ports
  with ``expose: true``;
- ``task``: a Job named ``<app>-<component>``, ``count`` pods in parallel and to complete,
  ``restart`` Never (or OnFailure), the older ``volumes`` list;
- ``cron-task``: a CronJob of ``schedule`` with its history limits and a job template as
  ``task``'s, plus ``volumeMounts`` and ``hostAliases``. Its definition picks
  ``batch/v1beta1`` on clusters before 1.25; one render serves every member here, so it
  is ``batch/v1`` (served since 1.21; an older member refuses the write, naming the kind).

Where a definition declares a parameter its template never uses (``task``'s and
``cron-task``'s ``livenessProbe``/``readinessProbe``), it is refused by name rather than
accepted and dropped. ``daemon``'s ``addRevisionLabel`` labels its pods as webservice's
does (:func:`.pods.revision_label`). Pods carry ``app.oam.dev/name`` and
``app.oam.dev/component``, as the definitions label them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from federation.applications import fields, pods
from federation.applications.model import AppError, Component

JSON = dict[str, Any]

APP_LABEL = "app.oam.dev/name"
COMPONENT_LABEL = "app.oam.dev/component"
_CONTAINER = {"labels", "annotations", "image", "imagePullPolicy", "imagePullSecrets", "cmd",
              "env", "cpu", "memory"}
DAEMON_PROPS = frozenset(_CONTAINER | {"port", "ports", "exposeType", "addRevisionLabel",
                                       *pods.POD_PROPS})
TASK_PROPS = frozenset(_CONTAINER | {"count", "restart", "volumes"})
CRON_PROPS = frozenset(TASK_PROPS | {"schedule", "startingDeadlineSeconds", "suspend",
                                     "concurrencyPolicy", "successfulJobsHistoryLimit",
                                     "failedJobsHistoryLimit", "volumeMounts", "hostAliases",
                                     "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                                     "backoffLimit"})
_UNUSED = {"livenessProbe": "its definition accepts a probe and renders none",
           "readinessProbe": "its definition accepts a probe and renders none"}


def _allowed(props: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    for key in props:
        if key in _UNUSED and key not in allowed:
            raise AppError(f"{where}.{key}: not supported ({_UNUSED[key]})")
    fields.allowed(props, allowed, where)


def _container(component: Component, where: str) -> JSON:
    """The main container as these definitions write it: cpu and memory are both the
    request and the limit."""
    props = component.properties
    container: JSON = {"name": component.name,
                       "image": fields.string(props, "image", where, required=True)}
    if props.get("imagePullPolicy") is not None:
        if props["imagePullPolicy"] not in ("Always", "Never", "IfNotPresent"):
            raise AppError(f"{where}.imagePullPolicy: must be Always, Never or IfNotPresent")
        container["imagePullPolicy"] = props["imagePullPolicy"]
    if props.get("cmd") is not None:
        container["command"] = fields.strings(props["cmd"], f"{where}.cmd")
    if props.get("env") is not None:
        container["env"] = fields.env_list(props["env"], f"{where}.env")
    amounts = {k: fields.quantity(props[k], f"{where}.{k}") for k in ("cpu", "memory")
               if props.get(k) is not None}
    if amounts:
        container["resources"] = {"limits": dict(amounts), "requests": dict(amounts)}
    return container


def _pod_template(component: Component, app: str, pod: JSON, where: str) -> JSON:
    props = component.properties
    labels = fields.string_map(props.get("labels") or {}, f"{where}.labels")
    meta: JSON = {"labels": {**labels, **pods.revision_label(component, where),
                             APP_LABEL: app, COMPONENT_LABEL: component.name}}
    if props.get("annotations") is not None:
        meta["annotations"] = fields.string_map(props["annotations"], f"{where}.annotations")
    if props.get("imagePullSecrets") is not None:
        pod["imagePullSecrets"] = [{"name": n} for n in fields.strings(
            props["imagePullSecrets"], f"{where}.imagePullSecrets")]
    return {"metadata": meta, "spec": pod}


def daemon(component: Component, app: str, namespace: str, where: str) -> list[JSON]:
    props = component.properties
    _allowed(props, DAEMON_PROPS, where)
    container = _container(component, where)
    ports = _daemon_ports(props, where)
    if ports:
        container["ports"] = [{k: v for k, v in p.items() if k != "expose"} for p in ports]
    pod: JSON = {"containers": [container]}
    pods.apply(props, container, pod, where, host_mount_options=True)
    objects = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": component.name, "namespace": namespace},
                "spec": {"selector": {"matchLabels": {COMPONENT_LABEL: component.name}},
                         "template": _pod_template(component, app, pod, where)}}]
    exposed = [{"port": p["containerPort"], "targetPort": p["containerPort"],
                "name": p["name"]} for p in ports if p.get("expose")]
    service_type = props.get("exposeType", "ClusterIP")
    if service_type not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        raise AppError(f"{where}.exposeType: must be ClusterIP, NodePort, LoadBalancer or "
                       "ExternalName")
    if exposed:
        objects.append({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": component.name, "namespace": namespace},
                        "spec": {"selector": {COMPONENT_LABEL: component.name},
                                 "ports": exposed, "type": service_type}})
    return objects


def _daemon_ports(props: Mapping[str, Any], where: str) -> list[JSON]:
    """``ports`` (or, without it, the deprecated ``port``: one bare containerPort)."""
    if props.get("ports") is None:
        if props.get("port") is None:
            return []
        return [{"containerPort": fields.integer(props["port"], f"{where}.port", 1)}]
    out = []
    for index, raw in enumerate(fields.maps(props["ports"], f"{where}.ports")):
        here = f"{where}.ports[{index}]"
        fields.allowed(raw, {"port", "name", "protocol", "expose"}, here)
        port = fields.integer(raw.get("port"), f"{here}.port", 1)
        protocol = raw.get("protocol", "TCP")
        if protocol not in ("TCP", "UDP", "SCTP"):
            raise AppError(f"{here}.protocol: must be TCP, UDP or SCTP")
        out.append({"containerPort": port, "protocol": protocol,
                    "name": fields.string(raw, "name", here) or f"port-{port}",
                    "expose": fields.boolean(raw.get("expose", False), f"{here}.expose")})
    return out


def _job_spec(component: Component, app: str, where: str) -> JSON:
    """``task``'s Job spec, which ``cron-task``'s job template shares."""
    props = component.properties
    count = fields.integer(props.get("count", 1), f"{where}.count", 0, 10000)
    restart = props.get("restart", "Never")
    if restart not in ("Never", "OnFailure"):
        raise AppError(f"{where}.restart: must be Never or OnFailure (a Job's pods)")
    container = _container(component, where)
    pod: JSON = {"restartPolicy": restart, "containers": [container]}
    pods.apply({k: props[k] for k in ("volumeMounts", "volumes", "hostAliases")
                if k in props}, container, pod, where)
    return {"parallelism": count, "completions": count,
            "template": _pod_template(component, app, pod, where)}


def task(component: Component, app: str, namespace: str, where: str) -> list[JSON]:
    _allowed(component.properties, TASK_PROPS, where)
    return [{"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": f"{app}-{component.name}", "namespace": namespace},
             "spec": _job_spec(component, app, where)}]


def cron_task(component: Component, app: str, namespace: str, where: str) -> list[JSON]:
    props = component.properties
    _allowed(props, CRON_PROPS, where)
    job = _job_spec(component, app, where)
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds"):
        if props.get(key) is not None:
            job[key] = fields.integer(props[key], f"{where}.{key}", 0, 2**31 - 1)
    job["backoffLimit"] = fields.integer(props.get("backoffLimit", 6), f"{where}.backoffLimit",
                                         0, 2**31 - 1)
    template = {"metadata": copy.deepcopy(job["template"]["metadata"]), "spec": job}
    policy = props.get("concurrencyPolicy", "Allow")
    if policy not in ("Allow", "Forbid", "Replace"):
        raise AppError(f"{where}.concurrencyPolicy: must be Allow, Forbid or Replace")
    spec: JSON = {
        "schedule": fields.string(props, "schedule", where, required=True),
        "concurrencyPolicy": policy,
        "suspend": fields.boolean(props.get("suspend", False), f"{where}.suspend"),
        "successfulJobsHistoryLimit": fields.integer(props.get(
            "successfulJobsHistoryLimit", 3), f"{where}.successfulJobsHistoryLimit", 0, 1000),
        "failedJobsHistoryLimit": fields.integer(props.get("failedJobsHistoryLimit", 1),
                                                 f"{where}.failedJobsHistoryLimit", 0, 1000)}
    if props.get("startingDeadlineSeconds") is not None:
        spec["startingDeadlineSeconds"] = fields.integer(
            props["startingDeadlineSeconds"], f"{where}.startingDeadlineSeconds", 0, 2**31 - 1)
    spec["jobTemplate"] = template
    return [{"apiVersion": "batch/v1", "kind": "CronJob",
             "metadata": {"name": component.name, "namespace": namespace}, "spec": spec}]
