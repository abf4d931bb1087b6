"""The broker's delayed fetches: Kafka's fetch purgatory (``DelayedFetch``), for the fetches the
request fan-out (``request_fanout.py``) has read from every partition.

Rules
-----
1. A read fetch is answered now if it does not wait, a partition erred or never answered, enough
   bytes are there, or (followers, KIP-392) a partition's high watermark moved past what the
   follower was last sent (``broker_requests.decide_fetch``); or if its wait has expired.
2. Otherwise it is *parked*: its timer (``max_wait_ms``, started once) bounds the wait, and each
   hosted partition that answered a read is asked to say once when it changes (``NotifyOnChange``
   with the offsets that read saw, so a change in between is not missed).
3. ``PartitionChanged`` marks that partition stale in every parked fetch watching it, and a
   fetch whose reads are all in reads its stale partitions again (the others keep their last
   read and stay watched; ``request_fanout.py`` rule 6 adds the few that may be stale unsaid);
   stale partitions found when reads come in are read next. ``FetchExpired`` marks the fetch
   expired and answers it once its reads are in, after reading again what may be stale. A re-read
   never updates follower state: only a fetch's first read does (Kafka's delayed fetch). After
   each read the partitions just read are asked to say when they change.
4. A fetch leaving the purgatory cancels its timer and stops watching its partitions before it is
   answered.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors.common.protocol import FetchRequest
from actors.common.types import TopicPartition
from actors.server.broker_requests import PendingRequest, decide_fetch
from actors.server.replica.messages import NotifyOnChange, PartitionChanged, PartitionReadResult
from actors.server.replica_manager import HostedPartitions
from runtime.context import Context

__all__ = ["FetchExpired", "FetchPurgatory"]


@dataclass(frozen=True, slots=True)
class FetchExpired:
    """To the broker: a parked fetch's ``max_wait_ms`` has passed."""

    request_id: int


class FetchPurgatory:
    def __init__(
        self,
        *,
        hosted: HostedPartitions,
        read_again: Callable[[Context[Any], PendingRequest, set[TopicPartition]], None],
        complete: Callable[[Context[Any], PendingRequest], None],
    ) -> None:
        """``read_again``: read some of a parked fetch's partitions anew (without updating follower
        state);
        ``complete``: assemble and send its response."""
        self._hosted = hosted
        self._read_again = read_again
        self._complete = complete
        # Parked fetches by request id, and by the partitions they watch.
        self.parked: dict[int, PendingRequest] = {}
        self.watchers: dict[TopicPartition, set[int]] = {}

    def __len__(self) -> int:
        return len(self.parked)

    def read(self, ctx: Context[Any], pending: PendingRequest) -> None:
        """Every partition of this fetch has answered its read: answer it or park it (rules 1-2)."""
        request = pending.request
        assert isinstance(request, FetchRequest)
        decision = decide_fetch(request, pending.results)
        if decision.respond or pending.expired:
            self._leave(ctx, pending)
            self._complete(ctx, pending)
            return
        if not pending.parked:
            pending.parked = True
            self.parked[pending.request_id] = pending
            ctx.start_timer(
                ("fetch", pending.request_id), FetchExpired(pending.request_id), request.max_wait_ms
            )
        if pending.stale:
            self._read_stale(ctx, pending)
            return
        for tp in pending.last_read:
            ref = self._hosted.ref(tp)
            result = pending.results.get(tp)
            if ref is not None and isinstance(result, PartitionReadResult):
                self.watchers.setdefault(tp, set()).add(pending.request_id)
                ctx.tell(ref, NotifyOnChange(result.log_end_offset, result.response.high_watermark))

    def partition_changed(self, ctx: Context[Any], message: PartitionChanged) -> None:
        for request_id in self.watchers.pop(message.tp, set()):
            pending = self.parked.get(request_id)
            if pending is not None:
                pending.stale.add(message.tp)
                if not pending.waiting:
                    self._read_stale(ctx, pending)

    def expired(self, ctx: Context[Any], message: FetchExpired) -> None:
        pending = self.parked.get(message.request_id)
        if pending is None:
            return
        pending.expired = True
        if not pending.waiting:
            self._unwatch(pending)
            self._read_stale(ctx, pending)

    def _read_stale(self, ctx: Context[Any], pending: PendingRequest) -> None:
        stale, pending.stale = pending.stale, set()
        self._read_again(ctx, pending, stale)

    def _leave(self, ctx: Context[Any], pending: PendingRequest) -> None:
        if self.parked.pop(pending.request_id, None) is not None:
            ctx.cancel_timer(("fetch", pending.request_id))
            self._unwatch(pending)

    def _unwatch(self, pending: PendingRequest) -> None:
        request = pending.request
        assert isinstance(request, FetchRequest)
        for wanted in request.partitions:
            watching = self.watchers.get(wanted.tp)
            if watching is not None:
                watching.discard(pending.request_id)
                if not watching:
                    del self.watchers[wanted.tp]
