"""Supervision: what happens when a handler raises.

Each actor is spawned with a ``SupervisorStrategy``:

* ``RESTART`` (default): a fresh instance is built by the actor's factory and started after a
  back-off that doubles from ``backoff_min_ms`` up to ``backoff_max_ms``. The ref and the mailbox
  survive, so messages sent meanwhile are handled by the new incarnation; timers of the old one are
  cancelled. If more than ``max_restarts`` failures happen within ``within_ms``, the failure is
  escalated instead (a crash loop is not hidden).
* ``STOP``: the actor stops; later messages to it are dead letters.
* ``ESCALATE``: the failure becomes its parent's failure, handled by the parent's strategy. A
  top-level actor that escalates fails the node: the system's task group ends with the error, which
  is what "exceptions always propagate" means for a node.

The decision logic is pure (``RestartTracker.on_failure``) so it can be tested on numbers alone.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Directive", "RestartTracker", "SupervisorStrategy"]


class Directive(enum.Enum):
    RESTART = "restart"
    STOP = "stop"
    ESCALATE = "escalate"


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorStrategy:
    directive: Directive = Directive.RESTART
    max_restarts: int = 10
    within_ms: int = 60_000
    backoff_min_ms: int = 100
    backoff_max_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.within_ms <= 0:
            raise ValueError("max_restarts must be >= 0 and within_ms > 0")
        if not 0 <= self.backoff_min_ms <= self.backoff_max_ms:
            raise ValueError("need 0 <= backoff_min_ms <= backoff_max_ms")

    @classmethod
    def restart(cls, **kwargs: int) -> SupervisorStrategy:
        return cls(directive=Directive.RESTART, **kwargs)

    @classmethod
    def stop(cls) -> SupervisorStrategy:
        return cls(directive=Directive.STOP)

    @classmethod
    def escalate(cls) -> SupervisorStrategy:
        return cls(directive=Directive.ESCALATE)


@dataclass(slots=True)
class RestartTracker:
    """Counts failures in a sliding window and computes the back-off of the next restart."""

    strategy: SupervisorStrategy
    failures_ms: deque[int] = field(default_factory=deque)
    consecutive: int = 0

    def on_failure(self, now_ms: int) -> tuple[Directive, int]:
        """The directive for a failure at ``now_ms`` and, for a restart, its delay in ms."""
        if self.strategy.directive is not Directive.RESTART:
            return self.strategy.directive, 0
        self.failures_ms.append(now_ms)
        while self.failures_ms and now_ms - self.failures_ms[0] > self.strategy.within_ms:
            self.failures_ms.popleft()
        if len(self.failures_ms) > self.strategy.max_restarts:
            return Directive.ESCALATE, 0
        delay = min(
            self.strategy.backoff_max_ms, self.strategy.backoff_min_ms * (2 ** min(self.consecutive, 30))
        )
        self.consecutive += 1
        return Directive.RESTART, delay

    def on_message_processed(self) -> None:
        """A message handled without failure resets the back-off growth."""
        self.consecutive = 0
