"""vela-core's ``apply-object`` and ``apply-deployment`` workflow steps, as deploy steps of
one object to one cluster (vela-templates/definitions/internal/workflowstep/
apply-object.cue, apply-deployment.cue).

KubeVela applies the step's object with ``kube.#Apply`` in ``cluster`` ("" its control
plane: here the local cluster, ``--local-cluster``). Here the object is the one component
of a deploy step (a ``k8s-objects`` component named after the step) placed by a topology
of that one cluster, so it meets every check a component does (its namespace and the
grant, cluster-scoped kinds, the deny list), is tracked and cleaned like one, and the
step waits for it to be healthy: ``apply-deployment`` as its definition (ready replicas),
``apply-object`` too where KubeVela does not wait (a workload it applies is counted once
ready rather than once written).

- ``apply-object``: ``value`` (the manifest; named after the step when it names
  nothing), ``cluster``;
- ``apply-deployment``: a Deployment named after the step in the Application's
  namespace, pods labelled ``workflow.oam.dev/step-name: <app>-<step>``, one container of
  ``image`` and ``cmd``, ``replicas`` (1), ``cluster``.

And vela-core's deprecated deploy steps, still in KubeVela's examples, as the deploy steps
they stand for (vela-templates/definitions/deprecated/): ``apply-application`` (every
component, by the Application's topology and override policies: the default deploy),
``apply-remaining`` (the same without the components named in ``exceptions``) and
``deploy2runtime`` (every component to each of ``clusters``, default every member).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import shapes
from federation.applications.model import AppError, AppSpec, Component, PolicySpec, Step

JSON = dict[str, Any]
OBJECT_STEPS = ("apply-object", "apply-deployment")
DEPRECATED_STEPS = ("apply-application", "apply-remaining", "deploy2runtime")
LOCAL = "local"
APPLY_DEPLOYMENT = {"image": str, "replicas": shapes.Default(shapes.Range(0, 100000), 1),
                    "cluster": shapes.Default(str, ""), "cmd?": [str]}


def check(step: Step, where: str) -> JSON:
    """The step's properties, defaults filled in (the manifest itself is checked when it
    renders, as a component's)."""
    props = step.properties
    if step.type == "apply-deployment":
        return shapes.check(props, APPLY_DEPLOYMENT, where)  # type: ignore[no-any-return]
    if not isinstance(props.get("value"), dict):
        raise AppError(f"{where}.value: required, a manifest (a map)")
    rest = shapes.check({k: v for k, v in props.items() if k != "value"}, {"cluster?": str},
                        where)
    return {"value": props["value"], **rest}


def object_step(step: Step, spec: AppSpec, app: str, where: str
                ) -> tuple[AppSpec, PolicySpec]:
    """The step as a deploy step: the spec of its one component, and its topology."""
    props = check(step, f"{where}.properties")
    manifest = dict(props["value"]) if step.type == "apply-object" else \
        _deployment(step.name, app, props)
    try:
        component = Component(name=step.name, type="k8s-objects",
                              properties={"objects": [manifest]})
    except ValueError:
        raise AppError(f"{where}.name: {step.name!r} must be a DNS label to name the object "
                       "the step applies") from None
    topology = PolicySpec(name=where, type="topology",
                          properties={"clusters": [props.get("cluster") or LOCAL]})
    return spec.model_copy(update={"components": (component,)}), topology


def _deployment(name: str, app: str, props: Mapping[str, Any]) -> JSON:
    labels = {"workflow.oam.dev/step-name": f"{app}-{name}"}
    container: JSON = {"name": name, "image": props["image"]}
    if props.get("cmd") is not None:
        container["command"] = list(props["cmd"])
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                     "replicas": props.get("replicas", 1),
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container]}}}}


def deprecated_step(step: Step, spec: AppSpec, known: Mapping[str, PolicySpec], where: str
                    ) -> tuple[list[str], dict[str, PolicySpec]]:
    """The policies a deprecated deploy step stands for, in a deploy step's order, and
    the policies known with the ones it makes."""
    here = f"{where}.properties"
    props = shapes.check(step.properties, {"apply-application": {},
                                           "apply-remaining": {"exceptions?": [str]},
                                           "deploy2runtime": {"clusters?": [str]}}[step.type],
                         here)
    own = [p.name for p in known.values() if p.type in ("topology", "override")]
    made: dict[str, PolicySpec] = {}
    if step.type == "apply-remaining":
        names = {c.name for c in spec.components}
        for index, name in enumerate(props.get("exceptions") or []):
            if name not in names:
                raise AppError(f"{here}.exceptions[{index}]: names no component of the "
                               "Application")
        kept = [c.name for c in spec.components if c.name not in props.get("exceptions", [])]
        made[f"{where} remaining"] = PolicySpec(name=f"{where} remaining", type="override",
                                                properties={"selector": kept})
    if step.type == "deploy2runtime":
        own = [name for name in own if known[name].type == "override"]
        clusters = props.get("clusters")
        made[where] = PolicySpec(name=where, type="topology", properties=(
            {"clusters": clusters} if clusters is not None else {"clusterLabelSelector": {}}))
    return [*own, *made], {**known, **made}
