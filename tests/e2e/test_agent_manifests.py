"""Issue 22: member3's agent from its shipped manifests, as an operator runs it.

What docs/install.md ("Joining a pull member") tells an operator, step by step: `fedctl join
member3 --mode pull` on the hub; a kustomize overlay of ``config/agent`` that fills the
ConfigMap (cluster name, hub address) and the Secret (the three files join wrote);
``kubectl apply -k`` of it to the member. The local fleet has no kubelet: the pod runner
(:mod:`federation.local.pods`) runs the Deployment's pod as a local process with a token of
its ServiceAccount, and nothing else (no kubeconfig, no certificate file).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from federation.local import pods
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, free_port, get_or_none, wait_for
from tests.e2e.test_agent import _only, deployment, ready, weighted

CONFIG = Path(__file__).resolve().parents[2] / "config" / "agent"
NAMESPACE = NAME = "federation-agent"
MC = "memberclusters.cluster.federation.io"


def overlay(directory: Path, tls: Path, hub_address: str) -> Path:
    """The operator's overlay of config/agent (docs/install.md shows the same file)."""
    directory.mkdir()
    for name in ("tls.crt", "tls.key", "ca.crt"):
        shutil.copyfile(tls / name, directory / name)
        (directory / name).chmod(0o600)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(CONFIG, directory)],
        "generatorOptions": {"disableNameSuffixHash": True},
        "configMapGenerator": [{"name": NAME, "namespace": NAMESPACE, "behavior": "replace",
                                "literals": ["cluster-name=member3",
                                             f"hub-address={hub_address}"]}],
        "secretGenerator": [{"name": "federation-agent-tls", "namespace": NAMESPACE,
                             "behavior": "replace", "type": "kubernetes.io/tls",
                             "files": ["tls.crt", "tls.key", "ca.crt"]}],
    }, sort_keys=False))
    return directory


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[ControlPlane, Path, str]]:
    fleet = fleet_session
    directory = tmp_path_factory.mktemp("agent-manifests")
    address = f"127.0.0.1:{free_port()}"
    control = ControlPlane(fleet, directory / "fedctl-run.log", "--cleanup-wait", "8",
                           "--work-bind-address", address)
    source = yaml.safe_load(control.kubeconfig.read_text())
    without = directory / "control-plane.yaml"  # as `local up --pull member3` writes it
    without.write_text(yaml.safe_dump(_only(source, {"hub", "member1", "member2"}, "hub")))
    control.argv[control.argv.index("--kubeconfig") + 1] = str(without)
    control.install()
    joined = subprocess.run(  # the operator's first step, on the hub (makes the work CA)
        [*control.argv[:3], "join", "member3", "--mode", "pull", "--hub-kubeconfig",
         str(fleet.kubeconfig), "--hub-context", "hub", "--out-dir", str(directory / "tls"),
         "--hub-address", address], capture_output=True, text=True, timeout=60)
    assert joined.returncode == 0, joined.stderr
    control.launch()
    try:
        yield control, directory, address
    finally:
        pods.stop(fleet.state_dir, "member3", NAMESPACE, NAME)
        control.stop()
        fleet.kubectl("hub", "patch", MC, "member3", "--type", "merge", "-p",
                      '{"spec":{"mode":null}}', check=False)
        # Not the namespace: the fleet has no namespace controller to finish deleting it.
        fleet.kubectl("member3", "-n", NAMESPACE, "delete", "deployment,configmap,secret",
                      "--all", check=False)


@pytest.mark.timeout(300)
def test_member3s_agent_runs_from_config_agent_with_its_service_account(
        fleet: TestFleet, plane: tuple[ControlPlane, Path, str]) -> None:
    _, directory, address = plane
    fleet.kubectl("member3", "apply", "-k", str(overlay(directory / "overlay",
                                                         directory / "tls", address)))
    pods.start(fleet.state_dir, fleet.kubeconfig, "member3", NAMESPACE, NAME)
    where = pods.directory(fleet.state_dir, "member3", NAMESPACE, NAME)
    try:
        running = pods.wait_ready(fleet.state_dir, "member3", NAMESPACE, NAME, 1, 120)
    except TimeoutError as exc:
        logs = "\n".join(p.read_text()[-2000:] for p in where.glob("**/*.log"))
        raise AssertionError(f"{exc}\n{logs}") from None
    pod_dir = where / "pods" / running[0].name
    log = pod_dir / "agent.log"
    wait_for(lambda: ready(fleet) == "True" and "work stream" in log.read_text(),
             timeout=90, what=f"member3 Ready through the agent's pod\n{log.read_text()[-2000:]}")
    assert "open (cluster member3" in log.read_text()
    # Nothing but the ServiceAccount mount reaches the member: no kubeconfig, no file of
    # the certificate or key anywhere in the pod's directory.
    assert not [p for p in pod_dir.rglob("*") if p.is_file() and
                b"PRIVATE KEY" in p.read_bytes()]

    ns = f"agent-pod-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", ns)
    try:
        apply(fleet, "hub", deployment("web", ns, 2), weighted("web", ns, {"member3": 1}))
        wait_for(lambda: (get_or_none(fleet, "member3", "deployment", "web", "-n", ns)
                          or {}).get("spec", {}).get("replicas") == 2,
                 timeout=60, what=f"the work applied by the pod\n{log.read_text()[-2000:]}")
        audit = (fleet.state_dir / "clusters" / "member3" / "audit.log").read_text()
        writer = [line for line in audit.splitlines()
                  if f'"namespace":"{ns}"' in line and '"verb":"create"' in line
                  and '"resource":"deployments"' in line]
        assert writer and all("system:serviceaccount:federation-agent:federation-agent"
                              in line for line in writer), writer[:2]
    finally:
        # The templates, not the namespace: the fleet has no namespace controller, so a
        # deleted namespace would keep its templates (and their copies) for later modules.
        for kinds in ("deployments", "propagationpolicies.policy.federation.io"):
            fleet.kubectl("hub", "delete", kinds, "--all", "-n", ns, "--wait=false",
                          check=False)
