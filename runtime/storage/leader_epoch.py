"""LeaderEpochCache: which leader epoch wrote which offsets (Kafka's ``LeaderEpochFileCache``).

An ordered list of ``(epoch, start_offset)`` entries, strictly increasing in both fields, persisted to
the partition's ``leader-epoch-checkpoint`` after every change (docs/leader-epochs.md §1). Followers ask
the leader ``end_offset_for(epoch)`` to find where their log diverges (KIP-101/KIP-279).

Rules kept here:

* ``assign(epoch, start_offset)`` is a no-op when the latest entry has the same epoch and a start
  offset <= the given one; otherwise every entry that is not (older epoch *and* smaller start offset)
  is removed and the new entry appended: a conflicting new entry always wins.
* ``end_offset_for(requested)``: -1 -> (-1, -1); the latest epoch -> (epoch, log end offset); else the
  last epoch <= requested paired with the start offset of the first epoch above it, or
  (requested, that start offset) if there is no epoch <= requested, or (-1, -1) if none above.
* ``truncate_from_end(offset)`` drops entries starting at or after ``offset`` (log truncation);
  ``truncate_from_start(offset)`` drops entries wholly below it and moves the last of those up to
  ``offset``; ``clear_and_flush()`` empties it.
* The checkpoint write is synchronous and fsynced (tmp + rename): it happens once per leader epoch
  change, as in Kafka, and a lost entry would make a follower truncate wrongly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from runtime.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochCache"]

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class LeaderEpochCache:
    def __init__(
        self,
        log_end_offset: Callable[[], int],
        checkpoint: LeaderEpochCheckpointFile | None = None,
        entries: Iterable[EpochEntry] | None = None,
    ) -> None:
        """Entries come from ``entries`` if given, else from the checkpoint file (if any)."""
        self._log_end_offset = log_end_offset
        self._checkpoint = checkpoint
        if entries is None:
            entries = checkpoint.read() if checkpoint is not None else ()
        self._entries: list[EpochEntry] = []
        # The last entry, kept as a plain attribute: the append path reads it for every batch.
        self.latest_entry: EpochEntry | None = None
        for entry in entries:
            self._assign(entry)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` started at ``start_offset``; persist if anything changed."""
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self._flush()
        return changed

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self.latest_entry
        if latest is not None and latest.epoch == entry.epoch and latest.start_offset <= entry.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        self.latest_entry = entry
        return True

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for a follower or consumer that last saw ``requested_epoch``."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.latest_epoch == requested_epoch:
            return requested_epoch, self._log_end_offset()
        subsequent = [entry for entry in self._entries if entry.epoch > requested_epoch]
        previous = [entry for entry in self._entries if entry.epoch <= requested_epoch]
        if not subsequent:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if not previous:
            return requested_epoch, subsequent[0].start_offset
        return previous[-1].epoch, subsequent[0].start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range contains ``offset``, if known."""
        found: int | None = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        removed = [entry for entry in self._entries if entry.start_offset <= start_offset]
        if removed:
            kept = self._entries[len(removed) :]
            self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
            self._flush()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self._flush()

    def _flush(self) -> None:
        self.latest_entry = self._entries[-1] if self._entries else None
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)
