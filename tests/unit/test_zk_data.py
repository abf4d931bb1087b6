"""Kafka's znode layout and payloads: exact paths, exact JSON, strict decoding with named fields."""

from __future__ import annotations

import orjson
import pytest

from actors.server.zk_data import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    PERSISTENT_ZK_PATHS,
    PREFERRED_REPLICA_ELECTION_PATH,
    BrokerRegistration,
    ControllerRegistration,
    EndPoint,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    ZkDataError,
    broker_id_path,
    decode_broker_registration,
    decode_controller,
    decode_controller_epoch,
    decode_isr_change_notification,
    decode_partition_state,
    decode_preferred_replica_election,
    decode_reassign_partitions,
    decode_topic_assignment,
    decode_topic_config,
    delete_topic_path,
    encode_broker_registration,
    encode_controller,
    encode_controller_epoch,
    encode_isr_change_notification,
    encode_partition_state,
    encode_preferred_replica_election,
    encode_reassign_partitions,
    encode_topic_assignment,
    encode_topic_config,
    http_broker_registration,
    isr_change_notification_path,
    isr_change_sequence_number,
    parse_broker_id,
    partition_state_path,
    topic_config_path,
    topic_partition_path,
    topic_partitions_path,
    topic_path,
)

# ------------------------------------------------------------------------------------- paths


def test_paths_match_kafkas_layout() -> None:
    assert broker_id_path(3) == "/brokers/ids/3"
    assert (CONTROLLER_PATH, CONTROLLER_EPOCH_PATH) == ("/controller", "/controller_epoch")
    assert topic_path("orders") == "/brokers/topics/orders"
    assert topic_partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert topic_partition_path("orders", 2) == "/brokers/topics/orders/partitions/2"
    assert partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert isr_change_notification_path() == "/isr_change_notification/isr_change_"
    assert isr_change_notification_path("0000000007") == "/isr_change_notification/isr_change_0000000007"
    assert delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"
    assert topic_config_path("orders") == "/config/topics/orders"


def test_persistent_paths_are_kafkas_startup_list() -> None:
    assert set(PERSISTENT_ZK_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
    }
    assert len(PERSISTENT_ZK_PATHS) == len(set(PERSISTENT_ZK_PATHS))


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "spaces here", "x" * 250])
def test_illegal_topic_names_never_become_paths(topic: str) -> None:
    with pytest.raises(ValueError, match="illegal Kafka topic name"):
        topic_path(topic)


def test_negative_ids_never_become_paths() -> None:
    with pytest.raises(ValueError, match="broker_id"):
        broker_id_path(-1)
    with pytest.raises(ValueError, match="partition"):
        partition_state_path("orders", -1)


def test_isr_change_sequence_number_accepts_names_and_paths_only() -> None:
    assert isr_change_sequence_number("isr_change_0000000042") == "0000000042"
    assert isr_change_sequence_number("/isr_change_notification/isr_change_0000000042") == "0000000042"
    for bad in ("isr_change_42", "other_0000000042", "isr_change_00000000x2"):
        with pytest.raises(ValueError, match="not an ISR change notification"):
            isr_change_sequence_number(bad)


def test_broker_ids_are_parsed_from_child_names() -> None:
    assert parse_broker_id("12") == 12
    with pytest.raises(ZkDataError) as raised:
        parse_broker_id("x1")
    assert raised.value.path == "/brokers/ids/x1"


# ----------------------------------------------------------------------- broker registration


def test_http_broker_registration_encodes_kafkas_version_4_json() -> None:
    registration = http_broker_registration(1, "10.0.0.5", 8081, timestamp_ms=1_700_000_000_123, rack="r1")
    assert orjson.loads(encode_broker_registration(registration)) == {
        "version": 4,
        "host": "10.0.0.5",
        "port": 8081,
        "endpoints": ["HTTP://10.0.0.5:8081"],
        "listener_security_protocol_map": {"HTTP": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": "1700000000123",
        "rack": "r1",
    }
    assert decode_broker_registration(1, encode_broker_registration(registration)) == registration


def test_an_unclean_start_is_said_only_when_true() -> None:
    unclean = http_broker_registration(3, "h", 1, timestamp_ms=5, unclean_start=True)
    assert orjson.loads(encode_broker_registration(unclean))["unclean_start"] is True
    assert decode_broker_registration(3, encode_broker_registration(unclean)).unclean_start
    clean = http_broker_registration(3, "h", 1, timestamp_ms=5)
    assert "unclean_start" not in orjson.loads(encode_broker_registration(clean))  # Kafka's JSON, as is
    assert not decode_broker_registration(3, encode_broker_registration(clean)).unclean_start


def test_registration_without_rack_omits_the_field() -> None:
    registration = http_broker_registration(2, "h", 1, timestamp_ms=5)
    assert "rack" not in orjson.loads(encode_broker_registration(registration))
    assert registration.endpoint().connection_string == "HTTP://h:1"


def test_registration_written_by_kafka_decodes() -> None:
    # Kafka 2.4's own example: two listeners, no PLAINTEXT one among the legacy fields.
    kafka_json = (
        b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
        b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1",'
        b'"jmx_port":9999,"host":"localhost","timestamp":"2233345666","port":9092,"version":4}'
    )
    registration = decode_broker_registration(7, kafka_json)
    assert registration.endpoints == (
        EndPoint(listener_name="CLIENT", host="host1", port=9092, security_protocol="SSL"),
        EndPoint(listener_name="REPLICATION", host="host1", port=9093, security_protocol="PLAINTEXT"),
    )
    assert (registration.rack, registration.jmx_port, registration.timestamp_ms) == ("dc1", 9999, 2233345666)
    encoded = orjson.loads(encode_broker_registration(registration))
    assert (encoded["host"], encoded["port"]) == ("host1", 9093)


def test_registration_without_plaintext_listener_has_null_host_like_kafka() -> None:
    registration = BrokerRegistration(
        broker_id=1,
        endpoints=(EndPoint(listener_name="SECURE", host="h", port=1, security_protocol="SSL"),),
        timestamp_ms=1,
    )
    encoded = orjson.loads(encode_broker_registration(registration))
    assert (encoded["host"], encoded["port"]) == (None, -1)


def _broker_json(**changes: object) -> bytes:
    value: dict[str, object] = {
        "version": 4,
        "host": "h",
        "port": 1,
        "endpoints": ["HTTP://h:1"],
        "listener_security_protocol_map": {"HTTP": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": "17",
    }
    for key, change in changes.items():
        if change is None:
            del value[key]
        else:
            value[key] = change
    return orjson.dumps(value)


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        (b"", "<json>", "not JSON"),
        (b"[1]", "<json>", "JSON object"),
        (_broker_json(version=3), "version", "unsupported version 3"),
        (_broker_json(version="4"), "version", "integer"),
        (_broker_json(endpoints=None), "endpoints", "missing"),
        (_broker_json(endpoints=[]), "endpoints", "non-empty"),
        (_broker_json(endpoints=["h:1"]), "endpoints", "LISTENER://host:port"),
        (_broker_json(endpoints=["OTHER://h:1"]), "listener_security_protocol_map", "OTHER"),
        (_broker_json(listener_security_protocol_map=["HTTP"]), "listener_security_protocol_map", "object"),
        (_broker_json(timestamp=17), "timestamp", "string"),
        (_broker_json(timestamp="soon"), "timestamp", "decimal"),
        (_broker_json(jmx_port=True), "jmx_port", "integer"),
        (_broker_json(rack=3), "rack", "string or null"),
    ],
)
def test_malformed_registration_names_path_and_field(payload: bytes, field: str, reason: str) -> None:
    with pytest.raises(ZkDataError, match=reason) as raised:
        decode_broker_registration(4, payload)
    assert (raised.value.path, raised.value.field) == ("/brokers/ids/4", field)
    assert "/brokers/ids/4" in str(raised.value)


# -------------------------------------------------------------------------------- controller


def test_controller_payload_is_kafkas_version_1() -> None:
    data = encode_controller(ControllerRegistration(broker_id=2, timestamp_ms=1234))
    assert orjson.loads(data) == {"version": 1, "brokerid": 2, "timestamp": "1234"}
    assert decode_controller(data) == ControllerRegistration(broker_id=2, timestamp_ms=1234)


def test_malformed_controller_names_the_field() -> None:
    with pytest.raises(ZkDataError) as raised:
        decode_controller(b'{"version":1,"brokerid":"2","timestamp":"1"}')
    assert (raised.value.path, raised.value.field) == ("/controller", "brokerid")


def test_controller_epoch_is_decimal_text() -> None:
    assert encode_controller_epoch(0) == b"0"
    assert decode_controller_epoch(b"17") == 17
    for bad in (b"", b"-1", b"1.5", b"\xff", "\u00b2".encode()):
        with pytest.raises(ZkDataError) as raised:
            decode_controller_epoch(bad)
        assert raised.value.path == "/controller_epoch"


# ------------------------------------------------------------------------------------ topics


def test_topic_assignment_is_kafkas_version_2() -> None:
    assignment = TopicAssignment(partitions={1: (2, 3), 0: (1, 2)}, adding_replicas={1: (3,)})
    data = encode_topic_assignment(assignment)
    assert orjson.loads(data) == {
        "version": 2,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"1": [3]},
        "removing_replicas": {},
    }
    assert decode_topic_assignment("orders", data) == assignment


def test_topic_assignment_version_1_has_only_partitions() -> None:
    decoded = decode_topic_assignment("orders", b'{"version":1,"partitions":{"0":[1,2,3]}}')
    assert dict(decoded.partitions) == {0: (1, 2, 3)}
    assert dict(decoded.adding_replicas) == dict(decoded.removing_replicas) == {}


def test_topic_assignment_is_read_only() -> None:
    assignment = TopicAssignment(partitions={0: [1, 2]})  # type: ignore[dict-item]
    assert assignment.partitions[0] == (1, 2)
    with pytest.raises(TypeError):
        assignment.partitions[1] = (3,)  # type: ignore[index]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b'{"version":2,"partitions":{"x":[1]},"adding_replicas":{},"removing_replicas":{}}', "partitions"),
        (
            b'{"version":2,"partitions":{"0":[1,"2"]},"adding_replicas":{},"removing_replicas":{}}',
            "partitions.0",
        ),
        (b'{"version":2,"partitions":{"0":[1]},"removing_replicas":{}}', "adding_replicas"),
        (b'{"version":3,"partitions":{}}', "version"),
    ],
)
def test_malformed_topic_assignment_names_the_field(payload: bytes, field: str) -> None:
    with pytest.raises(ZkDataError) as raised:
        decode_topic_assignment("orders", payload)
    assert (raised.value.path, raised.value.field) == ("/brokers/topics/orders", field)


def test_partition_state_is_kafkas_version_1() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 3), controller_epoch=2)
    data = encode_partition_state(state)
    assert orjson.loads(data) == {
        "version": 1,
        "leader": 1,
        "leader_epoch": 4,
        "controller_epoch": 2,
        "isr": [1, 3],
    }
    path = partition_state_path("orders", 0)
    assert decode_partition_state(data, path=path) == state
    no_leader = PartitionState(leader=-1, leader_epoch=5, isr=(1,), controller_epoch=2)
    assert decode_partition_state(encode_partition_state(no_leader), path=path) == no_leader


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"leader": -2}, "leader"),
        ({"leader_epoch": -1}, "leader_epoch"),
        ({"isr": [1, -1]}, "isr"),
        ({"isr": "1,2"}, "isr"),
        ({"controller_epoch": None}, "controller_epoch"),
    ],
)
def test_malformed_partition_state_names_the_field(changes: dict[str, object], field: str) -> None:
    value: dict[str, object] = {
        "version": 1,
        "leader": 1,
        "leader_epoch": 0,
        "controller_epoch": 1,
        "isr": [1],
    }
    for key, change in changes.items():
        if change is None:
            del value[key]
        else:
            value[key] = change
    path = partition_state_path("orders", 3)
    with pytest.raises(ZkDataError) as raised:
        decode_partition_state(orjson.dumps(value), path=path)
    assert (raised.value.path, raised.value.field) == (path, field)


# ----------------------------------------------------------------------------- notifications


def test_isr_change_notification_is_kafkas_version_1_sorted_and_deduplicated() -> None:
    partitions = [TopicPartition(topic="b", partition=0), TopicPartition(topic="a", partition=1)] * 2
    data = encode_isr_change_notification(partitions)
    assert orjson.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 1}, {"topic": "b", "partition": 0}],
    }
    path = isr_change_notification_path("0000000000")
    assert decode_isr_change_notification(data, path=path) == frozenset(partitions)


def test_malformed_isr_change_notification_names_the_entry() -> None:
    path = isr_change_notification_path("0000000003")
    with pytest.raises(ZkDataError) as raised:
        decode_isr_change_notification(
            b'{"version":1,"partitions":[{"topic":"a","partition":"0"}]}', path=path
        )
    assert (raised.value.path, raised.value.field) == (path, "partitions[0].partition")
    with pytest.raises(ZkDataError) as raised:
        decode_isr_change_notification(
            b'{"version":1,"partitions":[{"topic":"a/b","partition":0}]}', path=path
        )
    assert raised.value.field == "partitions[0].topic"


def test_preferred_replica_election_round_trips() -> None:
    partitions = {TopicPartition(topic="orders", partition=2)}
    data = encode_preferred_replica_election(partitions)
    assert orjson.loads(data) == {"version": 1, "partitions": [{"topic": "orders", "partition": 2}]}
    assert decode_preferred_replica_election(data) == partitions


def test_topic_config_is_kafkas_version_1_of_strings() -> None:
    data = encode_topic_config({"min.insync.replicas": "2", "cleanup.policy": "delete"})
    assert orjson.loads(data) == {
        "version": 1,
        "config": {"cleanup.policy": "delete", "min.insync.replicas": "2"},
    }
    assert dict(decode_topic_config("orders", data)) == {
        "cleanup.policy": "delete",
        "min.insync.replicas": "2",
    }
    with pytest.raises(ZkDataError) as raised:
        decode_topic_config("orders", b'{"version":1,"config":{"min.insync.replicas":2}}')
    assert (raised.value.path, raised.value.field) == ("/config/topics/orders", "config.min.insync.replicas")


def test_registration_parent_path_is_the_broker_ids_path() -> None:
    assert broker_id_path(0).rsplit("/", 1)[0] == BROKER_IDS_PATH


# ------------------------------------------------------------------------------ reassignment


def test_topic_assignment_drops_empty_reassignment_entries() -> None:
    assignment = TopicAssignment(partitions={0: (1, 2)}, adding_replicas={0: ()}, removing_replicas={0: ()})
    assert orjson.loads(encode_topic_assignment(assignment)) == {
        "version": 2,
        "partitions": {"0": [1, 2]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert assignment.reassigning == frozenset()


def test_topic_assignment_of_a_reassigning_partition_round_trips() -> None:
    # ORS [1, 2, 3] -> TRS [4, 2]: RS = TRS then the rest of ORS.
    assignment = TopicAssignment(
        partitions={0: (4, 2, 1, 3), 1: (2, 3)}, adding_replicas={0: (4,)}, removing_replicas={0: (1, 3)}
    )
    data = encode_topic_assignment(assignment)
    assert orjson.loads(data)["removing_replicas"] == {"0": [1, 3]}
    decoded = decode_topic_assignment("orders", data)
    assert decoded == assignment
    assert decoded.reassigning == frozenset({0})


def test_reassign_partitions_is_kafkas_version_1() -> None:
    data = encode_reassign_partitions(
        {TopicPartition(topic="orders", partition=1): (3, 1), TopicPartition(topic="a", partition=0): [2]}
    )
    assert orjson.loads(data) == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 0, "replicas": [2]},
            {"topic": "orders", "partition": 1, "replicas": [3, 1]},
        ],
    }
    assert decode_reassign_partitions(data) == {
        TopicPartition(topic="a", partition=0): (2,),
        TopicPartition(topic="orders", partition=1): (3, 1),
    }


def test_reassign_partitions_reads_what_kafkas_tool_writes() -> None:
    written = (
        b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[4,5],'
        b'"log_dirs":["any","any"]}]}'
    )
    assert decode_reassign_partitions(written) == {TopicPartition(topic="orders", partition=0): (4, 5)}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b'{"version":2,"partitions":[]}', "version"),
        (b'{"version":1,"partitions":{}}', "partitions"),
        (b'{"version":1,"partitions":[{"topic":"a","partition":0}]}', "partitions[0].replicas"),
        (b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[]}]}', "partitions[0].replicas"),
        (
            b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}',
            "partitions[0].replicas",
        ),
        (
            b'{"version":1,"partitions":[{"topic":"a","partition":-1,"replicas":[1]}]}',
            "partitions[0].partition",
        ),
        (b'{"version":1,"partitions":[{"topic":"a/b","partition":0,"replicas":[1]}]}', "partitions[0].topic"),
    ],
)
def test_malformed_reassign_partitions_names_the_field(payload: bytes, field: str) -> None:
    with pytest.raises(ZkDataError) as raised:
        decode_reassign_partitions(payload)
    assert (raised.value.path, raised.value.field) == ("/admin/reassign_partitions", field)
