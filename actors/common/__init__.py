"""What every Kafka role shares: value types (``TopicPartition`` re-exported, broker ids, Kafka's
sentinels), error codes, the wire messages between brokers and clients (``protocol.py``,
``client_protocol.py``), topic-name rules, request scripts, and ``names.py``: every actor name.

Nothing here knows a role: the server, the controller and the clients all import it, and it
imports only ``runtime``.
"""
