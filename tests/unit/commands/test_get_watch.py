"""`fedctl get -w`: list then watch each member; resume, start over on 410, retry a
member that fails with growing pauses while reporting it (no cluster: fakes)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from federation.commands import get, get_watch
from federation.contexts import client as kube
from federation.contexts import kubeconfig

CONFIGMAPS = kube.Resource("", "v1", "configmaps", "ConfigMap", True)


def cm(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "shop", "resourceVersion": version}}


class Stop(Exception):
    pass


class FakeMember:
    """A list, then scripted watch streams; each stream is a list of events (or an
    exception to raise when the stream is opened)."""

    name = "member1"

    def __init__(self, items: list[dict[str, Any]], streams: list[Any]) -> None:
        self.items, self.streams = items, streams
        self.lists: list[dict[str, Any]] = []
        self.watches: list[str | None] = []

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **params: Any) -> dict[str, Any]:
        self.lists.append({"namespace": namespace, **params})
        return {"metadata": {"resourceVersion": "10"}, "items": [dict(i) for i in self.items]}

    async def watch(self, resource: kube.Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, **params: Any
                    ) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(resource_version)
        if not self.streams:
            raise Stop
        stream = self.streams.pop(0)
        if isinstance(stream, Exception):
            raise stream
        for event in stream:
            yield event


async def run(member: FakeMember, name: str | None = None) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    with pytest.raises(Stop):
        await get_watch._list_and_watch(member, CONFIGMAPS, name, "shop",
                                        lambda e, c, o: seen.append((e, o["metadata"]["name"])),
                                        lambda: None)
    return seen


async def test_lists_then_prints_each_change_and_resumes_where_it_ended() -> None:
    member = FakeMember([cm("a", "5")], [
        [{"type": "MODIFIED", "object": cm("a", "11")},
         {"type": "BOOKMARK", "object": cm("", "12")}],
        [{"type": "DELETED", "object": cm("a", "13")}],
    ])
    seen = await run(member)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert member.watches == ["10", "12", "13"]  # resumed from the bookmark, then the delete
    assert len(member.lists) == 1


async def test_an_expired_version_starts_over_with_a_fresh_list() -> None:
    member = FakeMember([cm("a", "5")], [[{"type": "ERROR", "object": {"code": 410}}]])
    seen = await run(member)
    assert seen == [("ADDED", "a"), ("ADDED", "a")] and len(member.lists) == 2


async def test_a_name_watches_only_that_object() -> None:
    member = FakeMember([], [])
    await run(member, name="a")
    assert member.lists == [{"namespace": "shop", "fieldSelector": "metadata.name=a"}]


async def test_another_watch_error_is_the_members_error() -> None:
    member = FakeMember([], [[{"type": "ERROR", "object": {"code": 403, "reason": "Forbidden",
                                                           "message": "no"}}]])
    with pytest.raises(kube.ApiError, match="403 Forbidden: no"):
        await get_watch._list_and_watch(member, CONFIGMAPS, None, "shop",
                                        lambda *a: None, lambda: None)


async def test_an_unreachable_member_is_reported_and_retried_with_growing_pauses() -> None:
    """1, 2, 4 ... seconds of virtual time, each failure one line naming the member."""
    context = kubeconfig.merge([(Path("kubeconfig"), {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "member2", "context": {"cluster": "c", "user": "u"}}],
    })]).context("member2")
    pauses: list[float] = []
    reports: list[tuple[str, str]] = []

    @contextlib.asynccontextmanager
    async def unreachable(ctx: kubeconfig.Context) -> AsyncIterator[Any]:
        raise kube.ClusterUnavailable("member2", "connection refused")
        yield  # pragma: no cover

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 7:
            raise Stop

    with pytest.raises(Stop):
        await get_watch.follow(context, "ConfigMap", None, "shop", lambda *a: None,
                               lambda c, m: reports.append((c, m)), connect=unreachable,
                               sleep=sleep)
    assert pauses == [1, 2, 4, 8, 16, 30, 30]
    assert reports[0] == ("member2", "connection refused") and len(reports) == 7


def test_rows_line_up_under_the_header() -> None:
    line = get_watch.row("MODIFIED", "member1", cm("web", "1"), "2/3", "5m")
    assert line.split() == ["MODIFIED", "member1", "shop", "web", "2/3", "no", "5m"]
    assert line.index("member1") == get_watch.header().index("CLUSTER")
    assert line.index("web") == get_watch.header().index(" NAME ") + 1


def test_watching_clusters_is_refused() -> None:
    result = CliRunner().invoke(get.get, ["clusters", "-w", "--kubeconfig", "/dev/null"])
    assert result.exit_code != 0 and "-w is for objects in the members" in result.output


KUBECONFIG = {
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {}}],
    "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}}
                 for n in ("hub", "member1", "member2", "prod")],
    "current-context": "hub",
}


@pytest.mark.parametrize(("joined", "expected", "note"), [
    (["member1", "member2"], ["member1", "member2"], ""),  # prod is never asked
    (["member1", "member3"], ["member1"], "member3 has no context"),
    (None, ["member1", "member2", "prod"], ""),  # no federation API on the hub
])
def test_without_contexts_the_members_are_those_the_hub_joined(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        joined: list[str] | None, expected: list[str], note: str) -> None:
    """~/.kube/config holds clusters of the user's that are no members (prod): the
    default is the hub's MemberClusters that have a context, not every context."""
    config = kubeconfig.merge([(Path("kubeconfig"), KUBECONFIG)])

    async def members(hub: kubeconfig.Context) -> list[str] | None:
        assert hub.name == "hub"
        return joined

    monkeypatch.setattr(get, "joined_members", members)
    assert get._members(config, "hub") == expected
    assert note in capsys.readouterr().err


def test_an_unreachable_hub_says_how_to_go_on() -> None:
    config = kubeconfig.merge([(Path("kubeconfig"), KUBECONFIG)])
    with pytest.raises(kube.ClusterUnavailable, match="name them with --contexts"):
        get._members(config, "hub")
