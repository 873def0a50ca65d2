"""config/ against a real API server: every base and overlay passes `kubectl apply -k
--dry-run=server` on the local fleet, and config/default is what `fedctl install
--control-plane --print` prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.deploy import layout
from tests.conftest import TestFleet, kubectl_binary

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
JSON = dict[str, Any]

SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"plural": "servicemonitors", "singular": "servicemonitor",
                       "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}]}}
"""A minimal stand-in for Prometheus Operator's CRD (the fleet has no Prometheus), so the
component's ServiceMonitor is checked by the server too; its schema is not."""


def kustomize(directory: str) -> list[JSON]:
    """`kubectl kustomize` (kustomize built into kubectl) of config/DIRECTORY."""
    result = subprocess.run([kubectl_binary(), "kustomize", str(CONFIG / directory)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def kubectl(fleet: TestFleet, context: str, *args: str, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", context, *args],
        input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if check:
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr.strip()}"
    return result


def key(doc: JSON) -> tuple[str, str, str, str]:
    meta = doc["metadata"]
    return (doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"])


def apply_for_real(fleet: TestFleet, context: str, docs: list[JSON]) -> None:
    """Client-side apply, as `apply -k` will be (so it has nothing to warn about)."""
    if docs:
        kubectl(fleet, context, "apply", "-f", "-", stdin=layout.dump(docs))


def serves(fleet: TestFleet, context: str, group_version: str) -> bool:
    return group_version in kubectl(fleet, context, "api-versions").stdout.split()


def dry_run(fleet: TestFleet, context: str, directory: str) -> tuple[set[str], list[str]]:
    """`kubectl apply -k` with a server dry run: (objects the server accepted, errors)."""
    result = kubectl(fleet, context, "apply", "-k", str(CONFIG / directory),
                     "--dry-run=server", check=False)
    accepted = {line.split()[0] for line in result.stdout.splitlines()
                if line.endswith("(server dry run)")}
    # kubectl warns (does not fail) about objects that exist without its last-applied
    # annotation: `fedctl install` made them earlier in the session (CRDs, RBAC, namespace).
    errors = [line for line in result.stderr.splitlines()
              if line.strip() and not line.startswith("Warning:")]
    return accepted, errors


def resource_name(doc: JSON) -> str:
    """How kubectl names an object in its output: kind.group/name, lower case."""
    group = doc["apiVersion"].rpartition("/")[0]
    kind = doc["kind"].lower()
    return f"{kind}.{group}/{doc['metadata']['name']}" if group else \
        f"{kind}/{doc['metadata']['name']}"


@pytest.mark.parametrize(("directory", "context"), [
    *[(d, "hub") for d in layout.bases() if d != "agent"],
    ("agent", "member1"),  # the agent's manifests are applied to a member
])
def test_every_base_and_overlay_passes_a_server_dry_run(fleet: TestFleet, directory: str,
                                                        context: str) -> None:
    """Every object of `kubectl apply -k config/DIR` is accepted by the server (a dry run:
    nothing is written). The namespaces (and, for the Prometheus overlay, a stand-in
    ServiceMonitor CRD) are created first, as a dry run cannot create what others need.
    The local API servers are Kubernetes 1.20, which serves PodDisruptionBudgets only as
    policy/v1beta1: there the PDB (shipped as policy/v1, served since 1.21) must be the one
    object refused, for that reason, and the same PDB as v1beta1 passes."""
    docs = kustomize(directory)
    apply_for_real(fleet, context, [d for d in docs if d["kind"] == "Namespace"])
    if any(d["kind"] == "ServiceMonitor" for d in docs):
        apply_for_real(fleet, context, [SERVICE_MONITOR_CRD])
        kubectl(fleet, context, "wait", "--for=condition=Established", "--timeout=30s",
                "crd/servicemonitors.monitoring.coreos.com")
    accepted, errors = dry_run(fleet, context, directory)
    expected = {resource_name(d) for d in docs}
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    if pdbs and not serves(fleet, context, "policy/v1"):
        expected -= {resource_name(d) for d in pdbs}
        hint = "ensure CRDs are installed first"  # kubectl's second line of the refusal
        assert errors and all(('kind "PodDisruptionBudget" in version "policy/v1"' in e)
                              or e == hint for e in errors), errors
        older = [{**d, "apiVersion": "policy/v1beta1"} for d in pdbs]
        kubectl(fleet, context, "apply", "--dry-run=server", "-f", "-",
                stdin=layout.dump(older))
    else:
        assert not errors, errors
    assert accepted == expected


def test_config_default_is_what_install_prints(tmp_path: Path) -> None:
    """`kubectl kustomize config/default` and `fedctl install --control-plane --print` give
    the same objects (kustomize orders them its own way)."""
    printed = subprocess.run(
        [sys.executable, "-m", "federation", "install", "--control-plane", "--print",
         "--kubeconfig", str(tmp_path / "no-such-kubeconfig.yaml")],
        capture_output=True, text=True, timeout=60, check=False)
    assert printed.returncode == 0, printed.stderr
    ours = sorted((d for d in yaml.safe_load_all(printed.stdout) if d), key=key)
    theirs = sorted(kustomize("default"), key=key)
    assert [key(d) for d in ours] == [key(d) for d in theirs]
    assert ours == theirs


def fedctl_install(fleet: TestFleet, *extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "federation", "install", "--kubeconfig", str(fleet.kubeconfig),
         "--hub-context", "hub", *extra], capture_output=True, text=True, timeout=180,
        check=False)
    assert result.returncode == 0, result.stderr
    return result


def test_install_control_plane_upgrades_an_older_version_in_place(fleet: TestFleet) -> None:
    """An older version's Deployment (another image, fewer flags), applied by the same
    field manager, becomes this version's with `fedctl install --control-plane`; the
    Services, PDB and NetworkPolicy are there after it."""
    printed = [d for d in yaml.safe_load_all(fedctl_install(
        fleet, "--control-plane", "--print").stdout) if d]
    deployment = next(d for d in printed if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    older = yaml.safe_load(yaml.safe_dump(deployment))
    older["spec"]["template"]["spec"]["containers"][0].update(
        image="ghcr.io/federation/fedctl:0.0.1", args=["run", "--leader-elect"])
    namespace = next(d for d in printed if d["kind"] == "Namespace")
    apply_for_real(fleet, "hub", [namespace])
    kubectl(fleet, "hub", "apply", "-f", "-", "--server-side", "--field-manager=federation",
            stdin=layout.dump([older]))
    try:
        out = fedctl_install(fleet, "--control-plane").stdout
        assert f"control plane {container['image']} applied" in out
        live = yaml.safe_load(kubectl(fleet, "hub", "get", "deployment", "-n",
                                      namespace["metadata"]["name"],
                                      deployment["metadata"]["name"], "-o", "yaml").stdout)
        live_container = live["spec"]["template"]["spec"]["containers"][0]
        assert live_container["image"] == container["image"]
        assert live_container["args"] == container["args"]
        assert live["spec"]["template"]["spec"]["securityContext"] == \
            deployment["spec"]["template"]["spec"]["securityContext"]
        for kind in ("service", "poddisruptionbudget", "networkpolicy", "serviceaccount"):
            names = kubectl(fleet, "hub", "get", kind, "-n", namespace["metadata"]["name"],
                            "-l", "app.kubernetes.io/part-of=federation", "-o", "name").stdout
            assert names.strip(), kind
        fedctl_install(fleet, "--control-plane")  # again: nothing to change, no error
    finally:
        for kind in ("deployment", "service", "poddisruptionbudget", "networkpolicy"):
            kubectl(fleet, "hub", "delete", kind, "-n", namespace["metadata"]["name"],
                    "-l", "app.kubernetes.io/component=control-plane", "--wait=false",
                    check=False)
