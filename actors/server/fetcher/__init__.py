"""Replica fetchers (Kafka's ``ReplicaFetcherManager`` and ``ReplicaFetcherThread``): which
fetcher a followed partition belongs to, the fetch loop, and the truncation point by leader
epoch. Rules: ``docs/replication.md §6`` and ``docs/leader-epochs.md §2``.
"""
