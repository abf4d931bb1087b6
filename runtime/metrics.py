"""Metrics plumbing: one CollectorRegistry per node, filled from snapshots at scrape time.

Nothing registers in prometheus_client's global ``REGISTRY``. A node owns a ``NodeMetrics``; the
composition root adds collectors to it, each a function returning metric families built from the
actors' ``statistics()`` snapshots. Because values are read when Prometheus scrapes, a stopped
actor's series simply vanish: there is no unregister code to forget.

The runtime contributes its own families (mailbox depth, messages processed, failures, restarts,
dead letters) from ``ActorSystem.statistics()``. Counters are exposed without ``_created`` series.

``GET /metrics`` uses prometheus_client's aiohttp handler, which negotiates the text or
OpenMetrics format from the Accept header and always sets a proper Content-Type (Prometheus 3
rejects a missing one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from runtime.histogram import HistogramSnapshot
from runtime.system import ActorSystem

__all__ = ["NodeMetrics", "histogram_family_samples", "metrics_route", "system_metric_families"]

FamiliesFunction = Callable[[], Iterable[Metric]]


class _FunctionCollector(Collector):
    def __init__(self, families: FamiliesFunction) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families()

    def describe(self) -> Iterator[Metric]:
        # No up-front description: families are only known at scrape time.
        return iter(())


class NodeMetrics:
    """The metrics registry of one node."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)

    def add_collector(self, families: FamiliesFunction) -> None:
        self.registry.register(_FunctionCollector(families))

    def route(self, path: str = "/metrics") -> web.RouteDef:
        return metrics_route(self.registry, path)


def metrics_route(registry: CollectorRegistry, path: str = "/metrics") -> web.RouteDef:
    return web.get(path, make_aiohttp_handler(registry))


def system_metric_families(system: ActorSystem) -> list[Metric]:
    """The runtime's own families for one actor system."""
    statistics = system.statistics()
    depth = GaugeMetricFamily(
        "actorlog_actor_mailbox_depth", "Messages waiting in an actor's mailbox.", labels=["actor"]
    )
    processed = CounterMetricFamily(
        "actorlog_actor_messages_processed", "Messages handled by an actor.", labels=["actor"]
    )
    failures = CounterMetricFamily(
        "actorlog_actor_failures", "Handler exceptions seen by an actor's supervisor.", labels=["actor"]
    )
    restarts = CounterMetricFamily(
        "actorlog_actor_restarts", "Restarts of an actor by its supervisor.", labels=["actor"]
    )
    for cell in statistics.actors:
        depth.add_metric([cell.name], cell.mailbox_depth)
        processed.add_metric([cell.name], cell.processed_total)
        failures.add_metric([cell.name], cell.failures_total)
        restarts.add_metric([cell.name], cell.restarts_total)
    dead_letters = CounterMetricFamily(
        "actorlog_dead_letters", "Messages addressed to actors that did not exist or had stopped."
    )
    dead_letters.add_metric([], statistics.dead_letters_total)
    actors = GaugeMetricFamily("actorlog_actors", "Live actors on this node.")
    actors.add_metric([], len(statistics.actors))
    return [depth, processed, failures, restarts, dead_letters, actors]


def histogram_family_samples(
    snapshot: HistogramSnapshot,
) -> tuple[list[tuple[str, float]], float]:
    """Buckets in prometheus_client's ``HistogramMetricFamily.add_metric`` form, and the sum."""
    buckets = [
        ("+Inf" if bound == float("inf") else repr(float(bound)), float(count))
        for bound, count in snapshot.buckets
    ]
    return buckets, snapshot.sum


def histogram_family(
    name: str, documentation: str, labels: list[str], series: Iterable[tuple[list[str], HistogramSnapshot]]
) -> HistogramMetricFamily:
    """A histogram family from labelled snapshots."""
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for label_values, snapshot in series:
        buckets, total = histogram_family_samples(snapshot)
        family.add_metric(label_values, buckets, total)
    return family
