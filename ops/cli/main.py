"""The ``actorlog`` command (also ``python -m ops``): one entry point, one subcommand per tool.

Each subcommand lives in its own module with a ``main(argv) -> int``; this module dispatches,
importing the chosen module on demand (so ``actorlog produce`` never imports PySpark), and owns
what every tool does the same way:

* Errors are one line on stderr and a non-zero exit. A tool reports the errors it expects; anything
  else that escapes it is printed here as ``actorlog <command>: <Type>: <message>`` (exit 1).
  ``actorlog --debug <command> ...`` shows the traceback instead (and, for the client tools, the
  library's log records from DEBUG up).
* Output into a closed pipe (``actorlog consume ... | head -1``) ends the tool quietly with 141,
  the status of a process that SIGPIPE ended — no BrokenPipeError traceback, and no "Exception
  ignored" when Python flushes stdout at exit.
* The client tools (``CLIENT_TOOLS``) show log records of ERROR and above only, one line each (a
  retry's WARNING is the library talking to itself, not news for the user), and end within a second
  of Ctrl-C (SIGINT) or SIGTERM with status 130 or 143, as a JVM tool does. The first signal
  cancels the tool's asyncio main task, as ``asyncio.run`` does for Ctrl-C (outside an event loop it
  raises KeyboardInterrupt), so ``async with`` blocks close what they opened; a tool that handles the
  signal itself (``loop.add_signal_handler``, e.g. the console consumer) keeps doing so. A tool that
  lets the cancellation escape gets the line ``actorlog <command>: interrupted (SIGINT)``
  (``terminated (SIGTERM)``). If the process has not ended ``_STOP_GRACE_S`` after the signal (a
  close waiting on a broker that does not answer, a thread blocked reading stdin), or when a second
  signal comes, it ends at once with that line and status. The other tools (cluster, broker,
  zookeeper, demo, sim, verify...) handle their stop signals themselves.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import Context
from types import FrameType
from typing import Any, Final, NoReturn, TypeVar, TypeVarTuple

from runtime.logging import configure_logging

__all__ = ["CLIENT_TOOLS", "COMMANDS", "main"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

# subcommand -> (module, one-line description)
COMMANDS: dict[str, tuple[str, str]] = {
    "cluster": (
        "ops.cli.cluster",
        "run a local cluster (cluster up); partitions in trouble and the restart check (cluster health)",
    ),
    "broker": ("ops.broker_main", "run one broker process (broker start --config FILE)"),
    "topics": ("ops.cli.topics", "create, describe, list, alter and delete topics"),
    "configs": (
        "ops.cli.configs",
        "describe and alter dynamic broker and topic configs (replication throttles)",
    ),
    "reassign-partitions": (
        "ops.cli.reassign_partitions",
        "move partition replicas between brokers (generate, execute, verify, cancel, list)",
    ),
    "leader-election": ("ops.cli.leader_election", "elect preferred or unclean leaders of partitions"),
    "produce": ("ops.cli.console_producer", "console producer: lines from stdin to a topic"),
    "consume": ("ops.cli.console_consumer", "console consumer: records from a topic to stdout"),
    "perf": ("ops.cli.perf", "producer and consumer performance tools (perf produce|consume)"),
    "dump-log": ("ops.cli.dump_log", "print the contents of log segment and index files"),
    "sim": ("ops.cli.sim", "deterministic whole-cluster simulation (sim --seed N | --seeds A-B)"),
    "verify": ("ops.cli.verify", "Jepsen-style verification: check a run's history (verify check HISTORY)"),
    "demo": ("ops.cli.demo", "the main job: a local cluster, ISR shrink/expand, leader failover, rollup"),
    "rollup": ("ops.rollup.job", "PySpark rollup of exported metric snapshots"),
    "snapshots": ("ops.cli.snapshots", "export metric snapshots from a running cluster (snapshots export)"),
    "users": ("ops.cli.users", "add, delete and list client users (SCRAM-SHA-256 in ZooKeeper)"),
    "zookeeper": ("ops.cli.zookeeper", "run a standalone ZooKeeper from the installed package"),
}

# Tools that talk to a cluster (or read files) and start no processes of their own: the stop
# signals and the log output are handled here for them (module docstring).
CLIENT_TOOLS: Final = frozenset(
    {"topics", "configs", "reassign-partitions", "leader-election", "produce", "consume", "perf", "dump-log"}
)

_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
# From the first stop signal to the end of the process at the latest, flushing stdout included:
# the tools promise to be gone within a second.
_STOP_GRACE_S: Final = 0.8
_FLUSH_GRACE_S: Final = 0.1
# A process that SIGPIPE ended exits with 128 + 13: what `yes | head -1` reports under pipefail.
_BROKEN_PIPE_STATUS: Final = 141


def _usage() -> str:
    lines = ["usage: actorlog <command> [options]", "       actorlog --debug <command> [options]", ""]
    lines += ["commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()]
    lines += ["", "Run `actorlog <command> --help` for a command's options. --debug shows tracebacks,"]
    lines += ["and the client tools' log records below ERROR."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _dispatch(list(sys.argv[1:] if argv is None else argv))
        # Buffered output meets a closed pipe here rather than at interpreter exit.
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        # Ctrl-C outside any tool (between the tool's end and the process's): still one line.
        print("actorlog: interrupted", file=sys.stderr)
        return 130
    return status


def _dispatch(arguments: list[str]) -> int:
    debug = bool(arguments) and arguments[0] == "--debug"
    if debug:
        arguments = arguments[1:]
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if arguments else 2
    command, rest = arguments[0], arguments[1:]
    if command not in COMMANDS:
        print(f"actorlog: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    if command not in CLIENT_TOOLS:
        return _run(command, rest, None, debug=debug)
    stops = _StopSignals(command)
    stops.install()
    restore_logging = _configure_client_logging(command, debug=debug)
    try:
        return _run(command, rest, stops, debug=debug)
    finally:
        # Called in-process (tests), the caller gets its handlers, loop policy and logging back;
        # after a stop signal they stay: the process is ending, under the deadline.
        if stops.received is None:
            stops.uninstall()
            restore_logging()


def _run(command: str, rest: list[str], stops: _StopSignals | None, *, debug: bool) -> int:
    module_name, _ = COMMANDS[command]
    try:
        module = importlib.import_module(module_name)
        entry: Callable[[list[str]], int] = module.main
        # argparse takes its program name from argv[0]: make help and errors say "actorlog <command>".
        sys.argv[0] = f"actorlog {command}"
        status = int(entry(rest))
    except BrokenPipeError:
        raise  # main's: quiet
    except (KeyboardInterrupt, asyncio.CancelledError):
        # The tool let the interruption escape: say so, in one line.
        if stops is not None and stops.received is not None:
            return stops.report()
        print(f"actorlog {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # whatever a tool did not expect is still one line
        if isinstance(error, ModuleNotFoundError) and error.name == module_name:
            print(f"actorlog: the {command!r} command is not available in this build", file=sys.stderr)
            return 2
        if debug:
            raise
        if stops is not None and stops.received is not None:
            return stops.report()  # a failure on the way out of a stop is the stop
        text = " ".join(str(error).split()) or "(no message)"
        print(f"actorlog {command}: {type(error).__name__}: {text}", file=sys.stderr)
        return 1
    if stops is not None and stops.received is not None:
        return stops.status  # the tool handled the signal and reported it (the console consumer's total)
    return status


def _quiet_broken_pipe() -> int:
    # Python flushes stdout again at exit, which would fail the same way and print "Exception
    # ignored ... BrokenPipeError": point stdout at /dev/null first (the recipe in Python's
    # documentation of SIGPIPE).
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a file descriptor (called in-process): nothing flushes it at exit
    finally:
        os.close(devnull)
    return _BROKEN_PIPE_STATUS


# ------------------------------------------------------------------------------------ logging


class _OneLineFormatter(logging.Formatter):
    """``actorlog <command>: <message>``, the first line of it, with an exception as its type and
    message rather than a traceback."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self._prefix = f"actorlog {command}: "

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().splitlines()
        text = lines[0] if lines else ""
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {' '.join(str(error).split())}"
        return self._prefix + text


def _configure_client_logging(command: str, *, debug: bool) -> Callable[[], None]:
    """Log records to stderr: one line each from ERROR up, or everything with ``--debug``.
    Returns what puts the root logger back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level

    def restore() -> None:
        for each in list(root.handlers):
            root.removeHandler(each)
        for each in handlers:
            root.addHandler(each)
        root.setLevel(level)

    if debug:
        configure_logging("DEBUG", fmt="console")
        return restore
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLineFormatter(command))
    for existing in handlers:
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(logging.ERROR)
    return restore


# ------------------------------------------------------------------------------- stop signals


class _StopSignals:
    """SIGINT and SIGTERM for a client tool (module docstring): the first one cancels the tool and
    starts the deadline; the deadline, or a second signal, ends the process."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.received: signal.Signals | None = None
        self._lock = threading.Lock()
        self._reported = False
        # Set when the interpreter reaches its exit handlers: by then every non-daemon thread has
        # ended, so the process is as good as gone and the deadline has nothing left to cut.
        self._exiting = threading.Event()
        self._previous: dict[signal.Signals, Any] = {}
        self._previous_policy: asyncio.AbstractEventLoopPolicy | None = None

    @property
    def status(self) -> int:
        assert self.received is not None
        return 128 + int(self.received)

    def install(self) -> None:
        self._previous = {number: signal.signal(number, self.on_signal) for number in _STOP_SIGNALS}
        self._previous_policy = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(_ClientLoopPolicy(self))
        atexit.register(self._exiting.set)

    def uninstall(self) -> None:
        asyncio.set_event_loop_policy(self._previous_policy)
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        atexit.unregister(self._exiting.set)

    def on_signal(self, number: int, frame: FrameType | None) -> None:
        """The process-level handler, run by the main thread between two bytecodes."""
        self.note(number)
        loop = _running_loop()
        if isinstance(loop, _ClientLoop) and loop.cancel_main():
            return
        raise KeyboardInterrupt

    def note(self, number: int) -> None:
        """A stop signal arrived (whoever handles it): the first starts the deadline, another one
        ends the process now."""
        if self.received is not None:
            self._end_now()
        self.received = signal.Signals(number)
        threading.Thread(target=self._deadline, name="actorlog-stop-deadline", daemon=True).start()

    def report(self) -> int:
        """Print the line (once) and return the status."""
        with self._lock:
            if not self._reported:
                self._reported = True
                print(self._line(), file=sys.stderr, flush=True)
        return self.status

    def _line(self) -> str:
        assert self.received is not None
        what = "interrupted" if self.received is signal.SIGINT else "terminated"
        return f"actorlog {self.command}: {what} ({self.received.name})"

    def _deadline(self) -> None:
        if not self._exiting.wait(_STOP_GRACE_S):
            self._end_now()

    def _end_now(self) -> NoReturn:
        # Written straight to the descriptor: the main thread may hold sys.stderr's lock, and may
        # be stuck holding sys.stdout's (writing to a full pipe), so stdout is flushed by a thread
        # that is given _FLUSH_GRACE_S.
        if self._lock.acquire(timeout=_FLUSH_GRACE_S) and not self._reported:
            self._reported = True
            with contextlib.suppress(OSError):  # nowhere left to say it
                os.write(2, (self._line() + "\n").encode())
        flusher = threading.Thread(target=_flush_stdout, name="actorlog-stop-flush", daemon=True)
        flusher.start()
        flusher.join(_FLUSH_GRACE_S)
        os._exit(self.status)


def _flush_stdout() -> None:
    # A closed pipe or file, or the main thread in the middle of a write: nothing left to save.
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        sys.stdout.flush()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _ClientLoop(asyncio.SelectorEventLoop):
    """A client tool's event loop: it knows its first task (``asyncio.run``'s main task) so that a
    stop signal can cancel it, and a tool's own SIGINT/SIGTERM handler also notes the signal (the
    deadline applies to it too)."""

    def __init__(self, stops: _StopSignals) -> None:
        super().__init__()
        self._stops = stops
        self._main_task: asyncio.Task[Any] | None = None

    def create_task(
        self,
        coro: Coroutine[Any, Any, _T] | Generator[Any, None, _T],
        *,
        name: object = None,
        context: Context | None = None,
    ) -> asyncio.Task[_T]:
        task = super().create_task(coro, name=name, context=context)
        if self._main_task is None:
            self._main_task = task
        return task

    def cancel_main(self) -> bool:
        """Cancel the main task, as ``asyncio.run`` does on Ctrl-C; False when there is none left."""
        task = self._main_task
        if task is None or task.done():
            return False
        # Cancelled by the loop at its next turn, not here: this runs inside the signal handler,
        # between two bytecodes of whatever the loop was doing, possibly a callback half-way
        # through setting the very future the task waits on. call_soon_threadsafe also wakes the
        # loop, which would otherwise go back to waiting in select().
        self.call_soon_threadsafe(task.cancel)
        return True

    def add_signal_handler(self, sig: int, callback: Callable[[*_Ts], object], *args: *_Ts) -> None:
        if sig not in _STOP_SIGNALS:
            super().add_signal_handler(sig, callback, *args)
            return
        stops = self._stops

        def noted(*arguments: *_Ts) -> None:
            stops.note(sig)
            callback(*arguments)

        super().add_signal_handler(sig, noted, *args)

    def remove_signal_handler(self, sig: int) -> bool:
        removed = super().remove_signal_handler(sig)
        if sig in _STOP_SIGNALS:
            # asyncio puts the default handler back; the tool's own handling is over, ours resumes.
            signal.signal(sig, self._stops.on_signal)
        return removed


class _ClientLoopPolicy(asyncio.DefaultEventLoopPolicy):
    def __init__(self, stops: _StopSignals) -> None:
        super().__init__()
        self._stops = stops

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return _ClientLoop(self._stops)
