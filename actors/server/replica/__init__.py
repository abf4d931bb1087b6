"""One partition replica on one broker (Kafka's ``Partition`` and ``Replica``): the actor, its
leader and follower handlers, the pure ISR/HW state (``partition_state.py``), the conditional
ISR write (``state_store.py``), the acks=all purgatory, statistics and messages. Rules:
``docs/replication.md``.
"""
