"""Informers, the multi-cluster client, discovery, cluster selection and exec credentials
on the real fleet."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import stat
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.contexts import cache, clusters, kubeconfig, multicluster
from federation.contexts import client as kube
from tests.conftest import TestFleet

pytestmark = pytest.mark.asyncio(loop_scope="session")

NAMESPACE = "rt-clients"


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE}, "data": data or {"k": "v"}}


@pytest.fixture
async def cluster_set(fleet: TestFleet) -> AsyncIterator[clusters.ClusterSet]:
    config = kubeconfig.load(fleet.kubeconfig)
    result = clusters.ClusterSet.from_kubeconfig(config, hub_context="hub")
    for cluster in result.engaged:
        assert cluster.client is not None
        with contextlib.suppress(kube.ApiError):
            await cluster.client.create(kube.NAMESPACES, {"metadata": {"name": NAMESPACE}})
    try:
        yield result
    finally:
        await result.close()


def etcd_revision(endpoint: str) -> int:
    out = subprocess.run(["etcdctl", "--endpoints", endpoint, "endpoint", "status", "-w",
                          "json"], env={**os.environ, "ETCDCTL_API": "3"}, check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return int(json.loads(out)[0]["Status"]["header"]["revision"])


def compact(endpoint: str) -> None:
    subprocess.run(["etcdctl", "--endpoints", endpoint, "compact", str(etcd_revision(endpoint))],
                   env={**os.environ, "ETCDCTL_API": "3"}, check=True, capture_output=True,
                   timeout=30)


@pytest.mark.timeout(120)
async def test_watch_410_gone_relists(fleet: TestFleet,
                                      cluster_set: clusters.ClusterSet) -> None:
    """An informer resuming from a compacted resourceVersion gets 410 and relists, and its
    handlers see every change it missed."""
    member = cluster_set.get("member1")
    assert member.client is not None
    informer = cache.Informer(member.client, kube.CONFIGMAPS, namespace=NAMESPACE)
    events: list[cache.Event] = []
    informer.add_handler(events.append)
    task = asyncio.create_task(informer.run())
    assert await informer.wait_synced(10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    old_version = informer.resource_version
    assert old_version is not None
    names = [f"gone-{i}" for i in range(20)]
    for name in names:
        await member.client.create(kube.CONFIGMAPS, configmap(name))
    endpoint = fleet.spec("member1").etcd_endpoint
    await asyncio.to_thread(compact, endpoint)
    # The apiserver serves watches from its watch cache, which keeps 75 s of history
    # whatever etcd compacted; a restart rebuilds it from etcd, now compacted past our
    # resourceVersion, as happens when an apiserver restarts or fails over.
    await asyncio.to_thread(fleet.stop, "member1")
    await asyncio.to_thread(fleet.start, "member1")
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(100):
            if informer.relists >= 1 and informer.state == "watching":
                break
            await asyncio.sleep(0.1)
        assert informer.relists == 1
        assert informer.resource_version != old_version
        added = {e.obj["metadata"]["name"] for e in events if e.type == "ADDED"}
        assert set(names) <= added
        assert all(informer.store.get(NAMESPACE, n) is not None for n in names)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for name in names:
            await member.client.delete(kube.CONFIGMAPS, name, NAMESPACE)


@pytest.mark.timeout(120)
async def test_writes_reach_their_cluster_and_honour_resource_versions(
        cluster_set: clusters.ClusterSet) -> None:
    """create/apply/patch/update/delete through a cluster's writer reach exactly that
    cluster; stale resourceVersions are rejected with 409 and reads come from the caches."""
    mc = multicluster.MultiClusterClient(cluster_set, field_manager="rt-test")
    for cluster in cluster_set.engaged:
        assert cluster.cache is not None
        cluster.cache.start()
    targets = ("member1", "member3")
    try:
        for name in targets:
            created = await mc.cluster(name).create(configmap("routed", a="1"))
            assert created["data"] == {"a": "1"}
        applied = {name: await mc.cluster(name).apply(configmap("routed", a="2"))
                   for name in targets}
        assert all(o["data"]["a"] == "2" for o in applied.values())
        assert "routed" not in {o["metadata"]["name"] for o in
                                (await mc.list(kube.CONFIGMAPS, NAMESPACE,
                                               clusters=["member2"])).items["member2"]}
        for _ in range(50):
            listing = await mc.list(kube.CONFIGMAPS, NAMESPACE, label_selector=None)
            if all(any(o["metadata"]["name"] == "routed" and o["data"]["a"] == "2"
                       for o in listing.items.get(n, [])) for n in ("member1", "member3")):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("caches did not see the applied objects")
        assert not listing.errors

        writer = mc.cluster("member1")
        stale = applied["member1"]
        fresh = await writer.patch(kube.CONFIGMAPS, "routed", {"data": {"a": "3"}},
                                   namespace=NAMESPACE,
                                   resource_version=stale["metadata"]["resourceVersion"])
        with pytest.raises(kube.ApiError) as conflict:
            await writer.update({**stale, "data": {"a": "4"}})
        assert conflict.value.status == 409 and conflict.value.retryable
        with pytest.raises(kube.ApiError) as conflict:
            await writer.patch(kube.CONFIGMAPS, "routed", {"data": {"a": "5"}},
                               namespace=NAMESPACE,
                               resource_version=stale["metadata"]["resourceVersion"])
        assert conflict.value.status == 409
        with pytest.raises(kube.ApiError) as conflict:
            await writer.delete(kube.CONFIGMAPS, "routed", NAMESPACE, uid="not-the-uid")
        assert conflict.value.status == 409
        updated = await writer.update({**fresh, "data": {"a": "6"}})
        assert updated["data"] == {"a": "6"}

        for name in targets:
            await mc.cluster(name).delete(kube.CONFIGMAPS, "routed", NAMESPACE)
        with pytest.raises(kube.ApiError) as missing:
            await writer.get(kube.CONFIGMAPS, "routed", NAMESPACE)
        assert missing.value.status == 404
    finally:
        for name in ("member1", "member3"):
            with contextlib.suppress(kube.ApiError):
                await mc.cluster(name).delete(kube.CONFIGMAPS, "routed", NAMESPACE)


@pytest.mark.timeout(120)
async def test_status_writes_and_crds_through_discovery(
        cluster_set: clusters.ClusterSet) -> None:
    """Discovery resolves built-ins and a CRD created at run time; status goes to /status."""
    writer = multicluster.MultiClusterClient(cluster_set).cluster("member2")
    crd: dict[str, Any] = {
           "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.rt.federation.io"},
           "spec": {"group": "rt.federation.io", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object",
                                      "x-kubernetes-preserve-unknown-fields": True}}}]}}
    with contextlib.suppress(kube.ApiError):
        await writer.create(crd)
    member2 = cluster_set.get("member2")
    assert member2.discovery is not None
    deployments = await member2.discovery.find("Deployment")
    assert deployments == kube.DEPLOYMENTS
    widget = {"apiVersion": "rt.federation.io/v1", "kind": "Widget",
              "metadata": {"name": "w", "namespace": NAMESPACE}, "spec": {"size": 1}}
    try:
        for _ in range(50):  # the CRD becomes servable a moment after it is created
            try:
                created = await writer.create(widget)
                break
            except kube.ApiError as exc:
                if exc.status != 404:
                    raise
            except kube.ClientError:
                pass
            await asyncio.sleep(0.2)
        else:
            raise AssertionError("Widget never became servable")
        # by apiVersion: other tests' CRDs may serve a kind named Widget in other groups
        resource = await member2.discovery.resolve("rt.federation.io/v1", "Widget")
        assert (resource.group, resource.plural, resource.namespaced) == (
            "rt.federation.io", "widgets", True)
        created["status"] = {"ready": True}
        status = await writer.update_status(created)
        assert status["status"] == {"ready": True}
        patched = await writer.patch_status(resource, "w", {"status": {"ready": False}},
                                            namespace=NAMESPACE)
        assert patched["status"] == {"ready": False} and patched["spec"] == {"size": 1}
    finally:
        with contextlib.suppress(kube.ApiError):
            await writer.delete(await writer.resource(crd), crd["metadata"]["name"])


def write_kubeconfig(path: Path, base: Path, extra: dict[str, Any]) -> Path:
    document = yaml.safe_load(base.read_text())
    for kind in ("clusters", "users", "contexts"):
        document[kind].extend(extra.get(kind, []))
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.timeout(120)
async def test_cluster_selection_reuse_disable_and_bad_contexts(
        fleet: TestFleet, tmp_path: Path) -> None:
    """A hub alias reuses the hub client, a disabled member refuses writes, a bad context is
    one clear error, and the rest answer."""
    path = write_kubeconfig(tmp_path / "k.yaml", fleet.kubeconfig, {
        "clusters": [{"name": "broken", "cluster": {"server": "https://127.0.0.1:1",
                                                    "certificate-authority-data": "bm90IGEgY2E="}}],
        "contexts": [{"name": "hub-as-member", "context": {"cluster": "hub", "user": "hub-admin"}},
                     {"name": "broken", "context": {"cluster": "broken"}}],
    })
    config = kubeconfig.load(path)
    cluster_set = clusters.ClusterSet.from_kubeconfig(
        config, hub_context="hub",
        contexts=["member1", "member2", "hub-as-member", "broken", "missing"],
        disabled=["member2"])
    try:
        assert cluster_set.get("hub-as-member").client is cluster_set.hub.client
        assert set(cluster_set.errors) == {"broken", "missing"}
        assert "context 'missing' not found" in cluster_set.errors["missing"]
        assert "context 'broken': bad certificate" in cluster_set.errors["broken"]
        mc = multicluster.MultiClusterClient(cluster_set)
        with pytest.raises(clusters.ClusterDisabled) as disabled:
            await mc.cluster("member2").create(configmap("x"))
        assert disabled.value.retryable
        with pytest.raises(clusters.ClusterNotEngaged):
            await mc.cluster("broken").create(configmap("x"))
        for _ in range(50):  # member1 may have been restarted by an earlier test
            listing = await mc.list(kube.NAMESPACES)
            if set(listing.items) == {"member1", "hub-as-member"}:
                break
            await asyncio.sleep(0.2)
        assert set(listing.items) == {"member1", "hub-as-member"}, listing.errors
        assert set(listing.errors) == {"member2", "broken", "missing"}
        assert any(o["metadata"]["name"] == NAMESPACE or o["metadata"]["name"] == "default"
                   for o in listing.items["hub-as-member"])
    finally:
        await cluster_set.close()


@pytest.mark.timeout(120)
async def test_exec_plugin_credentials_refresh_before_expiry(fleet: TestFleet,
                                                             tmp_path: Path) -> None:
    """An exec plugin's short-lived token is fetched again before it expires, calls keep
    working, and the kubeconfig is never written to."""
    token = fleet.pki("member1").admin_token()
    runs = tmp_path / "runs"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"""#!/usr/bin/env python3
import datetime, json, pathlib
runs = pathlib.Path({str(runs)!r})
runs.write_text(str(int(runs.read_text() if runs.exists() else "0") + 1))
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1beta1",
                  "kind": "ExecCredential", "status": {{"token": {token!r},
                  "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
""")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    path = write_kubeconfig(tmp_path / "k.yaml", fleet.kubeconfig, {
        "users": [{"name": "exec-user", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}}],
        "contexts": [{"name": "member1-exec",
                      "context": {"cluster": "member1", "user": "exec-user"}}],
    })
    before = path.read_bytes()
    context = kubeconfig.load(path).context("member1-exec")
    async with kube.connect(context) as client:
        await client.get(kube.NAMESPACES, "default")
        assert runs.read_text() == "1"
        await client.get(kube.NAMESPACES, "default")
        assert runs.read_text() == "1"  # cached while fresh
        await asyncio.sleep(2.6)  # past 80% of the 3 s lifetime
        await client.get(kube.NAMESPACES, "default")
        assert int(runs.read_text()) == 2
    assert path.read_bytes() == before
    assert datetime.datetime.now(datetime.UTC).year >= 2024
