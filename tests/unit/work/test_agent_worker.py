"""The agent's worker against a fake member API server: idempotent by generation."""

from pathlib import Path
from typing import Any

from federation.agent.applied import Applied
from federation.agent.session import Session, Worker
from federation.contexts.client import DEPLOYMENTS, ApiError, ClusterUnavailable
from federation.work import wire
from federation.work.proto import work_pb2 as pb
from federation.work.wire import Key
from tests.unit.clients import Unserved


class FakeMember(Unserved):
    """Records every write; answers like an API server (create conflicts, PUT replaces)."""

    name = "member3"

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []
        self.down = False
        self.version = 0

    async def create(self, resource: Any, body: dict[str, Any], namespace: Any = None
                     ) -> dict[str, Any]:
        self.calls.append("POST")
        if self.down:
            raise ClusterUnavailable("member3", "connection refused")
        key = (body["metadata"].get("namespace", ""), body["metadata"]["name"])
        if key in self.objects:
            raise ApiError("member3", 409, "AlreadyExists", "exists")
        return self._store(key, body)

    async def get(self, resource: Any, name: str, namespace: Any = None) -> dict[str, Any]:
        self.calls.append("GET")
        found = self.objects.get((namespace or "", name))
        if found is None:
            raise ApiError("member3", 404, "NotFound", "no such object")
        return found

    async def replace(self, resource: Any, body: dict[str, Any], subresource: Any = None
                      ) -> dict[str, Any]:
        self.calls.append("PUT")
        key = (body["metadata"].get("namespace", ""), body["metadata"]["name"])
        return self._store(key, body)

    async def delete(self, resource: Any, name: str, namespace: Any = None, **body: Any
                     ) -> dict[str, Any]:
        self.calls.append("DELETE")
        if self.objects.pop((namespace or "", name), None) is None:
            raise ApiError("member3", 404, "NotFound", "gone")
        return {}

    def _store(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        self.objects[key] = obj
        return obj


def work(op: pb.Op.ValueType, generation: int, name: str = "web") -> pb.Work:
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "shop"}}
    return pb.Work(key=wire.key_to_pb(Key(DEPLOYMENTS, "shop", name)), generation=generation,
                   op=op,
                   manifest=wire.encode(manifest) if op != pb.DELETE else b"")


def worker(tmp_path: Path, member: FakeMember) -> Worker:
    return Worker("member3", member, Applied(tmp_path / "applied.json"))


async def test_a_redelivered_generation_is_not_written_again(tmp_path: Path) -> None:
    member = FakeMember()
    first = await worker(tmp_path, member).apply(work(pb.CREATE, 1))
    assert first.ok and not first.duplicate and member.calls == ["POST"]
    # A new agent process (a restart): the applied generations come from the file.
    again = worker(tmp_path, member)
    assert [a.generation for a in again.hello().hello.applied] == [1]
    second = await again.apply(work(pb.CREATE, 1))
    assert second.ok and second.duplicate and member.calls == ["POST"]
    assert again.stats.duplicates == 1 and again.stats.writes == {}


async def test_refusals_are_answers_outages_are_not(tmp_path: Path) -> None:
    member = FakeMember()
    w = worker(tmp_path, member)
    await w.apply(work(pb.CREATE, 1))
    refused = await w.apply(work(pb.CREATE, 2))
    assert not refused.ok and refused.status == 409 and refused.reason == "AlreadyExists"
    assert w.applied.get(Key(DEPLOYMENTS, "shop", "web")) == 2
    member.down = True
    lost = await w.apply(work(pb.CREATE, 3, "api"))
    assert not lost.ok and lost.status == 503
    assert w.applied.get(Key(DEPLOYMENTS, "shop", "api")) == 0  # not done: not recorded


async def test_update_without_version_replaces_and_delete_sends_the_uid(tmp_path: Path
                                                                        ) -> None:
    member = FakeMember()
    w = worker(tmp_path, member)
    await w.apply(work(pb.CREATE, 1))
    updated = await w.apply(work(pb.UPDATE, 2))
    # Not subscribed: the live object is read, then replaced at its resourceVersion.
    assert updated.ok and member.calls == ["POST", "GET", "PUT"]
    assert wire.decode(updated.object)["metadata"]["resourceVersion"] == "2"
    deleted = await w.apply(pb.Work(key=work(pb.DELETE, 3).key, generation=3, op=pb.DELETE,
                                    uid="u-1"))
    assert deleted.ok and member.calls[-1] == "DELETE"


async def test_a_manifest_for_another_object_is_refused(tmp_path: Path) -> None:
    member = FakeMember()
    w = worker(tmp_path, member)
    bad = work(pb.CREATE, 1)
    bad.key.name = "other"
    answer = await w.apply(bad)
    assert not answer.ok and "another object" in answer.message and member.calls == []


async def test_only_discovery_paths_are_served_to_the_hub(tmp_path: Path) -> None:
    class Discovering(FakeMember):
        async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
            self.calls.append(f"{method} {path}")
            return {"kind": "APIResourceList"}

    member = Discovering()
    w = worker(tmp_path, member)
    session = Session()
    await w._discover(session, pb.DiscoveryRequest(id=1, path="/apis/apps/v1"))
    await w._discover(session, pb.DiscoveryRequest(id=2, path="/api/v1/namespaces/x/secrets"))
    answers = [session.outbox.get_nowait() for _ in range(2)]
    assert [a.discovery.status for a in answers if a] == [200, 403]
    assert member.calls == ["GET /apis/apps/v1"]


def marked(name: str, image: str) -> dict[str, Any]:
    from federation.hub import manifests

    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": image}]}}}}
    return manifests.mark(body, "uid-1")


async def test_hub_away_drift_and_deletion_are_undone_and_nothing_else(tmp_path: Path
                                                                        ) -> None:
    from federation.contexts import cache

    member = FakeMember()
    w = worker(tmp_path, member)
    key = Key(DEPLOYMENTS, "shop", "web")
    desired = marked("web", "app:1")
    await w.apply(pb.Work(key=wire.key_to_pb(key), generation=1, op=pb.CREATE,
                          manifest=wire.encode(desired)))
    informer = cache.Informer(member, DEPLOYMENTS)
    w.informers[DEPLOYMENTS] = informer
    live = member.objects[("shop", "web")]
    informer.store.put(live)
    assert await w.reassert(key) is None  # as desired: no write
    drifted = {**live, "spec": {"template": {"spec": {"containers": [
        {"name": "a", "image": "evil:1"}]}}}}
    informer.store.put(drifted)
    assert await w.reassert(key) == "updated"
    assert member.objects[("shop", "web")]["spec"] == desired["spec"]
    informer.store.remove(("shop", "web"))
    member.objects.clear()
    assert await w.reassert(key) == "created"
    w.session_ = Session()  # the hub is back: its decisions, not the agent's
    informer.store.remove(("shop", "web"))
    assert await w.reassert(key) is None
    assert w.stats.writes["reassert"] == 2
    # A restarted agent keeps the manifest (the file), and forgets it once deleted.
    again = worker(tmp_path, member)
    assert again.applied.manifests[key]["spec"] == desired["spec"]
    await again.apply(pb.Work(key=wire.key_to_pb(key), generation=2, op=pb.DELETE))
    assert key not in worker(tmp_path, member).applied.manifests
