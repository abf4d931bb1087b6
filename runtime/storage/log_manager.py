"""LogManager: the owner of one log dir (Kafka's ``LogManager`` plus the high watermark checkpoint).

Layout of a log dir (docs/log.md §1)::

    <log.dir>/
      <topic>-<partition>/                     one Log each (log.py)
      replication-offset-checkpoint            high watermarks
      recovery-point-offset-checkpoint         recovery points
      log-start-offset-checkpoint              log start offsets above the first segment's base
      meta.properties                          written at the dir's first use
      .kafka_cleanshutdown                     present only after a clean shutdown

Rules kept here:

* ``open`` reads the three checkpoints, then opens every ``<topic>-<partition>`` directory with its
  recovery point, log start offset and high watermark. With the clean-shutdown marker present the logs
  skip recovery; the marker is then removed (and the removal made durable) so that a crash from here
  on is treated as unclean. ``meta.properties`` is written durably at the dir's first use: without
  the marker, a dir that has it makes an ``unclean_start``, which the broker's registration says
  until a controller has seen the process (``mark_seen``); so does a start whose loading found
  flushed records gone (a corrupt active segment cut after a clean shutdown). A clean shutdown before
  that writes the marker with ``unseen-unclean-start`` in it, so the next start inherits it.
  Directories ending ``-delete`` (a deletion interrupted by a crash) are removed.
* A checkpoint that cannot be parsed stops nothing: it is logged and counted (``recovery_report``)
  and the logs load as if it were empty (a damaged recovery point file also means a full recovery,
  marker or not); the next checkpoint rewrites it from the logs. Damage inside one partition's
  directory affects only that partition (log_loader.py, ``Log.open``).
* ``close`` is the clean shutdown: flush every log, write the three checkpoints, close the logs, and
  only then write the marker (fsynced).
* Checkpoints are written atomically (checkpoint.py). Each ``checkpoint_*`` method writes
  synchronously; each ``*_checkpoint()`` method returns a ``CheckpointWrite`` whose ``run()`` can go to
  a worker thread (``asyncio.to_thread``) because the bytes were captured on the caller's thread.
* After ``truncate_to`` the recovery points are checkpointed, as Kafka's ``LogManager.truncateTo``
  does, so a restart never trusts data above a truncation point.
"""

from __future__ import annotations

import posixpath
import random
from collections.abc import Mapping
from typing import Final

from runtime.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointWrite,
    OffsetCheckpointFile,
)
from runtime.storage.config import LogConfig
from runtime.storage.errors import CorruptCheckpointError
from runtime.storage.fs import FileSystem
from runtime.storage.log import Log
from runtime.storage.log_recovery import RecoveryAction, RecoveryKind, RecoveryReport
from runtime.storage.topic_partition import TopicPartition

__all__ = ["CLEAN_SHUTDOWN_FILE", "META_PROPERTIES_FILE", "LogManager", "parse_partition_directory"]

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
# The clean-shutdown marker's content when the stopping process had an unclean start no controller saw.
UNSEEN_UNCLEAN_START: Final = b"unseen-unclean-start\n"
# Kafka's name; written (durably) when a log dir is used for the first time.
META_PROPERTIES_FILE: Final = "meta.properties"
DELETE_DIR_SUFFIX: Final = "-delete"
FUTURE_DIR_SUFFIX: Final = "-future"


def parse_partition_directory(name: str) -> TopicPartition | None:
    """``my-topic-3`` -> ``TopicPartition("my-topic", 3)``; None for anything else."""
    topic, separator, partition = name.rpartition("-")
    if not separator or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    def __init__(
        self,
        fs: FileSystem,
        log_dir: str,
        default_config: LogConfig,
        topic_configs: Mapping[str, LogConfig],
        rng: random.Random,
        *,
        had_clean_shutdown: bool,
    ) -> None:
        """Use ``LogManager.open``."""
        self.fs = fs
        self.log_dir = log_dir
        self.default_config = default_config
        self.topic_configs = dict(topic_configs)
        self.had_clean_shutdown = had_clean_shutdown
        self._rng = rng
        self._logs: dict[TopicPartition, Log] = {}
        # Why the log dir went offline (an I/O error), if it did: the broker halts right after.
        self.offline_reason: str | None = None
        # What loading repaired (every action also logged at WARN); the broker's metrics count it.
        self.recovery_report = RecoveryReport()
        # The log dir had never been used (no meta.properties): a broker on it has nothing to lose.
        self.first_use = False
        # This process opened a used log dir after an unclean shutdown (or inherited that, see
        # ``open``), and no controller has seen it since (``mark_seen``): what was not flushed may
        # be gone. The broker's registration says so (docs/controller.md §2).
        self.unclean_start = False
        self._high_watermarks = OffsetCheckpointFile(
            fs, posixpath.join(log_dir, REPLICATION_OFFSET_CHECKPOINT)
        )
        self._recovery_points = OffsetCheckpointFile(fs, posixpath.join(log_dir, RECOVERY_POINT_CHECKPOINT))
        self._log_start_offsets = OffsetCheckpointFile(
            fs, posixpath.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
        )

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        log_dir: str,
        *,
        now_ms: int,
        rng: random.Random,
        wall_clock_ms: int = 0,
        default_config: LogConfig | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
    ) -> LogManager:
        """Load every partition of ``log_dir`` (creating the dir if needed)."""
        fs.make_dirs(log_dir)
        marker = posixpath.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = fs.exists(marker)
        meta = posixpath.join(log_dir, META_PROPERTIES_FILE)
        first_use = not fs.exists(meta)
        if first_use:
            # Durable before the broker registers: from now on a start without the clean-shutdown
            # marker is an unclean start of a log dir that may have held data.
            fs.write_file(meta, b"version=0\n", fsync=True)
            fs.fsync_dir(log_dir)
            fs.fsync_dir(posixpath.dirname(log_dir.rstrip("/")) or "/")
        manager = cls(
            fs, log_dir, default_config or LogConfig(), topic_configs or {}, rng, had_clean_shutdown=clean
        )
        manager.first_use = first_use
        # Inherited: a process that started uncleanly and stopped cleanly before any controller had
        # seen it kept whatever its start lost; the marker says so, and this start is unclean too.
        inherited = clean and fs.read_file(marker) == UNSEEN_UNCLEAN_START
        manager.unclean_start = (not clean and not first_use) or inherited
        recovery_points = manager._read_checkpoint(
            manager._recovery_points, "every partition is recovered from its first segment"
        )
        log_start_offsets = manager._read_checkpoint(
            manager._log_start_offsets, "every log starts at its first segment's base offset"
        )
        high_watermarks = manager._read_checkpoint(
            manager._high_watermarks,
            "high watermarks restart at the log start (a follower learns its leader's)",
        )
        if recovery_points is None:
            clean = False  # Without recovery points, no log is known to be flushed: recover them all.
        for name in fs.list_dir(log_dir):
            path = posixpath.join(log_dir, name)
            if not fs.is_dir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                _delete_tree(fs, path)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                continue  # Intra-broker moves are not supported; leave the directory alone.
            topic_partition = parse_partition_directory(name)
            if topic_partition is None:
                continue
            manager._logs[topic_partition] = Log.open(
                fs,
                path,
                manager.config_for(topic_partition.topic),
                now_ms=now_ms,
                wall_clock_ms=wall_clock_ms,
                rng=rng,
                log_start_offset=(log_start_offsets or {}).get(topic_partition, 0),
                recovery_point=(recovery_points or {}).get(topic_partition, 0),
                high_watermark=(high_watermarks or {}).get(topic_partition, 0),
                clean_shutdown=clean,
                report=manager.recovery_report,
            )
        # The marker vouches for what was flushed, not for what is still readable: a check that cut
        # flushed records makes this start as unclean as a crash would (docs/controller.md §2).
        if any(log.missing_flushed_offsets is not None for log in manager._logs.values()):
            manager.unclean_start = True
        if fs.exists(marker):
            fs.delete_file(marker)
            fs.fsync_dir(log_dir)
        return manager

    def _read_checkpoint(
        self, checkpoint: OffsetCheckpointFile, consequence: str
    ) -> dict[TopicPartition, int] | None:
        """The file's entries, or None (logged, counted, and the file rewritten on the next checkpoint)
        when it cannot be parsed: the logs are then loaded as if it had no entries."""
        try:
            return checkpoint.read()
        except CorruptCheckpointError as error:
            self.recovery_report.record(
                RecoveryAction(
                    RecoveryKind.CHECKPOINT_REBUILT, "", checkpoint.path, f"{error}; {consequence}"
                )
            )
            return None

    def mark_seen(self) -> None:
        """A controller has seen this process: its start, however unclean, has been handled."""
        self.unclean_start = False

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    # --------------------------------------------------------------------------------- logs

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, topic_partition: TopicPartition) -> Log | None:
        return self._logs.get(topic_partition)

    def get_or_create_log(
        self,
        topic_partition: TopicPartition,
        config: LogConfig | None = None,
        *,
        now_ms: int,
        wall_clock_ms: int = 0,
    ) -> Log:
        """The partition's log, created empty if it does not exist yet. The log dir is not synced here
        (docs/log.md §8): every checkpoint written into it syncs it, so the new directory's entry is
        durable no later than the first checkpoint that names the log. A LeaderAndIsr creating
        thousands of logs would otherwise sync the log dir thousands of times; Kafka never does."""
        log = self._logs.get(topic_partition)
        if log is not None:
            return log
        if config is not None:
            self.topic_configs[topic_partition.topic] = config
        log = Log.open(
            self.fs,
            posixpath.join(self.log_dir, str(topic_partition)),
            self.config_for(topic_partition.topic),
            now_ms=now_ms,
            wall_clock_ms=wall_clock_ms,
            rng=self._rng,
        )
        self._logs[topic_partition] = log
        return log

    def mark_offline(self, reason: str) -> None:
        """An I/O error took the log dir offline (Kafka's OfflineLogDirectoryCount counts it)."""
        if self.offline_reason is None:
            self.offline_reason = reason

    def delete_log(self, topic_partition: TopicPartition) -> None:
        """Close the log, rename its directory ``<name>.<id>-delete`` (durably) and remove it."""
        log = self._logs.pop(topic_partition, None)
        if log is None:
            return
        log.close()
        doomed = posixpath.join(
            self.log_dir, f"{topic_partition}.{self._rng.getrandbits(64):016x}{DELETE_DIR_SUFFIX}"
        )
        self.fs.rename(log.directory, doomed)
        self.fs.fsync_dir(self.log_dir)
        _delete_tree(self.fs, doomed)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def truncate_to(self, topic_partition: TopicPartition, target_offset: int, *, now_ms: int) -> bool:
        """``Log.truncate_to`` then a recovery point checkpoint."""
        log = self._logs[topic_partition]
        truncated = log.truncate_to(target_offset, now_ms=now_ms)
        if truncated:
            self.checkpoint_recovery_points()
        return truncated

    def delete_old_segments(self, *, now_ms: int, wall_clock_ms: int) -> int:
        """Retention over every log (Kafka's ``kafka-log-retention`` task) and expired ``.deleted`` files."""
        deleted = 0
        for log in self._logs.values():
            deleted += log.delete_old_segments(now_ms=now_ms, wall_clock_ms=wall_clock_ms)
            log.delete_expired_files(now_ms)
        return deleted

    # --------------------------------------------------------------------------- checkpoints

    def high_watermark_checkpoint(self) -> CheckpointWrite:
        return self._high_watermarks.prepare({tp: log.high_watermark for tp, log in self._logs.items()})

    def recovery_point_checkpoint(self) -> CheckpointWrite:
        return self._recovery_points.prepare({tp: log.recovery_point for tp, log in self._logs.items()})

    def log_start_offset_checkpoint(self) -> CheckpointWrite:
        return self._log_start_offsets.prepare(
            {
                tp: log.log_start_offset
                for tp, log in self._logs.items()
                if log.log_start_offset > log.segments[0].base_offset
            }
        )

    def checkpoint_high_watermarks(self) -> None:
        self.high_watermark_checkpoint().run()

    def checkpoint_recovery_points(self) -> None:
        self.recovery_point_checkpoint().run()

    def checkpoint_log_start_offsets(self) -> None:
        self.log_start_offset_checkpoint().run()

    def read_high_watermark_checkpoint(self) -> dict[TopicPartition, int]:
        return self._high_watermarks.read()

    # ---------------------------------------------------------------------------- shutdown

    def close(self, *, now_ms: int) -> None:
        """Clean shutdown: flush and close every log, checkpoint, then write the marker."""
        for log in self._logs.values():
            log.close(flush=True, now_ms=now_ms)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        marker = UNSEEN_UNCLEAN_START if self.unclean_start else b""
        self.fs.write_file(posixpath.join(self.log_dir, CLEAN_SHUTDOWN_FILE), marker, fsync=True)
        self.fs.fsync_dir(self.log_dir)
        self._logs.clear()


def _delete_tree(fs: FileSystem, path: str) -> None:
    for name in fs.list_dir(path):
        child = posixpath.join(path, name)
        if fs.is_dir(child):
            _delete_tree(fs, child)
        else:
            fs.delete_file(child)
    fs.delete_dir(path)
