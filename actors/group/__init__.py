"""The group coordinator: Kafka 2.4's classic consumer-group protocol (docs/consumer-groups.md)."""
