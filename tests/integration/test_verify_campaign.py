"""One short fault campaign on real processes, run as an operator runs it: ``actorlog verify run
--tls`` (three broker processes on a real ZooKeeper behind fault-injecting proxies, over HTTPS
through the proxies with every host name verified, idempotent producers, a JSON API writer and a
reader, 20 seeded faults of every kind in 25 s, healing, the final read, every replica's log, the
checker), then ``actorlog verify check`` on the history it kept. The long campaign (plain HTTP)
and the negative controls are ``make chaos`` and ``make chaos-controls``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from actors.server.config import ProtocolFault
from ops import broker_main
from ops.config import load_broker_settings
from ops.verify import faulty_broker

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]


def actorlog(*arguments: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "ops", *arguments],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout_s,
        check=False,
    )


def test_a_short_campaign_of_twenty_faults_loses_no_acknowledged_write(tmp_path: Path) -> None:
    run = actorlog(
        "verify", "run", "--seed", "20", "--faults", "20", "--duration", "25", "--dir", str(tmp_path),
        "--tls", timeout_s=400,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "cluster up: 3 brokers over HTTPS" in run.stdout
    line = re.search(
        r"^seed 20: (\d+) faults \((.*?)\); (\d+) acknowledged.*; valid$", run.stdout, re.MULTILINE
    )
    assert line is not None, run.stdout[-4000:]
    assert int(line[1]) == 20
    assert int(line[3]) > 1_000
    assert "ISR full" in line[0]

    history = tmp_path / "seed-20" / "history.jsonl"
    assert history.is_file()
    assert not (tmp_path / "seed-20" / "cluster").exists()  # a valid seed's broker data is removed
    check = actorlog("verify", "check", str(history), timeout_s=120)
    assert check.returncode == 0, check.stdout[-4000:]
    totals = check.stdout.splitlines()[0]
    assert re.search(rf"sends {line[3]} ok, \d+ info, \d+ fail", totals), totals
    assert "lost 0, duplicated 0, inconsistent 0, order 0, dirty 0, divergent 0, unseen 0" in totals
    assert check.stdout.splitlines()[-1] == "valid"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--seed", "1", "--kinds", "kill-leader,meteor"], "unknown fault kind(s) meteor"),
        (["--seeds", "5-2"], "the range is empty"),
        (["--seed", "1", "--duration", "0"], "--duration positive"),
        (["--seed", "1", "--min-insync-replicas", "4"], "must be 1, 2 or 3"),
        (["--seed", "1", "--protocol-fault", "nonsense"], "invalid choice"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(arguments: list[str], message: str, tmp_path: Path) -> None:
    run = actorlog("verify", "run", "--dir", str(tmp_path), *arguments, timeout_s=60)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr
    assert not any(tmp_path.iterdir())  # nothing started


def test_the_negative_controls_broker_carries_its_protocol_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ops/verify/faulty_broker.py`` is ``actorlog broker`` with the fault set on the loaded
    settings, the rest of the command line passed through untouched."""
    seen: dict[str, object] = {}

    def fake_main(argv: list[str], *, adjust: object) -> int:
        seen["argv"] = argv
        seen["adjust"] = adjust
        return 0

    monkeypatch.setattr(broker_main, "main", fake_main)
    argv = ["--protocol-fault", "truncate-to-high-watermark", "broker", "start", "--config", "x.properties"]
    argv += ["--log-format", "console"]
    assert faulty_broker.main(argv) == 0
    assert seen["argv"] == ["start", "--config", "x.properties", "--log-format", "console"]
    adjust = seen["adjust"]
    assert callable(adjust)
    settings = load_broker_settings(
        overrides=[
            "broker.id=1",
            "log.dirs=/tmp/unused",
            "zookeeper.connect=127.0.0.1:2181",
            "internal.auth.secret=0123456789abcdef",
        ],
        environ={},
    )
    adjusted = adjust(settings)
    assert adjusted.broker.protocol_faults == frozenset({ProtocolFault.TRUNCATE_TO_HIGH_WATERMARK})
    assert settings.broker.protocol_faults == frozenset()


def test_the_negative_controls_broker_refuses_an_unknown_fault() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "ops.verify.faulty_broker", "--protocol-fault", "nonsense", "broker", "start"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert "invalid choice: 'nonsense'" in run.stderr
