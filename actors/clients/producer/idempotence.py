"""The idempotent producer's bookkeeping: producer id, per-partition sequences (docs/producer.md §5).

Kafka 2.4's ``TransactionManager`` for a non-transactional producer, pure. The sender asks it what
may be drained and tells it how each sequenced batch ended.

State per partition: the next sequence to hand out, the last acknowledged sequence and offset, the
batches holding sequences that are not yet resolved (sent, or queued for a retry), ordered by
sequence, and an *unresolved* flag.

Rules kept
----------
* A batch gets ``base_sequence = next`` when it is first drained, and ``next += records``
  (wrapping at Int.MAX). A retried batch keeps its sequence, so a broker that already wrote it
  recognises the retry as a duplicate and answers with the original offset.
* Drain (``SequenceGate``): nothing without a producer id; no new batch while the partition is
  unresolved; a retried batch only when it is the first unresolved sequence (retries go one at a
  time, in order).
* The broker window: a broker recognises a retry as a duplicate only while the batch is among the
  producer's last ``BROKER_RETAINED_BATCHES`` (5) batches it wrote; further back, the retry is
  OUT_OF_ORDER_SEQUENCE_NUMBER, retried again, and again, until delivery.timeout.ms. So no new
  batch is drained while the first unresolved batch is at or before the oldest of the partition's
  last five drained ones: a batch never has more than four successors sent while its fate is
  unknown. Kafka gets this for free: one connection answers in order, so with five requests in
  flight a batch's answer (or disconnect) arrives before a sixth batch can leave. Here answers to
  one broker arrive in any order, and a lost answer's retry could otherwise be overtaken by
  batches drained after it.
* ``can_retry`` (non-retriable codes the idempotence allows to retry):
  OUT_OF_ORDER_SEQUENCE_NUMBER when the partition is not unresolved and the batch was not the next
  expected one *when it was sent* (an earlier batch was still in flight: it may have failed, or
  arrived later) or its sequence was reset. Kafka asks "is it the next one now?", which is the same
  question on one TCP connection, where requests reach the broker in the order sent; here asks to a
  broker travel concurrently and may overtake each other, so a batch sent behind unacknowledged
  ones can be rejected before its predecessor arrives and must be retried, not declared a gap.
  A batch sent as the next one and still rejected is a real gap (fatal, below);
  UNKNOWN_PRODUCER_ID when the response has no log start offset, when the batch's sequence was
  reset, when it was sent behind unacknowledged batches (it may have overtaken the very first one),
  or when the last acknowledged offset is below the log start offset (the broker deleted our state
  with the log head: sequences restart at 0 for this partition).
* A batch that fails for good with OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID *resets the
  producer id*: the id, epoch and every partition's sequences are discarded and a new id is
  requested (InitProducerId). Batches never sent get sequences from 0 under the new id; batches
  already sent keep their old id and, if they then need a retry, fail with OutOfOrderSequenceError
  ("the producer id changed"), as Kafka 2.4 does (2.5 bumps the epoch instead, KIP-360).
* A batch rejected definitively by the broker (another non-retriable error, retries left) shifts
  the sequences of the later batches of its partition down by its record count (they were never
  going to be accepted with a gap before them).
* A sequenced batch that expires (delivery.timeout.ms) makes its partition *unresolved*: its fate
  is unknown. Once no unresolved batch of the partition remains (their requests answered), the
  partition is resolved if the acknowledged sequences reach the next sequence, and otherwise the
  producer id is reset (Kafka 2.4's ``maybeResolveSequences``). Kafka marks only retried batches;
  here any sent one is, since a first attempt that timed out is just as unknown.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from actors.clients.producer.batch import ProducerBatch
from actors.clients.producer.errors import OutOfOrderSequenceError, ProducerError, UnknownProducerIdError
from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from runtime.storage.records import NO_SEQUENCE, increment_sequence

__all__ = ["IdempotenceManager", "PartitionSequences"]

NO_LAST_ACKED_SEQUENCE = -1
# How many of a producer's batches a broker keeps to recognise duplicates (Kafka's
# ProducerStateEntry.NumBatchesToRetain). Clients may not import the broker's storage, so the value
# is repeated; a test holds it equal to runtime.storage.producer_state.NUM_BATCHES_TO_RETAIN.
BROKER_RETAINED_BATCHES = 5


@dataclass(slots=True)
class PartitionSequences:
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    last_acked_offset: int = -1
    # Sent batches not yet resolved, ordered by base sequence.
    unresolved_batches: list[ProducerBatch] = field(default_factory=list)
    unresolved: bool = False
    # The last batches given a sequence, oldest first: the broker's duplicate window (docstring).
    recent_batches: deque[ProducerBatch] = field(
        default_factory=lambda: deque(maxlen=BROKER_RETAINED_BATCHES)
    )


class IdempotenceManager:
    """Producer id and sequences (module docstring); implements ``accumulator.SequenceGate``."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: dict[TopicPartition, PartitionSequences] = {}
        self.producer_id_resets_total = 0

    # ----------------------------------------------------------------------- producer id

    @property
    def needs_producer_id(self) -> bool:
        return self.producer_id < 0

    def producer_id_and_epoch(self) -> tuple[int, int] | None:
        return None if self.producer_id < 0 else (self.producer_id, self.producer_epoch)

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    def has_producer_id(self, producer_id: int, producer_epoch: int) -> bool:
        return self.producer_id == producer_id and self.producer_epoch == producer_epoch

    def reset_producer_id(self) -> None:
        """Forget the id and every partition's sequences (Kafka 2.4's ``resetProducerId``)."""
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions.clear()
        self.producer_id_resets_total += 1

    # ---------------------------------------------------------------------------- drain

    def _partition(self, tp: TopicPartition) -> PartitionSequences:
        state = self.partitions.get(tp)
        if state is None:
            state = self.partitions[tp] = PartitionSequences()
        return state

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        state = self.partitions.get(tp)
        return state is not None and state.unresolved

    def broker_window_is_full(self, tp: TopicPartition) -> bool:
        """Whether another new batch could push the first unresolved one out of the broker's
        duplicate window (module docstring)."""
        state = self.partitions.get(tp)
        if (
            state is None
            or not state.unresolved_batches
            or len(state.recent_batches) < BROKER_RETAINED_BATCHES
        ):
            return False
        return state.unresolved_batches[0].base_sequence <= state.recent_batches[0].base_sequence

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        state = self.partitions.get(tp)
        if state is None or not state.unresolved_batches:
            return NO_SEQUENCE
        return state.unresolved_batches[0].base_sequence

    def assign_sequence(self, batch: ProducerBatch) -> None:
        assert self.producer_id >= 0, "assigning a sequence without a producer id"
        state = self._partition(batch.tp)
        batch.set_producer_state(self.producer_id, self.producer_epoch, state.next_sequence)
        state.next_sequence = increment_sequence(state.next_sequence, batch.record_count)
        state.recent_batches.append(batch)
        self.add_unresolved_batch(batch)

    def add_unresolved_batch(self, batch: ProducerBatch) -> None:
        batches = self._partition(batch.tp).unresolved_batches
        index = len(batches)
        while index > 0 and batches[index - 1].base_sequence > batch.base_sequence:
            index -= 1
        batches.insert(index, batch)

    def remove_unresolved_batch(self, batch: ProducerBatch) -> None:
        state = self.partitions.get(batch.tp)
        if state is not None and batch in state.unresolved_batches:
            state.unresolved_batches.remove(batch)

    def is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        state = self.partitions.get(tp)
        last_acked = NO_LAST_ACKED_SEQUENCE if state is None else state.last_acked_sequence
        return sequence - last_acked == 1

    # ------------------------------------------------------------------------ outcomes

    def can_retry(self, error: ErrorCode, log_start_offset: int, batch: ProducerBatch) -> bool:
        """Whether a non-retriable error may still be retried (Kafka's ``canRetry``)."""
        if not self.has_producer_id(batch.producer_id, batch.producer_epoch):
            return False
        tp = batch.tp
        if error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return not self.has_unresolved_sequence(tp) and (
                batch.sequence_reset or not batch.sent_as_next_sequence
            )
        if error is ErrorCode.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1 or batch.sequence_reset or not batch.sent_as_next_sequence:
                # Unknown offsets; already renumbered; or it overtook the producer's first batch in
                # transit (a broker with no state yet wants sequence 0 first): retry as it is.
                return True
            state = self.partitions.get(tp)
            last_acked_offset = -1 if state is None else state.last_acked_offset
            if last_acked_offset < log_start_offset:
                self.start_sequences_at_beginning(tp)
                return True
        return False

    def handle_completed(self, batch: ProducerBatch, base_offset: int) -> None:
        """The batch was written (or was a duplicate of a written one)."""
        if not self.has_producer_id(batch.producer_id, batch.producer_epoch):
            return  # an answer for a producer id reset meanwhile: its sequences are gone
        state = self._partition(batch.tp)
        state.last_acked_sequence = max(state.last_acked_sequence, batch.last_sequence)
        if base_offset >= 0:
            state.last_acked_offset = max(state.last_acked_offset, base_offset + batch.record_count - 1)
        self.remove_unresolved_batch(batch)

    def handle_failed(self, batch: ProducerBatch, error: ProducerError, adjust_sequences: bool) -> None:
        """The batch failed for good with ``error`` (not an expiry: see ``mark_sequence_unresolved``)."""
        self.remove_unresolved_batch(batch)
        if isinstance(error, (OutOfOrderSequenceError, UnknownProducerIdError)):
            self.reset_producer_id()
        elif adjust_sequences and batch.has_sequence:
            self._adjust_sequences_due_to_failed_batch(batch)

    def _adjust_sequences_due_to_failed_batch(self, failed: ProducerBatch) -> None:
        state = self.partitions.get(failed.tp)
        if state is None or not self.has_producer_id(failed.producer_id, failed.producer_epoch):
            return  # sequences are no longer tracked (the producer id was reset)
        count = failed.record_count
        state.next_sequence -= count
        assert state.next_sequence >= 0, f"sequence of {failed.tp} would become negative"
        for batch in state.unresolved_batches:
            if batch.base_sequence > failed.base_sequence:
                batch.reset_producer_state(
                    batch.producer_id, batch.producer_epoch, batch.base_sequence - count
                )

    def start_sequences_at_beginning(self, tp: TopicPartition) -> None:
        """The broker lost our state with the log head: renumber the unresolved batches from 0."""
        state = self._partition(tp)
        sequence = 0
        for batch in state.unresolved_batches:
            batch.reset_producer_state(batch.producer_id, batch.producer_epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        state.next_sequence = sequence
        state.last_acked_sequence = NO_LAST_ACKED_SEQUENCE
        state.recent_batches.clear()  # the broker forgot them too

    def mark_sequence_unresolved(self, tp: TopicPartition) -> None:
        self._partition(tp).unresolved = True

    def maybe_resolve_sequences(self) -> bool:
        """Resolve partitions whose unknown batches are all answered; True if that reset the
        producer id (some sequence range can no longer be accounted for)."""
        for tp, state in list(self.partitions.items()):
            if not state.unresolved or state.unresolved_batches:
                continue
            if self.is_next_sequence(tp, state.next_sequence):
                state.unresolved = False
                continue
            self.reset_producer_id()
            return True
        return False
