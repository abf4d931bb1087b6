"""Fixtures for the dashboard tests: the installed Prometheus and promtool.

When either is missing the tests that need it are skipped with the reason, unless
``ACTORLOG_REQUIRE_PROMETHEUS`` is set (CI sets it), in which case they fail: a CI run without
Prometheus must not pass by skipping. ``make setup`` installs the package.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ops.local.prometheus import PrometheusNotInstalledError, find_prometheus, find_promtool


def _installed(find: Callable[[], Path]) -> Path:
    try:
        return find()
    except PrometheusNotInstalledError as error:
        if os.environ.get("ACTORLOG_REQUIRE_PROMETHEUS"):
            pytest.fail(f"ACTORLOG_REQUIRE_PROMETHEUS is set but {error}")
        pytest.skip(f"{error} (set ACTORLOG_REQUIRE_PROMETHEUS to make this an error)")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return _installed(find_promtool)


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    return _installed(find_prometheus)
