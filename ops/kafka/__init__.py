"""Kafka's binary protocol for clients: the ``KAFKA://host:port`` listener beside the HTTP one.

``codec.py`` is the one module that imports the protocol library (kio); ``server.py`` reads frames,
authenticates connections and answers in order; ``apis.py`` turns each Kafka request into the
internal requests the broker's actors serve (``docs/kafka-protocol.md``).
"""
