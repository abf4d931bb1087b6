"""The Rng port: seeded randomness handed out per node.

There is no module-level randomness anywhere in the project (ruff bans the ``random`` module
functions outside this file). A node gets one ``random.Random`` from ``node_rng(seed, node_id)``;
the same seed and node id always give the same sequence, so a failing simulation replays from its
printed seed.
"""

from __future__ import annotations

import hashlib
import random
import secrets

__all__ = ["Rng", "fresh_seed", "node_rng"]

Rng = random.Random


def node_rng(seed: int, node_id: str) -> random.Random:
    """A deterministic generator for ``node_id`` derived from a cluster-wide ``seed``."""
    digest = hashlib.blake2b(f"{seed}:{node_id}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def fresh_seed() -> int:
    """A new seed from the OS, for production nodes (print it when you want to replay)."""
    return secrets.randbits(63)
