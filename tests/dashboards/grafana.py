"""The checked-in Grafana dashboards as the tests see them: panels (rows included), their PromQL
targets, template variables, and Grafana's variable substitution.

Substitution follows Grafana's rules for the Prometheus data source: ``$var``, ``${var}`` and
``[[var]]``; a multi-value variable becomes ``(a|b|c)``, its "All" value the variable's
``allValue`` when set; ``$__rate_interval`` is max(4 × scrape interval, ``$__interval`` + scrape
interval); ``$__interval`` is the step; ``$__range`` the dashboard's time range.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DASHBOARD_DIR",
    "BuiltIns",
    "Dashboard",
    "Target",
    "format_value",
    "load_dashboards",
    "substitute",
]

DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "grafana"
BUILT_IN_VARIABLES = frozenset({"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s"})
_VARIABLE = re.compile(r"\$\{(?P<braced>\w+)(?::\w+)?\}|\$(?P<plain>\w+)|\[\[(?P<old>\w+)\]\]")


@dataclass(frozen=True, slots=True)
class Target:
    dashboard: str
    panel_title: str
    panel_type: str
    ref_id: str
    expr: str

    @property
    def key(self) -> str:
        return f"{self.dashboard} / {self.panel_title} / {self.ref_id}"


@dataclass(frozen=True, slots=True)
class Dashboard:
    path: Path
    model: dict[str, Any]

    @property
    def title(self) -> str:
        return str(self.model["title"])

    def panels(self) -> Iterator[dict[str, Any]]:
        """Every panel, rows included, with a collapsed row's panels after it."""
        for panel in self.model["panels"]:
            yield panel
            yield from panel.get("panels", [])

    def targets(self) -> Iterator[Target]:
        for panel in self.panels():
            for target in panel.get("targets", []):
                yield Target(self.title, panel["title"], panel["type"], target["refId"], target["expr"])

    def variables(self) -> list[dict[str, Any]]:
        variables: list[dict[str, Any]] = self.model["templating"]["list"]
        return variables

    def query_variables(self) -> list[dict[str, Any]]:
        return [v for v in self.variables() if v["type"] == "query"]


def load_dashboards(directory: Path = DASHBOARD_DIR) -> list[Dashboard]:
    return [Dashboard(path, json.loads(path.read_text())) for path in sorted(directory.glob("*.json"))]


def variable_query(variable: Mapping[str, Any]) -> str:
    """A query variable's PromQL (Grafana stores it as a string or as ``{"query": ...}``)."""
    query = variable["query"]
    return str(query["query"] if isinstance(query, dict) else query)


@dataclass(frozen=True, slots=True)
class BuiltIns:
    scrape_interval_s: float
    step_s: float
    range_s: float

    def values(self) -> dict[str, str]:
        rate_interval_s = max(4 * self.scrape_interval_s, self.step_s + self.scrape_interval_s)
        return {
            "__rate_interval": f"{round(rate_interval_s * 1000)}ms",
            "__interval": f"{round(self.step_s * 1000)}ms",
            "__interval_ms": str(round(self.step_s * 1000)),
            "__range": f"{round(self.range_s)}s",
            "__range_s": str(round(self.range_s)),
        }


def format_value(variable: Mapping[str, Any], selected: Sequence[str], *, all_selected: bool) -> str:
    """How Grafana writes a variable's selection into PromQL."""
    if all_selected and variable.get("allValue"):
        return str(variable["allValue"])
    if variable.get("multi") or all_selected:
        escaped = [re.sub(r"([\\.+*?^$()\[\]{}|])", r"\\\\\1", value) for value in selected]
        return "(" + "|".join(escaped) + ")" if len(escaped) != 1 else escaped[0]
    (value,) = selected
    return value


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace every variable reference; an undefined one is an error, never left in the query."""

    def replace(match: re.Match[str]) -> str:
        name = match["braced"] or match["plain"] or match["old"]
        if name not in values:
            raise KeyError(f"undefined variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


def referenced_variables(text: str) -> set[str]:
    return {m["braced"] or m["plain"] or m["old"] for m in _VARIABLE.finditer(text)}
