"""The follower side of a partition replica: what the replica fetcher's requests do to the local log.

House rules
-----------
1. Functions of (the follower's log, one request) to the answer. The partition actor's handlers
   call them once its role table has let the request through (a follower only) and ``local_log``
   has fenced the leader epoch the request was built for, so nothing here checks a role or an
   epoch. Time and the logger come from ``ctx``; cutting the log (the log manager's truncation and
   its recovery-point checkpoint) stays with the actor.

Theory of operation (docs/replication.md §4.2, §6.3, docs/leader-epochs.md §2)
---------------------------------------------------------
* ``log_state``: the log's latest leader epoch, LEO, log start and HW (what the fetcher needs to
  build OffsetsForLeaderEpoch, or to fall back to the HW when the log has no epochs).
* ``truncation_on_leader_epoch``: the leader's OffsetsForLeaderEpoch answer, decided by
  ``truncation.py`` (KIP-101 with KIP-279's rounds): where to cut, and whether another round is
  needed; ``truncated`` is the answer once the log is cut.
* ``append_as_follower``: the leader's batches, byte for byte, at the log end; then the follower
  HW becomes min(leader HW, LEO) and the log start offset follows the leader's. An empty log whose start
  offset lies inside the leader's first batch restarts at that batch (docs/replication.md §6.3's special
  case).
"""

from __future__ import annotations

from typing import Any, assert_never

from actors.common.errors import ErrorCode
from actors.server.fetcher.truncation import TruncationDecision, decide_truncation
from actors.server.replica.messages import (
    AppendAsFollower,
    FollowerAppendResult,
    FollowerLogState,
    FollowerRequest,
    GetFollowerLogState,
    TruncateFullyAndStartAt,
    TruncateOnLeaderEpoch,
    TruncateTo,
    TruncationResult,
)
from runtime.context import Context
from runtime.errors import StorageError
from runtime.storage.errors import CorruptRecordError, UnexpectedAppendOffsetError
from runtime.storage.log import Log, LogAppendInfo
from runtime.storage.records import iterate_batches

__all__ = ["append_as_follower", "log_state", "refused", "truncated", "truncation_on_leader_epoch"]


def refused(
    message: FollowerRequest, error: ErrorCode
) -> FollowerLogState | TruncationResult | FollowerAppendResult:
    """The answer to a request this partition will not act on (not a follower, another epoch)."""
    match message:
        case GetFollowerLogState():
            return FollowerLogState(error)
        case TruncateOnLeaderEpoch() | TruncateTo() | TruncateFullyAndStartAt():
            return TruncationResult(error)
        case AppendAsFollower():
            return FollowerAppendResult(error)
        case _:
            assert_never(message)


def log_state(log: Log) -> FollowerLogState:
    return FollowerLogState(
        ErrorCode.NONE,
        latest_epoch=log.leader_epoch_cache.latest_epoch,
        log_end_offset=log.log_end_offset,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
    )


def truncation_on_leader_epoch(log: Log, message: TruncateOnLeaderEpoch) -> TruncationDecision:
    """Where the leader's answer ``(leader_epoch_answer, end_offset)`` says to cut this log."""
    return decide_truncation(
        leader_epoch_answer=message.leader_epoch_answer,
        leader_end_offset=message.end_offset,
        local_end_offset_for_epoch=log.end_offset_for_epoch(message.leader_epoch_answer)
        if message.leader_epoch_answer >= 0
        else None,
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
    )


def truncated(log: Log, *, complete: bool) -> TruncationResult:
    """The answer to a truncation: the fetcher goes on from the new log end offset."""
    return TruncationResult(ErrorCode.NONE, log.log_end_offset, complete, log.log_end_offset)


def append_as_follower(
    ctx: Context[Any], log: Log, message: AppendAsFollower
) -> tuple[FollowerAppendResult, int | None]:
    """The answer, and the offset up to which the log wants a flush (None: no flush due)."""
    if message.fetch_offset != log.log_end_offset:
        return (
            FollowerAppendResult(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                error_message=f"fetched at {message.fetch_offset} but the log end offset is "
                f"{log.log_end_offset}",
            ),
            None,
        )
    try:
        info = _append(ctx, log, message.records)
    except CorruptRecordError as failure:
        return FollowerAppendResult(ErrorCode.CORRUPT_MESSAGE, error_message=str(failure)), None
    except StorageError as failure:
        return FollowerAppendResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(failure)), None
    appended = info.valid_bytes if info.first_offset >= 0 else 0
    # The follower's HW is the leader's, capped by what it has (docs/replication.md §4.2), then its log start
    # offset follows the leader's.
    log.update_high_watermark(min(message.leader_high_watermark, log.log_end_offset))
    if message.leader_log_start_offset > log.log_start_offset:
        log.maybe_increment_log_start_offset(min(message.leader_log_start_offset, log.high_watermark))
    result = FollowerAppendResult(
        ErrorCode.NONE,
        log_end_offset=log.log_end_offset,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
        appended_bytes=appended,
    )
    return result, info.flush_up_to_offset


def _append(ctx: Context[Any], log: Log, records: bytes) -> LogAppendInfo:
    try:
        return log.append_as_follower(records, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms)
    except UnexpectedAppendOffsetError:
        # docs/replication.md §6.3: an empty log whose start offset lies inside the leader's first batch (the
        # leader's log start moved into a batch): restart the log at that batch and append again.
        first_batch = next(iterate_batches(records), None)
        first = None if first_batch is None else first_batch.header
        if (
            first is None
            or log.log_end_offset != log.log_start_offset
            or not first.base_offset < log.log_end_offset <= first.last_offset
        ):
            raise
        log.truncate_fully_and_start_at(first.base_offset, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms)
        return log.append_as_follower(records, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms)
