"""How the Kafka client libraries under test reach a cluster's KAFKA listeners (SASL_PLAINTEXT with
SCRAM-SHA-256, as ``cluster up``'s ``client.properties`` says), shared by the Kafka client tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

USER = "admin"  # the client user `cluster up` writes into client.properties


@dataclass(frozen=True)
class KafkaCluster:
    bootstrap: str  # the KAFKA listeners, as client.properties names them
    password: str
    listeners: dict[int, str]  # broker id -> host:port of its KAFKA listener

    def kafka_python(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap.split(","),
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": USER,
            "sasl_plain_password": self.password,
            **extra,
        }

    def aiokafka(self, **extra: Any) -> dict[str, Any]:
        return {**self.kafka_python(**extra), "bootstrap_servers": self.bootstrap}

    def librdkafka(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER,
            "sasl.password": self.password,
            **extra,
        }
