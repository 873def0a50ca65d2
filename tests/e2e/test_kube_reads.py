"""The in-process ``kubectl get -o json`` (tests/kube_reads.py) gives kubectl's answers:
compared with kubectl itself on the same fleet, for each shape the reader answers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import TestFleet, run_kubectl
from tests.kube_reads import KubeReads

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def namespace(fleet_session: TestFleet) -> Iterator[str]:
    fleet = fleet_session
    name = f"reads-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    fleet.kubectl("hub", "create", "configmap", "one", "-n", name, "--from-literal=a=1")
    fleet.kubectl("hub", "create", "configmap", "two", "-n", name, "--from-literal=b=2")
    fleet.kubectl("hub", "label", "configmap", "two", "-n", name, "pick=yes")
    fleet.kubectl("hub", "create", "deployment", "web", "-n", name, "--image=nginx")
    yield name
    fleet.kubectl("hub", "delete", "namespace", name, "--wait=false", check=False)


def _strip(found: object) -> object:
    """kubectl's List carries no resourceVersion of its own; the rest must be equal."""
    if isinstance(found, dict) and found.get("kind") == "List":
        return {**found, "metadata": {}}
    return found


@pytest.mark.parametrize("args", [
    ("configmap", "one"), ("configmaps/one",), ("cm", "one"), ("configmap",),
    ("configmap", "-l", "pick=yes"), ("deployment.apps", "web"), ("deploy",),
    ("namespace", "default"), ("leases.coordination.k8s.io",), ("configmap", "-A"),
])
def test_answers_as_kubectl_does(fleet: TestFleet, namespace: str, args: tuple[str, ...]
                                 ) -> None:
    argv = ("get", *args, "-n", namespace, "-o", "json")
    reads = KubeReads(fleet.kubeconfig)
    answered = reads.get("hub", argv)
    assert answered is not None, f"{argv} should be answered in process"
    expected = run_kubectl(fleet.kubeconfig, "hub", *argv)
    assert answered.returncode == 0
    assert _strip(json.loads(answered.stdout)) == _strip(json.loads(expected.stdout))


def test_missing_objects_and_unknown_shapes(fleet: TestFleet, namespace: str) -> None:
    reads = KubeReads(fleet.kubeconfig)
    missing = reads.get("hub", ("get", "configmap", "nope", "-n", namespace, "-o", "json"))
    kubectl = run_kubectl(fleet.kubeconfig, "hub", "get", "configmap", "nope", "-n",
                          namespace, "-o", "json", check=False)
    assert missing is not None and missing.returncode == kubectl.returncode == 1
    assert missing.stderr.strip() == kubectl.stderr.strip()
    ignored = reads.get("hub", ("get", "configmap", "nope", "-n", namespace,
                                "--ignore-not-found", "-o", "json"))
    assert ignored is not None and (ignored.returncode, ignored.stdout) == (0, "")
    # Shapes the reader leaves to kubectl: another output, several types, an unknown type.
    for argv in (("get", "configmap", "one", "-n", namespace, "-o", "yaml"),
                 ("get", "configmap,secret", "-n", namespace, "-o", "json"),
                 ("get", "nosuchkind", "-n", namespace, "-o", "json")):
        assert reads.get("hub", argv) is None
