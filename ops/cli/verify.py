"""``actorlog verify``: Jepsen-style verification of real processes.

    actorlog verify check HISTORY [--json] [--examples N]
    actorlog verify run --seed N | --seeds A-B [--faults K] [--duration S] [--dir DIR]
                        [--acks all|1] [--min-insync-replicas N] [--unclean] [--kinds K,K...]
                        [--tls]

``run`` runs one fault campaign per seed (``ops/verify/campaign.py``): three broker processes on a
real ZooKeeper, each behind its own fault-injecting proxy on 127.0.0.(10+N), idempotent producers,
a JSON API writer and a reader recording every operation, K seeded faults over S seconds, then
healing, the ISR bound, the final read, every replica's log, and the checker. It prints each fault
as it starts, one line per seed, and with several seeds the totals line. Each seed's history stays
at ``DIR/seed-N/history.jsonl`` (``verify check`` re-checks it); the brokers' data is removed when
the seed passed and kept when it failed. ``--tls``: the brokers listen on HTTPS (certificates made
with ``openssl`` as ``cluster up --tls`` makes them, naming each broker's 127.0.0.(10+N)), and the
proxies pass TLS through, so every client verifies each broker's certificate and host name.

``check`` judges a recorded history offline (``ops/verify/checker.py``): one totals line, then for
each error class found a block with its first examples, the longest unavailability per partition,
notes, and the verdict; ``--json`` prints the same as one JSON document instead.

Exit status: 0 when every history is valid (and, for ``run``, the ISR became full within its bound),
1 when one holds a violation, 2 on bad usage or a history that cannot be read (one line on stderr,
no traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import orjson

from actors.server.config import ProtocolFault
from ops.properties import ConfigError
from ops.verify.campaign import CampaignOptions, CampaignResult, run_campaign
from ops.verify.checker import ERROR_CLASSES, SUMMARY_GROUPS, CheckResult, Window, check_history
from ops.verify.faults import FaultKind
from ops.verify.history import HistoryError, read_history

__all__ = ["describe_example", "main", "summary_lines", "totals_line"]

_WINDOWS_SHOWN = 10


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="actorlog verify", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check,run}")
    check = commands.add_parser(
        "check", help="check a recorded history offline", description="Check a recorded history offline."
    )
    check.add_argument("history", metavar="HISTORY", help="the history file (JSON Lines)")
    check.add_argument("--json", action="store_true", help="print the result as one JSON document")
    check.add_argument(
        "--examples", type=int, default=10, metavar="N", help="examples kept per error class (10)"
    )
    run = commands.add_parser(
        "run", help="run seeded fault campaigns against real processes", description="Run fault campaigns."
    )
    seeds = run.add_mutually_exclusive_group(required=True)
    seeds.add_argument("--seed", type=int, metavar="N", help="one campaign")
    seeds.add_argument("--seeds", type=_seed_range, metavar="A-B", help="one campaign per seed, A to B")
    run.add_argument("--faults", type=int, default=20, metavar="K", help="faults per campaign (20)")
    run.add_argument("--duration", type=float, default=60.0, metavar="S", help="fault window, seconds (60)")
    run.add_argument("--dir", type=Path, default=Path("actorlog-verify"), help="where runs are kept")
    run.add_argument("--acks", choices=("all", "1"), default="all", help="the writers' acks (all)")
    run.add_argument("--min-insync-replicas", type=int, default=2, metavar="N", help="the topic's (2)")
    run.add_argument(
        "--unclean", action="store_true", help="unclean.leader.election.enable=true on the topic"
    )
    run.add_argument(
        "--protocol-fault",
        action="append",
        default=[],
        choices=[fault.value for fault in ProtocolFault],
        help="negative control: brokers built with this deliberate bug (ops/verify/faulty_broker.py)",
    )
    run.add_argument(
        "--expect-violation",
        action="store_true",
        help="negative control: stop at the first invalid seed; exit 0 if one was found, 1 if none",
    )
    run.add_argument(
        "--tls",
        action="store_true",
        help="HTTPS listeners (certificates made with openssl); clients verify them through the proxies",
    )
    run.add_argument(
        "--kinds",
        type=_kinds,
        default=tuple(FaultKind),
        metavar="K,K...",
        help="fault kinds (all): " + ", ".join(kind.value for kind in FaultKind),
    )
    return parser


def _seed_range(text: str) -> range:
    first, _, last = text.partition("-")
    try:
        start, end = int(first), int(last)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range A-B") from None
    if end < start:
        raise argparse.ArgumentTypeError(f"{text!r}: the range is empty")
    return range(start, end + 1)


def _kinds(text: str) -> tuple[FaultKind, ...]:
    known = {kind.value: kind for kind in FaultKind}
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}"
        )
    return tuple(known[name] for name in names)


def totals_line(result: CheckResult) -> str:
    """``history: N events; sends ...; read ...; lost 0, ...; longest unavailability 4.2 s``."""
    groups = ", ".join(f"{group} {result.group_count(group)}" for group in SUMMARY_GROUPS)
    longest = result.longest_unavailability
    unavailability = "none" if longest is None else f"{longest.duration_s:.1f} s ({longest.key})"
    return (
        f"history: {result.events} events; sends {result.sends_ok} ok, {result.sends_info} info, "
        f"{result.sends_fail} fail; read {result.values_read} values; {groups}; "
        f"longest unavailability {unavailability}"
    )


def _record(value: str | None) -> str:
    return "no record" if value is None else repr(value)


def _index_word(delta: int) -> str:
    return "index" if abs(delta) == 1 else "indexes"


_DESCRIPTIONS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "lost": lambda e: (
        f"{e['key']} {e['value']!r} acknowledged at offset {e['offset']} (event {e['writer']}) "
        "is absent from the final read"
    ),
    "lost-write": lambda e: (
        f"{e['key']} {e['value']!r} acknowledged at offset {e['offset']} (event {e['writer']}, index "
        f"{e['index']}) was never read, though index {e['max_read_index']} was "
        f"({e['max_read'].get('value')!r}, event {e['max_read'].get('reader')})"
    ),
    "unseen": lambda e: (
        f"{e['key']} {e['value']!r} acknowledged at offset {e['offset']} (event {e['writer']}) was never read"
    ),
    "no-final-read": lambda e: (
        f"{e['key']}: {e['unjudged']} of {e['acknowledged']} acknowledged sends not judged ({e['reason']}"
        + (f"; read up to offset {e['read_up_to']}" if e.get("read_up_to") is not None else "")
        + (f", high watermark {e['high_watermark']}" if e.get("high_watermark") is not None else "")
        + ")"
    ),
    "duplicate": lambda e: f"{e['key']} {e['value']!r} at {e['count']} offsets: {e['offsets']}",
    "inconsistent-offsets": lambda e: (
        f"{e['key']} offset {e['offset']} (index {e['index']}) holds {len(e['values'])} values: {e['values']}"
    ),
    "G1a": lambda e: (
        f"{e['key']} {e['value']!r} read by event {e['reader']}, but its send failed "
        f"(event {e['writer']}, {e['error']})"
    ),
    "dirty-read": lambda e: (
        f"{e['key']} {e['value']!r} read at offset {e['offset']} by event {e['reader']} "
        "is absent from the final read"
    ),
    "poll-skip": lambda e: (
        f"{e['key']} process {e['process']}: event {e['reader']} starts at {e['value']!r} (offset "
        f"{e['offset']}), {e['delta']} indexes after where event {e['previous_reader']} stopped; "
        f"skipped {e.get('skipped', [])}"
    ),
    "nonmonotonic-poll": lambda e: (
        f"{e['key']} process {e['process']}: event {e['reader']} starts at {e['value']!r} (offset "
        f"{e['offset']}), {1 - e['delta']} {_index_word(1 - e['delta'])} back from where event "
        f"{e['previous_reader']} stopped"
    ),
    "int-poll-skip": lambda e: (
        f"{e['key']} process {e['process']}: within event {e['reader']}, {e['value']!r} (offset "
        f"{e['offset']}) comes {e['delta']} indexes after the value before it; skipped {e.get('skipped', [])}"
    ),
    "int-nonmonotonic-poll": lambda e: (
        f"{e['key']} process {e['process']}: within event {e['reader']}, {e['value']!r} (offset "
        f"{e['offset']}) is {1 - e['delta']} {_index_word(1 - e['delta'])} back from the value before it"
    ),
    "nonmonotonic-send": lambda e: (
        f"{e['key']} process {e['process']}: {e['value']!r} landed at offset {e['offset']} (event "
        f"{e['writer']}), below {e['previous_value']!r} sent before it, at offset {e['previous_offset']}"
    ),
    "replica-divergence": lambda e: (
        f"{e['key']} broker {e['broker']} offset {e['offset']}: {_record(e['replica_value'])} where the "
        f"leader has {_record(e['leader_value'])} (high watermark {e['high_watermark']}, the leader's "
        f"{e['leader_high_watermark']}; compared with the {e['compared_with']})"
    ),
}


def describe_example(error_class: str, example: Mapping[str, Any]) -> str:
    """One line for one example of an error class."""
    describe = _DESCRIPTIONS.get(error_class)
    if describe is None:
        return _json(example)
    return describe(example)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _window_line(window: Window, origin_ns: int) -> str:
    start = (window.start_ns - origin_ns) / 1e9
    end = (window.end_ns - origin_ns) / 1e9
    line = (
        f"  {window.key}: {window.duration_s:.1f} s, from {start:.1f} s to {end:.1f} s"
        f"{' (still unavailable at the end)' if window.open else ''}, {window.failed_sends} failed sends"
    )
    if window.error:
        line += f" (first: {window.error})"
    if window.faults:
        line += "; nemesis: " + "; ".join(
            f"{fault['f']} at {(fault['time_ns'] - origin_ns) / 1e9:.1f} s {_json(fault['value'])}"
            for fault in window.faults
        )
    return line


def summary_lines(result: CheckResult) -> list[str]:
    """The text report: the totals line, a block per error class found, windows, notes, verdict."""
    lines = [totals_line(result)]
    for name in ERROR_CLASSES:
        count = result.counts[name]
        if not count:
            continue
        lines.append(f"{name}: {count}")
        examples = result.examples[name]
        lines += [f"  {describe_example(name, example)}" for example in examples]
        if count > len(examples):
            lines.append(f"  ... and {count - len(examples)} more")
    if result.unavailability:
        windows = sorted(result.unavailability.values(), key=lambda w: w.start_ns - w.end_ns)
        lines.append("longest unavailability per partition:")
        lines += [_window_line(window, result.origin_ns) for window in windows[:_WINDOWS_SHOWN]]
        if len(windows) > _WINDOWS_SHOWN:
            lines.append(f"  ... and {len(windows) - _WINDOWS_SHOWN} more partitions")
    lines += [f"note: {note}" for note in result.notes]
    violations = result.violations
    if violations:
        lines.append("INVALID: " + ", ".join(f"{name} {count}" for name, count in violations.items()))
    else:
        lines.append("valid")
    return lines


def campaign_line(result: CampaignResult) -> str:
    """One seed: its faults, its workload with and without faults, the ISR bound, the verdict."""
    faults = ", ".join(f"{kind} {count}" for kind, count in sorted(result.faults.items())) or "none"
    isr = "not within the bound" if result.isr_restored_s is None else f"{result.isr_restored_s:.1f} s"
    verdict = "valid" if result.valid else "INVALID"
    return (
        f"seed {result.options.seed}: {sum(result.faults.values())} faults ({faults}); "
        f"{result.acknowledged} acknowledged, {result.fault_free_rate:.0f}/s without faults, "
        f"{result.faulty_rate:.0f}/s during faults; ISR full {isr} after healing; "
        f"{result.broker_restarts} unplanned broker restarts; {verdict}"
    )


def _mean_rate(results: Sequence[CampaignResult], *, faulty: bool) -> float:
    rates = [result.faulty_rate if faulty else result.fault_free_rate for result in results]
    return sum(rates) / len(rates) if rates else 0.0


def campaign_totals_line(results: Sequence[CampaignResult]) -> str:
    """Every seed together: faults by kind, acknowledged writes, each violation group, the longest
    unavailability."""
    faults: Counter[str] = Counter()
    for result in results:
        faults.update(result.faults)
    groups = ", ".join(
        f"{group} {sum(result.check.group_count(group) for result in results)}" for group in SUMMARY_GROUPS
    )
    other = sum(result.check.counts[name] for result in results for name in ("lost-write", "no-final-read"))
    windows = [r.check.longest_unavailability for r in results if r.check.longest_unavailability]
    longest = max(windows, key=lambda window: window.duration_s, default=None)
    unavailability = "none" if longest is None else f"{longest.duration_s:.1f} s"
    by_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(faults.items()))
    return (
        f"totals: {len(results)} seeds, {sum(faults.values())} faults ({by_kind}); "
        f"{sum(r.acknowledged for r in results)} acknowledged writes "
        f"({_mean_rate(results, faulty=False):.0f}/s without faults, "
        f"{_mean_rate(results, faulty=True):.0f}/s during faults); {groups}, lost-write or "
        f"unjudged {other}; ISR not full within the bound {sum(r.isr_restored_s is None for r in results)}; "
        f"longest unavailability {unavailability}; "
        f"{sum(not r.valid for r in results)} invalid"
    )


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _run(arguments: argparse.Namespace) -> int:
    if arguments.faults < 0 or arguments.duration <= 0:
        print(
            "actorlog verify run: error: --faults must be 0 or more and --duration positive", file=sys.stderr
        )
        return 2
    if not 1 <= arguments.min_insync_replicas <= 3:
        print("actorlog verify run: error: --min-insync-replicas must be 1, 2 or 3", file=sys.stderr)
        return 2
    if arguments.tls and shutil.which("openssl") is None:
        print(
            "actorlog verify run: error: --tls needs the openssl command to make certificates",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The campaign's own ZooKeeper client reconnects through every ZooKeeper fault; its library
    # logs each failed attempt with a traceback, which says nothing a fault line does not.
    logging.getLogger("aiozk").setLevel(logging.CRITICAL)
    # SIGTERM as Ctrl-C: the running campaign is cancelled and cleans up (its broker processes
    # run in their own sessions and would outlive this one; their log dirs are mounts).
    signal.signal(signal.SIGTERM, _interrupt)
    seeds = [arguments.seed] if arguments.seed is not None else list(arguments.seeds)
    results: list[CampaignResult] = []
    for seed in seeds:
        options = CampaignOptions(
            seed=seed,
            faults=arguments.faults,
            duration_s=arguments.duration,
            kinds=arguments.kinds,
            acks=arguments.acks,
            min_insync_replicas=arguments.min_insync_replicas,
            unclean_leader_election=arguments.unclean,
            protocol_faults=tuple(arguments.protocol_fault),
            tls=arguments.tls,
        )
        directory = arguments.dir / f"seed-{seed}"
        if directory.exists():
            shutil.rmtree(directory)
        try:
            result = asyncio.run(run_campaign(options, directory, echo=lambda line: print(line, flush=True)))
        except KeyboardInterrupt:
            # asyncio.run cancelled the campaign: its cluster stopped the brokers and unmounted.
            print(
                f"actorlog verify run: interrupted at seed {seed}; its history: {directory}", file=sys.stderr
            )
            return 130
        except ConfigError as refused:
            # The certificates for --tls could not be made: said in one line, like bad usage.
            print(f"actorlog verify run: error: {refused}", file=sys.stderr)
            return 2
        results.append(result)
        for skipped in result.skipped:
            print(f"skipped: {skipped}")
        for error in result.fault_errors:
            print(f"fault error: {error}")
        print(campaign_line(result))
        if result.valid:
            shutil.rmtree(directory / "cluster", ignore_errors=True)
        else:
            print("\n".join(summary_lines(result.check)))
        print(f"history: {result.history_path}", flush=True)
        if arguments.expect_violation and not result.valid:
            print(f"violation detected at seed {seed}, after {len(results)} of {len(seeds)} seeds")
            return 0
    if len(results) > 1:
        print(campaign_totals_line(results))
    if arguments.expect_violation:
        print(f"no violation detected in {len(results)} seeds", file=sys.stderr)
        return 1
    return 0 if all(result.valid for result in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if arguments.command == "run":
        return _run(arguments)
    if arguments.examples < 0:
        print("actorlog verify check: error: --examples must be 0 or more", file=sys.stderr)
        return 2
    try:
        history = read_history(arguments.history)
    except HistoryError as error:
        print(f"actorlog verify check: error: {error}", file=sys.stderr)
        return 2
    result = check_history(history, max_examples=arguments.examples)
    if arguments.json:
        print(orjson.dumps(result.as_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        print("\n".join(summary_lines(result)))
    return 0 if result.valid else 1
