"""One-shot watches on top of aiozk's session watch table (used by ``runtime.coordination.zk``).

aiozk keeps, per session, a table ``(event type, path) -> set of callbacks`` and calls every
callback of a key when the server sends that event; it re-arms the keys' paths with SetWatches after
a reconnection. This module turns that into the port's one-shot watches, without importing aiozk
(it is handed the session object and the numeric event types):

* A watch registers one callback per event type it may fire on. The first event fires the watch
  and removes all its callbacks, so it fires once.
* Registration happens BEFORE the request that sets the server-side watch, because the server may
  send the event right behind the response. Events that arrive before the response was processed
  are stale (ZooKeeper sends a change's event before answering any later read), so a watch ignores
  events until it is ``arm``-ed, which the adapter does in the same step as it gets the response.
* ``exists`` does not know in advance whether it sets a creation watch or a data watch; the adapter
  arms it keeping only the event types that can follow from the answer.
* A failing callback is logged: it runs inside aiozk's dispatch, which must not break.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.coordination.base import WatchCallback, WatchEvent, WatchEventKind

__all__ = ["Watch", "WatchTable"]

_log = logging.getLogger("actorlog.runtime.coordination.zk")


@dataclass(eq=False, slots=True)
class Watch:
    path: str
    full_path: str
    callback: WatchCallback
    handlers: dict[int, Callable[[str], None]] = field(default_factory=dict)
    armed: bool = False
    done: bool = False


class WatchTable:
    """The adapter's outstanding watches on one aiozk session."""

    def __init__(self, session: Any, kinds: Mapping[int, WatchEventKind]) -> None:
        self._session = session
        self._kinds = kinds
        self._watches: set[Watch] = set()

    def __len__(self) -> int:
        return len(self._watches)

    def register(
        self, path: str, full_path: str, callback: WatchCallback | None, event_types: tuple[int, ...]
    ) -> Watch | None:
        """Listen for ``event_types`` on ``full_path`` (not yet armed). None when no callback."""
        if callback is None:
            return None
        watch = Watch(path=path, full_path=full_path, callback=callback)
        for event_type in event_types:
            handler = functools.partial(self._on_event, watch, event_type)
            watch.handlers[event_type] = handler
            self._session.add_watch_callback(event_type, full_path, handler)
        self._watches.add(watch)
        return watch

    def arm(self, watch: Watch | None, keep: tuple[int, ...] | None = None) -> None:
        """The registering request was answered: from now on events are real (only ``keep``)."""
        if watch is None or watch.done:
            return
        if keep is not None:
            for event_type in [t for t in watch.handlers if t not in keep]:
                handler = watch.handlers.pop(event_type)
                self._session.remove_watch_callback(event_type, watch.full_path, handler)
        watch.armed = True

    def cancel(self, watch: Watch | None) -> None:
        if watch is None:
            return
        watch.done = True
        for event_type, handler in watch.handlers.items():
            self._session.remove_watch_callback(event_type, watch.full_path, handler)
        watch.handlers.clear()
        self._watches.discard(watch)

    def drop_all(self) -> None:
        """The session is gone: its watches never fire (they would be re-armed on a new one)."""
        for watch in list(self._watches):
            self.cancel(watch)
        self.forget_empty_keys()

    def forget_empty_keys(self) -> None:
        # aiozk's dispatch creates empty entries in its defaultdict for every event it receives;
        # SetWatches would re-arm those paths on reconnection for nobody.
        callbacks = self._session.watch_callbacks
        for key in [key for key, handlers in callbacks.items() if not handlers]:
            del callbacks[key]

    def _on_event(self, watch: Watch, event_type: int, _path: str) -> None:
        if watch.done or not watch.armed:
            return  # fired already, or a stale event that preceded the registering response
        self.cancel(watch)
        event = WatchEvent(path=watch.path, kind=self._kinds[event_type])
        try:
            watch.callback(event)
        except Exception:  # noqa: BLE001 - a broken callback must not break aiozk's dispatch
            _log.exception("watch callback %r failed on %s", watch.callback, event)
