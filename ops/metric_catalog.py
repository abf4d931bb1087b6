"""The catalogue of every metric a broker exports: name, type, labels, help.

One source of truth for the collectors (``ops/broker_metrics.py`` emits only these), the Grafana
dashboards and Prometheus rules (tests check every expression uses catalogued names), and the
PySpark rollup (which reads snapshots of these series).

Naming (docs/operations.md §1): Kafka's replication and controller metrics use the names the Strimzi /
jmx_exporter configuration produces (``kafka_server_replicamanager_isrshrinks_total``...), with the
same labels, so existing dashboards and alerts work. New metrics, and every latency, follow
Prometheus conventions with base units (``_seconds`` histograms). Counters are listed with their
exposed ``_total`` name. Every series exists from start-up (labelled ones for their known label
values), so panels and alerts never see "no data" for a metric that simply has not moved yet.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "CATALOG",
    "TOPIC_AGGREGATION",
    "MetricSpec",
    "MetricType",
    "PartitionLevel",
    "labels_at",
    "metric_names",
]


class MetricType(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        """The family name prometheus_client is given (counters without ``_total``)."""
        if self.type is MetricType.COUNTER:
            return self.name.removesuffix("_total")
        return self.name

    @property
    def sample_names(self) -> tuple[str, ...]:
        if self.type is MetricType.HISTOGRAM:
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


C, G, H = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM
TP = ("topic", "partition")

CATALOG: tuple[MetricSpec, ...] = (
    # --- ReplicaManager (kafka.server:type=ReplicaManager) -------------------------------------
    MetricSpec("kafka_server_replicamanager_isrshrinks_total", C,
               "Successful leader-initiated ISR shrinks (IsrShrinksPerSec)."),
    MetricSpec("kafka_server_replicamanager_isrexpands_total", C,
               "Successful leader-initiated ISR expansions (IsrExpandsPerSec)."),
    MetricSpec("kafka_server_replicamanager_failedisrupdates_total", C,
               "ISR updates refused by ZooKeeper's conditional write (FailedIsrUpdatesPerSec)."),
    MetricSpec("kafka_server_replicamanager_underreplicatedpartitions", G,
               "Partitions led by this broker whose ISR is smaller than their replica set."),
    MetricSpec("kafka_server_replicamanager_underminisrpartitioncount", G,
               "Partitions led by this broker whose ISR is below min.insync.replicas."),
    MetricSpec("kafka_server_replicamanager_atminisrpartitioncount", G,
               "Partitions led by this broker whose ISR equals min.insync.replicas."),
    MetricSpec("kafka_server_replicamanager_reassigningpartitions", G,
               "Partitions led by this broker that are being reassigned (ReassigningPartitions, KIP-455)."),
    MetricSpec("kafka_server_replicamanager_partitioncount", G, "Partitions hosted by this broker."),
    MetricSpec("kafka_server_replicamanager_leadercount", G, "Partitions led by this broker."),
    MetricSpec("kafka_log_logmanager_offlinelogdirectorycount", G,
               "Log directories taken offline by an I/O error (the broker halts after it)."),
    # --- Log loading at start-up (runtime/storage/log_recovery.py; beyond Kafka) ---------------
    MetricSpec("kafka_log_recovery_actions_total", C,
               "Repairs made while loading the log dir at start-up, by action (segment_recovered, "
               "bytes_truncated, file_moved_aside, checkpoint_rebuilt, epoch_entries_dropped, "
               "records_missing); each is also logged at WARN.", ("action",)),
    MetricSpec("kafka_log_recovery_truncated_bytes_total", C,
               "Bytes cut off torn or invalid segment tails while loading the log dir at start-up."),
    # --- ISR change propagation (the 5 s / 60 s rule, docs/propagation.md §1) ---------------
    MetricSpec("kafka_server_isrchangepropagation_checks_total", C,
               "isr-change-propagation checks with pending changes, by outcome: written (after 5 s "
               "of quiet), forced (by the 60 s bound while changes kept coming; also writes), "
               "deferred (black-out: nothing written).", ("outcome",)),
    MetricSpec("kafka_server_isrchangepropagation_failures_total", C,
               "isr_change_notification writes that failed (ZooKeeper unavailable): the changes stay "
               "pending and are written at a later check."),
    MetricSpec("kafka_server_isrchangepropagation_pending_changes", G,
               "Partitions whose ISR change is recorded but not yet propagated (isrChangeSet size)."),
    MetricSpec("kafka_server_isrchangepropagation_delay_seconds", H,
               "Time from the first recorded ISR change to its propagation to ZooKeeper."),
    # --- Partitions (kafka.cluster:type=Partition), reported on the leader --------------------
    MetricSpec("kafka_cluster_partition_underreplicated", G, "1 if this led partition is under-replicated.", TP),
    MetricSpec("kafka_cluster_partition_underminisr", G, "1 if this led partition's ISR is below min ISR.", TP),
    MetricSpec("kafka_cluster_partition_atminisr", G, "1 if this led partition's ISR equals min ISR.", TP),
    MetricSpec("kafka_cluster_partition_insyncreplicascount", G, "ISR size if leader, else 0.", TP),
    MetricSpec("kafka_cluster_partition_replicascount", G, "Replica count if leader, else 0.", TP),
    MetricSpec("kafka_cluster_partition_leaderepoch", G, "Current leader epoch of the partition.", TP),
    # --- Logs (kafka.log:type=Log) --------------------------------------------------------------
    MetricSpec("kafka_log_log_size", G, "Bytes in the partition's log segments.", TP),
    MetricSpec("kafka_log_log_logendoffset", G, "Log end offset of the partition replica.", TP),
    MetricSpec("kafka_log_log_logstartoffset", G, "Log start offset of the partition replica.", TP),
    MetricSpec("kafka_log_log_highwatermark", G, "High watermark of the partition replica.", TP),
    MetricSpec("kafka_log_log_numlogsegments", G, "Number of segments of the partition replica.", TP),
    # --- Replica fetchers ---------------------------------------------------------------------
    MetricSpec("kafka_server_replicafetchermanager_maxlag", G,
               "Largest lag (leader HW − next fetch offset) over all partitions this broker follows.",
               ("clientId",)),
    MetricSpec("kafka_server_replicafetchermanager_failedpartitionscount", G,
               "Followed partitions removed from their fetcher after an error (e.g. fenced epoch).",
               ("clientId",)),
    MetricSpec("kafka_server_fetcherlagmetrics_consumerlag", G,
               "Per followed partition: leader HW from the last response − next fetch offset.",
               ("clientId", "topic", "partition")),
    MetricSpec("kafka_server_fetcherstats_bytes_total", C,
               "Record bytes fetched by replica fetchers, by source broker.", ("clientId", "source_broker")),
    MetricSpec("kafka_server_fetcherstats_requests_total", C,
               "Fetch requests sent by replica fetchers, by source broker.", ("clientId", "source_broker")),
    # --- Replication quotas (kafka.server:type=LeaderReplication / FollowerReplication) ---------
    MetricSpec("kafka_server_leaderreplication_byte_rate", G,
               "Bytes/s this leader sent for throttled partitions (leader.replication.throttled."
               "replicas), over the quota's 11 one-second windows (byte-rate)."),
    MetricSpec("kafka_server_followerreplication_byte_rate", G,
               "Bytes/s this broker fetched as a follower for throttled partitions (follower."
               "replication.throttled.replicas), over the quota's 11 one-second windows (byte-rate)."),
    MetricSpec("kafka_server_leaderreplication_throttle_time_seconds_total", C,
               "Time the leader replication quota was found exceeded, holding back out-of-sync "
               "replicas of throttled partitions (not a Kafka metric)."),
    MetricSpec("kafka_server_followerreplication_throttle_time_seconds_total", C,
               "Time the follower replication quota was found exceeded, keeping out-of-sync throttled "
               "partitions out of fetches (not a Kafka metric)."),
    # --- Broker topic metrics ------------------------------------------------------------------
    MetricSpec("kafka_server_brokertopicmetrics_bytesin_total", C, "Bytes appended by producers.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_bytesout_total", C, "Bytes returned to consumers.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_messagesin_total", C, "Records appended by producers.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_replicationbytesin_total", C,
               "Bytes appended by this broker as a follower.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_replicationbytesout_total", C,
               "Bytes served to followers.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_reassignmentbytesin_total", C,
               "Bytes appended by this broker as a replica being added by a reassignment "
               "(ReassignmentBytesInPerSec).", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_reassignmentbytesout_total", C,
               "Bytes served to replicas being added by a reassignment (ReassignmentBytesOutPerSec).",
               ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_totalproducerequests_total", C,
               "Produce requests per topic.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_failedproducerequests_total", C,
               "Produce requests per topic that failed.", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_totalfetchrequests_total", C,
               "Fetch requests per topic (consumers and followers).", ("topic",)),
    MetricSpec("kafka_server_brokertopicmetrics_failedfetchrequests_total", C,
               "Fetch requests per topic that failed.", ("topic",)),
    # --- Requests and purgatories --------------------------------------------------------------
    MetricSpec("kafka_network_request_duration_seconds", H,
               "Time from request arrival to response, by request type "
               "(Produce, FetchConsumer, FetchFollower, ...).", ("request",)),
    MetricSpec("kafka_network_requestmetrics_requests_total", C, "Requests handled, by request type.",
               ("request",)),
    MetricSpec("kafka_network_requestmetrics_errors_total", C, "Request-level or partition errors, by type.",
               ("request", "error")),
    MetricSpec("kafka_server_delayedoperationpurgatory_purgatorysize", G,
               "Requests parked in a purgatory.", ("delayedOperation",)),
    MetricSpec("kafka_server_delayedproducemetrics_expires_total", C,
               "acks=all produces that expired before enough replicas had the data."),
    # --- ZooKeeper session ---------------------------------------------------------------------
    MetricSpec("kafka_server_sessionexpirelistener_zookeeperexpires_total", C, "ZooKeeper session expiries."),
    MetricSpec("kafka_server_sessionexpirelistener_zookeeperdisconnects_total", C, "ZooKeeper connection losses."),
    MetricSpec("kafka_server_sessionexpirelistener_zookeepersyncconnects_total", C, "ZooKeeper (re)connections."),
    MetricSpec("kafka_server_zookeeper_requests_total", C, "Requests sent to ZooKeeper."),
    MetricSpec("kafka_server_zookeeper_request_seconds_total", C,
               "Total time spent in ZooKeeper requests (rate over requests_total's rate = mean latency)."),
    MetricSpec("kafka_server_kafkaserver_brokerstate", G,
               "Broker state (Kafka's numbering: 0 not running, 1 starting, 3 running, "
               "6 pending controlled shutdown, 7 shutting down)."),
    # --- Controller ----------------------------------------------------------------------------
    MetricSpec("kafka_controller_kafkacontroller_activecontrollercount", G,
               "1 on the broker whose controller is active, 0 elsewhere; the cluster sum must be 1."),
    MetricSpec("kafka_controller_kafkacontroller_offlinepartitionscount", G,
               "Partitions without a live leader (as seen by the active controller)."),
    MetricSpec("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", G,
               "Partitions not led by their preferred replica (as seen by the active controller)."),
    MetricSpec("kafka_controller_kafkacontroller_rackconstraintviolatingpartitioncount", G,
               "Not a Kafka metric: partitions whose replicas span fewer racks (broker.rack) than "
               "min(replication factor, racks of the live brokers), as seen by the active controller; "
               "0 when no broker has a rack."),
    MetricSpec("kafka_controller_kafkacontroller_globaltopiccount", G, "Topics in the cluster."),
    MetricSpec("kafka_controller_kafkacontroller_globalpartitioncount", G, "Partitions in the cluster."),
    MetricSpec("kafka_controller_kafkacontroller_activebrokercount", G, "Live brokers seen by the controller."),
    MetricSpec("kafka_controller_kafkacontroller_controllerepoch", G, "Controller epoch of the active controller."),
    MetricSpec("kafka_controller_controllerstats_uncleanleaderelections_total", C,
               "Leaders elected from outside the ISR."),
    MetricSpec("kafka_controller_controllerstats_leaderelection_duration_seconds", H,
               "Time to elect and propagate leaders for a batch of partitions (count = elections)."),
    MetricSpec("kafka_controller_controllereventmanager_eventqueuesize", G, "Events waiting in the controller queue."),
    MetricSpec("kafka_controller_controllereventmanager_eventqueue_time_seconds", H,
               "Time an event waited in the controller queue."),
    MetricSpec("kafka_controller_controllereventmanager_event_processing_seconds", H,
               "Time the controller spent processing events, by event type.", ("event",)),
    # --- Runtime (the actor system itself) -----------------------------------------------------
    MetricSpec("actorlog_actor_mailbox_depth", G, "Messages waiting in an actor's mailbox.", ("actor",)),
    MetricSpec("actorlog_actor_messages_processed_total", C, "Messages handled by an actor.", ("actor",)),
    MetricSpec("actorlog_actor_failures_total", C, "Handler exceptions seen by an actor's supervisor.", ("actor",)),
    MetricSpec("actorlog_actor_restarts_total", C, "Restarts of an actor by its supervisor.", ("actor",)),
    MetricSpec("actorlog_dead_letters_total", C, "Messages addressed to actors that did not exist or had stopped."),
    MetricSpec("actorlog_actors", G, "Live actors on this node."),
    MetricSpec("actorlog_event_loop_lag_max_seconds", G,
               "Largest delay of the event loop in running a due callback since the process started."),
    MetricSpec("actorlog_event_loop_stalls_total", C, "Event-loop delays of at least one second (each is also logged)."),
)  # fmt: skip

_BY_NAME = {spec.name: spec for spec in CATALOG}
assert len(_BY_NAME) == len(CATALOG), "duplicate metric names in the catalogue"


class PartitionLevel(enum.Enum):
    """``metrics.partition.level``: how a broker exports its per-partition families (those labelled
    ``partition``). Thousands of partitions make thousands of series per family per broker; a
    cluster that cannot afford them folds them per topic or drops them. Broker-level totals
    (``kafka_server_replicamanager_*``, per-topic counters...) are exported at every level."""

    PARTITION = "partition"  # one series per partition (the default, Kafka's)
    TOPIC = "topic"  # one series per topic: the partition label dropped, values folded (below)
    NONE = "none"  # not exported at all


# metrics.partition.level=topic: how each per-partition family folds its partitions per topic (and
# per the family's other labels). "sum" where the values add up to something meaningful: counts of
# partitions in a state (under-replicated...), ISR and replica counts (their difference is the
# topic's missing replicas), bytes and segments, and offsets (a rate of the summed log end offsets
# is the topic's append rate on that broker). "max" where a sum means nothing: a leader epoch, and a
# follower's lag (the topic's worst partition, as Kafka's MaxLag is the broker's worst).
TOPIC_AGGREGATION: Final[Mapping[str, Literal["sum", "max"]]] = {
    "kafka_cluster_partition_underreplicated": "sum",
    "kafka_cluster_partition_underminisr": "sum",
    "kafka_cluster_partition_atminisr": "sum",
    "kafka_cluster_partition_insyncreplicascount": "sum",
    "kafka_cluster_partition_replicascount": "sum",
    "kafka_cluster_partition_leaderepoch": "max",
    "kafka_log_log_size": "sum",
    "kafka_log_log_logendoffset": "sum",
    "kafka_log_log_logstartoffset": "sum",
    "kafka_log_log_highwatermark": "sum",
    "kafka_log_log_numlogsegments": "sum",
    "kafka_server_fetcherlagmetrics_consumerlag": "max",
}
assert set(TOPIC_AGGREGATION) == {spec.name for spec in CATALOG if "partition" in spec.labels}, (
    "every per-partition family says how metrics.partition.level=topic folds it"
)


def labels_at(spec: MetricSpec, level: PartitionLevel) -> tuple[str, ...] | None:
    """The labels ``spec`` is exported with at ``level``; None when it is not exported there."""
    if "partition" not in spec.labels or level is PartitionLevel.PARTITION:
        return spec.labels
    if level is PartitionLevel.NONE:
        return None
    return tuple(label for label in spec.labels if label != "partition")


def metric_names() -> frozenset[str]:
    """Every exposed sample name (histograms contribute _bucket, _sum and _count)."""
    return frozenset(name for spec in CATALOG for name in spec.sample_names)


def spec(name: str) -> MetricSpec:
    return _BY_NAME[name]
