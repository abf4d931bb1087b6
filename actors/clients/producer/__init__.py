"""The producer (Kafka 2.4's Java client): the ``RecordAccumulator`` and its batches, the
``Sender``, idempotence, the partitioner, configuration and errors, and ``ProducerActor``, which
runs them on a client node. Rules: ``docs/producer.md``.
"""
