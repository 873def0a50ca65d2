"""Shard assignment by rendezvous hashing: balance, minimal movement, and no aiming."""

from __future__ import annotations

import collections

from federation.runtime import shards

SEED = bytes(range(16))
KEYS = [f"shop/template-{i}-deployment" for i in range(300)]
THREE = ["federation-controller-manager-shard-0", "federation-controller-manager-shard-1",
         "federation-controller-manager-shard-2"]


def shares(assigned: dict[str, str]) -> dict[str, float]:
    counts = collections.Counter(assigned.values())
    return {shard: counts[shard] / len(assigned) for shard in counts}


def test_three_shards_each_hold_between_20_and_47_percent() -> None:
    """300 keys over 3 shards: every shard holds 20-47% (for several seeds)."""
    for seed in (SEED, b"\xff" * 16, bytes(16)):
        found = shares(shards.assignment(seed, THREE, KEYS))
        assert set(found) == set(THREE)
        assert all(0.20 <= share <= 0.47 for share in found.values()), found


def test_deterministic_whatever_the_order_of_shards() -> None:
    """Every replica computes the same owner, however it listed the shards."""
    assert shards.assignment(SEED, THREE, KEYS) == \
        shards.assignment(SEED, list(reversed(THREE)), KEYS)


def test_two_to_three_moves_at_most_45_percent_and_only_to_the_new_shard() -> None:
    """A shard joining takes keys only for itself, about a third of them."""
    before = shards.assignment(SEED, THREE[:2], KEYS)
    after = shards.assignment(SEED, THREE, KEYS)
    moved = shards.moved(before, after)
    assert len(moved) <= 0.45 * len(KEYS)
    assert moved and all(after[key] == THREE[2] for key in moved)


def test_removing_a_shard_moves_only_its_keys() -> None:
    """A shard leaving hands over its own keys; no other key changes owner."""
    before = shards.assignment(SEED, THREE, KEYS)
    after = shards.assignment(SEED, [THREE[0], THREE[2]], KEYS)
    assert shards.moved(before, after) == {k for k, s in before.items() if s == THREE[1]}


def test_no_shard_no_owner() -> None:
    assert shards.owner(SEED, [], "a/b") is None
    assert shards.assignment(SEED, [], KEYS) == {}


def test_a_tenant_cannot_aim_its_names_at_one_shard() -> None:
    """The attack: a tenant who knows the shard names and the algorithm picks 200 names
    that all land on shard 0 under an unkeyed hash (or any seed it guesses). Under the
    fleet's secret seed those names spread like any others."""
    guessed = b"\x00" * 16
    aimed = [name for name in (f"tenant/n{i}-deployment" for i in range(5000))
             if shards.owner(guessed, THREE, name) == THREE[0]][:200]
    assert len(aimed) == 200
    assert set(shards.assignment(guessed, THREE, aimed).values()) == {THREE[0]}
    spread = shares(shards.assignment(SEED, THREE, aimed))
    assert set(spread) == set(THREE)
    assert all(0.20 <= share <= 0.47 for share in spread.values()), spread
