"""Broker configuration: Kafka's keys from a file, the environment and overrides; strict validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.broker_main import main as broker_main
from ops.config import KNOWN_KEYS, load_broker_settings, settings_from_properties
from ops.properties import ConfigError, parse_properties

BASE = {
    "broker.id": "2",
    "listeners": "HTTP://127.0.0.1:19092",
    "log.dirs": "/var/lib/actorlog",
    "zookeeper.connect": "zk-0:2181,zk-1:2181/actorlog",
    "internal.auth.secret": "s3cret-s3cret-s3cret",
}


def settings(**extra: str):
    properties = {**BASE, **{key.replace("__", "."): value for key, value in extra.items()}}
    return load_broker_settings(overrides=[f"{k}={v}" for k, v in properties.items()], environ={})


def test_kafka_keys_map_onto_the_broker_config() -> None:
    loaded = settings(
        **{"replica.lag.time.max.ms": "4000", "num.replica.fetchers": "3", "log.segment.bytes": "1048576"}
    )
    assert loaded.broker.broker_id == 2
    assert loaded.broker.replica_lag_time_max_ms == 4000
    assert loaded.broker.isr_expiration_interval_ms == 2000
    assert loaded.broker.num_replica_fetchers == 3
    assert loaded.log_config.segment_bytes == 1_048_576
    assert loaded.listener.url == "http://127.0.0.1:19092"
    assert loaded.zookeeper_connect == "zk-0:2181,zk-1:2181/actorlog"


def test_defaults_are_kafkas_except_the_durability_defaults() -> None:
    broker = settings().broker
    assert broker.replica_fetch_wait_max_ms == 500
    assert broker.replica_fetch_backoff_ms == 1000
    assert broker.unclean_leader_election_enable is False
    assert broker.min_insync_replicas == 2
    assert broker.default_replication_factor == 3


def test_properties_file_syntax() -> None:
    text = "# comment\n! also a comment\nbroker.id = 7\nlog.dirs: /data\nzookeeper.connect=a:1,\\\n  b:2\n\n"
    assert parse_properties(text) == {"broker.id": "7", "log.dirs": "/data", "zookeeper.connect": "a:1,b:2"}


def test_environment_variables_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in BASE.items()))
    loaded = load_broker_settings(
        config_file=str(path),
        environ={"ACTORLOG_CFG_BROKER_ID": "5", "ACTORLOG_CFG_MIN_INSYNC_REPLICAS": "3"},
    )
    assert loaded.broker.broker_id == 5
    assert loaded.broker.min_insync_replicas == 3
    overridden = load_broker_settings(
        config_file=str(path), environ={"ACTORLOG_CFG_BROKER_ID": "5"}, overrides=["broker.id=6"]
    )
    assert overridden.broker.broker_id == 6


def test_an_unknown_key_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(
        ConfigError, match=r"'replica\.lag\.time\.max\.msx' \(did you mean 'replica\.lag\.time\.max\.ms'"
    ):
        settings(**{"replica.lag.time.max.msx": "1"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("broker.id", "two", r"broker\.id: expected an integer"),
        ("unclean.leader.election.enable", "yes", "expected true or false"),
        ("zookeeper.connect", "localhost", r"zookeeper\.connect must be host:port"),
        ("listeners", "PLAINTEXT://h:1", "only the HTTP and HTTPS listeners"),
        ("listeners", "HTTP://h", r"must look like HTTP://host:port"),
        ("internal.auth.secret", "short", "at least 16 characters"),
        ("replica.fetch.wait.max.ms", "40000", r"less than replica\.socket\.timeout\.ms"),
        ("log.dirs", "/a,/b", "one directory"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(**{key: value})


def test_a_wildcard_listener_needs_an_advertised_address() -> None:
    with pytest.raises(ConfigError, match=r"advertised\.listeners"):
        settings(listeners="HTTP://0.0.0.0:9092")
    loaded = settings(listeners="HTTP://0.0.0.0:9092", **{"advertised.listeners": "HTTP://broker-2.svc:9092"})
    assert loaded.advertised_listener.url == "http://broker-2.svc:9092"


def test_the_secret_is_redacted_in_the_banner() -> None:
    lines = settings().describe()
    assert "internal.auth.secret = [redacted]" in lines
    assert not any("s3cret" in line for line in lines)


def test_broker_start_with_a_bad_config_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nlog.dirs=/tmp/x\n")
    assert broker_main(["start", "--config", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert error.startswith("actorlog broker: zookeeper.connect must be")
    assert broker_main(["start", "--config", str(tmp_path / "missing")]) == 2
    assert "cannot read the config file" in capsys.readouterr().err


def test_the_simulations_protocol_faults_cannot_be_configured() -> None:
    """The negative controls break the protocol on purpose: no key may reach them."""
    assert "protocol.faults" not in KNOWN_KEYS
    with pytest.raises(ConfigError, match=r"protocol\.faults"):
        settings_from_properties({"broker.id": "1", "protocol.faults": "skip-min-insync-check"})
