"""``actorlog sim``: the deterministic whole-cluster simulation.

    actorlog sim --seed 42 [--steps 120] [--verbose]      one seed: its event log, and on failure
                                                           the shortest schedule that still fails
    actorlog sim --seeds 1-10000 [--jobs 2]               many seeds in parallel processes: seeds/s,
                                                           faults per kind, checks, failing seeds

A run is decided by its seed alone, provided Python's hash seed is fixed too (set iteration order
decides some message orders): the command re-runs itself with ``PYTHONHASHSEED=0`` when it is not.
Exit status: 0 when every seed passed, 1 when one failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import NoReturn

from ops.sim.runner import RunResult, SimOptions, run_seed, shrink

__all__ = ["main", "parse_seed_range", "run_one"]


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_seed_range(text: str) -> range:
    """``7`` or ``1-10000`` (inclusive)."""
    first, separator, last = text.partition("-")
    if not first.isdigit() or (separator and not last.isdigit()):
        raise argparse.ArgumentTypeError(f"expected N or FIRST-LAST, got {text!r}")
    low, high = int(first), int(last) if separator else int(first)
    if high < low:
        raise argparse.ArgumentTypeError(f"empty seed range {text!r}")
    return range(low, high + 1)


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="actorlog sim", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="run one seed")
    which.add_argument("--seeds", type=parse_seed_range, help="run a range of seeds, e.g. 1-10000")
    parser.add_argument("--steps", type=int, default=SimOptions().steps, help="actions per run (120)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes")
    parser.add_argument("--verbose", action="store_true", help="print the event log as it happens")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink a failing schedule")
    return parser


def run_one(arguments: tuple[int, int]) -> tuple[int, str | None, int, float, dict[str, int], int, int, str]:
    """One seed in a worker process: (seed, violation, virtual ms, wall s, faults by kind,
    checks, actions, event-log hash)."""
    seed, steps = arguments
    logging.basicConfig(level=logging.CRITICAL)  # a worker process: only the outcome matters
    result = run_seed(seed, SimOptions(steps=steps))
    violation = None if result.violation is None else str(result.violation)
    return (
        seed, violation, result.virtual_ms, result.wall_s, dict(result.faults), result.checks, result.steps,
        result.events.digest(),
    )  # fmt: skip


def _report_failure(result: RunResult, options: SimOptions, *, shrink_it: bool) -> None:
    assert result.violation is not None
    print(f"seed {result.seed} FAILED: {result.violation}")
    print("\nevent log (last 80 lines):")
    print(result.events.tail(80))
    if shrink_it:
        print("\nshrinking the schedule...", flush=True)
        smallest = shrink(result, options)
        print(
            f"shortest schedule found: {smallest.steps} of {result.steps} actions, still {smallest.violation}"
        )
        from ops.sim.plan import as_python, describe

        for action in smallest.plan:
            print(f"  {action.at_ms:>8} ms  {describe(action)}")
        print("\nas a regression schedule (tests/sim/test_regressions.py):")
        print("\n".join(f"    {as_python(action)}," for action in smallest.plan))
    print(f"\nreplay: actorlog sim --seed {result.seed} --steps {options.steps} --verbose")


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Re-run with a fixed hash seed: the seed alone must decide the run.
        environment = dict(os.environ, PYTHONHASHSEED="0")
        command = [sys.executable, "-m", "ops", "sim", *(sys.argv[1:] if argv is None else argv)]
        os.execve(sys.executable, command, environment)
    logging.basicConfig(level=logging.CRITICAL)
    options = SimOptions(steps=arguments.steps, echo=arguments.verbose)
    if arguments.seed is not None:
        result = run_seed(arguments.seed, options)
        print(
            f"seed {result.seed}: {'passed' if result.passed else 'FAILED'}; {result.steps} actions, "
            f"{result.virtual_ms / 1000:.1f} s virtual in {result.wall_s:.2f} s, {result.checks} checks, "
            f"{result.acked_records} records acknowledged, faults {dict(sorted(result.faults.items()))}, "
            f"event log {result.events.digest()[:16]}"
        )
        if not result.passed:
            _report_failure(result, options, shrink_it=not arguments.no_shrink)
            return 1
        return 0
    seeds: range = arguments.seeds
    started = time.perf_counter()
    faults: Counter[str] = Counter()
    failures: list[tuple[int, str]] = []
    checks = steps = 0
    virtual_ms = 0
    context = multiprocessing.get_context("spawn")
    done = 0
    interrupted = False
    # SIGTERM as Ctrl-C: a campaign stopped early still reports the seeds it finished.
    signal.signal(signal.SIGTERM, _interrupt)
    with context.Pool(max(1, arguments.jobs)) as pool:
        try:
            for done, (seed, violation, virtual, _, kinds, seed_checks, seed_steps, _) in enumerate(
                pool.imap_unordered(run_one, [(seed, arguments.steps) for seed in seeds]), 1
            ):
                faults.update(kinds)
                checks += seed_checks
                steps += seed_steps
                virtual_ms += virtual
                if violation is not None:
                    failures.append((seed, violation))
                    print(f"seed {seed} FAILED: {violation}", flush=True)
                if done % 100 == 0:
                    elapsed = time.perf_counter() - started
                    print(f"{done}/{len(seeds)} seeds, {done / elapsed:.2f} seeds/s", flush=True)
        except KeyboardInterrupt:
            interrupted = True
            pool.terminate()
    elapsed = time.perf_counter() - started
    if interrupted:
        print(f"interrupted after {done} of {len(seeds)} seeds (finished in any order)")
    print(
        f"{done} seeds in {elapsed:.1f} s ({done / elapsed:.2f} seeds/s, {arguments.jobs} jobs): "
        f"{done - len(failures)} passed, {len(failures)} failed; {steps} actions, "
        f"{virtual_ms / 1000:.0f} s virtual, {checks} invariant checks"
    )
    print("faults injected: " + ", ".join(f"{kind} {count}" for kind, count in sorted(faults.items())))
    for seed, violation in sorted(failures):
        print(f"  seed {seed}: {violation}")
    return 1 if failures or interrupted else 0
