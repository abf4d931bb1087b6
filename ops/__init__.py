"""Composition root and operator tooling: CLI, configuration, wiring, local cluster, demo, perf
tools, metric snapshot export and the PySpark rollup."""
