"""vela-core's internal definitions (vela-templates/definitions/internal/{component,trait,
policy,workflowstep}) and what this control plane does with each: built in (a Python
function rendering what the definition renders, or controller behaviour), or not, with the
reason, which a refusal quotes (``spec.components[0].type: 'helmchart' is not built in:
...``). docs/applications.md has the same table; a unit test keeps the two, the code's
registries and the upstream list (when a mirror of kubevela/kubevela is at hand) in step.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["component", "trait", "policy", "workflowstep"]

BUILT_IN: dict[Kind, tuple[str, ...]] = {
    "component": ("webservice", "worker", "statefulset", "k8s-objects", "daemon", "task",
                  "cron-task", "ref-objects", "helmchart"),
    "trait": ("scaler", "labels", "annotations", "env", "expose", "storage", "sidecar",
              "gateway", "init-container", "cpuscaler", "command", "container-image",
              "hostalias", "json-merge-patch", "json-patch", "affinity", "container-ports",
              "hpa", "k8s-update-strategy", "lifecycle", "podsecuritycontext",
              "securitycontext", "resource", "service-account", "startup-probe",
              "topologyspreadconstraints", "service-binding", "pure-ingress", "nocalhost"),
    "policy": ("topology", "override", "garbage-collect", "apply-once", "read-only",
               "replication", "resource-update", "shared-resource", "take-over"),
    "workflowstep": ("deploy", "apply-component", "suspend", "notification", "apply-object",
                     "apply-deployment", "step-group", "restart-workflow", "read-object",
                     "export2config", "export2secret", "print-message-in-status",
                     "collect-service-endpoints", "export-data", "depends-on-app",
                     "clean-jobs", "apply-terraform-config", "apply-terraform-provider",
                     "create-config", "read-config", "list-config", "delete-config",
                     "webhook", "request", "check-metrics", "deploy-cloud-resource",
                     "share-cloud-resource", "export-service", "generate-jdbc-connection",
                     "vela-cli", "build-push-image"),
}
"""The internal definitions built in. Besides: vela-core's deprecated ``raw`` component,
``ingress``, ``ingress-1-20``, ``volumes``, ``pvc``, ``configmap`` traits and
``apply-application``, ``apply-remaining``, ``deploy2runtime``, ``deploy2env`` steps and
``env-binding`` policy, and ours:
component ``config``, policy ``health``, step ``approve``."""

REFUSED: dict[Kind, dict[str, str]] = {
    "component": {
    },
    "trait": {
    },
    "policy": {
    },
    "workflowstep": {
    },
}


def refusal(kind: Kind, name: str) -> str | None:
    """Why ``name`` is not built in, when it is one of vela-core's definitions."""
    return REFUSED[kind].get(name)
