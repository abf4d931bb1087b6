"""Running things on this machine: the local cluster launcher behind ``cluster up`` and the demo
(``cluster.py``), ZooKeeper and Prometheus from the installed packages, and watch-driven waits
on ZooKeeper (``zk_waits.py``).
"""
