"""``TopicPartition``: the name of one partition, the project's most basic type.

It lives at the bottom of the tree because the storage engine names a partition's directory
(``<topic>-<partition>``) and its checkpoint entries with it, and ``runtime/`` may not import
``actors/``. Every layer above imports it from here (``actors.common.types`` re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
