"""The broker's roles (Kafka's ``kafka.server`` and ``kafka.cluster``): request routing
(``broker.py``), the replica manager (``replica_manager.py``), partition replicas (``replica/``),
replica fetchers (``fetcher/``), topic administration (``admin/``), registration, ISR change
propagation, topic configs and Kafka's ZooKeeper data (``zk_data.py``).

Never imports ``actors.clients``.
"""
