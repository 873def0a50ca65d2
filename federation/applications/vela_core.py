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

_JDBC = ("its output is the database password in plain (env url, username, password from "
         "the connection Secret's DB_HOST, DB_PORT, DB_NAME, DB_USER, DB_PASSWORD) for a "
         "component's env: kept in the Application's status, readable by whoever may get "
         "the Application, and in the member's pod template, readable by Kubernetes' view "
         "role, which is kept from Secrets on purpose; and the Secret is named freely "
         "(name, namespace), not as this Application's Configuration declares it. The same "
         "env without the control plane reading anything: entries with valueFrom."
         "secretKeyRef (or the service-binding trait) for the five keys, and url "
         "jdbc://$(DB_HOST):$(DB_PORT)/$(DB_NAME)?characterEncoding=utf8&useSSL=false, "
         "which the kubelet expands (docs/security.md, Applications: cloud-resource steps)")

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
                     "share-cloud-resource", "vela-cli", "build-push-image"),
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
        "export-service": "writes a Service and its Endpoints pointing at an address the "
                          "tenant names: Endpoints are never written in a member (the deny "
                          "list; the control plane's member role has no right on them, as "
                          "Kubernetes' own edit role has none since CVE-2021-25740: a "
                          "selector-less Service's Endpoints forward traffic to any address, "
                          "another namespace's pods included)",
        "generate-jdbc-connection": _JDBC,
    },
}


def refusal(kind: Kind, name: str) -> str | None:
    """Why ``name`` is not built in, when it is one of vela-core's definitions."""
    return REFUSED[kind].get(name)
