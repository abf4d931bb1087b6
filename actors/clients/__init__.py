"""The client roles (Kafka's ``clients`` module): the producer (``producer/``), the consumer
(``consumer/``) and the cluster metadata both keep (``metadata.py``).

Clients import ``actors.common`` and the record-batch format of ``runtime.storage``, never the
server, the controller or the log.
"""
