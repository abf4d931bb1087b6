"""A stop signal cancels a client tool's main task from the event loop, never from inside a callback.

Python runs a signal handler between two bytecodes of whatever the main thread is doing, which may
be one of the loop's own callbacks half-way through (asyncio's ``_sock_connect_cb`` between checking
that the connect future is pending and setting its result). Cancelling the main task right there
cancels that future under the callback, which then fails with InvalidStateError and prints an
"Exception in callback" line beside the tool's own "terminated (SIGTERM)". A regression:
``tests/ops/test_tools_fail_fast.py`` met it once on a clean clone (``perf consume``, SIGTERM).
"""

from __future__ import annotations

import asyncio

import pytest

from ops.cli import main as cli_main


def test_a_stop_signal_inside_a_callback_leaves_the_callbacks_future_alone() -> None:
    stops = cli_main._StopSignals("perf")
    loop = cli_main._ClientLoop(stops)
    errors: list[BaseException] = []
    waited: asyncio.Future[None] = loop.create_future()

    async def tool() -> None:
        await waited  # as a connect future the main task waits on

    def connect_callback() -> None:
        # The signal arrives here, between the check that `waited` is pending and its result.
        assert loop.cancel_main()
        try:
            waited.set_result(None)
        except asyncio.InvalidStateError as error:
            errors.append(error)

    main = loop.create_task(tool())
    loop.call_soon(connect_callback)
    try:
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(main)
    finally:
        loop.close()
    assert errors == []
    assert main.cancelled()
