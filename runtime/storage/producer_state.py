"""ProducerStateManager: idempotent-producer state of one partition (docs/producer.md §5).

For every producer id it keeps the producer epoch and the metadata of its last 5 batches (first and
last sequence, first and last offset, max timestamp). The leader uses it to reject fenced epochs and
sequence gaps and to recognise a retried batch (a *duplicate*: nothing is written and the original
offsets are returned). Followers and recovery feed it the same batches, so every replica ends with
the same state, which is why it needs no replication of its own.

Rules kept here (Kafka's ``ProducerAppendInfo`` / ``ProducerStateEntry``):

* client append, lower epoch than stored -> ``InvalidProducerEpochError``; replication and recovery
  accept it (the leader already decided);
* client append, new epoch: the first sequence must be 0, else ``OutOfOrderSequenceError`` when the
  producer is known and ``UnknownProducerIdError`` when it is not;
* client append, same epoch: the first sequence must follow the last (``last + 1``, or 0 after
  Int.MAX), else ``OutOfOrderSequenceError``; a known epoch with no batch and a first sequence != 0
  -> ``UnknownProducerIdError``;
* a batch with a new epoch clears the remembered batches; only the last 5 are kept.

Validation is staged: ``prepare`` checks a whole append against a working copy and returns a
``ProducerAppend`` that ``apply`` commits only after the bytes are written.

What this module deliberately does not do: transactions (no markers, no LSO), producer id expiry
(``transactional.id.expiration.ms``) and snapshot files. Restart rebuilds the state by scanning the
batch headers of the log from its first segment (only 61-byte headers are read); truncation restores
the in-memory snapshot taken at the last segment roll at or below the truncation point and rescans
from there. This is documented in log.py's theory of operation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from runtime.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError
from runtime.storage.records import INT32_MAX, NO_SEQUENCE, BatchHeader

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "ProducerAppend",
    "ProducerStateEntry",
    "ProducerStateManager",
]

NUM_BATCHES_TO_RETAIN: Final = 5


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        """An independent copy. Its batches are frozen, so copying the deque is enough (a deepcopy
        cost more than the rest of a leader's append; it ran for every batch)."""
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN)
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == header.last_sequence:
                return batch
        return None

    def add_batch(self, header: BatchHeader) -> None:
        if header.producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = header.producer_epoch
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )


@dataclass(slots=True)
class ProducerAppend:
    """Validated, not yet applied, producer updates of one append."""

    updated: dict[int, ProducerStateEntry]


def _copy_all(producers: dict[int, ProducerStateEntry]) -> dict[int, ProducerStateEntry]:
    return {producer_id: entry.copy() for producer_id, entry in producers.items()}


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self._snapshots: dict[int, dict[int, ProducerStateEntry]] = {}
        self.map_end_offset = 0  # every batch below this offset has been applied

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """Live view, for statistics and tests; do not mutate."""
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        entry = self._producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry is not None else None

    def prepare(self, headers: list[BatchHeader], *, from_client: bool) -> ProducerAppend:
        """Validate the producer fields of an append's batches (offsets already final)."""
        updated: dict[int, ProducerStateEntry] = {}
        for header in headers:
            if not header.has_producer_id:
                continue
            entry = updated.get(header.producer_id)
            if entry is None:
                current = self._producers.get(header.producer_id)
                entry = (
                    current.copy()
                    if current is not None
                    else ProducerStateEntry(header.producer_id, NO_PRODUCER_EPOCH_UNKNOWN)
                )
                updated[header.producer_id] = entry
            if from_client:
                self._validate(entry, header)
            entry.add_batch(header)
        return ProducerAppend(updated)

    @staticmethod
    def _validate(entry: ProducerStateEntry, header: BatchHeader) -> None:
        producer_epoch = header.producer_epoch
        first_sequence = header.base_sequence
        where = f"producer {header.producer_id} at offset {header.base_offset}"
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"{where}: epoch {producer_epoch} is older than the current epoch "
                f"{entry.producer_epoch} (fenced)"
            )
        if producer_epoch != entry.producer_epoch:
            if first_sequence != 0:
                if entry.producer_epoch != NO_PRODUCER_EPOCH_UNKNOWN:
                    raise OutOfOrderSequenceError(
                        f"{where}: first sequence {first_sequence} for new epoch {producer_epoch}, expected 0"
                    )
                raise UnknownProducerIdError(
                    f"{where}: no state for this producer on the broker and first sequence "
                    f"{first_sequence} != 0 "
                    "(its batches may have been removed by retention)"
                )
            return
        last_sequence = entry.last_sequence
        if last_sequence == NO_SEQUENCE and first_sequence != 0:
            raise UnknownProducerIdError(
                f"{where}: epoch {producer_epoch} is known but not its last sequence, and first sequence "
                f"{first_sequence} != 0"
            )
        if last_sequence != NO_SEQUENCE and not _in_sequence(last_sequence, first_sequence):
            raise OutOfOrderSequenceError(
                f"{where} epoch {producer_epoch}: first sequence {first_sequence}, expected "
                f"{last_sequence + 1} "
                f"(last sequence {last_sequence})"
            )

    def apply(self, append: ProducerAppend, next_offset: int) -> None:
        self._producers.update(append.updated)
        self.map_end_offset = max(self.map_end_offset, next_offset)

    def update(self, header: BatchHeader) -> None:
        """Apply one batch without validation (follower-style): recovery and rebuilds."""
        if header.has_producer_id:
            entry = self._producers.get(header.producer_id)
            if entry is None:
                entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
                self._producers[header.producer_id] = entry
            entry.add_batch(header)
        self.map_end_offset = max(self.map_end_offset, header.next_offset)

    # ----------------------------------------------------------------------- snapshots, truncation

    def take_snapshot(self, offset: int) -> None:
        """Remember the state as of ``offset`` (every batch below it applied), in memory."""
        self._snapshots[offset] = _copy_all(self._producers)

    def restore_latest_snapshot(self, at_or_below: int) -> int:
        """Drop snapshots above ``at_or_below``, restore the latest remaining one and return its
        offset (the state is empty and 0 is returned when there is none)."""
        for offset in [o for o in self._snapshots if o > at_or_below]:
            del self._snapshots[offset]
        if not self._snapshots:
            self._producers = {}
            self.map_end_offset = 0
            return 0
        offset = max(self._snapshots)
        self._producers = _copy_all(self._snapshots[offset])
        self.map_end_offset = offset
        return offset

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose last batch is below the log start offset, and older snapshots
        except the newest one at or below it (still needed to rebuild after a truncation)."""
        for producer_id in [p for p, e in self._producers.items() if e.last_offset < log_start_offset]:
            del self._producers[producer_id]
        older = sorted(o for o in self._snapshots if o <= log_start_offset)
        for offset in older[:-1]:
            del self._snapshots[offset]

    def truncate_fully(self) -> None:
        self._producers = {}
        self._snapshots = {}
        self.map_end_offset = 0


NO_PRODUCER_EPOCH_UNKNOWN: Final = -1
