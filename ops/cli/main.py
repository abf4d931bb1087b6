"""The ``actorlog`` command (also ``python -m ops``): one entry point, one subcommand per tool.

Each subcommand lives in its own module with a ``main(argv) -> int``; this module only dispatches,
importing the chosen module on demand (so ``actorlog produce`` never imports PySpark). Errors are
one clear line on stderr and a non-zero exit; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

__all__ = ["COMMANDS", "main"]

# subcommand -> (module, one-line description)
COMMANDS: dict[str, tuple[str, str]] = {
    "cluster": ("ops.cli.cluster", "run a local cluster (cluster up)"),
    "broker": ("ops.broker_main", "run one broker process (broker start --config FILE)"),
    "topics": ("ops.cli.topics", "create, describe, list, alter and delete topics"),
    "produce": ("ops.cli.console_producer", "console producer: lines from stdin to a topic"),
    "consume": ("ops.cli.console_consumer", "console consumer: records from a topic to stdout"),
    "perf": ("ops.cli.perf", "producer and consumer performance tools (perf produce|consume)"),
    "dump-log": ("ops.cli.dump_log", "print the contents of log segment and index files"),
    "sim": ("ops.cli.sim", "deterministic whole-cluster simulation (sim --seed N | --seeds A-B)"),
    "verify": ("ops.cli.verify", "Jepsen-style verification: check a run's history (verify check HISTORY)"),
    "demo": ("ops.cli.demo", "the main job: a local cluster, ISR shrink/expand, leader failover, rollup"),
    "rollup": ("ops.rollup.job", "PySpark rollup of exported metric snapshots"),
    "snapshots": ("ops.cli.snapshots", "export metric snapshots from a running cluster (snapshots export)"),
    "zookeeper": ("ops.cli.zookeeper", "run a standalone ZooKeeper from the installed package"),
}


def _usage() -> str:
    lines = ["usage: actorlog <command> [options]", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()]
    lines += ["", "Run `actorlog <command> --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if arguments else 2
    command, rest = arguments[0], arguments[1:]
    if command not in COMMANDS:
        print(f"actorlog: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _ = COMMANDS[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            print(f"actorlog: the {command!r} command is not available in this build", file=sys.stderr)
            return 2
        raise
    entry: Callable[[list[str]], int] = module.main
    # argparse takes its program name from argv[0]: make help and errors say "actorlog <command>".
    sys.argv[0] = f"actorlog {command}"
    try:
        return int(entry(rest))
    except KeyboardInterrupt:
        return 130
