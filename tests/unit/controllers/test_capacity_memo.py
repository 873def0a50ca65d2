"""hub/capacity.py's Allocations: a member's allocated resources summed again and again
look again only at workloads that changed, and equal a fresh sum every time."""

from __future__ import annotations

from typing import Any

from federation.hub import capacity


def deployment(uid: str, version: str, ready: int, cpu: str = "100m",
               memory: str = "64Mi") -> dict[str, Any]:
    return {"kind": "Deployment",
            "metadata": {"name": uid, "uid": uid, "resourceVersion": version},
            "spec": {"template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}},
            "status": {"readyReplicas": ready}}


def test_a_summary_reads_only_the_workloads_that_changed(monkeypatch: Any) -> None:
    read: list[str] = []
    fresh = capacity.share

    def counting(kind: str, workload: Any) -> dict[str, float]:
        read.append(workload["metadata"]["uid"])
        return fresh(kind, workload)

    monkeypatch.setattr(capacity, "share", counting)
    allocations = capacity.Allocations()
    workloads = [deployment(f"d{i}", "1", ready=2) for i in range(100)]
    first = allocations.total(("Deployment", w) for w in workloads)
    assert len(read) == 100 and first["pods"] == 200.0
    read.clear()
    workloads[7] = deployment("d7", "2", ready=5)  # one copy became more ready
    del workloads[9]  # one copy gone
    second = allocations.total(("Deployment", w) for w in workloads)
    assert read == ["d7"]
    assert second == capacity.allocated(w for w in workloads)  # the same as a fresh sum
    assert second["pods"] == 2.0 * 98 + 5


def test_a_workload_without_uid_or_version_is_summed_every_time() -> None:
    allocations = capacity.Allocations()
    bare = deployment("", "", ready=1)
    assert allocations.total([("Deployment", bare)])["pods"] == 1.0
    bare["status"]["readyReplicas"] = 3
    assert allocations.total([("Deployment", bare)])["pods"] == 3.0


def test_a_deployments_replica_set_adds_nothing() -> None:
    owned = {**deployment("rs", "1", ready=4), "kind": "ReplicaSet"}
    owned["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "d"}]
    assert capacity.Allocations().total([("ReplicaSet", owned)])["pods"] == 0.0
