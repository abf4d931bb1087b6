"""``actorlog verify check``: the totals line, a block per error class, ``--json``, and the exit codes
(0 valid, 1 a violation, 2 bad usage or a history that cannot be read, without a traceback)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from ops.cli import main as actorlog
from ops.cli.verify import campaign_line, campaign_totals_line, main
from ops.verify.campaign import CampaignOptions, CampaignResult
from ops.verify.checker import check_history
from ops.verify.history import HistoryWriter, read_history
from runtime.clock import ManualClock

K = "orders-0"


def _history(path: Path, *, lose: bool = False) -> Path:
    clock = ManualClock()
    with HistoryWriter(path, clock) as history:
        history.send_ok(history.send(0, K, "a"), 0)
        clock.advance(1000)
        failing = history.send(1, K, "x")
        history.fault({"kind": "pause-long", "broker": 2})
        clock.advance(4200)
        failing.info(error="REQUEST_TIMED_OUT")
        history.send_ok(history.send(1, K, "b"), 1)
        history.poll(2).ok({K: [[0, "a"], [1, "b"]]})
        history.final_read(3, K, [(0, "a")] if lose else [(0, "a"), (1, "b")], high_watermark=2)
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_a_valid_history_exits_0_with_its_totals_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = _run(capsys, "check", str(_history(tmp_path / "h.jsonl")))
    assert code == 0, lines
    assert lines[0] == (
        "history: 10 events; sends 2 ok, 1 info, 0 fail; read 2 values; lost 0, duplicated 0, "
        "inconsistent 0, order 0, dirty 0, divergent 0, unseen 0; longest unavailability 4.2 s (orders-0)"
    )
    assert lines[1] == "longest unavailability per partition:"
    assert lines[2].startswith(
        "  orders-0: 4.2 s, from 1.0 s to 5.2 s, 1 failed sends (first: REQUEST_TIMED_OUT)"
    )
    assert "nemesis: fault at 1.0 s" in lines[2]
    assert lines[-1] == "valid"
    assert err == ""


def test_a_violation_exits_1_with_a_block_per_error_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = _run(capsys, "check", str(_history(tmp_path / "h.jsonl", lose=True)))
    assert code == 1
    assert "lost 1," in lines[0]
    assert "dirty 1," in lines[0]
    lost = lines.index("lost: 1")
    assert (
        lines[lost + 1] == "  orders-0 'b' acknowledged at offset 1 (event 6) is absent from the final read"
    )
    dirty = lines.index("dirty-read: 1")
    assert lines[dirty + 1] == "  orders-0 'b' read at offset 1 by event 8 is absent from the final read"
    assert lines[-1] == "INVALID: lost 1, dirty-read 1"


def test_json_prints_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = _run(capsys, "check", str(_history(tmp_path / "h.jsonl", lose=True)), "--json")
    assert code == 1
    document = orjson.loads("\n".join(lines))
    assert document["valid"] is False
    assert document["sends"] == {"ok": 2, "info": 1, "fail": 0}
    assert document["counts"]["lost"] == 1
    assert document["examples"]["lost"] == [{"key": K, "value": "b", "offset": 1, "writer": 6}]
    assert document["longest_unavailability"]["duration_s"] == pytest.approx(4.2)


def test_a_malformed_history_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _history(tmp_path / "h.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], b"garbage\n", *lines[3:]]))
    code, out, err = _run(capsys, "check", str(path))
    assert code == 2
    assert out == []
    assert len(err.splitlines()) == 1
    assert err.startswith(f"actorlog verify check: error: {path}, line 4: not JSON (")


def test_a_crashed_runs_history_is_checked_up_to_the_tear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _history(tmp_path / "h.jsonl")
    path.write_bytes(path.read_bytes() + b'{"index": 10, "ti')
    code, lines, _ = _run(capsys, "check", str(path))
    assert code == 0
    assert (
        "note: line 11 is truncated (the run crashed while writing it); the events before it were checked"
        in lines
    )


@pytest.mark.parametrize("args", [[], ["check"], ["run"], ["check", "h.jsonl", "--bogus"]])
def test_bad_usage_exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_tls_without_openssl_is_one_line_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no openssl on it
    assert main(["run", "--seed", "1", "--tls", "--dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err == "actorlog verify run: error: --tls needs the openssl command to make certificates\n"
    assert not (tmp_path / "runs").exists()


def test_a_missing_history_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "check", str(tmp_path / "absent.jsonl"))
    assert code == 2
    assert err.startswith("actorlog verify check: error: ")
    assert "cannot read" in err


def test_the_actorlog_command_dispatches_to_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert actorlog.main(["verify", "check", str(_history(tmp_path / "h.jsonl"))]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "valid"


def test_the_campaign_lines_give_faults_rates_and_every_violation_group(tmp_path: Path) -> None:
    """``verify run``'s seed line and totals line; the second seed lost the value a poll had read
    (lost and dirty) and its ISR did not become full within the bound."""

    def result(seed: int, *, lose: bool, isr_restored_s: float | None) -> CampaignResult:
        path = _history(tmp_path / f"seed-{seed}.jsonl", lose=lose)
        return CampaignResult(
            options=CampaignOptions(seed=seed),
            history_path=path,
            check=check_history(read_history(path)),
            faults=Counter({"kill-leader": 2, "partition": 1} if seed == 1 else {"kill-leader": 1}),
            acknowledged=2,
            fault_free_rate=100.0 * seed,
            faulty_rate=10.0 * seed,
            isr_restored_s=isr_restored_s,
        )

    good, bad = result(1, lose=False, isr_restored_s=0.5), result(2, lose=True, isr_restored_s=None)
    assert campaign_line(good) == (
        "seed 1: 3 faults (kill-leader 2, partition 1); 2 acknowledged, 100/s without faults, "
        "10/s during faults; ISR full 0.5 s after healing; 0 unplanned broker restarts; valid"
    )
    assert campaign_line(bad).endswith(
        "ISR full not within the bound after healing; 0 unplanned broker restarts; INVALID"
    )
    assert campaign_totals_line([good, bad]) == (
        "totals: 2 seeds, 4 faults (kill-leader 3, partition 1); 4 acknowledged writes (150/s without "
        "faults, 15/s during faults); lost 1, duplicated 0, inconsistent 0, order 0, dirty 1, divergent 0, "
        "unseen 0, lost-write or unjudged 0; ISR not full within the bound 1; longest unavailability "
        "4.2 s; 1 invalid"
    )
