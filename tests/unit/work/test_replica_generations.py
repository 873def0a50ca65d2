"""Generations per control-plane replica (docs/runtime.md, "Pull members with shards").

With ``--shards`` each replica numbers its own writes of an object. Compared in one table,
the first write of a key's new owner after a handover could be at or below the old owner's
last generation and be answered "duplicate" without being written: a lost write.
"""

import json
from pathlib import Path

from federation.agent.applied import RETENTION, Applied
from federation.agent.session import Session, Worker
from federation.contexts.client import DEPLOYMENTS
from federation.work import wire
from federation.work.proto import work_pb2 as pb
from federation.work.pull import PullState
from federation.work.wire import Key
from tests.unit.work.test_agent_worker import FakeMember, work

WEB = Key(DEPLOYMENTS, "shop", "web")


def writes(member: FakeMember) -> list[str]:
    """The member's write calls (an update reads the live object first)."""
    return [call for call in member.calls if call != "GET"]


class WallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def welcome(replica: str) -> pb.HubMessage:
    return pb.HubMessage(welcome=pb.Welcome(window=64, heartbeat_interval=2.0,
                                            replica=replica))


def worker(tmp_path: Path, member: FakeMember, clock: WallClock | None = None) -> Worker:
    return Worker("member3", member, Applied(tmp_path / "applied.json", clock or WallClock()))


async def test_a_new_owners_first_write_is_written_whatever_the_old_owners_generation(
        tmp_path: Path) -> None:
    """Replica a wrote web up to generation 5; the key moves to replica b, whose own
    numbering starts at 1: b's write is applied, not taken for a duplicate."""
    member = FakeMember()
    w = worker(tmp_path, member)
    await w.apply(work(pb.CREATE, 1), "replica-a")
    for generation in range(2, 6):
        await w.apply(work(pb.UPDATE, generation), "replica-a")
    assert writes(member) == ["POST"] + ["PUT"] * 4
    taken = await w.apply(work(pb.UPDATE, 1), "replica-b")
    assert taken.ok and not taken.duplicate and writes(member) == ["POST"] + ["PUT"] * 5
    again = await w.apply(work(pb.UPDATE, 1), "replica-b")  # b's redelivery: a duplicate
    assert again.duplicate and writes(member) == ["POST"] + ["PUT"] * 5
    assert (w.applied.get(WEB, "replica-a"), w.applied.get(WEB, "replica-b")) == (5, 1)


async def test_a_stream_applies_with_the_generations_of_the_replica_its_welcome_names(
        tmp_path: Path) -> None:
    member = FakeMember()
    w = worker(tmp_path, member)
    await w.apply(work(pb.CREATE, 3), "replica-a")
    session = Session()
    w.handle(session, welcome("replica-b"))
    await w._work(session, work(pb.UPDATE, 2))
    result = session.outbox.get_nowait()
    assert result is not None and result.result.ok and not result.result.duplicate
    assert writes(member) == ["POST", "PUT"]


def test_the_hello_names_each_generations_replica_and_each_replica_takes_its_own(
        tmp_path: Path) -> None:
    applied = Applied(tmp_path / "applied.json", WallClock())
    applied.set(WEB, 7)
    applied.set(WEB, 5, replica="replica-a")
    applied.set(WEB, 2, replica="replica-b")
    hello = Worker("member3", FakeMember(), applied).hello().hello
    assert sorted((a.replica, a.generation) for a in hello.applied) == \
        [("", 7), ("replica-a", 5), ("replica-b", 2)]
    for replica, expected in (("replica-b", 2), ("replica-a", 5), ("", 7), ("gone", 0)):
        state = PullState("member3", replica=replica)
        state.connect(hello)
        assert state.applied.get(WEB, 0) == expected, replica
        assert state.next_message().welcome.replica == replica  # type: ignore[union-attr]


async def test_another_replicas_entries_do_not_lower_or_raise_ours() -> None:
    """A Hello that names another replica's (huge) generation for our key changes nothing
    of what we number: our next write is the next of our own."""
    hello = pb.Hello(cluster_name="member3", applied=[
        pb.Applied(key=wire.key_to_pb(WEB), generation=2**62, replica="replica-a"),
        pb.Applied(key=wire.key_to_pb(WEB), generation=3, replica="replica-b")])
    state = PullState("member3", replica="replica-b")
    state.connect(hello)
    state.submit(WEB, pb.UPDATE, {"metadata": {"name": "web", "namespace": "shop"}})
    sent = [m for m in iter(state.next_message, None) if m.WhichOneof("body") == "work"]
    assert [m.work.generation for m in sent] == [4]


def test_tables_survive_a_restart_and_a_gone_replicas_is_dropped(tmp_path: Path) -> None:
    clock = WallClock()
    applied = Applied(tmp_path / "applied.json", clock)
    applied.set(WEB, 4)
    applied.reached("replica-a")
    applied.set(WEB, 5, replica="replica-a")
    clock.now += 60
    applied.reached("replica-b")
    applied.set(WEB, 1, replica="replica-b")
    restarted = Applied(tmp_path / "applied.json", clock)
    assert (restarted.get(WEB), restarted.get(WEB, "replica-a"),
            restarted.get(WEB, "replica-b")) == (4, 5, 1)
    clock.now += RETENTION - 30  # a's last use is RETENTION + 30 ago, b's RETENTION - 30
    restarted.reached("replica-b")
    assert set(restarted.replicas) == {"replica-b"} and restarted.get(WEB) == 4
    on_disk = json.loads((tmp_path / "applied.json").read_text())
    assert set(on_disk["replicas"]) == {"replica-b"}


def test_a_file_written_before_replicas_loads_as_the_unsharded_table(tmp_path: Path) -> None:
    path = tmp_path / "applied.json"
    applied = Applied(path, WallClock())
    applied.set(WEB, 3)
    raw = json.loads(path.read_text())
    del raw["replicas"]
    path.write_text(json.dumps(raw))
    assert Applied(path, WallClock()).get(WEB) == 3
