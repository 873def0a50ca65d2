"""Simulated reloaders on the local fleet: a workload asking for one gets, in every member,
a real ``fedctl reloader`` process listed by an EndpointSlice, reachable over mutual TLS
with a client certificate from the hub's reloader CA, whose action records the parameters
it applied; ``simulate-fail`` (set on the pod template for one member by an
OverridePolicy) makes it fail; the process and the slice go with the workload.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from federation.commands import reloader_ca
from federation.hub.rollouts import RELOADER_CA_SECRET, RELOADER_PORT_NAME
from federation.local import processes
from federation.reloader.client import (
    ClientTLS,
    ReloaderUnreachable,
    UpgradeResult,
    online_upgrade,
)
from federation.work import identity
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import (
    apply,
    free_port,
    get_json,
    get_or_none,
    reloaded_app,
    wait_for,
)

MEMBERS = ("member1", "member2", "member3")
FAILING = "member3"
INI = "[mysqld]\nmax_connections=100\n"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"rsim-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    for kinds in ("deployments,configmaps",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def slices(fleet: TestFleet, member: str, ns: str) -> list[dict[str, Any]]:
    listing = get_json(fleet, member, "endpointslices.discovery.k8s.io", "-n", ns,
                       "-l", "kubernetes.io/service-name=app-reloader")
    items: list[dict[str, Any]] = listing.get("items", [])
    return items


def address(slice_: dict[str, Any]) -> str:
    port = next(p["port"] for p in slice_["ports"] if p["name"] == RELOADER_PORT_NAME)
    endpoint = slice_["endpoints"][0]
    assert endpoint["conditions"]["ready"] is True
    return f"{endpoint['addresses'][0]}:{port}"


def client_tls(fleet: TestFleet) -> ClientTLS:
    secret = get_json(fleet, "hub", "secret", RELOADER_CA_SECRET, "-n", "federation-system")
    return reloader_ca.client_tls_from(identity.ca_from_secret(secret, RELOADER_CA_SECRET))


def call(target: str, tls: ClientTLS, namespace: str) -> UpgradeResult:
    return asyncio.run(online_upgrade(target, tls, namespace=namespace,
                                      config_spec="app-config", config_file="my.ini",
                                      params={"mysqld.max_connections": "200"}, timeout=20))


def test_each_member_runs_a_reachable_reloader_that_records_or_fails(
        fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", *reloaded_app(ns, INI, fail_in=FAILING))
    found = {m: wait_for(partial(slices, fleet, m, ns), timeout=90,
                         what=f"reloader EndpointSlice in {m}")[0] for m in MEMBERS}
    tls = client_tls(fleet)
    root = fleet.state_dir / "reloaders"
    for member in MEMBERS:
        workload = root / member / ns / "app"
        # The config directory holds the member's copy of the mounted ConfigMap.
        wait_for((workload / "config" / "my.ini").is_file, timeout=30, what="config synced")
        assert (workload / "config" / "my.ini").read_text() == INI
        applied = workload / "applied.jsonl"
        # The attack: an EndpointSlice of another namespace pointing here. The call is
        # meant for that namespace's workload, so this reloader refuses it, runs nothing.
        foreign = call(address(found[member]), tls, "another-team")
        assert not foreign.ok and f"serves namespace {ns}" in foreign.message, foreign
        assert not applied.exists()
        result = call(address(found[member]), tls, ns)
        if member == FAILING:
            assert not result.ok and "exited with status 1" in result.message, result
            assert not applied.exists()
        else:
            assert result.ok, (member, result)
            assert result.config_version
            lines = [json.loads(line) for line in applied.read_text().splitlines()]
            assert [line["params"] for line in lines] == [{"mysqld.max_connections": "200"}]

    # The simulator stops its reloaders when it exits, and starts them again when it returns.
    pid_files = [root / m / ns / "app" / "reloader.pid" for m in MEMBERS]
    assert fleet.stop_simulator()
    assert all(stopped(p) for p in pid_files)
    fleet.start_simulator(print)
    for pid_file in pid_files:
        wait_for(partial(running, pid_file), timeout=60, what=f"{pid_file} again")

    # The workload goes: its slice and its process go in every member.
    fleet.kubectl("hub", "delete", "deployment", "app", "-n", ns)
    for member in MEMBERS:
        wait_for(partial(gone, fleet, member, ns), timeout=90, what=f"slice gone from {member}")
        pid_file = root / member / ns / "app" / "reloader.pid"
        wait_for(partial(stopped, pid_file), timeout=30, what=f"the reloader of {member} stopped")


def gone(fleet: TestFleet, member: str, ns: str) -> bool:
    return (get_or_none(fleet, member, "deployment", "app", "-n", ns) is None
            and not slices(fleet, member, ns))


def stopped(pid_file: Path) -> bool:
    return processes.owned_pid(pid_file) is None


def running(pid_file: Path) -> bool:
    return not stopped(pid_file)


def test_reloader_cert_makes_a_sidecar_the_rollout_controller_can_call(
        fleet: TestFleet, tmp_path: Path) -> None:
    """`fedctl reloader-cert` (what an admin runs for real sidecars) writes files a
    `fedctl reloader` serves with, and the control plane's client identity from the same
    hub CA gets through (`--allow-client federation-reconfigure`)."""
    tls_dir = tmp_path / "tls"
    written = subprocess.run(
        [sys.executable, "-m", "federation", "reloader-cert", "--out-dir", str(tls_dir),
         "--hub-kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub"],
        capture_output=True, text=True, timeout=60, check=False)
    assert written.returncode == 0, written.stderr
    assert "--allow-client federation-reconfigure" in written.stdout
    secret = get_json(fleet, "hub", "secret", RELOADER_CA_SECRET, "-n", "federation-system")
    ca = identity.ca_from_secret(secret, RELOADER_CA_SECRET)
    assert (tls_dir / "ca.crt").read_bytes() == ca.cert_pem
    assert (tls_dir / "tls.key").stat().st_mode & 0o077 == 0
    (tmp_path / "config").mkdir()
    out = tmp_path / "applied.json"
    action = tmp_path / "action.yaml"
    action.write_text(json.dumps({"kind": "exec", "command": [
        sys.executable, "-c",
        "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))", str(out)]}))
    port = free_port()
    reloader = subprocess.Popen(
        [sys.executable, "-m", "federation", "reloader", "--config-dir",
         str(tmp_path / "config"), "--action", str(action),
         "--bind-address", f"127.0.0.1:{port}", "--health-probe-bind-address", "127.0.0.1:0",
         "--tls-cert", str(tls_dir / "tls.crt"), "--tls-key", str(tls_dir / "tls.key"),
         "--tls-ca", str(tls_dir / "ca.crt"), "--allow-client", "federation-reconfigure",
         "--namespace", "shop"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        answer = wait_for(partial(_answered, f"127.0.0.1:{port}", client_tls(fleet)),
                          timeout=30, what="the reloader to answer")
        assert answer.ok, answer.message
        assert json.loads(out.read_text()) == ["mysqld.max_connections=200"]
    finally:
        reloader.terminate()
        reloader.wait(timeout=10)


def _answered(target: str, tls: ClientTLS) -> UpgradeResult | None:
    try:
        return call(target, tls, "shop")
    except ReloaderUnreachable:
        return None  # not listening yet
