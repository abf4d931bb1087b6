"""Building the rollup's SparkSession without ever hard-coding the master.

Spark's precedence is: settings made in code > spark-submit flags > spark-defaults.conf. A
``.master("local[*]")`` in code would therefore silently override ``spark-submit --master k8s://...``
(docs/operations.md §4). The rule kept here:

* ``--master`` given on our own command line wins (the user asked for it);
* otherwise, if the launcher already configured ``spark.master`` (spark-submit, which starts the JVM
  before Python and passes its address in ``PYSPARK_GATEWAY_PORT``, or ``PYSPARK_SUBMIT_ARGS``
  containing ``--master``), the builder gets no ``.master()`` at all;
* otherwise (plain ``python`` / ``actorlog rollup``) the master is ``local[*]``.

Every run sets ``spark.sql.session.timeZone=UTC`` (windows and partitions are UTC). When this code
picks a local master, it also sets a small ``spark.sql.shuffle.partitions`` (the default 200 makes
tiny shuffles slow), no UI and a loopback driver address; under spark-submit those are left to the
launcher, so the job runs there unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_LOCAL_MASTER",
    "SessionPlan",
    "build_session",
    "launcher_configures_master",
    "plan_session",
]

DEFAULT_LOCAL_MASTER = "local[*]"
APP_NAME = "actorlog-rollup"


def launcher_configures_master(environ: Mapping[str, str]) -> bool:
    """True when spark-submit (or ``PYSPARK_SUBMIT_ARGS``) has already chosen the master."""
    if "PYSPARK_GATEWAY_PORT" in environ:
        # spark-submit ran the Python driver: the JVM it started has --master / spark-defaults applied.
        return True
    submit_arguments = environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    return "--master" in submit_arguments or any(a.startswith("--master=") for a in submit_arguments)


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """What the builder will be told: the master (None = leave it to the launcher) and settings."""

    master: str | None
    config: Mapping[str, str]

    @property
    def local(self) -> bool:
        return self.master is not None and self.master.startswith("local")


def plan_session(
    requested_master: str | None,
    environ: Mapping[str, str],
    *,
    shuffle_partitions: int | None = None,
    extra_config: Mapping[str, str] | None = None,
) -> SessionPlan:
    """Decide the master and configuration (pure, so the rule above is unit-tested)."""
    if requested_master is not None:
        master: str | None = requested_master
    elif launcher_configures_master(environ):
        master = None
    else:
        master = DEFAULT_LOCAL_MASTER
    config: dict[str, str] = {"spark.sql.session.timeZone": "UTC"}
    if master is not None and master.startswith("local"):
        config["spark.ui.enabled"] = "false"
        # The job prints its own progress, one line per stage; Spark's bar would interleave with it.
        config["spark.ui.showConsoleProgress"] = "false"
        # A few partitions per core: enough parallelism on a laptop, no 200-task shuffles.
        config["spark.sql.shuffle.partitions"] = str(shuffle_partitions or 2 * (os.cpu_count() or 1))
        # Bind and advertise loopback: a local run needs no network, and a hostname resolving to
        # an unreachable interface otherwise breaks fetching large task results.
        config["spark.driver.bindAddress"] = "127.0.0.1"
        config["spark.driver.host"] = "127.0.0.1"
    elif shuffle_partitions is not None:
        config["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    config.update(extra_config or {})
    return SessionPlan(master=master, config=config)


def build_session(plan: SessionPlan) -> SparkSession:
    builder = SparkSession.builder.appName(APP_NAME)
    if plan.master is not None:
        builder = builder.master(plan.master)
    for key, value in plan.config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    # Settings that only apply to a new context (UI, bind address) are ignored by getOrCreate on an
    # existing one; the SQL settings below are per session and can always be applied.
    session.conf.set("spark.sql.session.timeZone", "UTC")
    if "spark.sql.shuffle.partitions" in plan.config:
        session.conf.set("spark.sql.shuffle.partitions", plan.config["spark.sql.shuffle.partitions"])
    # Errors only: Spark's planner warnings (single-partition windows for the flapping ranking,
    # truncated plan strings) say nothing an operator can act on and bury the job's own lines.
    session.sparkContext.setLogLevel("ERROR")
    return session
