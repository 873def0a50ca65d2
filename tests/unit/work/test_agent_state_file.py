"""Issue 20, finding 7: the agent's state file held every propagated Secret's data,
readable by every local user (mode 0644). Now it holds a digest instead, mode 0600, in a
directory of mode 0700; the data stays in memory for the hub-away guarantee."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from federation.agent.applied import Applied, data_digest
from federation.agent.session import Worker
from federation.contexts import cache
from federation.contexts.client import Resource
from federation.work import wire
from federation.work.proto import work_pb2 as pb
from federation.work.wire import Key
from tests.unit.work.test_agent_worker import FakeMember

SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
TOKEN = "czNjcjN0LXRva2VuLXZhbHVl"  # base64 of a token: must never reach the disk


def secret(token: str = TOKEN) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "db", "namespace": "shop"}, "data": {"token": token}}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def apply_secret(worker: Worker, generation: int = 1, token: str = TOKEN) -> Key:
    key = Key(SECRETS, "shop", "db")
    result = await worker.apply(pb.Work(key=wire.key_to_pb(key), generation=generation,
                                        op=pb.CREATE if generation == 1 else pb.UPDATE,
                                        manifest=wire.encode(secret(token))))
    assert result.ok
    return key


async def test_no_secret_data_on_disk_and_the_file_is_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    worker = Worker("member3", FakeMember(),
                    Applied(state / "applied.json"))
    key = await apply_secret(worker)
    text = (state / "applied.json").read_text()
    assert TOKEN not in text
    assert data_digest(secret()) in text
    assert mode(state / "applied.json") == 0o600 and mode(state) == 0o700
    assert worker.applied.manifests[key]["data"] == {"token": TOKEN}  # memory only


async def test_an_old_world_readable_file_is_rewritten_at_start(tmp_path: Path) -> None:
    """A state file written before: Secret data inside, 0644, in a 0755 directory."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o755)
    key = Key(SECRETS, "shop", "db")
    encoded = json.dumps(["", "v1", "secrets", "Secret", True, "shop", "db"],
                         separators=(",", ":"))
    (state / "applied.json").write_text(json.dumps({
        "generations": {encoded: 3}, "manifests": {encoded: secret()}}))
    os.chmod(state / "applied.json", 0o644)
    applied = Applied(state / "applied.json")
    assert TOKEN not in (state / "applied.json").read_text()
    assert mode(state / "applied.json") == 0o600 and mode(state) == 0o700
    assert applied.get(key) == 3 and applied.manifests[key]["data"] == {"token": TOKEN}
    again = Applied(state / "applied.json")  # a restart: the digest, not the data
    assert key not in again.manifests and again.withheld[key] == data_digest(secret())


async def test_after_a_restart_a_changed_secret_is_reported_not_restored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    member = FakeMember()
    first = Worker("member3", member, Applied(tmp_path / "applied.json"))
    key = await apply_secret(first)
    restarted = Worker("member3", member,
                       Applied(tmp_path / "applied.json"))
    informer = cache.Informer(member, SECRETS)
    restarted.informers[SECRETS] = informer
    live = member.objects[("shop", "db")]
    informer.store.put(live)
    writes = len(member.calls)
    with caplog.at_level(logging.WARNING, "federation.agent"):
        restarted._changed(cache.Event("MODIFIED", "member3", SECRETS, live))
        assert caplog.records == []  # the same data: nothing to say
        rotated = {**live, "data": {"token": "cm90YXRlZA=="}}
        informer.store.put(rotated)
        restarted._changed(cache.Event("MODIFIED", "member3", SECRETS, rotated))
    assert "is not restored" in caplog.text and "cm90YXRlZA==" not in caplog.text
    assert TOKEN not in caplog.text
    assert len(member.calls) == writes  # nothing written
    await restarted.apply(pb.Work(key=wire.key_to_pb(key), generation=2, op=pb.DELETE))
    assert key not in Applied(tmp_path / "applied.json").withheld


def test_a_state_file_with_an_impossible_generation_is_refused(tmp_path: Path) -> None:
    encoded = json.dumps(["apps", "v1", "deployments", "Deployment", True, "shop", "web"])
    (tmp_path / "applied.json").write_text(json.dumps({
        "generations": {encoded: 2**63 - 1}, "manifests": {}}))
    with pytest.raises(ValueError, match=r"out of range\); move it away"):
        Applied(tmp_path / "applied.json")


async def test_leaving_forgets_every_kept_object_and_digest(tmp_path: Path) -> None:
    member = FakeMember()
    worker = Worker("member3", member, Applied(tmp_path / "applied.json"))
    key = await apply_secret(worker)
    worker.applied.withheld[Key(CONFIGMAPS, "shop", "x")] = "sha256:0"
    worker.leave("the MemberCluster was deleted")
    assert worker.applied.manifests == {} and worker.applied.withheld == {}
    assert worker.applied.get(key) == 1  # generations only ever increase
    saved = json.loads((tmp_path / "applied.json").read_text())
    assert saved["manifests"] == {} and saved["secretDigests"] == {}
