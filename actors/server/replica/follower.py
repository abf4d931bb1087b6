"""The follower side of a partition replica: the replica fetcher's requests, applied to the local log.

House rules
-----------
1. Functions of (the partition's state, its log, one request) to the answer; the partition actor
   calls them from its mailbox and sends the reply. They touch only the local log (and the log
   manager's recovery-point checkpoint after a truncation); time and the logger come from ``ctx``.
2. Every request names the leader epoch it was built for. A partition that is not a follower is
   refused with NOT_LEADER_OR_FOLLOWER; a request for an older epoch with FENCED_LEADER_EPOCH, for
   a newer one with UNKNOWN_LEADER_EPOCH. So a fetcher can never apply data (or a truncation)
   across a leadership change.

Theory of operation (docs/replication.md §4.2, §6.3, docs/leader-epochs.md §2)
---------------------------------------------------------
* ``log_state``: the log's latest leader epoch, LEO, log start and HW (what the fetcher needs to
  build OffsetsForLeaderEpoch, or to fall back to the HW when the log has no epochs).
* ``truncate_on_leader_epoch``: the leader's OffsetsForLeaderEpoch answer, decided by
  ``truncation.py`` (KIP-101 with KIP-279's rounds); the log is cut and the fetcher told whether
  another round is needed.
* ``truncate_to`` / ``truncate_fully_and_start_at``: the HW fallback and the out-of-range reset.
* ``append_as_follower``: the leader's batches, byte for byte, at the log end; then the follower
  HW becomes min(leader HW, LEO) and the log start offset follows the leader's. An empty log whose start
  offset lies inside the leader's first batch restarts at that batch (docs/replication.md §6.3's special
  case).
"""

from __future__ import annotations

from typing import Any

from actors.common.errors import ErrorCode
from actors.server.fetcher.truncation import decide_truncation
from actors.server.replica.messages import (
    AppendAsFollower,
    FollowerAppendResult,
    FollowerLogState,
    GetFollowerLogState,
    TruncateFullyAndStartAt,
    TruncateOnLeaderEpoch,
    TruncateTo,
    TruncationResult,
)
from actors.server.replica.partition_state import PartitionState, Role
from runtime.context import Context
from runtime.errors import StorageError
from runtime.storage.errors import CorruptRecordError, UnexpectedAppendOffsetError
from runtime.storage.log import Log, LogAppendInfo
from runtime.storage.log_manager import LogManager
from runtime.storage.records import iterate_batches

__all__ = [
    "append_as_follower",
    "follower_check",
    "log_state",
    "truncate_fully_and_start_at",
    "truncate_on_leader_epoch",
    "truncate_to",
    "truncate_to_high_watermark",
]


def follower_check(state: PartitionState, log: Log | None, leader_epoch: int) -> ErrorCode:
    """Whether a request built for ``leader_epoch`` may act on this partition now."""
    if state.role is not Role.FOLLOWER or log is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if leader_epoch < state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if leader_epoch > state.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def log_state(state: PartitionState, log: Log | None, message: GetFollowerLogState) -> FollowerLogState:
    error = follower_check(state, log, message.leader_epoch)
    if error is not ErrorCode.NONE or log is None:
        return FollowerLogState(error)
    return FollowerLogState(
        ErrorCode.NONE,
        latest_epoch=log.leader_epoch_cache.latest_epoch,
        log_end_offset=log.log_end_offset,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
    )


def truncate_on_leader_epoch(
    ctx: Context[Any],
    state: PartitionState,
    log: Log | None,
    log_manager: LogManager,
    message: TruncateOnLeaderEpoch,
    *,
    to_high_watermark: bool = False,
) -> TruncationResult:
    """``to_high_watermark`` is the simulation's negative control (ProtocolFault): the pre-KIP-101
    rule, cutting to the local high watermark whatever the leader answered."""
    error = follower_check(state, log, message.leader_epoch)
    if error is not ErrorCode.NONE or log is None:
        return TruncationResult(error)
    if to_high_watermark:
        _truncate(ctx, state, log, log_manager, log.high_watermark, cause="high watermark (negative control)")
        return TruncationResult(ErrorCode.NONE, log.log_end_offset, True, log.log_end_offset)
    decision = decide_truncation(
        leader_epoch_answer=message.leader_epoch_answer,
        leader_end_offset=message.end_offset,
        local_end_offset_for_epoch=log.end_offset_for_epoch(message.leader_epoch_answer)
        if message.leader_epoch_answer >= 0
        else None,
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
    )
    _truncate(
        ctx,
        state,
        log,
        log_manager,
        decision.offset,
        cause=f"leader epoch {message.leader_epoch_answer} ends at {message.end_offset}",
    )
    return TruncationResult(ErrorCode.NONE, log.log_end_offset, decision.complete, log.log_end_offset)


def truncate_to(
    ctx: Context[Any], state: PartitionState, log: Log | None, log_manager: LogManager, message: TruncateTo
) -> TruncationResult:
    error = follower_check(state, log, message.leader_epoch)
    if error is not ErrorCode.NONE or log is None:
        return TruncationResult(error)
    _truncate(ctx, state, log, log_manager, message.offset, cause="fetcher")
    return TruncationResult(ErrorCode.NONE, log.log_end_offset, True, log.log_end_offset)


def truncate_fully_and_start_at(
    ctx: Context[Any],
    state: PartitionState,
    log: Log | None,
    log_manager: LogManager,
    message: TruncateFullyAndStartAt,
) -> TruncationResult:
    error = follower_check(state, log, message.leader_epoch)
    if error is not ErrorCode.NONE or log is None:
        return TruncationResult(error)
    ctx.log.info("%s: truncating fully and restarting at %d", state.tp, message.offset)
    log.truncate_fully_and_start_at(message.offset, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms)
    log_manager.checkpoint_recovery_points()
    return TruncationResult(ErrorCode.NONE, log.log_end_offset, True, log.log_end_offset)


def truncate_to_high_watermark(
    ctx: Context[Any], state: PartitionState, log: Log, log_manager: LogManager
) -> None:
    """The negative control's cut on becoming a follower (ProtocolFault.TRUNCATE_TO_HIGH_WATERMARK)."""
    _truncate(ctx, state, log, log_manager, log.high_watermark, cause="high watermark (negative control)")


def _truncate(
    ctx: Context[Any], state: PartitionState, log: Log, log_manager: LogManager, offset: int, *, cause: str
) -> None:
    before = log.log_end_offset
    if log_manager.truncate_to(state.tp, offset, now_ms=ctx.now_ms):
        ctx.log.info("%s: truncated from %d to %d (%s)", state.tp, before, log.log_end_offset, cause)


def append_as_follower(
    ctx: Context[Any], state: PartitionState, log: Log | None, message: AppendAsFollower
) -> tuple[FollowerAppendResult, int | None]:
    """The answer, and the offset up to which the log wants a flush (None: no flush due)."""
    error = follower_check(state, log, message.leader_epoch)
    if error is not ErrorCode.NONE or log is None:
        return FollowerAppendResult(error), None
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
