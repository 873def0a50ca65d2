"""The work server with ``--shards`` (docs/runtime.md, "Pull members with shards"): every
shard holder serves, numbering its own writes; one replica per cluster records renewals."""

from __future__ import annotations

import datetime

import pytest

from federation.commands.run import _work_server
from federation.contexts import clusters
from federation.contexts.client import WRITING_FOR
from federation.runtime import leader, manager
from federation.work import identity
from federation.work.server import WorkServer, renewal_key

OLD = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=61)


def due_agent(ca: identity.CA) -> tuple[bytes, identity.Presented]:
    """A renewal CSR of member3's agent, whose certificate is due, and that certificate."""
    cert, key = identity.issue_agent(ca, "member3", now=OLD)
    return identity.csr("member3", identity.load_key(key)), identity.presented(cert)


async def test_a_replica_that_does_not_own_the_clusters_renewal_key_signs_nothing() -> None:
    """Two replicas could otherwise record two serials for one cluster, each revoking the
    other's: only the owner of MemberCluster/<cluster> signs and records."""
    work = WorkServer(replica="replica-b", replicas=3)
    work.ca = identity.new_ca()
    recorded: list[str] = []

    async def recorder(name: str, record: identity.CertificateRecord, presented: str) -> None:
        recorded.append(record.serial)

    work.recorder = recorder
    work.renews = lambda cluster: "the key is shard-0's, not shard-1's"
    csr, presented = due_agent(work.ca)
    with pytest.raises(identity.IdentityError, match="ask on another stream"):
        await work._renew("member3", csr, presented)
    assert recorded == []


async def test_the_owner_records_a_renewal_under_the_clusters_key() -> None:
    """The record is a hub write: made for the cluster's renewal key, so the hub client's
    shard permit lets it through only while this replica owns that key."""
    work = WorkServer(replica="replica-a", replicas=3)
    work.ca = identity.new_ca()
    seen: list[str | None] = []

    async def recorder(name: str, record: identity.CertificateRecord, presented: str) -> None:
        seen.append(WRITING_FOR.get())

    work.recorder = recorder
    work.renews = lambda cluster: None
    csr, presented = due_agent(work.ca)
    cert = await work._renew("member3", csr, presented)
    assert identity.common_name(cert) == "member3"
    assert seen == [renewal_key("member3")] and WRITING_FOR.get() is None
    work._signer.shutdown()


def test_fedctl_run_wires_every_shard_holder_as_a_work_server() -> None:
    hub = clusters.Cluster("hub", is_hub=True, is_member=False)
    mgr = manager.Manager(clusters.ClusterSet([hub]), manager.ManagerSettings(
        leader_elect=True, leader=leader.LeaderSettings(), shards=3, identity="replica-a"))
    work = _work_server("127.0.0.1:0", "127.0.0.1", mgr)
    assert work is not None and work.leading is not None and work.renews is not None
    assert (work.replica, work.replicas) == ("replica-a", 3)
    state = work.register("member3")
    assert (state.replica, state.replicas) == ("replica-a", 3)
    # Before its shard is taken (and not leading) a replica serves no stream and records
    # no renewal; it would tell an agent to stream to one replica at least.
    assert not work.leading() and work.renews("member3") is not None
    assert work.serving is not None and work.serving() == 1
    work._signer.shutdown()


def test_without_shards_the_leader_serves_as_before() -> None:
    hub = clusters.Cluster("hub", is_hub=True, is_member=False)
    mgr = manager.Manager(clusters.ClusterSet([hub]))
    work = _work_server("127.0.0.1:0", "127.0.0.1", mgr)
    assert work is not None and work.renews is None and work.replica == ""
    assert work.register("member3").replica == ""
    work._signer.shutdown()
