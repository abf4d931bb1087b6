"""``actorlog verify``: Jepsen-style verification of real processes.

    actorlog verify check HISTORY [--json] [--examples N]

``check`` judges a recorded history offline (``ops/verify/checker.py``): one totals line, then for
each error class found a block with its first examples, the longest unavailability per partition,
notes, and the verdict; ``--json`` prints the same as one JSON document instead.

Exit status: 0 when the history is valid, 1 when it holds a violation, 2 on bad usage or a history
that cannot be read (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import orjson

from ops.verify.checker import ERROR_CLASSES, SUMMARY_GROUPS, CheckResult, Window, check_history
from ops.verify.history import HistoryError, read_history

__all__ = ["describe_example", "main", "summary_lines", "totals_line"]

_WINDOWS_SHOWN = 10


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="actorlog verify", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check}")
    check = commands.add_parser(
        "check", help="check a recorded history offline", description="Check a recorded history offline."
    )
    check.add_argument("history", metavar="HISTORY", help="the history file (JSON Lines)")
    check.add_argument("--json", action="store_true", help="print the result as one JSON document")
    check.add_argument(
        "--examples", type=int, default=10, metavar="N", help="examples kept per error class (10)"
    )
    return parser


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


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
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
