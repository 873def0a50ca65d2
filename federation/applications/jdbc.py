"""vela-core's ``generate-jdbc-connection`` (workflowstep/generate-jdbc-connection.cue), with
the same container env and nothing read.

KubeVela reads the connection Secret ``name`` (a database component's
``writeConnectionSecretToRef``: keys DB_HOST, DB_PORT, DB_NAME, DB_USER, DB_PASSWORD) on
its control plane and outputs ``env``: ``url``
(``jdbc://HOST:PORT/NAME?characterEncoding=utf8&useSSL=false``), ``username`` and
``password`` as plain values, which the workflow keeps in the Application's status and a
component's ``env`` puts into the member's pod template, where Kubernetes' ``view`` role
(kept from Secrets on purpose) reads them.

Here ``env`` is entries the kubelet resolves in the member: the five keys as
``valueFrom.secretKeyRef`` of Secret ``name``, then ``url`` as
``jdbc://$(DB_HOST):$(DB_PORT)/$(DB_NAME)?characterEncoding=utf8&useSSL=false`` (the
kubelet expands ``$(VAR)`` of variables defined earlier in the list) and ``username`` and
``password`` as references too. The container sees the same three values; the control
plane reads no Secret, and the status and pod template hold only the Secret's name. So the
Secret must be in the namespace of the pods, in each member they run in (the
``share-cloud-resource`` or ``deploy-cloud-resource`` step copies a connection Secret
there); missing, the pod does not start (``CreateContainerConfigError``, which ``kubectl
describe pod`` names) and the deploy step waits, as for any missing Secret. ``namespace``
may only be the Application's own (a secretKeyRef reads the pod's namespace only).
Pure: nothing here reads or writes.
"""

from __future__ import annotations

from typing import Any

from federation.applications import shapes, steps
from federation.applications.model import Step

JSON = dict[str, Any]
STEP_TYPE = "generate-jdbc-connection"
KEYS = ("DB_HOST", "DB_PORT", "DB_NAME", "DB_USER", "DB_PASSWORD")
"""The connection Secret's keys KubeVela's step reads (a database module's outputs)."""
URL = "jdbc://$(DB_HOST):$(DB_PORT)/$(DB_NAME)?characterEncoding=utf8&useSSL=false"
PARAMETERS = {"name": str, "namespace?": str}


def env(step: Step, namespace: str, where: str) -> list[JSON]:
    """The step's ``env`` output: references to Secret ``name`` of the Application's own
    namespace, then ``url``, ``username`` and ``password`` as KubeVela names them."""
    props = shapes.check(step.properties, PARAMETERS, where)
    steps.own_namespace(props, namespace, where)
    secret = steps.object_name(props["name"], f"{where}.name")

    def ref(name: str, key: str) -> JSON:
        return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}

    return [*(ref(key, key) for key in KEYS), {"name": "url", "value": URL},
            ref("username", "DB_USER"), ref("password", "DB_PASSWORD")]
