"""Which catalogued metrics the rollup reads, and what it makes of each.

Every name comes from ``ops/metric_catalog.py`` through ``spec(name)``, which raises ``KeyError`` at
import time if the catalogue ever drops one, so the rollup can never read a name no broker exports.
This module is plain Python (no pyspark) so the report and the tests can use it too.
"""

from __future__ import annotations

from typing import Final

from ops.metric_catalog import CATALOG, MetricSpec, MetricType, spec

__all__ = [
    "BYTES_IN",
    "BYTES_OUT",
    "COUNTERS",
    "FAILED_ISR_UPDATES",
    "HISTOGRAMS",
    "ISR_EXPANDS",
    "ISR_SHRINKS",
    "LEADER_ELECTION",
    "OFFLINE_PARTITIONS",
    "PARTITION_GAUGES",
    "PARTITION_ISR_COUNT",
    "PARTITION_UNDER_MIN_ISR",
    "PARTITION_UNDER_REPLICATED",
    "PENDING_ISR_CHANGES",
    "PROPAGATION_CHECKS",
    "PROPAGATION_DELAY",
    "PROPAGATION_OUTCOMES",
    "REPLICATION_BYTES_IN",
    "REPLICATION_BYTES_OUT",
    "REQUEST_DURATION",
    "SCALAR_GAUGES",
    "UNDER_MIN_ISR_PARTITIONS",
    "UNDER_REPLICATED_PARTITIONS",
    "rollup_sample_names",
]

# --- ISR churn (ReplicaManager meters, exposed as counters) ----------------------------------
ISR_SHRINKS: Final = spec("kafka_server_replicamanager_isrshrinks_total")
ISR_EXPANDS: Final = spec("kafka_server_replicamanager_isrexpands_total")
FAILED_ISR_UPDATES: Final = spec("kafka_server_replicamanager_failedisrupdates_total")

# --- ISR change propagation (the 5 s black-out / 60 s bound rule, docs/propagation.md §1) -------
PROPAGATION_CHECKS: Final = spec("kafka_server_isrchangepropagation_checks_total")
# The ``outcome`` label values: written after 5 s of quiet, deferred by the black-out, forced by the
# 60 s bound (a forced check also writes).
PROPAGATION_OUTCOMES: Final = ("written", "deferred", "forced")
PENDING_ISR_CHANGES: Final = spec("kafka_server_isrchangepropagation_pending_changes")
PROPAGATION_DELAY: Final = spec("kafka_server_isrchangepropagation_delay_seconds")

# --- Partition health -------------------------------------------------------------------------
UNDER_REPLICATED_PARTITIONS: Final = spec("kafka_server_replicamanager_underreplicatedpartitions")
UNDER_MIN_ISR_PARTITIONS: Final = spec("kafka_server_replicamanager_underminisrpartitioncount")
PARTITION_UNDER_REPLICATED: Final = spec("kafka_cluster_partition_underreplicated")
PARTITION_UNDER_MIN_ISR: Final = spec("kafka_cluster_partition_underminisr")
# ISR size if leader, else 0: only positive values describe the partition's ISR.
PARTITION_ISR_COUNT: Final = spec("kafka_cluster_partition_insyncreplicascount")
OFFLINE_PARTITIONS: Final = spec("kafka_controller_kafkacontroller_offlinepartitionscount")

# --- Controller and requests ----------------------------------------------------------------------
# One observation per election batch: the histogram's _count increase is the number of elections.
LEADER_ELECTION: Final = spec("kafka_controller_controllerstats_leaderelection_duration_seconds")
REQUEST_DURATION: Final = spec("kafka_network_request_duration_seconds")

# --- Traffic ---------------------------------------------------------------------------------------
BYTES_IN: Final = spec("kafka_server_brokertopicmetrics_bytesin_total")
BYTES_OUT: Final = spec("kafka_server_brokertopicmetrics_bytesout_total")
REPLICATION_BYTES_IN: Final = spec("kafka_server_brokertopicmetrics_replicationbytesin_total")
REPLICATION_BYTES_OUT: Final = spec("kafka_server_brokertopicmetrics_replicationbytesout_total")

# --- Groups the transforms work on -------------------------------------------------------------
COUNTERS: Final[tuple[MetricSpec, ...]] = tuple(s for s in CATALOG if s.type is MetricType.COUNTER)
HISTOGRAMS: Final[tuple[MetricSpec, ...]] = (PROPAGATION_DELAY, LEADER_ELECTION, REQUEST_DURATION)
PARTITION_GAUGES: Final[tuple[MetricSpec, ...]] = (
    PARTITION_UNDER_REPLICATED,
    PARTITION_UNDER_MIN_ISR,
)
# Gauges with one value per broker (or per small label set such as a fetcher's clientId): rolled up
# as time-weighted mean, min, max and last value per window. Per-partition gauges are not: there are
# thousands of them, and the rollup reduces them to seconds-under-X and ISR changes instead.
SCALAR_GAUGES: Final[tuple[MetricSpec, ...]] = tuple(
    s for s in CATALOG if s.type is MetricType.GAUGE and "partition" not in s.labels
)


def rollup_sample_names() -> frozenset[str]:
    """Every exposed sample name the rollup reads (the snapshot read filters on these)."""
    specs = (*COUNTERS, *HISTOGRAMS, *PARTITION_GAUGES, PARTITION_ISR_COUNT, *SCALAR_GAUGES)
    return frozenset(name for s in specs for name in s.sample_names)
