"""Reading the output of Apache Kafka's admin tools, as the interop tests check it.

Running the tools (``KafkaDistribution``, ``run_tool``, the main classes) is ``ops.local.kafka_tools``,
shared with ``make bench-vs-kafka``; ProducerPerformance's final line is read by
``ops.bench.perf_lines``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ------------------------------------------------------------------------------ reading output


@dataclass(frozen=True, slots=True)
class DescribedPartition:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedTopic:
    """TopicCommand --describe: the topic line's columns and one entry per partition line."""

    topic: str
    columns: dict[str, str]
    partitions: tuple[DescribedPartition, ...]


_FIELD = re.compile(r"(\w+):\s*(\S*)")


def parse_describe(stdout: str) -> list[DescribedTopic]:
    """TopicCommand --describe's output, as Kafka prints it: per topic, a line of tab-separated
    ``Name: value`` columns (``Topic``, ``TopicId``, ``PartitionCount``, ``ReplicationFactor``,
    ``Configs``), then one indented line per partition (``Topic``, ``Partition``, ``Leader``,
    ``Replicas``, ``Isr``...). A line that fits neither raises ``ValueError``."""
    topics: list[DescribedTopic] = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        columns = dict(_FIELD.findall(line))
        if "Partition" in columns and line[:1].isspace():
            if not topics or topics[-1].topic != columns.get("Topic"):
                raise ValueError(f"a partition line outside its topic: {line!r}")
            partition = DescribedPartition(
                partition=int(columns["Partition"]),
                leader=int(columns["Leader"]),
                replicas=_ids(columns["Replicas"]),
                isr=_ids(columns["Isr"]),
            )
            last = topics[-1]
            topics[-1] = DescribedTopic(last.topic, last.columns, (*last.partitions, partition))
        elif "PartitionCount" in columns:
            # Configs' value may be empty or hold commas: the rest of the line after "Configs:".
            columns["Configs"] = line.partition("Configs:")[2].strip()
            topics.append(DescribedTopic(columns["Topic"], columns, ()))
        else:
            raise ValueError(f"not a TopicCommand --describe line: {line!r}")
    return topics


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def parse_offsets(stdout: str) -> dict[tuple[str, int], int]:
    """GetOffsetShell's ``topic:partition:offset`` lines."""
    offsets: dict[tuple[str, int], int] = {}
    for line in stdout.splitlines():
        topic, partition, offset = line.rsplit(":", 2)
        offsets[topic, int(partition)] = int(offset)
    return offsets


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """One row of ConsumerGroupCommand --describe --group G."""

    topic: str
    partition: int
    current_offset: int | None  # "-": nothing committed
    log_end_offset: int
    lag: int | None


def parse_group_describe(stdout: str) -> list[GroupOffsets]:
    """The rows under ConsumerGroupCommand's header (``GROUP TOPIC PARTITION CURRENT-OFFSET
    LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``); the lines before it (such as "Consumer group
    'G' has no active members.") are skipped."""
    rows: list[GroupOffsets] = []
    header: list[str] | None = None
    for line in stdout.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "GROUP":
            header = fields
            continue
        if header is None:
            continue
        row = dict(zip(header, fields, strict=False))
        rows.append(
            GroupOffsets(
                topic=row["TOPIC"],
                partition=int(row["PARTITION"]),
                current_offset=None if row["CURRENT-OFFSET"] == "-" else int(row["CURRENT-OFFSET"]),
                log_end_offset=int(row["LOG-END-OFFSET"]),
                lag=None if row["LAG"] == "-" else int(row["LAG"]),
            )
        )
    return rows
