"""The hub API of configuration rollouts: ConfigConstraint and ReconfigurePolicy.

Two kinds in ``config.federation.io/v1alpha1`` (CRDs in ``federation/crds/crds.yaml``):

- ``ConfigConstraint`` (cluster-scoped, written by admins): a config file's format and
  which parameters are dynamic, static or immutable; its spec is
  :class:`federation.rollouts.constraint.ConfigConstraintSpec`.
- ``ReconfigurePolicy`` (namespaced, written by application teams): ties a ConfigMap or
  Secret of its own namespace to the workloads of its own namespace that mount it, with a
  reload policy, ``maxUnavailableClusters`` and the order of clusters. Nothing in it can
  name another namespace: every reference is a bare name resolved in the policy's own.

The rollout controller writes the policy's status; the propagation controller reads two
fields of it per cluster, which is how a rollout reaches the members without a second
writer of member objects:

- ``releasedVersion``: the governed ConfigMap/Secret is written to that cluster only when
  this equals :func:`config_version` of the hub object (a cluster whose turn has not come
  keeps its old copy; a cluster with no copy yet gets one at once: creating is no change);
- ``restartVersion``: stamped on the governed workloads' pod template as
  :data:`CONFIG_VERSION_ANNOTATION` in that cluster, so changing it restarts them there.

This module holds the shared vocabulary: resources, the spec model, the version function
and the status readers. It is pure (no client, no clock).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from federation.contexts.client import Resource
from federation.hub import parsed
from federation.rollouts import kubeblocks
from federation.rollouts.constraint import ConfigConstraintSpec
from federation.rollouts.diff import ReloadPolicy

GROUP = "config.federation.io"
VERSION = "v1alpha1"
CONFIG_CONSTRAINTS = Resource(GROUP, VERSION, "configconstraints", "ConfigConstraint",
                              namespaced=False)
RECONFIGURE_POLICIES = Resource(GROUP, VERSION, "reconfigurepolicies", "ReconfigurePolicy")
KUBEBLOCKS_CONFIG_CONSTRAINTS = Resource("apps.kubeblocks.io", "v1beta1", "configconstraints",
                                         "ConfigConstraint", namespaced=False)
KUBEBLOCKS_PARAMETERS_DEFINITIONS = Resource("parameters.kubeblocks.io", "v1alpha1",
                                             "parametersdefinitions", "ParametersDefinition",
                                             namespaced=False)

CONFIG_VERSION_ANNOTATION = "reconfigure.federation.io/config-version"
"""On a governed workload's pod template in a member: the config version it was last
restarted for (changing it is what restarts the workload there)."""

RELOADER_CA_SECRET = "federation-reloader-ca"
"""Hub Secret (in ``federation-system``) holding the CA of reloaders and of the control
plane's client certificate for them; separate from the work CA, so an agent's certificate
can never call a reloader, nor a reloader's certificate open a work stream."""

RELOADER_CLIENT_NAME = "federation-reconfigure"
"""The common name of the control plane's client certificate (a reloader's
``--allow-client``)."""

RELOADER_SERVER_NAME = "reloader.federation.io"
"""The name every reloader's server certificate carries and the controller verifies
(reloaders live at pod addresses no certificate could name in advance)."""

RELOADER_PORT_NAME = "reloader"
"""The EndpointSlice port name a reloader is found by."""

CONFIG_KINDS = frozenset({"ConfigMap", "Secret"})
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet"})


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True,
                              extra="forbid", frozen=True)


class ConfigKind(enum.StrEnum):
    CONFIG_MAP = "ConfigMap"
    SECRET = "Secret"


class WorkloadKind(enum.StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"


class ConfigRef(_Model):
    kind: ConfigKind
    name: str = Field(min_length=1, max_length=253)


class ConstraintKind(enum.StrEnum):
    """Which kind ``constraintRef`` names (kubectl's ``Kind.group`` spelling)."""

    CONFIG_CONSTRAINT = "ConfigConstraint"  # ours, config.federation.io
    KUBEBLOCKS_CONFIG_CONSTRAINT = "ConfigConstraint.apps.kubeblocks.io"
    KUBEBLOCKS_PARAMETERS_DEFINITION = "ParametersDefinition.parameters.kubeblocks.io"


CONSTRAINT_RESOURCES = {
    ConstraintKind.CONFIG_CONSTRAINT: CONFIG_CONSTRAINTS,
    ConstraintKind.KUBEBLOCKS_CONFIG_CONSTRAINT: KUBEBLOCKS_CONFIG_CONSTRAINTS,
    ConstraintKind.KUBEBLOCKS_PARAMETERS_DEFINITION: KUBEBLOCKS_PARAMETERS_DEFINITIONS,
}
"""Every kind a policy's file may be classified by: ours, and KubeBlocks' two, served
unchanged (CRDs of ours when KubeBlocks is not installed on the hub)."""


class ConfigFile(_Model):
    key: str = Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9_.][-A-Za-z0-9_.]*$")
    """The key of the ConfigMap's (Secret's) data holding the file. Not starting with
    ``-``: a reloader's template may place it alone in a program's arguments, where it
    would read as an option (the reloader refuses such a call too)."""
    constraint_ref: str = Field(min_length=1, max_length=253)
    """The ConfigConstraint (cluster-scoped) that classifies its parameters."""
    constraint_kind: ConstraintKind = ConstraintKind.CONFIG_CONSTRAINT
    """Which kind :attr:`constraint_ref` names: ours, or KubeBlocks' ConfigConstraint or
    ParametersDefinition (read unchanged by :mod:`federation.rollouts.kubeblocks`)."""


class WorkloadRef(_Model):
    kind: WorkloadKind
    name: str = Field(min_length=1, max_length=253)
    reloader_service: str | None = Field(default=None, min_length=1, max_length=63)
    """The member EndpointSlices (label ``kubernetes.io/service-name``) listing this
    workload's reloaders; default ``<name>-reloader``."""

    @property
    def service(self) -> str:
        return self.reloader_service or f"{self.name}-reloader"


class ReconfigurePolicySpec(_Model):
    config_ref: ConfigRef
    files: tuple[ConfigFile, ...] = Field(min_length=1)
    """The keys that are config files with a constraint. A change to any other key of the
    object is treated as a static change of that key (it restarts; ``online`` refuses it)."""
    workloads: tuple[WorkloadRef, ...] = Field(min_length=1)
    reload_policy: ReloadPolicy = ReloadPolicy.AUTO
    max_unavailable_clusters: int = Field(default=1, ge=1)
    """Clusters restarting (or being updated online) at once. One by default: a bad
    configuration then takes down one cluster, not the fleet."""
    cluster_order: tuple[str, ...] = ()
    """Clusters in rollout order; clusters holding the config that are not named follow,
    in name order. Empty: the clusters the propagation placed the config on, by name."""
    progress_deadline_seconds: int = Field(default=300, ge=1)
    """How long one cluster may take (workloads ready after a restart, or every reloader
    answering) before the rollout stops as failed."""


def parse_spec(doc: Mapping[str, Any]) -> ReconfigurePolicySpec:
    """The policy's spec; raises pydantic's ValidationError naming the field."""
    return ReconfigurePolicySpec.model_validate(doc.get("spec") or {})


parsed_spec = parsed.Memo(parse_spec)
"""Specs parsed once per version (:mod:`federation.hub.parsed`)."""

def parse_constraint(doc: Mapping[str, Any]) -> ConfigConstraintSpec:
    """The constraint of ``doc``: our ConfigConstraint's spec, or KubeBlocks' object read
    by :func:`federation.rollouts.kubeblocks.load` (a KubeBlocks object without a reload
    action never reloads online, as in KubeBlocks). Raises pydantic's ValidationError or
    :class:`~federation.rollouts.kubeblocks.Refused`, each naming the field."""
    if str(doc.get("apiVersion") or "").startswith(f"{GROUP}/"):
        return ConfigConstraintSpec.model_validate(doc.get("spec") or {})
    loaded = kubeblocks.load(doc)
    return loaded.spec.model_copy(update={"online_reload": loaded.reload.online})


parsed_constraint = parsed.Memo(parse_constraint)
"""Constraints parsed once per version: a rollout reads its constraints at every poll of
an Updating cluster."""


def config_version(obj: Mapping[str, Any]) -> str:
    """The version of a ConfigMap's or Secret's content: 16 hex digits of a SHA-256 over
    ``data`` and ``binaryData`` (metadata does not count). Hub object and member copy of
    the same content have the same version."""
    content = {"data": obj.get("data") or {}, "binaryData": obj.get("binaryData") or {}}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _order(doc: Mapping[str, Any]) -> tuple[str, str]:
    meta = doc.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


def governs(doc: Mapping[str, Any], kind: str, name: str) -> bool:
    """Whether policy ``doc`` names ``kind``/``name`` (its config or one of its workloads).
    A spec that does not parse governs nothing (its condition says why)."""
    try:
        spec = parsed_spec(doc)
    except ValueError:
        return False
    if spec.config_ref.kind == kind and spec.config_ref.name == name:
        return True
    return any(w.kind == kind and w.name == name for w in spec.workloads)


def governing(policies: Iterable[Mapping[str, Any]], kind: str,
              name: str) -> Mapping[str, Any] | None:
    """The policy (of one namespace's policies) that governs ``kind``/``name``: the oldest
    one naming it (by creation, then name); the others are refused as conflicting by the
    rollout controller and ignored here."""
    found = sorted((p for p in policies if governs(p, kind, name)), key=_order)
    return found[0] if found else None


def cluster_status(doc: Mapping[str, Any], cluster: str) -> Mapping[str, Any]:
    for entry in (doc.get("status") or {}).get("clusters") or []:
        if isinstance(entry, Mapping) and entry.get("name") == cluster:
            return entry
    return {}


def released_version(doc: Mapping[str, Any], cluster: str) -> str | None:
    """The config version propagation may write to ``cluster`` (None: none released)."""
    value = cluster_status(doc, cluster).get("releasedVersion")
    return str(value) if value else None


def restart_version(doc: Mapping[str, Any], cluster: str) -> str | None:
    """The value of :data:`CONFIG_VERSION_ANNOTATION` for the workloads in ``cluster``."""
    value = cluster_status(doc, cluster).get("restartVersion")
    return str(value) if value else None
