"""Where a follower truncates before fetching: KIP-101 with KIP-279's multi-round rule (docs/leader-epochs.md
§2).

Pure: given the leader's OffsetsForLeaderEpoch answer and the follower's own log facts, return the
offset to truncate to and whether truncation is complete. When the follower does not know the epoch
the leader answered with, it truncates to where its own log's largest epoch ≤ that epoch ends and
asks again with its new latest epoch, until both sides agree (docs/scenarios.md §3 #20).
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.common.types import UNKNOWN_OFFSET

__all__ = ["UNDEFINED_EPOCH", "TruncationDecision", "decide_truncation"]

UNDEFINED_EPOCH = -1


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    offset: int
    complete: bool


def decide_truncation(
    *,
    leader_epoch_answer: int,
    leader_end_offset: int,
    local_end_offset_for_epoch: tuple[int, int] | None,
    log_end_offset: int,
    high_watermark: int,
) -> TruncationDecision:
    """docs/leader-epochs.md §2. ``local_end_offset_for_epoch`` is the follower's ``(epoch, end offset)`` for
    the leader's answered epoch (its largest epoch ≤ that one), or None when it has none."""
    if leader_end_offset == UNKNOWN_OFFSET:
        # The leader has no epoch information (or the epoch is above all it knows): fall back to
        # the high watermark, the only point known to be committed.
        return TruncationDecision(high_watermark, complete=True)
    if leader_epoch_answer == UNDEFINED_EPOCH:
        # Version 0 of the API: plain KIP-101.
        return TruncationDecision(min(leader_end_offset, log_end_offset), complete=True)
    if local_end_offset_for_epoch is None:
        return TruncationDecision(min(leader_end_offset, log_end_offset), complete=True)
    local_epoch, local_end_offset = local_end_offset_for_epoch
    if local_epoch != leader_epoch_answer:
        # We never had the leader's epoch: cut back to where our own lineage diverges and ask
        # again with our new latest epoch.
        return TruncationDecision(min(local_end_offset, log_end_offset), complete=False)
    return TruncationDecision(min(local_end_offset, leader_end_offset, log_end_offset), complete=True)
