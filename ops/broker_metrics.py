"""A broker's Prometheus families, built at scrape time from its actors' statistics snapshots.

Only names from ``ops/metric_catalog.py`` are emitted (a test checks both directions: every emitted
name is catalogued, every catalogued metric is emitted). Series exist from start-up: families with
known label values (propagation outcomes, request types, purgatories, ``clientId="Replica"``) are
pre-initialised, and per-partition and per-topic series appear as soon as the partition is hosted.

Aggregations follow Kafka's definitions: replica-manager gauges count partitions *led* by this
broker; per-partition gauges are 0 on followers; ISR shrink/expand counters sum the partitions'
counters (partitions hosted now; a deleted partition's history leaves with it, as in Kafka).

``metrics.partition.level`` (``PartitionLevel``) bounds the cardinality of the per-partition
families (the catalogue's specs labelled ``partition``): ``partition`` exports them as above;
``topic`` folds each family's series per topic (and its other labels), the partition label dropped,
summed or maxed as ``TOPIC_AGGREGATION`` says; ``none`` leaves those families out (no HELP, no
series). Broker-level totals and the per-topic counters are exported at every level.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from actors.controller.controller import ControllerActor, ControllerStatistics
from actors.server.broker import BrokerActor, BrokerStatistics
from actors.server.fetcher.replica_fetcher import FetcherStatistics, ReplicaFetcherActor
from actors.server.replica.partition import PartitionActor, PartitionStatistics
from actors.server.replica.partition_state import Role
from ops.metric_catalog import CATALOG, TOPIC_AGGREGATION, MetricSpec, MetricType, PartitionLevel, labels_at
from runtime.coordination.base import CoordinatorStatistics
from runtime.histogram import (
    LATENCY_BUCKETS_SECONDS,
    PROPAGATION_BUCKETS_SECONDS,
    Histogram,
    HistogramSnapshot,
)
from runtime.metrics import histogram_family, system_metric_families
from runtime.storage.log_recovery import RecoveryKind
from runtime.system import ActorSystem

__all__ = ["REQUEST_KINDS", "NodeSnapshot", "broker_metric_families", "collect_node"]

EXPECTED_REQUEST_ERRORS: tuple[tuple[str, str], ...] = tuple(
    (kind, error)
    for kind, names in {
        "Produce": (
            "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_LEADER_OR_FOLLOWER",
            "REQUEST_TIMED_OUT", "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        "Fetch": (
            "FENCED_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER", "OFFSET_OUT_OF_RANGE",
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
    }.items()
    for error in names
)  # fmt: skip
REQUEST_KINDS = (
    "Produce", "FetchConsumer", "FetchFollower", "ListOffsets", "OffsetsForLeaderEpoch", "Metadata",
    "LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdown",
)  # fmt: skip
PROPAGATION_OUTCOMES = ("written", "deferred", "forced")
RECOVERY_ACTIONS = tuple(kind.value for kind in RecoveryKind)
FETCHER_CLIENT_ID = "Replica"
_SPECS = {spec.name: spec for spec in CATALOG}
_EMPTY_LATENCY = Histogram(LATENCY_BUCKETS_SECONDS).snapshot()


class NodeSnapshot:
    """Everything read from one node at one scrape."""

    def __init__(
        self,
        broker: BrokerStatistics | None,
        partitions: list[PartitionStatistics],
        fetchers: list[FetcherStatistics],
        coordinator: CoordinatorStatistics | None,
        controller: ControllerStatistics | None = None,
    ) -> None:
        self.broker = broker
        self.partitions = partitions
        self.fetchers = fetchers
        self.coordinator = coordinator
        self.controller = controller


def collect_node(system: ActorSystem, coordinator: CoordinatorStatistics | None) -> NodeSnapshot:
    broker: BrokerStatistics | None = None
    partitions: list[PartitionStatistics] = []
    fetchers: list[FetcherStatistics] = []
    controller: ControllerStatistics | None = None
    for _, actor in system.actor_instances():
        if isinstance(actor, BrokerActor):
            broker = actor.statistics(now_ms=system.clock.now_ms())
        elif isinstance(actor, ControllerActor):
            controller = actor.statistics()
        elif isinstance(actor, PartitionActor):
            partitions.append(actor.statistics())
        elif isinstance(actor, ReplicaFetcherActor):
            fetchers.append(actor.statistics())
    return NodeSnapshot(broker, partitions, fetchers, coordinator, controller)


def _gauge(name: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    spec = _SPECS[name]
    assert spec.type is MetricType.GAUGE, name
    return GaugeMetricFamily(
        spec.family, spec.help, labels=labels if labels is not None else list(spec.labels)
    )


def _counter(name: str) -> CounterMetricFamily:
    spec = _SPECS[name]
    assert spec.type is MetricType.COUNTER, name
    return CounterMetricFamily(spec.family, spec.help, labels=list(spec.labels))


def _histogram(name: str, series: Iterable[tuple[list[str], HistogramSnapshot]]) -> Metric:
    spec: MetricSpec = _SPECS[name]
    return histogram_family(spec.family, spec.help, list(spec.labels), series)


def broker_metric_families(
    system: ActorSystem, snapshot: NodeSnapshot, *, partition_level: PartitionLevel = PartitionLevel.PARTITION
) -> list[Metric]:
    """Every family; the per-partition ones at ``partition_level`` (``metrics.partition.level``)."""
    families: list[Metric] = []
    families += _replica_manager_families(snapshot)
    families += _propagation_families(snapshot.broker)
    families += _partition_families(snapshot.partitions, partition_level)
    families += _fetcher_families(snapshot.fetchers, partition_level)
    families += _replication_quota_families(snapshot.broker)
    families += _topic_families(snapshot.partitions)
    families += _request_families(snapshot)
    families += _zookeeper_families(snapshot)
    families += _controller_families(snapshot.controller)
    families += system_metric_families(system)
    return families


def _replica_manager_families(snapshot: NodeSnapshot) -> list[Metric]:
    led = [p for p in snapshot.partitions if p.role is Role.LEADER]
    shrinks = _counter("kafka_server_replicamanager_isrshrinks_total")
    shrinks.add_metric([], sum(p.isr_shrinks_total for p in snapshot.partitions))
    expands = _counter("kafka_server_replicamanager_isrexpands_total")
    expands.add_metric([], sum(p.isr_expands_total for p in snapshot.partitions))
    failed = _counter("kafka_server_replicamanager_failedisrupdates_total")
    failed.add_metric([], sum(p.failed_isr_updates_total for p in snapshot.partitions))
    gauges = {
        "kafka_server_replicamanager_underreplicatedpartitions": sum(p.under_replicated for p in led),
        "kafka_server_replicamanager_underminisrpartitioncount": sum(p.under_min_isr for p in led),
        "kafka_server_replicamanager_atminisrpartitioncount": sum(p.at_min_isr for p in led),
        "kafka_server_replicamanager_reassigningpartitions": sum(p.reassigning for p in led),
        "kafka_server_replicamanager_partitioncount": len(snapshot.partitions),
        "kafka_server_replicamanager_leadercount": len(led),
        "kafka_log_logmanager_offlinelogdirectorycount": (
            snapshot.broker.offline_log_directories if snapshot.broker is not None else 0
        ),
    }
    recovery = _counter("kafka_log_recovery_actions_total")
    actions = snapshot.broker.log_recovery_actions if snapshot.broker is not None else {}
    for action in RECOVERY_ACTIONS:
        recovery.add_metric([action], actions.get(action, 0))
    truncated = _counter("kafka_log_recovery_truncated_bytes_total")
    truncated.add_metric(
        [], snapshot.broker.log_recovery_truncated_bytes if snapshot.broker is not None else 0
    )
    families: list[Metric] = [shrinks, expands, failed, recovery, truncated]
    for name, value in gauges.items():
        family = _gauge(name)
        family.add_metric([], value)
        families.append(family)
    return families


def _propagation_families(broker: BrokerStatistics | None) -> list[Metric]:
    checks = _counter("kafka_server_isrchangepropagation_checks_total")
    outcomes = broker.propagation_outcomes if broker is not None else {}
    for outcome in PROPAGATION_OUTCOMES:
        checks.add_metric([outcome], outcomes.get(outcome, 0))
    pending = _gauge("kafka_server_isrchangepropagation_pending_changes")
    pending.add_metric([], broker.pending_isr_changes if broker is not None else 0)
    failures = _counter("kafka_server_isrchangepropagation_failures_total")
    failures.add_metric([], broker.propagation_failures_total if broker is not None else 0)
    delay = (
        broker.propagation_delay if broker is not None else Histogram(PROPAGATION_BUCKETS_SECONDS).snapshot()
    )
    return [
        checks,
        pending,
        failures,
        _histogram("kafka_server_isrchangepropagation_delay_seconds", [([], delay)]),
    ]


def _partition_families(partitions: list[PartitionStatistics], level: PartitionLevel) -> list[Metric]:
    values: dict[str, Callable[[PartitionStatistics], float]] = {
        "kafka_cluster_partition_underreplicated": lambda p: float(p.under_replicated),
        "kafka_cluster_partition_underminisr": lambda p: float(p.under_min_isr),
        "kafka_cluster_partition_atminisr": lambda p: float(p.at_min_isr),
        "kafka_cluster_partition_insyncreplicascount": lambda p: len(p.isr) if p.role is Role.LEADER else 0,
        "kafka_cluster_partition_replicascount": lambda p: (
            len(p.assigned_replicas) if p.role is Role.LEADER else 0
        ),
        "kafka_cluster_partition_leaderepoch": lambda p: p.leader_epoch,
        "kafka_log_log_size": lambda p: p.size_bytes,
        "kafka_log_log_logendoffset": lambda p: p.log_end_offset,
        "kafka_log_log_logstartoffset": lambda p: p.log_start_offset,
        "kafka_log_log_highwatermark": lambda p: p.high_watermark,
        "kafka_log_log_numlogsegments": lambda p: p.segment_count,
    }
    families: list[Metric] = []
    for name, value in values.items():
        rows = [((p.tp.topic, str(p.tp.partition)), float(value(p))) for p in partitions]
        families += _per_partition(name, rows, level)
    return families


def _per_partition(
    name: str, rows: Iterable[tuple[Sequence[str], float]], level: PartitionLevel
) -> list[Metric]:
    """A per-partition gauge family at ``level``: one series per partition, folded per topic (the
    partition label dropped; summed or maxed as ``TOPIC_AGGREGATION`` says), or none at all."""
    spec = _SPECS[name]
    labels = labels_at(spec, level)
    if labels is None:
        return []
    family = _gauge(name, list(labels))
    if level is PartitionLevel.PARTITION:
        for label_values, value in rows:
            family.add_metric(list(label_values), value)
        return [family]
    dropped = spec.labels.index("partition")
    folded: dict[tuple[str, ...], list[float]] = {}
    for label_values, value in rows:
        key = tuple(v for i, v in enumerate(label_values) if i != dropped)
        folded.setdefault(key, []).append(value)
    summed = TOPIC_AGGREGATION[name] == "sum"
    for key, numbers in sorted(folded.items()):
        family.add_metric(list(key), sum(numbers) if summed else max(numbers))
    return [family]


def _fetcher_families(fetchers: list[FetcherStatistics], level: PartitionLevel) -> list[Metric]:
    max_lag = _gauge("kafka_server_replicafetchermanager_maxlag")
    max_lag.add_metric([FETCHER_CLIENT_ID], max((f.max_lag for f in fetchers), default=0))
    failed = _gauge("kafka_server_replicafetchermanager_failedpartitionscount")
    failed.add_metric([FETCHER_CLIENT_ID], sum(f.failed_partitions for f in fetchers))
    lags: list[tuple[Sequence[str], float]] = []
    bytes_total = _counter("kafka_server_fetcherstats_bytes_total")
    requests_total = _counter("kafka_server_fetcherstats_requests_total")
    per_source: dict[int, tuple[int, int]] = defaultdict(lambda: (0, 0))
    for fetcher in fetchers:
        lags += [
            ((FETCHER_CLIENT_ID, partition.tp.topic, str(partition.tp.partition)), float(partition.lag))
            for partition in fetcher.partitions
        ]
        fetched, requests = per_source[fetcher.source_broker_id]
        per_source[fetcher.source_broker_id] = (
            fetched + fetcher.bytes_total,
            requests + fetcher.requests_total,
        )
    for source, (fetched, requests) in sorted(per_source.items()):
        bytes_total.add_metric([FETCHER_CLIENT_ID, str(source)], fetched)
        requests_total.add_metric([FETCHER_CLIENT_ID, str(source)], requests)
    consumer_lag = _per_partition("kafka_server_fetcherlagmetrics_consumerlag", lags, level)
    return [max_lag, failed, *consumer_lag, bytes_total, requests_total]


def _replication_quota_families(broker: BrokerStatistics | None) -> list[Metric]:
    leader_rate = _gauge("kafka_server_leaderreplication_byte_rate")
    leader_rate.add_metric([], broker.leader_replication_byte_rate if broker is not None else 0.0)
    follower_rate = _gauge("kafka_server_followerreplication_byte_rate")
    follower_rate.add_metric([], broker.follower_replication_byte_rate if broker is not None else 0.0)
    leader_time = _counter("kafka_server_leaderreplication_throttle_time_seconds_total")
    leader_time.add_metric(
        [], broker.leader_replication_throttle_time_ms / 1000 if broker is not None else 0.0
    )
    follower_time = _counter("kafka_server_followerreplication_throttle_time_seconds_total")
    follower_time.add_metric(
        [], broker.follower_replication_throttle_time_ms / 1000 if broker is not None else 0.0
    )
    return [leader_rate, follower_rate, leader_time, follower_time]


def _topic_families(partitions: list[PartitionStatistics]) -> list[Metric]:
    counters: dict[str, Callable[[PartitionStatistics], int]] = {
        "kafka_server_brokertopicmetrics_bytesin_total": lambda p: p.bytes_in_total,
        "kafka_server_brokertopicmetrics_bytesout_total": lambda p: p.bytes_out_total,
        "kafka_server_brokertopicmetrics_messagesin_total": lambda p: p.messages_in_total,
        "kafka_server_brokertopicmetrics_replicationbytesin_total": lambda p: p.replication_bytes_in_total,
        "kafka_server_brokertopicmetrics_replicationbytesout_total": lambda p: p.replication_bytes_out_total,
        "kafka_server_brokertopicmetrics_reassignmentbytesin_total": lambda p: p.reassignment_bytes_in_total,
        "kafka_server_brokertopicmetrics_reassignmentbytesout_total": lambda p: (
            p.reassignment_bytes_out_total
        ),
        "kafka_server_brokertopicmetrics_totalproducerequests_total": lambda p: p.produce_requests_total,
        "kafka_server_brokertopicmetrics_failedproducerequests_total": lambda p: (
            p.failed_produce_requests_total
        ),
        "kafka_server_brokertopicmetrics_totalfetchrequests_total": lambda p: p.fetch_requests_total,
        "kafka_server_brokertopicmetrics_failedfetchrequests_total": lambda p: p.failed_fetch_requests_total,
    }
    topics = sorted({p.tp.topic for p in partitions})
    families: list[Metric] = []
    for name, value in counters.items():
        family = _counter(name)
        for topic in topics:
            family.add_metric([topic], sum(value(p) for p in partitions if p.tp.topic == topic))
        families.append(family)
    return families


def _request_families(snapshot: NodeSnapshot) -> list[Metric]:
    broker = snapshot.broker
    durations = broker.request_durations if broker is not None else {}
    totals = broker.requests_total if broker is not None else {}
    errors = broker.request_errors_total if broker is not None else {}
    duration = _histogram(
        "kafka_network_request_duration_seconds",
        [([kind], durations.get(kind, _EMPTY_LATENCY)) for kind in REQUEST_KINDS],
    )
    requests = _counter("kafka_network_requestmetrics_requests_total")
    for kind in REQUEST_KINDS:
        requests.add_metric([kind], totals.get(kind, 0))
    error_family = _counter("kafka_network_requestmetrics_errors_total")
    # The errors a healthy cluster sees during faults exist from start-up at 0, so rate() counts
    # the first one too (a series born at 1 has no increase to show).
    for (kind, error), count in sorted({**dict.fromkeys(EXPECTED_REQUEST_ERRORS, 0), **errors}.items()):
        error_family.add_metric([kind, error], count)
    purgatory = _gauge("kafka_server_delayedoperationpurgatory_purgatorysize")
    purgatory.add_metric(["Produce"], sum(p.delayed_produces for p in snapshot.partitions))
    purgatory.add_metric(["Fetch"], broker.parked_fetches if broker is not None else 0)
    expires = _counter("kafka_server_delayedproducemetrics_expires_total")
    expires.add_metric([], sum(p.delayed_produce_expires_total for p in snapshot.partitions))
    state = _gauge("kafka_server_kafkaserver_brokerstate")
    state.add_metric([], broker.broker_state if broker is not None else 0)
    return [duration, requests, error_family, purgatory, expires, state]


def _zookeeper_families(snapshot: NodeSnapshot) -> list[Metric]:
    coordinator = snapshot.coordinator
    values = {
        "kafka_server_sessionexpirelistener_zookeeperexpires_total": coordinator.expires_total
        if coordinator
        else 0,
        "kafka_server_sessionexpirelistener_zookeeperdisconnects_total": coordinator.disconnects_total
        if coordinator
        else 0,
        "kafka_server_sessionexpirelistener_zookeepersyncconnects_total": coordinator.sync_connects_total
        if coordinator
        else 0,
    }
    families: list[Metric] = []
    for name, value in values.items():
        family = _counter(name)
        family.add_metric([], value)
        families.append(family)
    # The coordinator keeps a count and a sum of latencies (no buckets): two counters whose rates
    # give the mean latency, like a summary without quantiles.
    requests = _counter("kafka_server_zookeeper_requests_total")
    requests.add_metric([], coordinator.requests_total if coordinator else 0)
    seconds = _counter("kafka_server_zookeeper_request_seconds_total")
    seconds.add_metric([], coordinator.request_latency_ms_sum / 1000 if coordinator else 0.0)
    return [*families, requests, seconds]


def _controller_families(controller: ControllerStatistics | None) -> list[Metric]:
    """The controller's gauges are Kafka's: a broker whose controller is not active reports 0."""
    active = controller is not None and controller.active
    live = controller if active else None
    gauges = {
        "kafka_controller_kafkacontroller_activecontrollercount": 1 if active else 0,
        "kafka_controller_kafkacontroller_offlinepartitionscount": live.offline_partitions if live else 0,
        "kafka_controller_kafkacontroller_preferredreplicaimbalancecount": live.preferred_replica_imbalance
        if live
        else 0,
        "kafka_controller_kafkacontroller_rackconstraintviolatingpartitioncount": (
            live.rack_constraint_violating_partitions if live else 0
        ),
        "kafka_controller_kafkacontroller_globaltopiccount": live.global_topic_count if live else 0,
        "kafka_controller_kafkacontroller_globalpartitioncount": live.global_partition_count if live else 0,
        "kafka_controller_kafkacontroller_activebrokercount": live.active_broker_count if live else 0,
        "kafka_controller_kafkacontroller_controllerepoch": live.controller_epoch if live else 0,
        "kafka_controller_controllereventmanager_eventqueuesize": controller.event_queue_size
        if controller
        else 0,
    }
    families: list[Metric] = []
    for name, value in gauges.items():
        family = _gauge(name)
        family.add_metric([], value)
        families.append(family)
    unclean = _counter("kafka_controller_controllerstats_uncleanleaderelections_total")
    unclean.add_metric([], controller.unclean_leader_elections_total if controller else 0)
    families.append(unclean)
    families.append(
        _histogram(
            "kafka_controller_controllerstats_leaderelection_duration_seconds",
            [([], controller.leader_election_seconds if controller else _EMPTY_LATENCY)],
        )
    )
    families.append(
        _histogram(
            "kafka_controller_controllereventmanager_eventqueue_time_seconds",
            [([], controller.event_queue_seconds if controller else _EMPTY_LATENCY)],
        )
    )
    processing = controller.event_processing_seconds if controller else {}
    families.append(
        _histogram(
            "kafka_controller_controllereventmanager_event_processing_seconds",
            [([kind], snapshot) for kind, snapshot in sorted(processing.items())],
        )
    )
    return families
