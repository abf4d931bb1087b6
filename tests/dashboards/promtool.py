"""promtool as the tests use it, and where the alert rules and their unit tests live.

``lint_exposition`` runs ``promtool check metrics`` over a ``/metrics`` text and returns the
findings the project has not accepted. One kind is accepted, derived from the catalogue: label
names Kafka's exporters spell in camelCase (``clientId``, ``delayedOperation``), kept so that
Strimzi-style dashboards and queries work unchanged (docs/operations.md §1, §1). For each such
metric present in the exposition the finding must still occur, so the exception cannot go stale.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ops.metric_catalog import CATALOG

__all__ = ["ALERT_RULES", "ALERT_TESTS", "lint_exposition", "run_promtool"]

ALERTS_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "alerts"
ALERT_RULES = ALERTS_DIR / "actorlog-alerts.yaml"
ALERT_TESTS = sorted((ALERTS_DIR / "tests").glob("*.yaml"))

CAMEL_CASE_FINDING = "label names should be written in 'snake_case' not 'camelCase'"
KAFKA_CAMEL_CASE_LABELS = frozenset({"clientId", "delayedOperation"})
# The text format names a counter family with its _total, as the catalogue does.
ACCEPTED_CAMEL_CASE = frozenset(spec.name for spec in CATALOG if KAFKA_CAMEL_CASE_LABELS & set(spec.labels))


def run_promtool(
    promtool: Path, *arguments: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *arguments], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def lint_exposition(promtool: Path, exposition: str) -> list[str]:
    """Unaccepted ``promtool check metrics`` findings, as ``"<metric> <problem>"`` lines."""
    result = run_promtool(promtool, "check", "metrics", stdin=exposition)
    # 0: clean; 3: lint findings. Anything else is promtool failing to read the exposition.
    assert result.returncode in (0, 3), result.stdout + result.stderr
    findings = {line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()}
    accepted = {f"{name} {CAMEL_CASE_FINDING}" for name in ACCEPTED_CAMEL_CASE}
    present = {name for name in ACCEPTED_CAMEL_CASE if f"\n{name}{{" in "\n" + exposition}
    stale = {f"{name} {CAMEL_CASE_FINDING}" for name in present} - findings
    assert not stale, f"accepted findings that no longer occur (remove them): {sorted(stale)}"
    return sorted(findings - accepted)
