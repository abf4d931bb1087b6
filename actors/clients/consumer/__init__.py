"""The consumer: assigned partitions, positions, one fetch per leader, and offset resets via
ListOffsets (no consumer groups).
"""
