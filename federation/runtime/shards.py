"""Which shard owns a key: rendezvous (highest random weight) hashing, pure.

Every replica computes the owner of a key from the same three inputs: the key
(``namespace/name``), the shards alive now, and a secret seed shared through the hub.
Each shard scores the key with a keyed BLAKE2b hash and the highest score owns it. So:

- **Deterministic**: the same inputs give the same owner in every replica, with no
  coordination beyond agreeing on the live set.
- **Minimal movement**: a shard that joins takes only the keys it now scores highest
  on (about 1/N of them), each from the shard that held it; a shard that leaves hands
  only its own keys to the runners-up. No other key moves.
- **Not chosen by a tenant**: a tenant picks its objects' names, and with a public hash
  it could pick names that all land on one shard, piling its work (and the fence of
  that shard) on one replica while the others idle. The scores are keyed with
  :data:`SEED_BYTES` random bytes kept in a hub Lease a tenant cannot read, so names
  cannot be aimed at a shard.

It must never do I/O or read a clock: the runtime's :mod:`federation.runtime.peers`
feeds it what the hub says.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

SEED_BYTES = 16
"""The seed's length: 128 random bits, beyond guessing from observed placements."""


def score(seed: bytes, shard: str, key: str) -> int:
    """The weight of ``key`` on ``shard`` (64 bits of a keyed BLAKE2b)."""
    digest = hashlib.blake2b(f"{shard}\x00{key}".encode(), key=seed, digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(seed: bytes, shards: Sequence[str], key: str) -> str | None:
    """The shard that owns ``key`` among ``shards`` (None when there is none)."""
    if not shards:
        return None
    # Ties (2**-64) go to the larger name, the same in every replica.
    return max(shards, key=lambda shard: (score(seed, shard, key), shard))


def assignment(seed: bytes, shards: Sequence[str], keys: Iterable[str]) -> dict[str, str]:
    """Every key's owner (keys with no owner are left out)."""
    found = {}
    for key in keys:
        chosen = owner(seed, shards, key)
        if chosen is not None:
            found[key] = chosen
    return found


def moved(before: dict[str, str], after: dict[str, str]) -> set[str]:
    """The keys whose owner differs between two assignments (gone or new keys included)."""
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
