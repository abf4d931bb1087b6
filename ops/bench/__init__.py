"""Benchmarks: each module is runnable with `python -m ops.bench.<name>` and prints its figures."""
