"""The unchanged rollup job on a real Spark standalone cluster writes what local mode writes.

A master and two workers (one core, 512 MiB each) are started from the installed PySpark
(ops/local/spark_standalone.py); ``spark-submit --master spark://...`` runs ``ops/rollup/job.py``,
the file the Kubernetes SparkApplication runs, in client mode, so its executors are two JVMs the
workers start. The same job run as ``python ops/rollup/job.py --master local[*]`` (how
``actorlog rollup`` runs, in the CronJob too) is the reference: every table under ``OUT/tables/``
holds the same rows (sorted; floats within a tolerance) and the summary is the same. Each run keeps
its launcher's master (the job never calls ``.master()`` itself: it prints the one it got). The master's
JSON shows the application finished there with an executor on each worker, and once everything is
stopped no process of the cluster's, the drivers' or the executors' process groups is left.

Both runs get the same few speed settings for a tiny input on two cores (two shuffle partitions,
no locality wait, the C1 JIT only and the serial GC: the JVMs live for one short job, which C1
alone runs in about half the time); the local run starts while the cluster does. Java missing:
skipped, or failed when ``ACTORLOG_REQUIRE_SPARK`` is set (``make test``), as for every Spark test
(tests/ops/conftest.py).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from ops.local.spark_standalone import (
    SparkNotInstalledError,
    StandaloneCluster,
    find_java,
    live_group_members,
)
from ops.rollup import job
from tests.ops.test_rollup_job import write_cluster_snapshots

pytestmark = [pytest.mark.spark, pytest.mark.integration]

# What spark-submit runs: the job module's own file, whose `__main__` is the entry point. The
# SparkApplication's mainApplicationFile is this file in the image's site-packages
# (tests/k8s/test_rollup_entry.py checks that).
ROLLUP_APPLICATION = Path(job.__file__).resolve()
ROLLUP_MODULE = job.__name__
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPEED_SETTINGS = {
    "spark.locality.wait": "0s",
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
}
RUN_TIMEOUT_S = 240.0
FLOAT_TOLERANCE = 1e-9


@pytest.fixture
def java() -> Path:
    try:
        return find_java()
    except SparkNotInstalledError as error:
        if os.environ.get("ACTORLOG_REQUIRE_SPARK"):
            pytest.fail(f"ACTORLOG_REQUIRE_SPARK is set but {error}")
        pytest.skip(f"{error} (set ACTORLOG_REQUIRE_SPARK to make this an error)")


def test_rollup_on_a_standalone_cluster_writes_what_local_mode_writes(tmp_path: Path, java: Path) -> None:
    snapshots, local_out, cluster_out = tmp_path / "snapshots", tmp_path / "local", tmp_path / "cluster"
    write_cluster_snapshots(snapshots)
    arguments = ["--snapshots", str(snapshots), "--window", "1m", "--shuffle-partitions", "2"]
    cluster = StandaloneCluster(tmp_path / "spark", workers=2, worker_cores=1, worker_memory="512m")
    try:
        local_settings = {"spark.driver.memory": "512m", **SPEED_SETTINGS}
        local = cluster.start_command(
            [
                sys.executable, str(ROLLUP_APPLICATION), *arguments, "--out", str(local_out),
                "--master", "local[*]", *(f"--conf={key}={value}" for key, value in local_settings.items()),
            ],
            "local",
        )  # fmt: skip
        cluster.start()
        submit = cluster.submit_command(
            ROLLUP_APPLICATION,
            [*arguments, "--out", str(cluster_out)],
            driver_memory="512m",
            executor_memory="512m",
            conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **SPEED_SETTINGS},
        )
        on_cluster = cluster.start_command(submit, "cluster").wait(RUN_TIMEOUT_S)
        on_local = local.wait(RUN_TIMEOUT_S)

        assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
        assert on_local.returncode == 0, on_local.stderr[-3000:]
        assert f"] spark: master {cluster.master_url}, Spark " in on_cluster.stdout
        assert "] spark: master local[*], Spark " in on_local.stdout
        # The master ran the application to its end, with an executor on each worker.
        cluster.wait_until(lambda: _finished_everywhere(cluster), 30.0, "the application finished")
        (application,) = _rollup_applications(cluster.master_state())
        assert application["state"] == "FINISHED"
        assert application["cores"] == 2
    finally:
        cluster.stop()
    assert live_group_members(cluster.process_groups) == []

    tables = sorted(path.name for path in (local_out / "tables").iterdir())
    assert sorted(path.name for path in (cluster_out / "tables").iterdir()) == tables
    assert set(job.TABLES) <= set(tables)
    for name in tables:
        local_columns, local_rows = _read_table(local_out / "tables" / name)
        cluster_columns, cluster_rows = _read_table(cluster_out / "tables" / name)
        assert cluster_columns == local_columns, name
        assert len(cluster_rows) == len(local_rows), name
        for cluster_row, local_row in zip(cluster_rows, local_rows, strict=True):
            assert _same(cluster_row, local_row), f"{name}: {cluster_row} != {local_row}"
    assert _summary(on_cluster.stdout, cluster_out) == _summary(on_local.stdout, local_out)


def _rollup_applications(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in state.get("completedapps", []) if a.get("name") == "actorlog-rollup"]


def _finished_everywhere(cluster: StandaloneCluster) -> bool:
    """The application is among the master's completed ones, and every worker's finished executors
    include one of it (both are updated asynchronously after the driver stops)."""
    try:
        applications = _rollup_applications(cluster.master_state())
        if len(applications) != 1:
            return False
        app_id = applications[0]["id"]
        return all(
            any(e.get("appid") == app_id for e in cluster.worker_state(i).get("finishedexecutors", []))
            for i in range(cluster.workers)
        )
    except (OSError, ValueError):
        return False


def _read_table(path: Path) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """Columns (name, type) and rows sorted on every column; ``window`` comes from the directories."""
    table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    columns = sorted((field.name, str(field.type)) for field in table.schema)
    rows = table.to_pylist()
    names = [name for name, _ in columns]
    rows.sort(key=lambda row: tuple(_sort_key(row[name]) for name in names))
    return columns, rows


def _sort_key(value: Any) -> tuple[Any, ...]:
    if value is None:
        return (0,)
    if isinstance(value, float):
        return (1, "nan") if math.isnan(value) else (2, float(f"{value:.6g}"))
    if isinstance(value, dict):
        return (3, tuple(sorted((str(k), _sort_key(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return (4, tuple(_sort_key(v) for v in value))
    return (5, str(type(value)), value)


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        if math.isnan(left) or math.isnan(right):
            return math.isnan(left) and math.isnan(right)
        return math.isclose(left, right, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def _summary(stdout: str, out: Path) -> list[str]:
    """The job's summary (after the progress lines), with the output directory written as OUT."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rollup of"))
    return [line.replace(str(out), "OUT") for line in lines[start:]]
