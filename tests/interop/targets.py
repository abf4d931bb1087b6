"""What the interop tests know of a running cluster: where it is and how to log in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Target:
    """A running cluster as Kafka's tools see it."""

    name: str
    bootstrap_servers: str
    client_properties: Path
    brokers: int
    logs: tuple[Path, ...]

    @property
    def admin_args(self) -> list[str]:
        """What every admin tool takes: where, and how to authenticate."""
        return ["--bootstrap-server", self.bootstrap_servers, "--command-config", str(self.client_properties)]

    def client_args(self, config_option: str) -> list[str]:
        """The console producer's and consumer's: ``--producer.config`` / ``--consumer.config``."""
        return ["--bootstrap-server", self.bootstrap_servers, config_option, str(self.client_properties)]

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    def where(self) -> str:
        """Where to look when a tool fails: an assertion message's last line."""
        return f"{self.name} cluster; broker logs: {', '.join(str(log) for log in self.logs)}"
