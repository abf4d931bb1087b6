"""Concurrent request scripts for an actor: the runtime's one script driver, under the names the
actor layer has always imported.

The driver itself (steps, the runner, its rules) lives in ``runtime/scripts.py``; this module
re-exports it so that actors keep importing ``actors.common.scripts``.
"""

from __future__ import annotations

from runtime.scripts import (
    Ask,
    AskAll,
    AskFailed,
    Pause,
    Resume,
    Script,
    ScriptRunner,
    ScriptStep,
    Step,
    Watch,
)

__all__ = [
    "Ask",
    "AskAll",
    "AskFailed",
    "Pause",
    "Resume",
    "Script",
    "ScriptRunner",
    "ScriptStep",
    "Step",
    "Watch",
]
