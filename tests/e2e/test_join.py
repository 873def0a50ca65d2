"""fedctl join / unjoin on the local fleet, with `fedctl run` engaging the joined cluster live.

The joined cluster is ``edge``: member3's API server under another name, from a
Secret (the control plane's own kubeconfig has no context ``edge``).
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import TestFleet, run_kubectl
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

MC = "memberclusters.cluster.federation.io"


def fedctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "federation", *args], capture_output=True,
                          text=True, timeout=timeout)


def hub_flags(fleet: TestFleet) -> list[str]:
    return ["--hub-kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub"]


def test_exec_plugin_not_on_the_allowlist_is_refused(fleet: TestFleet, tmp_path: Path) -> None:
    """join refuses a context whose exec plugin is not allowed, says why, writes nothing."""
    document = yaml.safe_load(fleet.kubeconfig.read_text())
    for user in document["users"]:
        if user["name"] == "member3-admin":
            user["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                     "command": "/bin/sh", "args": ["-c", "cat ~/.ssh/*"]}}
    path = tmp_path / "with-exec.yaml"
    path.write_text(yaml.safe_dump(document))
    result = fedctl("join", "sneaky", "--kubeconfig", str(path), "--context", "member3",
                    *hub_flags(fleet))
    assert result.returncode == 1
    assert "exec plugin '/bin/sh', which is not on the allowlist" in result.stderr
    assert "--allow-exec-command /bin/sh" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert get_or_none(fleet, "hub", MC, "sneaky") is None
    assert get_or_none(fleet, "hub", "secret", "sneaky-kubeconfig", "-n",
                       "federation-system") is None


HOSTILE: list[tuple[str, Callable[[Path], dict[str, Any]], str]] = [
    # (MemberCluster name, exec config given the planted directory, what the refusal names)
    ("evil-path", lambda evil: {"command": "aws", "args": ["eks", "get-token"],
                                "env": [{"name": "PATH", "value": str(evil)}]},
     "exec env may not set PATH"),
    ("evil-preload", lambda evil: {"command": "aws", "args": ["eks", "get-token"],
                                   "env": [{"name": "LD_PRELOAD", "value": f"{evil}/x.so"}]},
     "exec env may not set LD_PRELOAD"),
    ("evil-relative", lambda evil: {"command": "../evil/aws"}, "relative or unnormalized path"),
    ("evil-absolute", lambda evil: {"command": f"{evil}/aws"}, "not on the allowlist"),
    ("evil-args", lambda evil: {"command": "aws", "args": ["iam", "create-access-key"]},
     "may only run `aws eks get-token`"),
]


@pytest.mark.timeout(240)
def test_hostile_exec_secrets_written_on_the_hub_are_refused(
        fleet: TestFleet, control_plane: ControlPlane, tmp_path: Path) -> None:
    """As an attacker with write access to federation-system on the hub (no fedctl join):
    MemberClusters whose kubeconfig Secrets would run a planted `aws` (exec.env PATH=<dir>,
    LD_PRELOAD, a relative or an unlisted absolute path, aws with other arguments). Each
    gets a JoinFailed event and a Ready=Unknown condition naming the reason; the planted
    command never runs; nothing is engaged; /healthz stays 200."""
    from federation.commands import join

    evil, marker = tmp_path / "evil", tmp_path / "PWNED"
    evil.mkdir()
    (evil / "aws").write_text(f"#!/bin/sh\necho ran >> '{marker}'\n")
    (evil / "aws").chmod(0o755)
    config = yaml.safe_load(fleet.kubeconfig.read_text())
    server = next(c["cluster"] for c in config["clusters"] if c["name"] == "member3")
    names = [name for name, _, _ in HOSTILE]
    apply(fleet, "hub", {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "federation-system"}})
    try:
        for name, exec_config, _ in HOSTILE:
            document = {"apiVersion": "v1", "kind": "Config", "current-context": name,
                        "clusters": [{"name": name, "cluster": server}],
                        "users": [{"name": name, "user": {"exec": {
                            "apiVersion": "client.authentication.k8s.io/v1",
                            **exec_config(evil)}}}],
                        "contexts": [{"name": name, "context": {"cluster": name,
                                                                "user": name}}]}
            secret, member = join.objects(name, document, {}, {})
            apply(fleet, "hub", secret, member)
        for name, _, reason in HOSTILE:
            wait_for(functools.partial(_refused, fleet, name, reason), timeout=60,
                     what=f"{name}: a JoinFailed event and NotEngaged condition naming {reason}")
        assert not marker.exists(), "the planted command ran"
        log = control_plane.log_path.read_text()
        assert not any(f"cluster {name} joined" in log for name in names)
        with urllib.request.urlopen(
                f"http://127.0.0.1:{control_plane.health_port}/healthz", timeout=5) as answer:
            assert answer.status == 200
    finally:
        fleet.kubectl("hub", "delete", MC, *names, "--ignore-not-found")
        fleet.kubectl("hub", "delete", "secret", "-n", "federation-system",
                      *(f"{n}-kubeconfig" for n in names), "--ignore-not-found")
    assert not marker.exists()


def _refused(fleet: TestFleet, name: str, reason: str) -> bool:
    member = get_json(fleet, "hub", MC, name)
    ready: dict[str, Any] = next(
        (c for c in (member.get("status") or {}).get("conditions") or []
         if c["type"] == "Ready"), {})
    if ready.get("reason") != "NotEngaged" or reason not in ready.get("message", ""):
        return False
    events = get_json(fleet, "hub", "events", "-n", "default", "--field-selector",
                      f"involvedObject.name={name}")["items"]
    return any(e["reason"] == "JoinFailed" and e["type"] == "Warning" and reason in e["message"]
               for e in events)


def decoded_secret(fleet: TestFleet, name: str) -> dict[str, Any]:
    secret = get_json(fleet, "hub", "secret", f"{name}-kubeconfig", "-n", "federation-system")
    assert set(secret["data"]) == {"kubeconfig"}
    found: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    return found


@pytest.mark.timeout(300)
def test_joined_cluster_holds_only_its_credentials_and_is_engaged_live(
        fleet: TestFleet, control_plane: ControlPlane) -> None:
    """join writes a Secret with member3's context alone; the running control plane engages
    it as `edge` (Ready, capacity), places on it; unjoin moves the workload off and removes
    MemberCluster and Secret."""
    name = "edge"
    result = fedctl("join", name, "--kubeconfig", str(fleet.kubeconfig), "--context",
                    "member3", "--labels", "tier=edge", "--region", "lab", *hub_flags(fleet))
    assert result.returncode == 0, result.stderr
    try:
        stored = decoded_secret(fleet, name)
        config = yaml.safe_load(fleet.kubeconfig.read_text())
        servers = {c["name"]: c["cluster"]["server"] for c in config["clusters"]}
        keys = {u["name"]: u["user"] for u in config["users"]}
        assert [c["name"] for c in stored["clusters"]] == [name]
        assert stored["clusters"][0]["cluster"]["server"] == servers["member3"]
        assert [u["name"] for u in stored["users"]] == [name]
        assert stored["users"][0]["user"]["client-key-data"] == \
            keys["member3-admin"]["client-key-data"]
        text = yaml.safe_dump(stored)
        for other in ("hub", "member1", "member2"):
            assert servers[other] not in text
            assert keys[f"{other}-admin"]["client-key-data"] not in text

        started = time.monotonic()
        wait_for(lambda: _ready(fleet, name), timeout=60, what="edge Ready with capacity")
        engaged = time.monotonic() - started
        member = get_json(fleet, "hub", MC, name)
        assert member["metadata"]["labels"] == {"tier": "edge"}
        assert member["spec"]["region"] == "lab"
        print(f"\nmeasured: joined cluster Ready (engaged from its Secret, probed, capacity "
              f"published) {engaged:.1f}s after join returned")
        _place_and_unjoin(fleet, name)
    finally:
        fedctl("unjoin", name, "--orphan", "--kubeconfig", str(fleet.kubeconfig),
               "--hub-context", "hub")
    assert get_or_none(fleet, "hub", MC, name) is None
    assert get_or_none(fleet, "hub", "secret", f"{name}-kubeconfig", "-n",
                       "federation-system") is None
    wait_for(lambda: "cluster edge left" in control_plane.log_path.read_text(), timeout=30,
             what="the control plane released edge")


@pytest.mark.timeout(300)
def test_unjoin_orphan_leaves_the_copies_running_unmanaged(
        fleet: TestFleet, control_plane: ControlPlane) -> None:
    """unjoin --orphan removes MemberCluster and Secret at once; the copy in the member stays,
    without our ownership marks, and nothing deletes it afterwards."""
    name = "edge2"
    result = fedctl("join", name, "--kubeconfig", str(fleet.kubeconfig), "--context",
                    "member3", *hub_flags(fleet))
    assert result.returncode == 0, result.stderr
    try:
        wait_for(lambda: _ready(fleet, name), timeout=60, what="edge2 Ready")
        ns, (copy, _) = _place(fleet, name)
        result = fedctl("unjoin", name, "--orphan", "--kubeconfig", str(fleet.kubeconfig),
                        "--hub-context", "hub")
        assert result.returncode == 0, result.stderr
        assert "left running, unmanaged" in result.stdout
        assert get_or_none(fleet, "hub", MC, name) is None
        wait_for(lambda: f"cluster {name} left" in control_plane.log_path.read_text(),
                 timeout=30, what="the control plane released edge2")
        time.sleep(3)  # a reconcile after the unjoin must not touch the orphan
        orphan = copy("member3")
        assert orphan is not None and orphan["spec"]["replicas"] == 1
        assert "federation.io/managed-by" not in (orphan["metadata"].get("labels") or {})
        fleet.kubectl("hub", "delete", "namespace", ns, "--wait=false")
        fleet.kubectl("member3", "delete", "deployment", "via-edge", "-n", ns)
    finally:
        fedctl("unjoin", name, "--orphan", "--kubeconfig", str(fleet.kubeconfig),
               "--hub-context", "hub")


def _ready(fleet: TestFleet, name: str) -> bool:
    doc = get_json(fleet, "hub", MC, name)
    conditions = {c["type"]: c["status"] for c in (doc.get("status") or {}).get(
        "conditions") or []}
    return conditions.get("Ready") == "True" and bool(doc["status"].get("resourceSummary"))


def _place(fleet: TestFleet, name: str) -> tuple[str, Any]:
    """via-edge, 2 replicas divided over ``name`` and member1; a reader of member copies."""
    ns = f"join-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", ns)
    workload = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "via-edge", "namespace": ns},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "e"}},
                         "template": {"metadata": {"labels": {"app": "e"}},
                                      "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    policy = {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "via-edge", "namespace": ns},
              "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                       "placement": {"clusterAffinity": {"clusterNames": [name, "member1"]},
                                     "replicaScheduling": {
                                         "replicaSchedulingType": "Divided"}}}}
    apply(fleet, "hub", workload, policy)

    def copy(member: str) -> dict[str, Any] | None:
        return get_or_none(fleet, member, "deployment", "via-edge", "-n", ns)

    def replicas(member: str) -> int | None:
        found = copy(member)
        return found["spec"]["replicas"] if found else None

    wait_for(lambda: replicas("member3") == 1 and replicas("member1") == 1, timeout=60,
             what="one replica through edge (in member3), one in member1")
    return ns, (copy, replicas)


def _place_and_unjoin(fleet: TestFleet, name: str) -> None:
    _, (_, replicas) = _place(fleet, name)
    result = fedctl("unjoin", name, "--timeout", "90", "--kubeconfig", str(fleet.kubeconfig),
                    "--hub-context", "hub")
    assert result.returncode == 0, result.stderr
    assert replicas("member3") is None, "unjoin finished with the copy still in edge"
    wait_for(lambda: replicas("member1") == 2, timeout=30, what="both replicas in member1")


def _jwt_subject(token: str) -> str:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["sub"])


@pytest.mark.timeout(300)
def test_join_with_a_service_account_stores_a_least_privilege_token(
        fleet: TestFleet, control_plane: ControlPlane, tmp_path: Path) -> None:
    """join --create-service-account: the Secret holds a ServiceAccount token (no client
    certificate, nothing of the admin); the control plane places through it and cleans up
    through it; the token cannot grant itself more (a ClusterRoleBinding is refused)."""
    name = "sa-edge"
    result = fedctl("join", name, "--kubeconfig", str(fleet.kubeconfig), "--context",
                    "member3", "--create-service-account", "--token-expiration-days", "2",
                    *hub_flags(fleet))
    assert result.returncode == 0, result.stderr
    assert "token expires" in result.stdout and "ServiceAccount token" in result.stdout
    try:
        stored = decoded_secret(fleet, name)
        user = stored["users"][0]["user"]
        assert set(user) == {"token"}
        assert _jwt_subject(user["token"]) == \
            "system:serviceaccount:federation-system:federation-control-plane"
        admin_key = next(u["user"]["client-key-data"] for u in
                         yaml.safe_load(fleet.kubeconfig.read_text())["users"]
                         if u["name"] == "member3-admin")
        assert admin_key not in yaml.safe_dump(stored)

        path = tmp_path / "stored.yaml"
        path.write_text(yaml.safe_dump(stored))
        escalate = run_kubectl(path, name, "create", "clusterrolebinding", "sa-edge-escalate",
                               "--clusterrole", "cluster-admin", "--user", "attacker",
                               check=False)
        assert escalate.returncode != 0 and "forbidden" in escalate.stderr.lower()
        assert get_or_none(fleet, "member3", "clusterrolebinding", "sa-edge-escalate") is None
        can = run_kubectl(path, name, "auth", "can-i", "create", "deployments", "-n", "x",
                          check=False)
        assert can.stdout.strip() == "yes"

        wait_for(lambda: _ready(fleet, name), timeout=60, what="sa-edge Ready with capacity")
        _place_and_unjoin(fleet, name)
    finally:
        fedctl("unjoin", name, "--orphan", "--kubeconfig", str(fleet.kubeconfig),
               "--hub-context", "hub")
    wait_for(lambda: f"cluster {name} left" in control_plane.log_path.read_text(),
             timeout=30, what="the control plane released sa-edge")
