"""The controller (Kafka's ``kafka.controller``): the actor with its single event queue
(``controller.py``), the event scripts (``logic.py``), the partition and replica state machines
(``state.py``), the leader election algorithms (``election.py``) and the batched requests to
brokers (``requests.py``). Rules: ``docs/controller.md`` and ``docs/propagation.md §2``.
"""
