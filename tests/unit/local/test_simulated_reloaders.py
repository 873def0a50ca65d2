"""Simulated reloaders: which workloads want one, the config directory as the kubelet writes
it, the EndpointSlice, the recorder, and the process handling (with fake processes and a
fake member API, on virtual time)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.contexts import client as kube
from federation.hub import rollouts
from federation.local import record_params, reloaders
from federation.reloader.server import config_version
from tests.unit.clients import Unserved

JSON = dict[str, Any]


def deployment(name: str = "app", *, simulate: bool = True, fail: str = "",
               volumes: list[JSON] | None = None, deleting: bool = False) -> JSON:
    template_ann = {reloaders.SIMULATE_ANNOTATION: "true"} if simulate else {}
    if fail == "template":
        template_ann[reloaders.FAIL_ANNOTATION] = "true"
    meta: JSON = {"name": name, "namespace": "shop", "uid": f"uid-{name}"}
    if fail == "workload":
        meta["annotations"] = {reloaders.FAIL_ANNOTATION: "true"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"template": {
        "metadata": {"annotations": template_ann},
        "spec": {"volumes": volumes if volumes is not None else
                 [{"name": "config", "configMap": {"name": "app-config"}}]}}}}


def config_map(name: str, **data: str) -> JSON:
    return {"kind": "ConfigMap", "metadata": {"name": name, "namespace": "shop"}, "data": data}


def test_the_names_match_the_hub_contract() -> None:
    assert reloaders.CLIENT_NAME == rollouts.RELOADER_CLIENT_NAME
    assert reloaders.PORT_NAME == rollouts.RELOADER_PORT_NAME
    ref = rollouts.WorkloadRef(kind=rollouts.WorkloadKind.DEPLOYMENT, name="app")
    slice_ = reloaders.endpoint_slice("shop", "app", 1)
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == ref.service


def test_only_the_pod_template_annotation_asks_for_a_reloader() -> None:
    on_workload_only = deployment(simulate=False)
    on_workload_only["metadata"]["annotations"] = {reloaders.SIMULATE_ANNOTATION: "true"}
    picked = reloaders.wanted([("Deployment", deployment("a")),
                               ("StatefulSet", deployment("b")),
                               ("Deployment", deployment("c", simulate=False)),
                               ("Deployment", on_workload_only),
                               ("Deployment", deployment("d", deleting=True))])
    assert sorted(picked) == [("Deployment", "shop", "a"), ("StatefulSet", "shop", "b")]


@pytest.mark.parametrize(("where", "expected"),
                         [("", False), ("template", True), ("workload", True)])
def test_the_fail_annotation_counts_on_the_workload_or_its_template(where: str,
                                                                    expected: bool) -> None:
    assert reloaders.fails(deployment(fail=where)) is expected


def test_files_of_configmaps_secrets_items_and_projected_volumes() -> None:
    secret = {"metadata": {"name": "creds"},
              "data": {"password": base64.b64encode(b"pw\n").decode()}}
    cm = config_map("app-config", **{"my.ini": "[mysqld]\nmax_connections=100\n",
                                     "other": "x"})
    cm["binaryData"] = {"blob": base64.b64encode(b"\x00\x01").decode()}
    volumes = [{"name": "a", "configMap": {"name": "app-config"}},
               {"name": "b", "secret": {"secretName": "creds",
                                        "items": [{"key": "password", "path": "auth/pw"}]}},
               {"name": "c", "projected": {"sources": [{"configMap": {
                   "name": "extra", "items": [{"key": "k", "path": "extra.conf"}]}}]}}]
    files = reloaders.desired_files(deployment(volumes=volumes),
                                    {"app-config": cm, "extra": config_map("extra", k="v")},
                                    {"creds": secret})
    assert files.files == {"my.ini": b"[mysqld]\nmax_connections=100\n", "other": b"x",
                           "blob": b"\x00\x01", "auth/pw": b"pw\n", "extra.conf": b"v"}
    assert files.problems == ()


def test_what_cannot_be_placed_is_said_not_skipped_silently() -> None:
    volumes = [{"name": "a", "configMap": {"name": "missing"}},
               {"name": "o", "secret": {"secretName": "maybe", "optional": True}},
               {"name": "b", "configMap": {"name": "cm", "items": [
                   {"key": "nokey", "path": "x"}, {"key": "k", "path": "../../etc/passwd"},
                   {"key": "k", "path": "..data/k"}, {"key": "k", "path": "/abs"},
                   {"key": "k", "path": "ok"}]}},
               {"name": "c", "configMap": {"name": "cm", "items": [{"key": "k", "path": "ok"}]}}]
    files = reloaders.desired_files(deployment(volumes=volumes), {"cm": config_map("cm", k="v")},
                                    {})
    assert files.files == {"ok": b"v"}
    assert files.missing == ("ConfigMap missing",)  # the optional Secret is not awaited
    assert files.problems == (
        "ConfigMap cm has no key 'nokey'",
        "ConfigMap cm: path '../../etc/passwd' refused", "ConfigMap cm: path '..data/k' refused",
        "ConfigMap cm: path '/abs' refused",
        "ConfigMap cm: path 'ok' already mounted by an earlier volume")


def test_the_endpoint_slice_lists_one_ready_loopback_reloader() -> None:
    slice_ = reloaders.endpoint_slice("shop", "app", 41234)
    assert slice_["apiVersion"] == "discovery.k8s.io/v1beta1"
    assert slice_["metadata"] == {
        "name": "app-reloader-simulated", "namespace": "shop",
        "labels": {"kubernetes.io/service-name": "app-reloader",
                   "endpointslice.kubernetes.io/managed-by": "simulator.federation.io"}}
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "reloader", "port": 41234, "protocol": "TCP"}]
    assert slice_["endpoints"] == [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]
    served = {**slice_, "metadata": {**slice_["metadata"], "resourceVersion": "7",
                                     "labels": {**slice_["metadata"]["labels"], "x": "y"}}}
    assert not reloaders.slice_differs(served, slice_)
    assert reloaders.slice_differs(served, reloaders.endpoint_slice("shop", "app", 41235))


def test_the_config_dir_is_written_like_a_kubelet_volume(tmp_path: Path) -> None:
    directory = tmp_path / "config"
    assert reloaders.sync_config_dir(directory, {"my.ini": b"a=1\n", "sub/x": b"x"})
    assert (directory / "my.ini").read_bytes() == b"a=1\n"
    assert os.readlink(directory / "my.ini") == "..data/my.ini"
    assert (directory / "sub" / "x").read_bytes() == b"x"
    first = os.readlink(directory / "..data")
    version = config_version(directory)
    # The same content again: nothing written, the same version for the reloader.
    assert not reloaders.sync_config_dir(directory, {"my.ini": b"a=1\n", "sub/x": b"x"})
    assert os.readlink(directory / "..data") == first
    # A change swaps ..data, drops the removed file, and removes the old version.
    assert reloaders.sync_config_dir(directory, {"my.ini": b"a=2\n"})
    assert (directory / "my.ini").read_bytes() == b"a=2\n"
    assert not (directory / "sub").exists() and not (directory / first).exists()
    assert config_version(directory) != version
    assert sorted(p.name for p in directory.iterdir() if not p.name.startswith("..")) == \
        ["my.ini"]


def test_a_removed_link_is_put_back(tmp_path: Path) -> None:
    directory = tmp_path / "config"
    reloaders.sync_config_dir(directory, {"my.ini": b"a=1\n"})
    (directory / "my.ini").unlink()
    assert reloaders.sync_config_dir(directory, {"my.ini": b"a=1\n"})
    assert (directory / "my.ini").read_bytes() == b"a=1\n"


def test_the_recorder_appends_params_and_fails_while_the_marker_exists(tmp_path: Path) -> None:
    applied, marker = tmp_path / "applied.jsonl", tmp_path / "fail"
    assert record_params.main([str(applied), str(marker), "a.b=1", "x=y=z; $(reboot)"]) == 0
    assert record_params.main([str(applied), str(marker)]) == 0
    lines = [json.loads(line) for line in applied.read_text().splitlines()]
    assert [line["params"] for line in lines] == [{"a.b": "1", "x": "y=z; $(reboot)"}, {}]
    assert lines[0]["time"].endswith("Z") and "." in lines[0]["time"]
    marker.touch()
    assert record_params.main([str(applied), str(marker), "a=2"]) == 1
    assert len(applied.read_text().splitlines()) == 2
    assert record_params.main([str(applied), str(marker), "noequals"]) == 1  # marker first
    marker.unlink()
    assert record_params.main([str(applied), str(marker), "noequals"]) == 2


# -- processes and the member reconciliation, faked ----------------------------------------

class FakeProcs:
    """processes.spawn/owned_pid/terminate over a dict of 'live' pid files."""

    def __init__(self) -> None:
        self.live: dict[Path, list[str]] = {}
        self.spawned: list[list[str]] = []
        self.terminated: list[Path] = []
        self.ports = iter(range(40000, 40100))

    def spawn(self, argv: list[str], pid_file: Path, log_file: Path) -> int:
        self.spawned.append(argv)
        self.live[pid_file] = argv
        return len(self.spawned)

    def alive(self, pid_file: Path) -> int | None:
        return 1 if pid_file in self.live else None

    def terminate(self, pid_file: Path) -> bool:
        self.terminated.append(pid_file)
        return self.live.pop(pid_file, None) is not None

    def processes(self, tmp: Path) -> reloaders.ReloaderProcesses:
        tls = reloaders.TLSFiles(tmp / "tls.crt", tmp / "tls.key", tmp / "ca.crt")
        return reloaders.ReloaderProcesses(tmp / "member1", tls, spawn=self.spawn,
                                           alive=self.alive, terminate=self.terminate,
                                           port=lambda: next(self.ports))


def test_a_process_is_started_once_with_mtls_and_restarted_when_it_died(tmp_path: Path) -> None:
    fake = FakeProcs()
    procs = fake.processes(tmp_path)
    key = ("Deployment", "shop", "app")
    first = procs.ensure(key)
    assert procs.ensure(key) is first and len(fake.spawned) == 1
    argv = fake.spawned[0]
    flags = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert argv[1:4] == ["-m", "federation", "reloader"]
    assert flags["--allow-client"] == "federation-reconfigure"
    assert flags["--bind-address"] == "127.0.0.1:40000"
    assert flags["--tls-ca"] == str(tmp_path / "ca.crt")
    assert flags["--config-dir"] == str(tmp_path / "member1/shop/app/config")
    action = yaml.safe_load(Path(flags["--action"]).read_text())
    assert action["kind"] == "exec" and action["command"][-2:] == [
        str(tmp_path / "member1/shop/app/applied.jsonl"), str(tmp_path / "member1/shop/app/fail")]
    fake.live.clear()  # it died
    again = procs.ensure(key)
    assert again.port == 40001 and len(fake.spawned) == 2
    procs.set_failing(key, True)
    assert (tmp_path / "member1/shop/app/fail").exists()
    procs.set_failing(key, False)
    assert not (tmp_path / "member1/shop/app/fail").exists()
    procs.stop_all()
    assert fake.live == {} and procs.running == {}


class FakeMember(Unserved):
    name = "member1"

    def __init__(self) -> None:
        self.slices: dict[tuple[str, str], JSON] = {}
        self.writes: list[tuple[str, str]] = []

    async def create(self, resource: kube.Resource, body: JSON, namespace: str | None = None
                     ) -> JSON:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self.writes.append(("create", key[1]))
        self.slices[key] = body
        return body

    async def replace(self, resource: kube.Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self.writes.append(("replace", key[1]))
        self.slices[key] = body
        return body

    async def delete(self, resource: kube.Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON:
        self.writes.append(("delete", name))
        self.slices.pop((namespace or "", name), None)
        return {}


@dataclasses.dataclass
class Harness:
    """A ReloaderSync over fake processes and a fake member: a port listens once
    :meth:`accept` has named it, and ``changed`` is set when a reloader comes up.

    Virtual time stands still until the test moves it: a waiter's sleep between probes
    returns only at the next :meth:`accept`, so no wait can run out of its budget while
    the test is between two steps (with sleeps that took no time at all, a waiter spun
    through its 30 s while a reconcile awaited a thread, and restarted the process)."""

    fake: FakeProcs
    member: FakeMember
    procs: reloaders.ReloaderProcesses
    changed: asyncio.Event
    accepting: set[int]
    sync: reloaders.ReloaderSync
    sleepers: list[asyncio.Future[None]]

    def accept(self, port: int) -> None:
        """``port`` listens from now on; every waiter probes once more."""
        self.accepting.add(port)
        for sleeper in self.sleepers:
            if not sleeper.done():
                sleeper.set_result(None)
        self.sleepers.clear()


def harness(tmp_path: Path) -> Harness:
    fake, member = FakeProcs(), FakeMember()
    procs = fake.processes(tmp_path)
    changed = asyncio.Event()
    accepting: set[int] = set()

    async def probe(port: int) -> bool:
        return port in accepting

    sleepers: list[asyncio.Future[None]] = []

    async def until_accept(_: float) -> None:
        sleeper = asyncio.get_running_loop().create_future()
        sleepers.append(sleeper)
        await sleeper

    sync = reloaders.ReloaderSync(member, procs, changed.set,
                                  probe=probe, sleep=until_accept)
    return Harness(fake, member, procs, changed, accepting, sync, sleepers)


async def test_a_pass_starts_syncs_registers_and_a_later_pass_cleans_up(tmp_path: Path) -> None:
    h = harness(tmp_path)
    app = deployment(fail="workload")
    objects: dict[str, dict[tuple[str, str], JSON]] = {
        "deployments": {("shop", "app"): app},
        "configmaps": {("shop", "app-config"): config_map("app-config", **{"my.ini": "a=1\n"}),
                       ("other", "app-config"): config_map("app-config", **{"my.ini": "NO"})},
        "secrets": {}, "endpointslices": {}}
    await h.sync.reconcile(objects)
    config = tmp_path / "member1/shop/app/config"
    assert (config / "my.ini").read_text() == "a=1\n"  # its own namespace's ConfigMap
    assert (tmp_path / "member1/shop/app/fail").exists()
    assert h.member.writes == []  # not listening yet: no slice advertises it
    h.accept(40000)
    await asyncio.wait_for(h.changed.wait(), 5)
    await h.sync.reconcile(objects)
    assert h.member.writes == [("create", "app-reloader-simulated")]
    objects["endpointslices"] = dict(h.member.slices)
    await h.sync.reconcile(objects)  # level-triggered: nothing differs, nothing written
    assert len(h.member.writes) == 1 and len(h.fake.spawned) == 1
    # A stale slice of a workload that is gone is deleted; so is the workload's own.
    objects["endpointslices"][("shop", "old-reloader-simulated")] = \
        reloaders.endpoint_slice("shop", "old", 1)
    objects["deployments"] = {}
    await h.sync.reconcile(objects)
    assert sorted(h.member.writes[1:]) == [("delete", "app-reloader-simulated"),
                                           ("delete", "old-reloader-simulated")]
    assert h.fake.live == {} and h.procs.running == {}


async def test_a_reloader_that_never_listens_is_stopped_for_the_next_pass(
        tmp_path: Path) -> None:
    fake, member = FakeProcs(), FakeMember()
    procs = fake.processes(tmp_path)
    changed = asyncio.Event()
    slept = 0.0

    async def never(port: int) -> bool:
        return False

    async def virtual_sleep(seconds: float) -> None:
        nonlocal slept
        slept += seconds
        await asyncio.sleep(0)

    sync = reloaders.ReloaderSync(member, procs, changed.set,
                                  probe=never, sleep=virtual_sleep)
    await sync.reconcile({"deployments": {("shop", "app"): deployment()},
                          "configmaps": {("shop", "app-config"): config_map("app-config")},
                          "secrets": {}, "endpointslices": {}})
    await asyncio.wait_for(changed.wait(), 5)
    assert slept >= reloaders.READY_TIMEOUT - 0.2 and fake.live == {}
    assert member.writes == []


async def test_a_replaced_process_is_waited_for_and_the_old_wait_stops_nothing(
        tmp_path: Path) -> None:
    h = harness(tmp_path)
    objects: dict[str, dict[tuple[str, str], JSON]] = {
        "deployments": {("shop", "app"): deployment()},
        "configmaps": {("shop", "app-config"): config_map("app-config")}, "secrets": {},
        "endpointslices": {}}
    await h.sync.reconcile(objects)
    h.fake.live.clear()  # the first process (port 40000) died before it listened
    await h.sync.reconcile(objects)  # a second one, on port 40001
    h.accept(40001)
    await asyncio.wait_for(h.changed.wait(), 5)
    await h.sync.reconcile(objects)
    assert len(h.fake.live) == 1
    assert h.member.slices[("shop", "app-reloader-simulated")]["ports"][0]["port"] == 40001


async def test_no_reloader_starts_before_its_configmap_exists(tmp_path: Path) -> None:
    fake, member = FakeProcs(), FakeMember()
    procs = fake.processes(tmp_path)
    sync = reloaders.ReloaderSync(member, procs, lambda: None,
                                  probe=lambda port: asyncio.sleep(0, result=False))
    objects: dict[str, dict[tuple[str, str], JSON]] = {
        "deployments": {("shop", "app"): deployment()}, "configmaps": {}, "secrets": {},
        "endpointslices": {}}
    await sync.reconcile(objects)
    assert fake.spawned == [] and member.writes == []
    objects["configmaps"] = {("shop", "app-config"): config_map("app-config", a="1")}
    await sync.reconcile(objects)
    assert len(fake.spawned) == 1
    assert (tmp_path / "member1/shop/app/config/a").read_text() == "1"
    sync.close()
    assert fake.live == {}
