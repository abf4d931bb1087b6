"""Verification of real processes: histories, the checker, fault campaigns. Where ``ops/sim/``
checks the cluster on virtual time in one process, this package runs real broker processes on a
real ZooKeeper, records what clients saw as a history, cuts the network between them with
fault-injecting proxies, and checks the history afterwards.
"""
