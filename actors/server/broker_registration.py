"""The broker's side of its registration in ZooKeeper: whether it is current, and whether the
controller has seen it.

Rules
-----
1. A ``BrokerRegistrationActor`` child (``registration.py``) keeps ``/brokers/ids/<id>``
   registered across ZooKeeper sessions. Its ``BrokerRegistered`` makes the registration current
   and hands the broker epoch on (the controller-request gate waits for it).
2. ``SessionSuspended`` counts a disconnect; ``SessionLost`` an expiry: the registration is not
   current, nor the metadata, until the child registers again and the controller says so.
3. ``BrokerRegistrationFailed`` halts the node: alive but unregistered, the controller counts this
   broker dead while it keeps answering clients and followers; its supervisor starts it again.
4. An UpdateMetadata naming this broker live while its registration is current means the
   controller has seen this incarnation: the metadata is current (what readiness may trust), and
   an unclean start has been handled, once: the log manager and the child are told, so a
   re-registration after a session expiry is no restart a later controller must treat as a bounce
   (docs/controller.md §2).

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeAlias, assert_never

from actors.common.names import REGISTRATION_ACTOR_NAME
from actors.server import zk_data
from actors.server.registration import (
    BrokerRegistered,
    BrokerRegistrationActor,
    BrokerRegistrationFailed,
    RestartSeen,
    SessionLost,
    SessionSuspended,
)
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.ref import ActorRef
from runtime.storage.log_manager import LogManager

__all__ = ["BrokerRegistrationState", "RegistrationEvent"]

RegistrationEvent: TypeAlias = BrokerRegistered | SessionSuspended | SessionLost | BrokerRegistrationFailed


class BrokerRegistrationState:
    def __init__(
        self,
        *,
        coordinator: Coordinator,
        registration: zk_data.BrokerRegistration,
        log_manager: LogManager,
        session_timeout_ms: int,
        on_registered: Callable[[Context[Any], int], None],
    ) -> None:
        """``on_registered``: told each new broker epoch (rule 1)."""
        self._coordinator = coordinator
        self.registration = registration
        self._log_manager = log_manager
        self._session_timeout_ms = session_timeout_ms
        self._on_registered = on_registered
        self._ref: ActorRef | None = None
        self.registered = False
        self.has_current_metadata = False
        self.zookeeper_expires_total = 0
        self.zookeeper_disconnects_total = 0

    def start(self, ctx: Context[Any]) -> None:
        self._ref = ctx.spawn(
            REGISTRATION_ACTOR_NAME,
            lambda: BrokerRegistrationActor(
                self._coordinator,
                self.registration,
                session_timeout_ms=self._session_timeout_ms,
                subscriber=ctx.self_ref,
            ),
        )

    def receive(self, ctx: Context[Any], message: RegistrationEvent) -> None:
        match message:
            case BrokerRegistered():
                self.registered = True
                ctx.log.info(
                    "registered in ZooKeeper as broker %d (broker epoch %d)",
                    message.broker_id,
                    message.broker_epoch,
                )
                self._on_registered(ctx, message.broker_epoch)
            case SessionSuspended():
                self.zookeeper_disconnects_total += 1
            case SessionLost():
                self.registered = False
                self.has_current_metadata = False
                self.zookeeper_expires_total += 1
                ctx.log.warning("ZooKeeper session expired; the registration will be re-created")
            case BrokerRegistrationFailed():
                ctx.halt_node(f"broker registration failed: {message.reason}")
            case _:
                assert_never(message)

    def seen_by_controller(self, ctx: Context[Any]) -> None:
        """Rule 4 (the caller has checked the registration is current)."""
        self.has_current_metadata = True
        if self.registration.unclean_start:
            self.registration = dataclasses.replace(self.registration, unclean_start=False)
            self._log_manager.mark_seen()
            if self._ref is not None:
                ctx.tell(self._ref, RestartSeen())
