"""Test-session fixtures shared by every tier.

Real ZooKeeper
--------------
``zookeeper_server`` starts ONE standalone ZooKeeper for the whole test session, from the installed
package (``ops.local.zookeeper.LocalZooKeeper``), in a temporary directory on a free loopback port, with
tickTime=500 ms so tests can use session timeouts of 1-10 s. ``zk_connect_string`` gives each test
its own chroot (``host:port/actorlog-tests/<test>-<n>``) so tests never see each other's znodes.

When java or ZooKeeper is missing the ZooKeeper tests are skipped with the reason, unless
``ACTORLOG_REQUIRE_ZK`` is set (CI sets it), in which case they fail: a CI run without ZooKeeper
must not pass by skipping.

Usage::

    @pytest.mark.zk
    async def test_something(zk_connect_string: str) -> None:
        coordinator = ZkCoordinator(zk_connect_string, session_timeout_ms=2000)
        await coordinator.start()
        ...
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator

import pytest

from ops.local.zookeeper import LocalZooKeeper, ZooKeeperNotInstalledError, find_installation

ZK_TICK_TIME_MS = 500
"""tickTime of the session's ZooKeeper: sessions may last 2-20 ticks (1-10 s)."""

_chroot_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """One real ZooKeeper for the test session (skipped or failed when not installed, see above)."""
    try:
        installation = find_installation()
    except ZooKeeperNotInstalledError as error:
        if os.environ.get("ACTORLOG_REQUIRE_ZK"):
            pytest.fail(f"ACTORLOG_REQUIRE_ZK is set but ZooKeeper cannot run: {error}")
        pytest.skip(f"needs java and ZooKeeper (set ACTORLOG_REQUIRE_ZK to make this an error): {error}")
    server = LocalZooKeeper(
        tmp_path_factory.mktemp("zookeeper"),
        tick_time_ms=ZK_TICK_TIME_MS,
        # The data is thrown away after the session: fsync would only slow the tests down.
        force_sync=False,
        installation=installation,
    )
    server.start_sync()
    try:
        yield server
    finally:
        server.stop_sync()


@pytest.fixture
def zk_connect_string(zookeeper_server: LocalZooKeeper, request: pytest.FixtureRequest) -> str:
    """``host:port/chroot`` with a chroot unique to this test (created by the client's start)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    return f"{zookeeper_server.connect_string}/actorlog-tests/{name}-{next(_chroot_numbers)}"


# The longest test files, started first: `make test` runs two workers, each taking one file at a
# time in collection order (the Makefile turns off xdist's own reordering by test count), so a long
# file collected last would run alone at the end while the other worker sits idle. Longest first
# (the durations `make test` prints at its end).
_LONGEST_FIRST = (
    "tests/ops/test_demo.py",
    "tests/ops/test_rollup_standalone.py",
    "tests/integration/test_readme_walkthrough.py",
    "tests/sim/test_seeds.py",
    "tests/integration/test_verify_campaign.py",
    "tests/sim/test_negative_controls.py",
    "tests/ops/test_rollup_job.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the longest files to the front, keeping every other order as collected."""
    rank = {path: index for index, path in enumerate(_LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: the rest keep their collected order
