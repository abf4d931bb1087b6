"""Running things on this machine: the local cluster launcher behind ``cluster up`` and the demo
(``cluster.py``), ZooKeeper and Prometheus from the installed packages, a Spark standalone cluster
from the installed PySpark (``spark_standalone.py``), and watch-driven waits on ZooKeeper
(``zk_waits.py``).
"""
