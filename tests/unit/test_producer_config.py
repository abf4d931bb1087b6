"""ProducerConfig: Kafka's producer keys, defaults, validation and the idempotence coupling."""

from __future__ import annotations

import pytest

from actors.clients.consumer.config import ConsumerConfig, ConsumerConfigError
from actors.clients.producer.config import INT32_MAX, ProducerConfig, ProducerConfigError
from runtime.storage.compression import CompressionType

BOOTSTRAP = {"bootstrap.servers": "localhost:9092"}


def parse(**extra: object) -> ProducerConfig:
    return ProducerConfig.from_properties({**BOOTSTRAP, **{k.replace("_", "."): v for k, v in extra.items()}})


def test_defaults_are_kafkas_with_idempotence_on() -> None:
    config = ProducerConfig.from_properties(BOOTSTRAP)
    assert config.bootstrap_servers == ("localhost:9092",)
    assert config.enable_idempotence is True
    assert config.acks == -1
    assert (config.batch_size, config.linger_ms, config.buffer_memory) == (16_384, 0, 33_554_432)
    assert (config.max_block_ms, config.max_request_size) == (60_000, 1_048_576)
    assert config.compression_type is CompressionType.NONE
    assert (config.retries, config.retry_backoff_ms) == (INT32_MAX, 100)
    assert (config.request_timeout_ms, config.delivery_timeout_ms) == (30_000, 120_000)
    assert config.max_in_flight_requests_per_connection == 5
    assert config.metadata_max_age_ms == 300_000
    assert config.notes == ()


def test_values_from_a_properties_file_and_from_python_agree() -> None:
    from_strings = ProducerConfig.from_properties(
        {
            **BOOTSTRAP,
            "linger.ms": "5",
            "acks": "all",
            "enable.idempotence": "true",
            "compression.type": "lz4",
        }
    )
    from_values = ProducerConfig.from_properties(
        {**BOOTSTRAP, "linger.ms": 5, "acks": -1, "enable.idempotence": True, "compression.type": "LZ4"}
    )
    assert from_strings == from_values
    assert from_strings.compression_type is CompressionType.LZ4


@pytest.mark.parametrize(("raw", "expected"), [("all", -1), ("-1", -1), ("0", 0), ("1", 1), (1, 1), (0, 0)])
def test_acks_accepts_kafkas_spellings(raw: object, expected: int) -> None:
    config = ProducerConfig.from_properties({**BOOTSTRAP, "acks": raw, "enable.idempotence": "false"})
    assert config.acks == expected


def test_bootstrap_servers_accept_a_list_or_a_comma_separated_string() -> None:
    listed = ProducerConfig.from_properties({"bootstrap.servers": ["a:1", "b:2"]})
    joined = ProducerConfig.from_properties({"bootstrap.servers": "a:1, b:2"})
    assert listed.bootstrap_servers == joined.bootstrap_servers == ("a:1", "b:2")


def test_bootstrap_servers_are_required_and_well_formed() -> None:
    with pytest.raises(ProducerConfigError, match=r"bootstrap\.servers is required"):
        ProducerConfig.from_properties({})
    with pytest.raises(ProducerConfigError, match="'nohost' is not host:port"):
        ProducerConfig.from_properties({"bootstrap.servers": "a:1,nohost"})
    with pytest.raises(ProducerConfigError, match="'a:99999' is not host:port"):
        ProducerConfig.from_properties({"bootstrap.servers": "a:99999"})


def test_an_unknown_key_names_the_closest_known_keys() -> None:
    with pytest.raises(
        ProducerConfigError, match=r"unknown producer configuration key 'linger\.msec'.*'linger\.ms'"
    ):
        ProducerConfig.from_properties({**BOOTSTRAP, "linger.msec": "5"})
    with pytest.raises(ProducerConfigError, match=r"'batch_size'.*'batch\.size'"):
        ProducerConfig.from_properties({**BOOTSTRAP, "batch_size": "5"})


def test_kafka_keys_this_producer_does_not_offer_say_why() -> None:
    with pytest.raises(ProducerConfigError, match=r"'transactional\.id' is not supported: transactions"):
        ProducerConfig.from_properties({**BOOTSTRAP, "transactional.id": "t"})
    with pytest.raises(ProducerConfigError, match="serialize them before send"):
        ProducerConfig.from_properties({**BOOTSTRAP, "value.serializer": "x"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("linger.ms", "soon", r"linger\.ms: expected an integer, got 'soon'"),
        ("linger.ms", True, r"linger\.ms: expected an integer, got True"),
        ("linger.ms", "-1", r"linger\.ms: must be at least 0, got -1"),
        ("batch.size", -5, r"batch\.size: must be at least 0, got -5"),
        ("max.in.flight.requests.per.connection", "0", r"must be at least 1, got 0"),
        ("retries", str(INT32_MAX + 1), r"retries: must be at most 2147483647"),
        ("acks", "2", r"acks: expected all, -1, 0 or 1, got '2'"),
        ("enable.idempotence", "yes", r"enable\.idempotence: expected true or false, got 'yes'"),
        ("compression.type", "brotli", r"compression\.type: expected one of none, gzip, snappy, lz4, zstd"),
        ("compression.type", "snappy", "snappy is not available in this build"),
    ],
)
def test_bad_values_name_the_key_the_value_and_the_expectation(key: str, value: object, message: str) -> None:
    with pytest.raises(ProducerConfigError, match=message):
        ProducerConfig.from_properties({**BOOTSTRAP, key: value})


@pytest.mark.parametrize(
    ("setting", "conflict"),
    [
        ({"acks": "1"}, r"acks=1 \(idempotence requires acks=all\)"),
        ({"acks": "0"}, "acks=0"),
        ({"retries": "0"}, r"retries=0"),
        ({"max.in.flight.requests.per.connection": "6"}, r"max\.in\.flight\.requests\.per\.connection=6"),
    ],
)
def test_explicit_idempotence_conflicts_are_errors(setting: dict[str, str], conflict: str) -> None:
    with pytest.raises(ProducerConfigError, match=f"enable.idempotence=true conflicts with {conflict}"):
        ProducerConfig.from_properties({**BOOTSTRAP, "enable.idempotence": "true", **setting})


@pytest.mark.parametrize(
    "setting", [{"acks": "1"}, {"retries": "0"}, {"max.in.flight.requests.per.connection": "10"}]
)
def test_default_idempotence_is_switched_off_by_a_conflicting_setting(setting: dict[str, str]) -> None:
    config = ProducerConfig.from_properties({**BOOTSTRAP, **setting})
    assert config.enable_idempotence is False
    assert len(config.notes) == 1
    assert config.notes[0].startswith("enable.idempotence switched off because")


def test_idempotence_can_be_switched_off_explicitly_keeping_acks_all() -> None:
    config = parse(enable_idempotence="false")
    assert config.enable_idempotence is False
    assert config.acks == -1
    assert config.notes == ()


def test_delivery_timeout_must_cover_linger_and_request_timeout_when_explicit() -> None:
    with pytest.raises(
        ProducerConfigError,
        match=r"delivery\.timeout\.ms should be equal to or larger than linger\.ms \+ request\.timeout\.ms "
        r"\(100 \+ 30000\), got 30000",
    ):
        parse(linger_ms=100, delivery_timeout_ms=30_000)
    assert parse(linger_ms=100, delivery_timeout_ms=30_100).delivery_timeout_ms == 30_100


def test_default_delivery_timeout_is_raised_silently_to_the_sum() -> None:
    config = parse(linger_ms=100_000, request_timeout_ms=30_000)
    assert config.delivery_timeout_ms == 130_000
    assert config.notes == ("delivery.timeout.ms raised to linger.ms + request.timeout.ms = 130000",)


def test_the_secret_is_never_shown() -> None:
    config = parse(internal_auth_secret="s3cret-value-0123456789")
    assert config.internal_auth_secret == "s3cret-value-0123456789"
    assert "s3cret" not in repr(config)
    described = config.describe()
    assert "internal.auth.secret = [redacted]" in described
    assert not any("s3cret" in line for line in described)


def test_describe_lists_every_key_with_kafkas_spelling() -> None:
    described = dict(line.split(" = ", 1) for line in parse(acks="all", compression_type="zstd").describe())
    assert described["acks"] == "all"
    assert described["compression.type"] == "zstd"
    assert described["enable.idempotence"] == "true"
    assert described["max.in.flight.requests.per.connection"] == "5"
    assert described["bootstrap.servers"] == "localhost:9092"


def test_guarantee_message_order_means_one_request_in_flight() -> None:
    assert parse(max_in_flight_requests_per_connection=1).guarantee_message_order
    assert not parse().guarantee_message_order


def test_the_client_properties_cluster_up_writes_are_a_valid_producer_and_consumer_config() -> None:
    """One client.properties serves every tool: its security keys are accepted, checked and never
    shown (docs/security.md §1)."""
    properties = {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="hunter2";'
        ),
    }
    config = ProducerConfig.from_properties(properties)
    assert dict(config.security)["sasl.mechanism"] == "SCRAM-SHA-256"
    described = "\n".join(config.describe())
    assert "sasl.jaas.config = [redacted]" in described
    assert "hunter2" not in described
    assert "hunter2" not in repr(config)
    assert dict(ConsumerConfig.from_properties(properties).security)["security.protocol"] == "SASL_PLAINTEXT"
    with pytest.raises(ProducerConfigError, match=r"security\.protocol"):
        ProducerConfig.from_properties({**properties, "security.protocol": "SASL_TLS"})
    with pytest.raises(ConsumerConfigError, match=r"sasl\.mechanism"):
        ConsumerConfig.from_properties({**properties, "sasl.mechanism": "GSSAPI"})
