"""ClusterSet.join/leave: members added and removed at runtime, static ones untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from federation.contexts import clusters, kubeconfig
from federation.contexts.kubeconfig import KubeConfig


def config(*names: str) -> KubeConfig:
    document: dict[str, Any] = {
        "current-context": names[0],
        "clusters": [{"name": n, "cluster": {"server": f"https://{n}.example:6443"}}
                     for n in names],
        "users": [{"name": n, "user": {"token": f"t-{n}"}} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
    }
    return kubeconfig.merge([(Path("test"), document)])


async def test_join_adds_a_member_and_leave_removes_it() -> None:
    """A joined cluster is a member with its own client; leave removes only joined ones."""
    cluster_set = clusters.ClusterSet.from_kubeconfig(config("hub", "member1"),
                                                      hub_context="hub")
    edge = cluster_set.join("edge", config("edge"))
    assert edge.joined and edge.engaged and edge.is_member
    assert [c.name for c in cluster_set.members] == ["member1", "edge"]
    with pytest.raises(ValueError, match="already"):
        cluster_set.join("member1", config("member1"))
    await cluster_set.leave("member1")  # static: stays
    await cluster_set.leave("edge")
    assert sorted(cluster_set.clusters) == ["hub", "member1"]
    await cluster_set.close()


async def test_join_of_a_broken_context_is_recorded_not_raised() -> None:
    """A kubeconfig without the named context gives a misconfigured member, as at start."""
    cluster_set = clusters.ClusterSet.from_kubeconfig(config("hub"), hub_context="hub")
    broken = cluster_set.join("edge", config("other"))
    assert broken.state == "misconfigured" and "edge" in (broken.error or "")
    await cluster_set.close()
