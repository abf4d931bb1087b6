"""The produce purgatory of one partition: acks=all appends waiting for the high watermark.

Kafka's ``DelayedProduce`` (docs/replication.md §5.1), per partition: an append with acks=-1 waits
until the leader's high watermark reaches ``required_offset`` (its last offset + 1), then answers
NONE if the ISR is at least ``min.insync.replicas``, else NOT_ENOUGH_REPLICAS_AFTER_APPEND (the data
is in the log either way). It answers REQUEST_TIMED_OUT when its timeout passes first, and
NOT_LEADER_OR_FOLLOWER when the partition stops being leader. Since the high watermark is the
minimum log end offset over the ISR, "HW ≥ required offset" means every ISR member has the data.

Pure bookkeeping: the partition actor owns the timers and sends the replies.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from runtime.messages import Requester

__all__ = ["DelayedProduce", "ProducePurgatory"]


@dataclass(slots=True)
class DelayedProduce:
    produce_id: int
    requester: Requester
    required_offset: int
    base_offset: int
    log_append_time_ms: int
    record_count: int
    created_ms: int


class ProducePurgatory:
    """Waiting produces ordered by required offset (ties by arrival)."""

    def __init__(self) -> None:
        self._order: list[tuple[int, int]] = []  # (required_offset, produce_id), sorted
        self._by_id: dict[int, DelayedProduce] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, produce: DelayedProduce) -> None:
        assert produce.produce_id not in self._by_id, f"produce {produce.produce_id} already waiting"
        bisect.insort(self._order, (produce.required_offset, produce.produce_id))
        self._by_id[produce.produce_id] = produce

    def complete_up_to(self, high_watermark: int) -> list[DelayedProduce]:
        """Remove and return every produce whose required offset the high watermark has reached."""
        done: list[DelayedProduce] = []
        cut = bisect.bisect_right(self._order, (high_watermark, float("inf")))
        for _, produce_id in self._order[:cut]:
            produce = self._by_id.pop(produce_id, None)
            if produce is not None:
                done.append(produce)
        del self._order[:cut]
        return done

    def expire(self, produce_id: int) -> DelayedProduce | None:
        """Remove one produce whose timeout passed (None if it completed meanwhile)."""
        produce = self._by_id.pop(produce_id, None)
        if produce is not None:
            self._order.remove((produce.required_offset, produce_id))
        return produce

    def drain(self) -> list[DelayedProduce]:
        """Remove and return everything (leadership lost, replica stopped)."""
        produces = [self._by_id[produce_id] for _, produce_id in self._order if produce_id in self._by_id]
        self._order.clear()
        self._by_id.clear()
        return produces
