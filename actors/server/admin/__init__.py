"""Topic administration on a broker (Kafka 2.4's ``AdminManager`` and ``AdminUtils``): create,
delete and grow topics, describe and alter configs, allocate producer ids, by writing ZooKeeper;
and the rack-unaware replica assignment (``docs/controller.md §8``).
"""
