"""Policies are parsed once per version of the hub object, never served stale."""

from __future__ import annotations

from typing import Any

import pytest

from federation.hub import parsed, propagation_policies


def doc(version: str | None, uid: str | None = "u1", replicas: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if uid:
        meta["uid"] = uid
    if version:
        meta["resourceVersion"] = version
    return {"kind": "K", "metadata": meta, "spec": {"replicas": replicas}}


def counting() -> tuple[parsed.Memo[int], list[int]]:
    calls: list[int] = []

    def parse(d: Any) -> int:
        calls.append(1)
        return int(d["spec"]["replicas"])

    return parsed.Memo(parse, limit=2), calls


def test_the_same_version_is_parsed_once() -> None:
    """Two reads of one (uid, resourceVersion) parse once and give the same answer."""
    memo, calls = counting()
    assert memo(doc("1")) == memo(doc("1")) == 1
    assert len(calls) == 1


def test_a_new_version_is_parsed_again() -> None:
    """A write changes resourceVersion: the new content is parsed, not the old served."""
    memo, _ = counting()
    assert memo(doc("1", replicas=1)) == 1
    assert memo(doc("2", replicas=5)) == 5


def test_objects_without_a_version_are_never_memoised() -> None:
    """Files read by `fedctl plan` have no uid/resourceVersion: parsed every time."""
    memo, calls = counting()
    memo(doc(None))
    memo(doc(None))
    memo(doc("1", uid=None))
    assert len(calls) == 3 and len(memo) == 0


def test_the_memo_is_bounded_oldest_first() -> None:
    """Past the limit the least recently used version goes (deleted policies do not pile up)."""
    memo, calls = counting()
    memo(doc("1"))
    memo(doc("2"))
    memo(doc("1"))  # used again: now the newest
    memo(doc("3"))  # evicts version 2
    assert len(memo) == 2
    memo(doc("1"))
    assert len(calls) == 3
    memo(doc("2"))
    assert len(calls) == 4


def test_errors_are_not_memoised() -> None:
    """A parse that raises raises again on the next read (nothing half-parsed is kept)."""
    def parse(d: Any) -> int:
        raise ValueError("bad")

    memo = parsed.Memo(parse)
    for _ in range(2):
        with pytest.raises(ValueError):
            memo(doc("1"))
    assert len(memo) == 0


def test_hub_policies_are_parsed_once_per_version() -> None:
    """parse_policy returns the very same Policy for the same version of a hub object."""
    body = {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "shop", "uid": "memo-test",
                         "resourceVersion": "7"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}
    first = propagation_policies.parse_policy(body)
    assert first is not None and propagation_policies.parse_policy(dict(body)) is first


def test_latest_only_keeps_one_entry_per_object_and_parses_a_large_fleet_once() -> None:
    """Bindings (one per template) outnumber any fixed limit of versions: a memo of the
    latest version per object reads 10,000 of them twice and parses each once."""
    calls: list[int] = []

    def parse(d: Any) -> int:
        calls.append(1)
        return int(d["spec"]["replicas"])

    memo = parsed.Memo(parse, limit=1 << 17, latest_only=True)
    fleet = [doc("1", uid=f"b{i}") for i in range(10_000)]
    for _ in range(2):
        for each in fleet:
            memo(each)
    assert len(calls) == 10_000 and len(memo) == 10_000
    assert memo(doc("2", uid="b7", replicas=4)) == 4  # a new version replaces the old one
    assert len(memo) == 10_000 and len(calls) == 10_001
    assert memo(doc("1", uid="b7")) == 1  # the old version again: parsed again, not stale
    assert len(calls) == 10_002
