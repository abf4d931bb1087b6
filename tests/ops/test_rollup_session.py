"""Choosing the Spark master: never hard-coded over what spark-submit configured (pure, no JVM)."""

from __future__ import annotations

import pytest

from ops.rollup.session import DEFAULT_LOCAL_MASTER, launcher_configures_master, plan_session


def test_a_plain_python_run_defaults_to_local_with_small_shuffles_and_no_ui() -> None:
    plan = plan_session(None, {}, shuffle_partitions=3)

    assert plan.master == DEFAULT_LOCAL_MASTER == "local[*]"
    assert plan.local
    assert plan.config["spark.sql.shuffle.partitions"] == "3"
    assert plan.config["spark.ui.enabled"] == "false"
    assert plan.config["spark.driver.bindAddress"] == plan.config["spark.driver.host"] == "127.0.0.1"
    assert plan.config["spark.sql.session.timeZone"] == "UTC"


@pytest.mark.parametrize(
    "environ",
    [
        {"PYSPARK_GATEWAY_PORT": "40000"},  # spark-submit started the JVM and this driver
        {"PYSPARK_SUBMIT_ARGS": "--master k8s://https://api:6443 pyspark-shell"},
        {"PYSPARK_SUBMIT_ARGS": "--master=yarn pyspark-shell"},
    ],
)
def test_a_master_chosen_by_the_launcher_is_left_alone(environ: dict[str, str]) -> None:
    plan = plan_session(None, environ)

    assert launcher_configures_master(environ)
    assert plan.master is None
    assert not plan.local
    # Only the time zone is set; local-run tuning would override the launcher's settings.
    assert plan.config == {"spark.sql.session.timeZone": "UTC"}


def test_an_explicit_master_wins_even_under_a_launcher() -> None:
    plan = plan_session("local[2]", {"PYSPARK_GATEWAY_PORT": "40000"})

    assert plan.master == "local[2]"
    assert plan.config["spark.ui.enabled"] == "false"


def test_extra_settings_are_applied_last() -> None:
    plan = plan_session(None, {}, extra_config={"spark.ui.enabled": "true", "spark.driver.memory": "4g"})

    assert plan.config["spark.ui.enabled"] == "true"
    assert plan.config["spark.driver.memory"] == "4g"


def test_submit_arguments_without_a_master_do_not_count_as_configured() -> None:
    assert not launcher_configures_master({"PYSPARK_SUBMIT_ARGS": "--driver-memory 2g pyspark-shell"})
