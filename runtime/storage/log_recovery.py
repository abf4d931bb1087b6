"""What loading a log dir repaired: one ``RecoveryAction`` per repair, logged at WARN and counted.

Loading (log_loader.py, log.py, log_manager.py) never repairs silently: every action it takes on a
partition's files is recorded here the moment it is taken. The record names the partition, the file,
and the byte and offset ranges involved, so an operator can tell from the broker's log what happened
to which records, and the counts feed the broker's ``kafka_log_recovery_*`` metric families
(docs/log.md §7), so a dashboard shows a broker that repaired itself.

Rules kept here:

* One WARN line per action on the ``actorlog.storage.recovery`` logger, with the partition in the
  text and as the ``tp`` field (JSON logs).
* Counters only go up; ``truncated_bytes`` sums the bytes cut off segments. ``cut_from_offset``
  keeps the lowest offset from which a partition's loaded log lost records it had on disk (a cut, or
  segments moved aside): the loaded log is the prefix below it.
* Once a partition is loaded (``Log.open``), ``summarize`` adds one line for it, in Kafka's words
  ("Recovered log <partition> (clean shutdown: yes|no): ..."), with the numbers: segments whose
  indexes were rebuilt, bytes and batches cut and at which offset and why, files moved aside,
  checkpoints not trusted, flushed offsets gone, where the log now ends. WARN when the partition's
  files were damaged (anything beyond the routine re-validation after an unclean shutdown), INFO
  otherwise; nothing for a partition that needed nothing.
"""

from __future__ import annotations

import enum
import logging
import posixpath
from dataclasses import dataclass, field

__all__ = ["RecoveryAction", "RecoveryKind", "RecoveryReport"]

_log = logging.getLogger("actorlog.storage.recovery")


class RecoveryKind(enum.Enum):
    # A segment's batches re-validated from the first byte and its indexes rebuilt: after an unclean
    # shutdown (above the recovery point), or because an index was missing or failed its checks.
    SEGMENT_RECOVERED = "segment_recovered"
    # Bytes cut off the end of a segment: a torn or invalid batch and everything after it.
    BYTES_TRUNCATED = "bytes_truncated"
    # A file renamed ``<name>.stray``: it does not fit the segment set (its first batch does not
    # match its name, it overlaps the segment before it, or a gap or a cut lies before it).
    FILE_MOVED_ASIDE = "file_moved_aside"
    # A checkpoint file that could not be parsed, rebuilt from the log (or replaced by what the log
    # implies), or one of its entries contradicting the log and ignored.
    CHECKPOINT_REBUILT = "checkpoint_rebuilt"
    # Leader epoch entries dropped because they start at or beyond the loaded log's end.
    EPOCH_ENTRIES_DROPPED = "epoch_entries_dropped"
    # The loaded log ends below the recovery point: records that were flushed are gone (damage).
    RECORDS_MISSING = "records_missing"


@dataclass(frozen=True, slots=True)
class RecoveryAction:
    kind: RecoveryKind
    partition: str  # the partition directory's name (``<topic>-<partition>``), or "" for a log dir file
    path: str
    detail: str
    truncated_bytes: int = 0
    cut_from_offset: int | None = None
    # A cut: the complete batches the cut bytes framed (None: not countable), and the kind of damage
    # at which it was made ("a CRC mismatch", "a batch cut short", ...).
    truncated_batches: int | None = None
    cause: str = ""


@dataclass(slots=True)
class RecoveryReport:
    """The actions taken while loading one log dir (or one log), in order."""

    actions: list[RecoveryAction] = field(default_factory=list)

    def record(self, action: RecoveryAction) -> None:
        self.actions.append(action)
        where = f"partition {action.partition}" if action.partition else "log dir"
        _log.warning(
            "Log recovery (%s) %s: %s: %s",
            action.kind.value,
            where,
            action.path,
            action.detail,
            extra={"tp": action.partition} if action.partition else None,
        )

    def counts(self) -> dict[str, int]:
        """Actions by kind (every kind present, 0 when none was taken)."""
        counts = dict.fromkeys((kind.value for kind in RecoveryKind), 0)
        for action in self.actions:
            counts[action.kind.value] += 1
        return counts

    @property
    def truncated_bytes(self) -> int:
        return sum(action.truncated_bytes for action in self.actions)

    def cut_from_offset(self, partition: str) -> int | None:
        """The lowest offset from which ``partition``'s loaded log lost what its files held."""
        cuts = [
            action.cut_from_offset
            for action in self.actions
            if action.partition == partition and action.cut_from_offset is not None
        ]
        return min(cuts) if cuts else None

    def summarize(
        self,
        partition: str,
        since: int,
        *,
        clean_shutdown: bool,
        checkpointed_recovery_point: int,
        log_end_offset: int,
        recovery_point: int,
    ) -> str | None:
        """Log (and return) one line for what loading ``partition`` did, from the actions recorded
        from index ``since`` on; None, and nothing logged, when it needed nothing. The recovery points
        are the one read from the checkpoint and the one the loaded log uses."""
        actions = [action for action in self.actions[since:] if action.partition == partition]
        if not actions:
            return None
        by_kind: dict[RecoveryKind, list[RecoveryAction]] = {}
        for action in actions:
            by_kind.setdefault(action.kind, []).append(action)
        done: list[str] = []
        if recovered := by_kind.get(RecoveryKind.SEGMENT_RECOVERED):
            done.append(f"rebuilt offset and time indexes of {len(recovered)} segment(s)")
        for cut in by_kind.get(RecoveryKind.BYTES_TRUNCATED, []):
            if cut.truncated_bytes == 0:  # every segment ended below the log start offset: removed
                done.append(f"removed segments holding only deleted records (log end {cut.cut_from_offset})")
                continue
            batches = "" if cut.truncated_batches is None else f" ({cut.truncated_batches} batches)"
            done.append(
                f"truncated {cut.truncated_bytes} bytes{batches} at offset {cut.cut_from_offset} "
                f"after {cut.cause or 'an invalid batch'} in {posixpath.basename(cut.path)}"
            )
        if moved := by_kind.get(RecoveryKind.FILE_MOVED_ASIDE):
            done.append(f"moved {len(moved)} file(s) aside (.stray)")
        if checkpoints := by_kind.get(RecoveryKind.CHECKPOINT_REBUILT):
            names = sorted({posixpath.basename(action.path) for action in checkpoints})
            done.append(f"rebuilt or ignored {', '.join(names)}")
        if RecoveryKind.EPOCH_ENTRIES_DROPPED in by_kind:
            done.append("dropped the leader epoch entries at or beyond the log end offset")
        if missing := by_kind.get(RecoveryKind.RECORDS_MISSING):
            done.append(
                f"offsets {missing[0].cut_from_offset}..{checkpointed_recovery_point - 1} were flushed but "
                "are gone from this replica (a follower fetches them again from its leader)"
            )
        routine = set(by_kind) == {RecoveryKind.SEGMENT_RECOVERED}
        line = (
            f"Recovered log {partition} (clean shutdown: {'yes' if clean_shutdown else 'no'}): "
            f"{'; '.join(done)}; log end offset {log_end_offset}, recovery point {recovery_point}"
        )
        _log.log(logging.INFO if routine else logging.WARNING, "%s", line, extra={"tp": partition})
        return line
