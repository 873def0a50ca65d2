"""The ``policy.karmada.io/v1alpha1`` CRDs the hub serves next to ours, written as code.

Karmada users apply their policy files to the hub unchanged, so the hub serves
Karmada's four policy kinds (PropagationPolicy, ClusterPropagationPolicy,
OverridePolicy, ClusterOverridePolicy) with the schema of Karmada's CRDs field
for field: the same properties, types, formats, enums, defaults, ``required``
lists, bounds and list/map types. The structure is built here from small
pieces (a label selector, a cluster affinity, a toleration, ...) the way
Karmada's Go types compose, and written to ``federation/crds/karmada.yaml``
(``python -m federation.hub.karmada_crds``); a unit test keeps the two equal.

Three deliberate differences, each so that our controllers can keep their
promises:

- every object node also carries ``x-kubernetes-preserve-unknown-fields``: the
  API server then keeps a misspelt field instead of pruning it in silence, and
  the policy-validation controller names it in the policy's ``Valid=False``
  condition (a Karmada hub would drop it and apply the rest);
- a ``status`` object and the status subresource, where that controller writes
  ``Valid`` (and ``Denied``);
- no short names (``pp``, ``op``, ...): ours already use them, and kubectl
  would pick one group at random; use ``propagationpolicies.policy.karmada.io``.

Defaults stay Karmada's (``conflictResolution: Abort``, ``priority: 0``,
``preemption: Never``, ``schedulerName: default-scheduler``,
``replicaSchedulingType: Divided``, ``purgeMode: Gracefully``, ...), so a
stored policy reads as it would on Karmada's hub.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

JSON = dict[str, Any]
GROUP = "policy.karmada.io"
VERSION = "v1alpha1"


# -- building blocks ------------------------------------------------------------------------


def _obj(properties: JSON, required: tuple[str, ...] = (), **extra: Any) -> JSON:
    node: JSON = {"type": "object", "properties": properties,
                  "x-kubernetes-preserve-unknown-fields": True}
    if required:
        node["required"] = list(required)
    node.update(extra)
    return node


def _string(**extra: Any) -> JSON:
    return {"type": "string", **extra}


def _enum(*values: str, **extra: Any) -> JSON:
    return {"type": "string", "enum": list(values), **extra}


def _int(fmt: str | None = None, **extra: Any) -> JSON:
    node: JSON = {"type": "integer"}
    if fmt:
        node["format"] = fmt
    node.update(extra)
    return node


def _array(items: JSON, **extra: Any) -> JSON:
    return {"type": "array", "items": items, **extra}


def _strings(**extra: Any) -> JSON:
    return _array(_string(), **extra)


def _any_json() -> JSON:
    """``apiextensionsv1.JSON``: any value."""
    return {"x-kubernetes-preserve-unknown-fields": True}


def _requirement(atomic_values: bool = True) -> JSON:
    values = _strings(**({"x-kubernetes-list-type": "atomic"} if atomic_values else {}))
    return _obj({"key": _string(), "operator": _string(), "values": values},
                ("key", "operator"))


def label_selector() -> JSON:
    """metav1.LabelSelector."""
    return _obj({
        "matchExpressions": _array(_requirement(), **{"x-kubernetes-list-type": "atomic"}),
        "matchLabels": {"type": "object", "additionalProperties": _string()},
    }, (), **{"x-kubernetes-map-type": "atomic"})


def _affinity_properties() -> JSON:
    return {
        "clusterNames": _strings(),
        "exclude": _strings(),
        "fieldSelector": _obj({"matchExpressions": _array(_requirement())}),
        "labelSelector": label_selector(),
    }


def cluster_affinity() -> JSON:
    return _obj(_affinity_properties())


def _affinity_name() -> JSON:
    return _string(maxLength=32, minLength=1)


def cluster_affinity_term() -> JSON:
    overflow = _obj({"affinityName": _affinity_name(), **_affinity_properties()},
                    ("affinityName",))
    return _obj({"affinityName": _affinity_name(), **_affinity_properties(),
                 "overflowAffinities": _array(overflow)}, ("affinityName",))


def toleration() -> JSON:
    """corev1.Toleration."""
    return _obj({"effect": _string(), "key": _string(), "operator": _string(),
                 "tolerationSeconds": _int("int64"), "value": _string()})


def resource_selector() -> JSON:
    return _obj({"apiVersion": _string(), "kind": _string(), "labelSelector": label_selector(),
                 "name": _string(), "namespace": _string()}, ("apiVersion", "kind"))


def _state_preservation() -> JSON:
    rule = _obj({"aliasLabelName": _string(), "jsonPath": _string()},
                ("aliasLabelName", "jsonPath"))
    return _obj({"rules": _array(rule)}, ("rules",))


def failover() -> JSON:
    application = _obj({
        "decisionConditions": _obj({"tolerationSeconds": _int("int32", default=300)}),
        "gracePeriodSeconds": _int("int32"),
        "purgeMode": _enum("Directly", "Gracefully", "Never", default="Gracefully"),
        "statePreservation": _state_preservation(),
    }, ("decisionConditions",))
    cluster = _obj({"purgeMode": _enum("Directly", "Gracefully", default="Gracefully"),
                    "statePreservation": _state_preservation()})
    return _obj({"application": application, "cluster": cluster})


def placement() -> JSON:
    weight = _obj({"targetCluster": cluster_affinity(),
                   "weight": _int("int64", minimum=1)}, ("targetCluster", "weight"))
    replica_scheduling = _obj({
        "replicaDivisionPreference": _enum("Aggregated", "Weighted"),
        "replicaSchedulingType": _enum("Duplicated", "Divided", default="Divided"),
        "weightPreference": _obj({"dynamicWeight": _enum("AvailableReplicas"),
                                  "staticWeightList": _array(weight)}),
    })
    spread = _obj({"maxGroups": _int(), "minGroups": _int(),
                   "spreadByField": _enum("cluster", "region", "zone", "provider"),
                   "spreadByLabel": _string()})
    group = _obj({"groupByLabelKey": _string()}, ("groupByLabelKey",))
    return _obj({
        "clusterAffinities": _array(cluster_affinity_term()),
        "clusterAffinity": cluster_affinity(),
        "clusterTolerations": _array(toleration()),
        "replicaScheduling": replica_scheduling,
        "spreadConstraints": _array(spread),
        "workloadAffinity": _obj({"affinity": group, "antiAffinity": group}),
    })


def propagation_spec() -> JSON:
    return _obj({
        "activationPreference": _enum("Lazy"),
        "association": {"type": "boolean"},
        "conflictResolution": _enum("Abort", "Overwrite", default="Abort"),
        "dependentOverrides": _strings(),
        "failover": failover(),
        "placement": placement(),
        "preemption": _enum("Always", "Never", default="Never"),
        "preserveResourcesOnDeletion": {"type": "boolean"},
        "priority": _int("int32", default=0),
        "propagateDeps": {"type": "boolean"},
        "resourceSelectors": _array(resource_selector(), minItems=1),
        "schedulePriority": _obj({"priorityClassName": _string(),
                                  "priorityClassSource": _enum("KubePriorityClass")},
                                 ("priorityClassName", "priorityClassSource")),
        "schedulerName": _string(default="default-scheduler"),
        "suspension": _obj({"dispatching": {"type": "boolean"},
                            "dispatchingOnClusters": _obj({"clusterNames": _strings()})}),
    }, ("resourceSelectors",))


def _operator() -> JSON:
    return _enum("add", "remove", "replace")


def overriders() -> JSON:
    command_args = _obj({"containerName": _string(), "operator": _enum("add", "remove"),
                         "value": _strings()}, ("containerName", "operator"))
    label_annotation = _obj({"operator": _operator(),
                             "value": {"type": "object", "additionalProperties": _string()}},
                            ("operator", "value"))
    patch = _obj({"operator": _operator(), "subPath": _string(), "value": _any_json()},
                 ("operator", "subPath"))
    field = _obj({"fieldPath": _string(), "json": _array(patch), "yaml": _array(patch)},
                 ("fieldPath",))
    image = _obj({"component": _enum("Registry", "Repository", "Tag"),
                  "operator": _operator(),
                  "predicate": _obj({"path": _string()}, ("path",)),
                  "value": _string()}, ("component", "operator"))
    plaintext = _obj({"operator": _operator(), "path": _string(), "value": _any_json()},
                     ("operator", "path"))
    return _obj({
        "annotationsOverrider": _array(label_annotation),
        "argsOverrider": _array(command_args),
        "commandOverrider": _array(command_args),
        "fieldOverrider": _array(field),
        "imageOverrider": _array(image),
        "labelsOverrider": _array(label_annotation),
        "plaintext": _array(plaintext),
    })


def override_spec() -> JSON:
    rule = _obj({"overriders": overriders(), "targetCluster": cluster_affinity()},
                ("overriders",))
    return _obj({"overrideRules": _array(rule), "overriders": overriders(),
                 "resourceSelectors": _array(resource_selector()),
                 "targetCluster": cluster_affinity()})


# -- the CRDs -------------------------------------------------------------------------------

#: (kind, plural, namespaced, spec schema builder, printer columns)
_KINDS = (
    ("PropagationPolicy", "propagationpolicies", True, propagation_spec),
    ("ClusterPropagationPolicy", "clusterpropagationpolicies", False, propagation_spec),
    ("OverridePolicy", "overridepolicies", True, override_spec),
    ("ClusterOverridePolicy", "clusteroverridepolicies", False, override_spec),
)


def _columns(kind: str) -> list[JSON]:
    valid = {"name": "Valid", "type": "string",
             "jsonPath": '.status.conditions[?(@.type=="Valid")].status'}
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    if "Propagation" not in kind:
        return [valid, age]
    return [{"name": "Conflict-Resolution", "type": "string",
             "jsonPath": ".spec.conflictResolution"},
            {"name": "Priority", "type": "string", "jsonPath": ".spec.priority"}, valid, age]


def crd(kind: str, plural: str, namespaced: bool, spec: JSON) -> JSON:
    schema = {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": _string(), "kind": _string(), "metadata": {"type": "object"},
        "spec": spec,
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}",
                     "labels": {"federation.io/component": "crd"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "categories": ["karmada-io"]},
            "versions": [{"name": VERSION, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema},
                          "subresources": {"status": {}},
                          "additionalPrinterColumns": _columns(kind)}],
        },
    }


def documents() -> list[JSON]:
    """The four CRDs, in the order they are installed."""
    return [crd(kind, plural, namespaced, build()) for kind, plural, namespaced, build in _KINDS]


HEADER = """\
# policy.karmada.io/v1alpha1: Karmada's policy kinds, served by the hub next to ours so
# that Karmada policy files apply unchanged. Generated by federation/hub/karmada_crds.py
# (python -m federation.hub.karmada_crds > federation/crds/karmada.yaml); do not edit.
"""


def render() -> str:
    return HEADER + yaml.safe_dump_all(documents(), sort_keys=False, explicit_start=True)


if __name__ == "__main__":  # pragma: no cover - the generator's command line
    sys.stdout.write(render())
