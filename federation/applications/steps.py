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
``apply-remaining`` (the same without the components named in ``exceptions``),
``deploy2runtime`` (every component to each of ``clusters``, default every member) and
``deploy2env`` (one env of an ``env-binding`` policy: :func:`env_binding`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from federation.applications import shapes
from federation.applications.model import AppError, AppSpec, Component, PolicySpec, Step
from federation.placement import resources as resources_

JSON = dict[str, Any]
OBJECT_STEPS = ("apply-object", "apply-deployment", "export2config", "export2secret")
DEPRECATED_STEPS = ("apply-application", "apply-remaining", "deploy2runtime", "deploy2env")
LOCAL = "local"
APPLY_DEPLOYMENT = {"image": str, "replicas": shapes.Default(shapes.Range(0, 100000), 1),
                    "cluster": shapes.Default(str, ""), "cmd?": [str]}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A Kubernetes object name (a DNS subdomain): no path characters, no upper case."""
_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


def check(step: Step, namespace: str, where: str) -> JSON:
    """The step's properties, defaults filled in (the manifest itself is checked when it
    renders, as a component's)."""
    props = step.properties
    if step.type == "apply-deployment":
        return shapes.check(props, APPLY_DEPLOYMENT, where)  # type: ignore[no-any-return]
    if step.type in ("export2config", "export2secret"):
        return {"value": exported(step.type, props, namespace, where),
                "cluster": _cluster(props, where)}
    if not isinstance(props.get("value"), dict):
        raise AppError(f"{where}.value: required, a manifest (a map)")
    rest = shapes.check({k: v for k, v in props.items() if k != "value"}, {"cluster?": str},
                        where)
    return {"value": props["value"], **rest}


def step_component(step: Step, manifests: list[JSON], where: str,
                   what: str = "the object") -> Component:
    """The ``k8s-objects`` component, named after the step, of the objects a step applies
    (its step is then a deploy step of that one component)."""
    try:
        return Component(name=step.name, type="k8s-objects",
                         properties={"objects": manifests})
    except ValueError:
        raise AppError(f"{where}.name: {step.name!r} must be a DNS label to name {what} "
                       "the step applies") from None


def object_step(step: Step, spec: AppSpec, app: str, namespace: str, where: str
                ) -> tuple[AppSpec, PolicySpec]:
    """The step as a deploy step: the spec of its one component, and its topology."""
    props = check(step, namespace, f"{where}.properties")
    manifest = _deployment(step.name, app, props) if step.type == "apply-deployment" \
        else dict(props["value"])
    component = step_component(step, [manifest], where)
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
    if step.type == "deploy2env":
        env = env_binding(step, spec, here)
        return list(env), {**known, **env}
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


_ENV_SELECTOR = {"name?": str, "labels?": shapes.STRINGS_MAP}
ENV = {"name": str,
       "placement?": {"clusterSelector?": _ENV_SELECTOR, "namespaceSelector?": _ENV_SELECTOR},
       "selector?": {"components?": [str]}, "patch?": {"components?": [shapes.OPEN_MAP]}}
"""One env of vela-core's deprecated ``env-binding`` policy (envbinding.cue)."""


def env_binding(step: Step, spec: AppSpec, where: str) -> dict[str, PolicySpec]:
    """vela-core's ``deploy2env`` (``op.#ApplyEnvBindApp``): the components of the
    Application patched by one env (``patch.components``, with an override policy's
    semantics: both are vela-core's ``PatchComponents``) and kept by its ``selector``,
    placed in ``placement.clusterSelector.name`` (default the local cluster) and
    ``namespaceSelector.name`` (default the Application's). Label selectors are refused
    by name: vela-core fails the step on them ("does not support label selector")."""
    props = shapes.check(step.properties, {"policy": shapes.Default(str, ""), "env": str,
                                           "parallel": shapes.Default(bool, False)}, where)
    bindings = [p for p in spec.policies if p.type == "env-binding"]
    policy = next((p for p in bindings if p.name == props["policy"]), None) \
        if props["policy"] else next(iter(bindings), None)
    if policy is None:
        raise AppError(f"{where}.policy: names no env-binding policy of the Application"
                       if props["policy"] else f"{where}: the Application has no "
                       "env-binding policy")
    envs = policy.properties.get("envs")
    if not isinstance(envs, list) or not envs:
        raise AppError(f"policy {policy.name} properties.envs: a non-empty list of envs")
    index = next((i for i, e in enumerate(envs)
                  if isinstance(e, dict) and e.get("name") == props["env"]), None)
    if index is None:
        raise AppError(f"{where}.env: {props['env'][:64]!r} is no env of policy {policy.name}")
    env = shapes.check(envs[index], ENV, f"policy {policy.name} properties.envs[{index}]")
    return _env_policies(env, f"{policy.name} env {env['name']}",
                         f"policy {policy.name} properties.envs[{index}].placement")


def _env_policies(env: Mapping[str, Any], name: str, where: str) -> dict[str, PolicySpec]:
    placement = env.get("placement") or {}
    for key in ("clusterSelector", "namespaceSelector"):
        if (placement.get(key) or {}).get("labels"):
            raise AppError(f"{where}.{key}.labels: not supported (vela-core fails the step: "
                           "its env-binding selects a cluster and a namespace by name only)")
    topology: JSON = {"clusters": [(placement.get("clusterSelector") or {}).get("name")
                                   or LOCAL]}
    namespace = (placement.get("namespaceSelector") or {}).get("name")
    if namespace:
        topology["namespace"] = namespace
    made: dict[str, PolicySpec] = {}
    override: JSON = {}
    if (env.get("patch") or {}).get("components"):
        override["components"] = env["patch"]["components"]
    if (env.get("selector") or {}).get("components") is not None:
        override["selector"] = env["selector"]["components"]
    if override:
        made[f"{name} patch"] = PolicySpec(name=f"{name} patch", type="override",
                                           properties=override)
    made[name] = PolicySpec(name=name, type="topology", properties=topology)
    return made


def _data(raw: Any, where: str) -> dict[str, str]:
    """``data`` (CUE's open ``{}``): each value as a string, anything else as JSON text."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise AppError(f"{where}: must be a map")
    found: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise AppError(f"{where}: a key is not a ConfigMap or Secret key (letters, digits, "
                           "'-', '_' and '.')")
        found[key] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return found


def _cluster(props: Mapping[str, Any], where: str) -> str:
    cluster = props.get("cluster", "")
    if not isinstance(cluster, str):
        raise AppError(f"{where}.cluster: must be a string")
    return cluster


def object_name(value: Any, where: str) -> str:
    """A Kubernetes object name; a name with path characters (``../x``, ``a/b``) or upper
    case is refused by path, not quoted."""
    if not isinstance(value, str) or not value:
        raise AppError(f"{where}: required, a string")
    if len(value) > 253 or not _NAME.match(value):
        raise AppError(f"{where}: not a Kubernetes object name (lower-case letters, digits, "
                       "'-' and '.'; at most 253 characters)")
    return value


def own_namespace(props: Mapping[str, Any], namespace: str, where: str) -> None:
    """``namespace`` may only be absent or the Application's own (KubeVela takes any
    namespace: another team's, here)."""
    if props.get("namespace") not in (None, "", namespace):
        raise AppError(f"{where}.namespace: not supported (the step writes or reads the "
                       "Application's own namespace only; leave it out)")


_EXPORTS: dict[str, dict[str, Any]] = {
    "export2config": {"configName": str, "namespace?": str, "cluster?": str},
    "export2secret": {"secretName": str, "namespace?": str, "type?": str,
                      "cluster?": str, "kind?": shapes.Enum("generic", "docker-registry"),
                      "dockerRegistry?": {"username": str, "password": str,
                                          "server": shapes.Default(
                                              str, "https://index.docker.io/v1/")}},
}


def exported(kind: str, props: Mapping[str, Any], namespace: str, where: str) -> JSON:
    """vela-core's ``export2config`` (a ConfigMap ``configName`` of ``data``) and
    ``export2secret`` (a Secret ``secretName`` of ``data`` as ``stringData``, or of a
    ``docker-registry`` login), in the Application's own namespace. Values are written as
    given (numbers and maps as JSON text, as KubeVela's CUE would refuse them); errors name
    the field, never a value."""
    found = shapes.check({k: v for k, v in props.items() if k != "data"}, _EXPORTS[kind],
                         where)
    own_namespace(found, namespace, where)
    data = _data(props.get("data"), f"{where}.data")
    if kind == "export2config":
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": object_name(found["configName"], f"{where}.configName")},
                "data": data}
    secret: JSON = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": object_name(found["secretName"], f"{where}.secretName")}}
    registry = found.get("dockerRegistry")
    if found.get("kind") == "docker-registry" and registry is not None:
        login = f"{registry['username']}:{registry['password']}"
        data = {".dockerconfigjson": json.dumps({"auths": {registry["server"]: {
            "username": registry["username"], "password": registry["password"],
            "auth": base64.b64encode(login.encode()).decode()}}})}
    if found.get("type") == "kubernetes.io/service-account-token":
        raise AppError(f"{where}.type: a service-account-token Secret is not written (the "
                       "member's token controller would fill it with a credential)")
    if found.get("type"):
        secret["type"] = found["type"]
    elif found.get("kind") == "docker-registry":
        secret["type"] = "kubernetes.io/dockerconfigjson"
    secret["stringData"] = data
    return secret


EXPORT_DATA = {"name?": str, "namespace?": str,
               "kind": shapes.Default(shapes.Enum("ConfigMap", "Secret"), "ConfigMap"),
               "topology?": str}


def export_data(step: Step, spec: AppSpec, app: str, namespace: str,
                known: Mapping[str, PolicySpec], where: str) -> tuple[AppSpec, PolicySpec]:
    """vela-core's ``export-data``: a ConfigMap (``data``) or Secret (``data`` as
    ``stringData``) named ``name`` (default the Application's) in the Application's own
    namespace, to each cluster of the topology policy ``topology`` (default the local
    cluster, as KubeVela's ``GetPlacementsFromTopologyPolicies`` without policies), as a
    deploy step of that one object. The topology's ``namespace`` is not used (KubeVela
    applies the object in its own namespace too); another ``namespace`` is refused."""
    here = f"{where}.properties"
    props = shapes.check({k: v for k, v in step.properties.items() if k != "data"},
                         EXPORT_DATA, here)
    own_namespace(props, namespace, here)
    data = _data(step.properties.get("data"), f"{here}.data")
    name = object_name(props.get("name", app), f"{here}.name")
    manifest: JSON = {"apiVersion": "v1", "kind": props["kind"], "metadata": {"name": name}}
    manifest["data" if props["kind"] == "ConfigMap" else "stringData"] = data
    component = step_component(step, [manifest], where)
    placement = topology_placement(props.get("topology"), known, f"{here}.topology")
    return spec.model_copy(update={"components": (component,)}), PolicySpec(
        name=where, type="topology", properties=placement)


def topology_placement(topology: str | None, known: Mapping[str, PolicySpec], where: str
                       ) -> JSON:
    """KubeVela's ``op.#GetPlacementsFromTopologyPolicies`` of one topology policy named
    ``topology`` (None: the local cluster, as it gives without policies), as a topology's
    properties. Its ``namespace`` is not used: the step's objects stay in the
    Application's own namespace, as KubeVela applies them in theirs."""
    if topology is None:
        return {"clusters": [LOCAL]}
    chosen = known.get(topology)
    if chosen is None or chosen.type != "topology":
        raise AppError(f"{where}: names no topology policy of the Application")
    return {k: v for k, v in chosen.properties.items() if k != "namespace"}


def depends_on_app(step: Step, app: str, namespace: str, where: str) -> str:
    """vela-core's ``depends-on-app``: the name of the Application of the same namespace
    it waits for. ``namespace`` may only be the Application's own (KubeVela requires it
    and takes any); the Application itself is refused (it would wait for ever)."""
    props = shapes.check(step.properties, {"name": str, "namespace?": str}, where)
    own_namespace(props, namespace, where)
    name = object_name(props["name"], f"{where}.name")
    if name == app:
        raise AppError(f"{where}.name: names this Application itself: it would wait for "
                       "ever for its own workflow")
    return name


_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def clean_jobs(step: Step, app: str, namespace: str, where: str) -> dict[str, str]:
    """vela-core's ``clean-jobs``: the label selector of the Jobs and Pods it deletes
    (``labelselector``, default ``workflow.oam.dev/name: <app>``, KubeVela's), in the
    Application's own namespace only (``namespace`` naming another is refused)."""
    props = shapes.check(step.properties, {"labelselector?": shapes.STRINGS_MAP, "namespace?": str},
                         where)
    own_namespace(props, namespace, where)
    selector = props.get("labelselector")
    if selector is None:
        return {"workflow.oam.dev/name": app}
    for key in selector:
        if len(key) > 316 or not _LABEL_KEY.match(key):
            raise AppError(f"{where}.labelselector: a key is not a label key")
    return dict(selector)


def cleaned(manifest: Mapping[str, Any], namespace: str, selector: Mapping[str, str]) -> bool:
    """Whether a ``clean-jobs`` step with ``selector`` takes ``manifest`` (a rendered
    object of the Application) away: a Job or a Pod of its own namespace whose labels
    hold every pair of the selector."""
    kind, version = manifest.get("kind"), str(manifest.get("apiVersion") or "")
    if not ((kind == "Job" and version.startswith("batch/")) or (kind, version) == ("Pod", "v1")):
        return False
    meta = manifest.get("metadata") or {}
    labels = meta.get("labels") or {}
    return meta.get("namespace") == namespace and all(
        labels.get(key) == value for key, value in selector.items())


@dataclasses.dataclass(frozen=True)
class Read:
    """What a ``read-object`` step reads: ``cluster`` "" for the hub, else a member."""

    cluster: str
    api_version: str
    kind: str
    name: str


READ_OBJECT = {"apiVersion": shapes.Default(str, "core.oam.dev/v1beta1"),
               "kind": shapes.Default(str, "Application"), "name": str, "namespace?": str,
               "cluster": shapes.Default(str, "")}


def read_object(step: Step, namespace: str, where: str) -> Read:
    """vela-core's ``read-object`` (``apiVersion`` default core.oam.dev/v1beta1, ``kind``
    default Application, ``name``, ``namespace``, ``cluster``), narrowed: the
    Application's own namespace only (KubeVela's default is ``default``), never a Secret,
    never a cluster-scoped kind; ``cluster`` "" or ``local`` is the hub (the control
    plane, as ``ref-objects`` reads it), any other a member the Application deploys to
    (checked by the compile, which knows them)."""
    props = shapes.check(step.properties, READ_OBJECT, where)
    own_namespace(props, namespace, where)
    kind = props["kind"]
    if kind.lower() == "secret":
        raise AppError(f"{where}.kind: a Secret is not read (the control plane reads no "
                       "Secret for an Application but the configs of its namespace's config "
                       "store: read-config)")
    if kind in resources_.CLUSTER_SCOPED_KINDS:
        raise AppError(f"{where}.kind: {kind} is cluster-scoped; a step reads the "
                       "Application's own namespace only")
    cluster = "" if props["cluster"] in ("", LOCAL) else props["cluster"]
    return Read(cluster, props["apiVersion"], kind, object_name(props["name"],
                                                                f"{where}.name"))
