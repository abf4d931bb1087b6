"""The KAFKA listener in a broker's configuration and registration: ``listeners``,
``advertised.listeners``, ``listener.security.protocol.map``, and the endpoints metadata carries."""

from __future__ import annotations

import pytest

from actors.common.protocol import BrokerEndpoint, ListenerEndpoint
from actors.server import zk_data
from ops.config import KafkaListener, load_broker_settings
from ops.properties import ConfigError

BASE = {
    "broker.id": "1",
    "listeners": "HTTP://127.0.0.1:19092,KAFKA://127.0.0.1:19192",
    "log.dirs": "/var/lib/actorlog",
    "zookeeper.connect": "zk:2181",
    "internal.auth.secret": "s3cret-s3cret-s3cret",
}


def settings(**extra: str):
    properties = {**BASE, **{key.replace("__", "."): value for key, value in extra.items()}}
    return load_broker_settings(overrides=[f"{k}={v}" for k, v in properties.items()], environ={})


def test_a_kafka_listener_beside_the_http_one() -> None:
    loaded = settings()
    assert loaded.listener.url == "http://127.0.0.1:19092"
    assert loaded.kafka_listener == KafkaListener("127.0.0.1", 19192)
    assert loaded.advertised_kafka_listener == loaded.kafka_listener
    assert loaded.kafka_listener.security_protocol == "SASL_PLAINTEXT"
    assert settings(listeners="HTTP://127.0.0.1:19092").kafka_listener is None


def test_advertised_listeners_name_each_listener_or_leave_it_as_it_listens() -> None:
    wildcard = "HTTP://0.0.0.0:9092,KAFKA://0.0.0.0:9093"
    loaded = settings(listeners=wildcard, advertised__listeners="HTTP://b-1.svc:9092,KAFKA://b-1.svc:9093")
    assert loaded.advertised_listener.url == "http://b-1.svc:9092"
    assert loaded.advertised_kafka_listener == KafkaListener("b-1.svc", 9093)
    only_kafka = settings(advertised__listeners="KAFKA://kafka.example:29092")
    assert only_kafka.advertised_listener.url == "http://127.0.0.1:19092"
    assert only_kafka.advertised_kafka_listener == KafkaListener("kafka.example", 29092)
    with pytest.raises(ConfigError, match="reachable host"):
        settings(listeners=wildcard, advertised__listeners="HTTP://b-1.svc:9092")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"listeners": "KAFKA://h:1"}, "needs an HTTP or HTTPS listener"),
        ({"listeners": "HTTP://h:1,KAFKA://h:2,KAFKA://h:3"}, "one KAFKA listener"),
        ({"listeners": "HTTP://h:1,HTTPS://h:2"}, "one HTTP or HTTPS listener"),
        ({"listeners": "HTTP://h:1,KAFKA://h:1"}, "different ports"),
        ({"listeners": "HTTP://h:1,SASL_PLAINTEXT://h:2"}, "only the HTTP and HTTPS listeners"),
        ({"listeners": "HTTP://h:1", "advertised.listeners": "KAFKA://h:2"}, "does not have"),
        ({"listener.security.protocol.map": "KAFKA:PLAINTEXT"}, "always authenticates"),
        ({"listener.security.protocol.map": "KAFKA:SSL"}, "KAFKA can only be SASL_PLAINTEXT or SASL_SSL"),
        (
            {"listener.security.protocol.map": "KAFKA:SASL_SSL"},
            "ssl.keystore.location is required for the KAFKA",
        ),
        ({"listener.security.protocol.map": "CLIENT:SSL"}, "NAME:PROTOCOL"),
    ],
)
def test_bad_listener_settings_name_the_key(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(**{key.replace(".", "__"): value for key, value in extra.items()})


def test_the_default_security_protocol_map_is_accepted() -> None:
    settings(listener__security__protocol__map="HTTP:PLAINTEXT,KAFKA:SASL_PLAINTEXT")


def test_the_registration_lists_the_kafka_listener_as_kafka_does() -> None:
    kafka = zk_data.EndPoint(
        listener_name=zk_data.KAFKA_LISTENER_NAME, host="h", port=19192, security_protocol="SASL_PLAINTEXT"
    )
    registration = zk_data.http_broker_registration(1, "h", 19092, timestamp_ms=5, extra_endpoints=(kafka,))
    data = zk_data.encode_broker_registration(registration)
    assert b'"endpoints":["HTTP://h:19092","KAFKA://h:19192"]' in data
    assert b'"listener_security_protocol_map":{"HTTP":"PLAINTEXT","KAFKA":"SASL_PLAINTEXT"}' in data
    assert b'"host":"h","port":19092' in data  # the PLAINTEXT (HTTP) endpoint, as Kafka fills them
    decoded = zk_data.decode_broker_registration(1, data)
    assert decoded.endpoint(zk_data.KAFKA_LISTENER_NAME) == kafka
    assert decoded == registration


def test_a_broker_endpoint_finds_its_listener_by_name() -> None:
    kafka = ListenerEndpoint(listener_name="KAFKA", host="h", port=2, security_protocol="SASL_PLAINTEXT")
    endpoint = BrokerEndpoint(broker_id=1, host="h", port=1, endpoints=(kafka,))
    assert endpoint.endpoint("KAFKA") == kafka
    assert endpoint.endpoint("OTHER") is None
    assert BrokerEndpoint(broker_id=1, host="h", port=1).endpoint("KAFKA") is None
