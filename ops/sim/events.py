"""The simulation's event log: one line per thing that happened, readable and hashable.

Each line is ``<virtual ms> <what>``: the actions of the plan as they were applied (or skipped,
and why), the cluster's observed changes (controller, partition leader, epoch and ISR as
ZooKeeper holds them, broker lifecycles) and any invariant violation. The hash of all lines is
how a replay proves it did exactly what the first run did.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = ["EventLog"]


@dataclass
class EventLog:
    lines: list[str] = field(default_factory=list)
    echo: bool = False

    def add(self, now_ms: int, text: str) -> None:
        line = f"{now_ms:>9} {text}"
        self.lines.append(line)
        if self.echo:
            print(line, flush=True)

    def digest(self) -> str:
        hasher = hashlib.sha256()
        for line in self.lines:
            hasher.update(line.encode())
            hasher.update(b"\n")
        return hasher.hexdigest()

    def tail(self, count: int = 60) -> str:
        return "\n".join(self.lines[-count:])

    def text(self) -> str:
        return "\n".join(self.lines)
