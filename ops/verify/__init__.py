"""Jepsen-style verification of real processes: fault campaigns against broker processes, the
history a run records (``history.py``) and the offline checker that judges it (``checker.py``,
``actorlog verify check HISTORY``).

A run's clients record every send and every read, then the final read of every partition and each
replica's log; the checker reports lost acknowledged writes, duplicates, inconsistent offsets,
order violations, dirty reads, replica divergence below the high watermark and unavailability
windows, the way Jepsen's Kafka queue checker (``jepsen/tests/kafka.clj``) and Kafka's ducktape
``validate_delivery`` do. The checker never talks to a broker: a history is a file, judged the same
way at the end of a campaign and offline afterwards.
"""
