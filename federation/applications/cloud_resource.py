"""vela-core's ``deploy-cloud-resource`` and ``share-cloud-resource`` (workflowstep/*.cue
over ``op.#DeployCloudResource`` / ``op.#ShareCloudResource``,
pkg/workflow/providers/legacy/terraform/terraform.cue): the pure half.

What KubeVela does: of one env of an ``env-binding`` policy (``policy``, default the
first), the Terraform components (patched by the env) are applied to the control plane's
cluster named ``<component>-<env>``, their connection Secret renamed ``<secret>-<env>``;
once the Configuration is healthy and that Secret exists, its data is copied as Secret
``<secret>`` into the clusters of the env (deploy) or of ``placements`` (share, each a
``cluster``, default local, and a ``namespace``).

Here (docs/security.md, *Applications: cloud-resource steps*), one deploy step:

- the renamed Configurations go to the local cluster (``--app-local-cluster``), in the
  Application's namespace, as ``apply-terraform-config``'s;
- the copies are Secrets ``<secret>`` in the Application's own namespace of each
  cluster: an env placed in another namespace, or a placement naming one, is refused by
  name; only the connection Secret of a Configuration this step renders is ever read
  (never a name from the step), and the controller reads and copies it (its data never
  passes through the workflow's state);
- a component that renders no Configuration, or one without ``writeConnectionSecretToRef``
  (KubeVela's step fails on it), is not a cloud resource of the env; an env with none is
  refused.

:func:`check` reads the step, :func:`renamed` makes the Configuration it applies and
:func:`copy_manifest` a copy as compiled, empty, naming its :class:`Source`; the compile
(``federation.applications.compile``) places them, and the controller
(``federation.controllers.applications.connection_secrets``) fills each copy's data from
the source when it writes it, and only then.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import shapes, steps, terraform
from federation.applications.model import AppError, AppSpec, PolicySpec, Step

JSON = dict[str, Any]
STEP_TYPES = ("deploy-cloud-resource", "share-cloud-resource")
COPY_ANNOTATION = "federation.io/connection-secret-copy-of"
"""On a copy, in the compiled manifest only: ``<cluster>/<Secret>/<Configuration>`` it is
copied from (the controller reads this from what it compiled, never from a live object)."""
_PLACEMENT = {"cluster?": str, "namespace?": str}


@dataclasses.dataclass(frozen=True)
class Source:
    """Where one copy's data comes from: the connection Secret of a Configuration this
    step renders, in the Application's namespace of the local cluster."""

    cluster: str
    secret: str
    configuration: str

    def encode(self) -> str:
        return f"{self.cluster}/{self.secret}/{self.configuration}"


def source_of(manifest: Mapping[str, Any]) -> Source | None:
    """The source a compiled copy names (None: not a copy)."""
    raw = ((manifest.get("metadata") or {}).get("annotations") or {}).get(COPY_ANNOTATION)
    if manifest.get("kind") != "Secret" or not isinstance(raw, str) or raw.count("/") != 2:
        return None
    cluster, secret, configuration = raw.split("/")
    return Source(cluster, secret, configuration)


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The step's env (its policies, as deploy2env's) and where the copies go."""

    env: str
    policies: dict[str, PolicySpec]
    clusters: tuple[str, ...] | None
    """share: the placements' clusters; deploy: None (the env's)."""


def check(step: Step, spec: AppSpec, namespace: str, where: str) -> Chosen:
    """The step's properties and its env, checked (:class:`AppError` naming the field)."""
    here = f"{where}.properties"
    shape: JSON = {"policy": shapes.Default(str, ""), "env": str}
    if step.type == "share-cloud-resource":
        shape["placements"] = [_PLACEMENT]
    props = shapes.check(dict(step.properties), shape, here)
    bound = step.model_copy(update={"properties": {"policy": props["policy"],
                                                   "env": props["env"]}})
    made = steps.env_binding(bound, spec, here)
    for policy in made.values():
        if policy.type == "topology" and \
                policy.properties.get("namespace") not in (None, namespace):
            raise AppError(f"{here}.env: env {props['env'][:64]!r} is placed in namespace "
                           f"{policy.properties['namespace']!r}: a connection Secret is "
                           "copied into the Application's own namespace only")
    clusters = None
    if "placements" in props:
        found: list[str] = []
        for index, placement in enumerate(props["placements"]):
            steps.own_namespace(placement, namespace, f"{here}.placements[{index}]")
            found.append(placement.get("cluster") or steps.LOCAL)
        if not found:
            raise AppError(f"{here}.placements: at least one")
        clusters = tuple(dict.fromkeys(found))
    return Chosen(props["env"], made, clusters)


def renamed(configuration: Mapping[str, Any], env: str, namespace: str, where: str
            ) -> tuple[JSON, str, str] | None:
    """A Configuration a component rendered, as the step applies it: named
    ``<component>-<env>``, its connection Secret ``<secret>-<env>`` in ``namespace``;
    with the Secret's own name and the source's. None: no connection Secret."""
    found = terraform.connection_secret(configuration)
    if found is None:
        return None
    component = str(((configuration.get("metadata") or {}).get("labels") or {})
                    .get("app.oam.dev/component") or
                    (configuration.get("metadata") or {}).get("name"))
    name = steps.object_name(f"{component}-{env}", f"{where} (the name <component>-<env>)")
    source = steps.object_name(f"{found[1]}-{env}", f"{where} (the Secret <secret>-<env>)")
    made = copy.deepcopy(dict(configuration))
    made["metadata"] = {"name": name, "namespace": namespace,
                        "annotations": dict((configuration.get("metadata") or {})
                                            .get("annotations") or {})}
    made["spec"]["writeConnectionSecretToRef"] = {"name": source, "namespace": namespace}
    return made, found[1], source


def copy_manifest(secret: str, source: Source) -> JSON:
    """A copy as compiled: no data yet (the controller fills it from the source)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret, "annotations": {COPY_ANNOTATION: source.encode()}},
            "data": {}}


def refuse_forged(clusters: Mapping[str, Sequence[Mapping[str, Any]]], where: str) -> None:
    """An object of another step carrying :data:`COPY_ANNOTATION` is refused: the
    annotation is how the controller knows a copy and its source, so only this module
    writes it (a tenant's manifest with it would name a source and land where the tenant
    places it)."""
    for objects in clusters.values():
        for obj in objects:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if COPY_ANNOTATION in annotations:
                raise AppError(f"{where}: {obj.get('kind')} "
                               f"{(obj.get('metadata') or {}).get('name')}: annotation "
                               f"{COPY_ANNOTATION} is written by deploy-cloud-resource and "
                               "share-cloud-resource only")


def configurations(objects: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [o for o in objects if terraform.is_configuration(o)]
