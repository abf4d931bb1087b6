"""The broker's gate for the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica):
the order they take effect in, whether their controller is real, and their epoch fence.

Rules
-----
1. Requests are held in arrival order (the controller's order is the order they take effect in)
   and released front first; a request waits while the one before it waits.
2. Before this broker has registered (no broker epoch yet) a request naming a broker epoch waits
   for the registration: the controller may act on it before the broker hears it was created.
3. A controller epoch below the highest applied passes on to the fence (rule 5). One not yet
   known is checked against ZooKeeper first: ``/controller_epoch`` and ``/controller`` are read
   and the request passes only if they name its epoch and controller id; an epoch still ahead of
   ZooKeeper's after ``_CONTROLLER_READS_MAX`` reads (a server may serve a read from before the
   controller's write) was never elected: the request is refused STALE_CONTROLLER_EPOCH and
   counted as forged. So a forged future epoch cannot fence the real controller (docs/security.md).
4. A LeaderAndIsr naming topics whose configs are not read yet waits until the broker's
   ``topic-configs`` child has read them (Kafka reads a new topic's config before creating its
   log); a failed read is asked again at the next release.
5. The fence: an epoch below the highest applied is STALE_CONTROLLER_EPOCH; a broker epoch older
   than this registration's, or any before registering (Kafka lets -1 through, we do not), is
   STALE_BROKER_EPOCH (KIP-380). A fenced request is answered with that error for the whole
   request; one that passes raises the applied controller epoch and is handed to the broker.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

from actors.common.errors import ErrorCode
from actors.common.names import TOPIC_CONFIGS_ACTOR_NAME
from actors.common.protocol import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from actors.server import zk_data
from actors.server.broker_statistics import RequestMetrics
from actors.server.topic_config_manager import LoadTopicConfigs, TopicConfigsLoaded
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.coordination.errors import NoNodeError
from runtime.coordination.requests import ZkGet, ZkRequest
from runtime.messages import Requester
from runtime.ref import ActorRef
from runtime.scripts import perform_script

__all__ = [
    "ControllerRead",
    "ControllerRequest",
    "ControllerRequestGate",
    "GateMessage",
    "ReadControllerAgain",
    "TopicConfigsReady",
    "answer",
]

ControllerRequest: TypeAlias = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest

# What the broker does with a request that passed the gate: (request, requester, started ns).
Apply: TypeAlias = Callable[[Context[Any], ControllerRequest, Requester | None, int], None]


@dataclass(frozen=True, slots=True)
class ControllerRead:
    """What ZooKeeper names as the controller (``controller_id`` None: nobody), or why it could not
    be read."""

    controller_epoch: int
    controller_id: int | None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class ReadControllerAgain:
    pass


@dataclass(frozen=True, slots=True)
class TopicConfigsReady:
    """The topic-configs actor's answer (None: it failed; the held requests wait for a retry)."""

    loaded: TopicConfigsLoaded | None


GateMessage: TypeAlias = ControllerRead | ReadControllerAgain


def answer(ctx: Context[Any], requester: Requester | None, response: object) -> None:
    if requester is not None:
        ctx.reply_to(requester, response)


def _name(request: ControllerRequest) -> str:
    return type(request).__name__.removesuffix("Request")


def _refusal(request: ControllerRequest, error: ErrorCode) -> object:
    match request:
        case LeaderAndIsrRequest():
            return LeaderAndIsrResponse(error_code=error)
        case UpdateMetadataRequest():
            return UpdateMetadataResponse(error_code=error)
        case StopReplicaRequest():
            return StopReplicaResponse(error_code=error)
        case _:
            assert_never(request)


class ControllerRequestGate:
    # Reads of /controller that found an epoch below a request's before it is refused (rule 3).
    _CONTROLLER_READS_MAX = 5
    _CONTROLLER_READ_RETRY_MS = 200

    def __init__(
        self,
        *,
        coordinator: Coordinator,
        request_timeout_ms: int,
        request_metrics: RequestMetrics,
        missing_topic_configs: Callable[[ControllerRequest], Sequence[str]],
        apply: Apply,
    ) -> None:
        """``missing_topic_configs``: the topics of a request whose configs are not read yet
        (rule 4); ``apply``: the broker's handling of a request that passed the fence."""
        self._coordinator = coordinator
        self._request_timeout_ms = request_timeout_ms
        self._metrics = request_metrics
        self._missing_topic_configs = missing_topic_configs
        self._apply = apply
        self._held: deque[tuple[ControllerRequest, Requester | None, int]] = deque()
        self._loading_topic_configs = False
        # The highest controller epoch applied, and this broker's registration's epoch (-1: none yet).
        self.controller_epoch = 0
        self.broker_epoch = -1
        # The (controller epoch, controller id) ZooKeeper last named, and whether a read is under way.
        self._zk_controller: tuple[int, int | None] | None = None
        self._reading_controller = False
        self._controller_reads = 0  # consecutive reads that found an epoch below a request's
        self.forged_controller_requests_total = 0

    def hold(self, ctx: Context[Any], request: ControllerRequest) -> None:
        self._held.append((request, ctx.requester, ctx.now_ns))
        self.release(ctx)

    def registered(self, ctx: Context[Any], broker_epoch: int) -> None:
        self.broker_epoch = broker_epoch
        self.release(ctx)

    def topic_configs_read(self, ctx: Context[Any]) -> None:
        """The broker has recorded what the topic-configs actor answered (rule 4)."""
        self._loading_topic_configs = False
        self.release(ctx)

    def release(self, ctx: Context[Any]) -> None:
        while self._held:
            request, requester, started = self._held[0]
            if self.broker_epoch == -1 and request.broker_epoch != -1:
                return  # rule 2: released when the registration is heard of
            verdict = self._controller_verdict(ctx, request)
            if verdict is None:
                return  # released when ZooKeeper has been read
            if not verdict:
                self._held.popleft()
                self._refuse_unverified(ctx, request, requester, started)
                continue
            missing = self._missing_topic_configs(request)
            if missing:
                if not self._loading_topic_configs:
                    self._loading_topic_configs = True
                    ctx.ask(
                        ActorRef(node_id=ctx.self_ref.node_id, name=TOPIC_CONFIGS_ACTOR_NAME),
                        LoadTopicConfigs(tuple(missing)),
                        timeout_ms=self._request_timeout_ms,
                        on_reply=lambda reply: TopicConfigsReady(
                            reply if isinstance(reply, TopicConfigsLoaded) else None
                        ),
                        on_failure=lambda _failure: TopicConfigsReady(None),
                    )
                return
            self._held.popleft()
            self._fence(ctx, request, requester, started)

    def _fence(
        self, ctx: Context[Any], request: ControllerRequest, requester: Requester | None, started: int
    ) -> None:
        """Rule 5."""
        if request.controller_epoch < self.controller_epoch:
            error = ErrorCode.STALE_CONTROLLER_EPOCH
        elif self.broker_epoch == -1 or request.broker_epoch < self.broker_epoch:
            # KIP-380. Before this process has registered, a request naming a broker epoch was
            # meant for an earlier process of this broker (its registration still in ZooKeeper):
            # acting on it would make this one, with whatever its disk kept, leader in an epoch
            # it never led. Kafka serves no controller request before registering.
            error = ErrorCode.STALE_BROKER_EPOCH
        else:
            self.controller_epoch = request.controller_epoch
            self._apply(ctx, request, requester, started)
            return
        kind = _name(request)
        if isinstance(request, LeaderAndIsrRequest):
            ctx.log.warning(
                "ignoring LeaderAndIsr from controller %d with epoch %d (latest known %d): %s",
                request.controller_id, request.controller_epoch, self.controller_epoch, error.name,
            )  # fmt: skip
        self._metrics.count_error(kind, error)
        answer(ctx, requester, _refusal(request, error))
        self._metrics.count_request(kind, ctx.now_ns - started)

    def _controller_verdict(self, ctx: Context[Any], request: ControllerRequest) -> bool | None:
        """True: ZooKeeper names this request's controller (or its epoch is already behind, which
        the fence answers); False: refuse it; None: ZooKeeper is being read."""
        if request.controller_epoch < self.controller_epoch:
            return True
        known = self._zk_controller
        if known is not None and request.controller_epoch <= known[0]:
            return (request.controller_epoch, request.controller_id) == known
        if self._controller_reads >= self._CONTROLLER_READS_MAX:
            return False  # its epoch is still ahead of ZooKeeper's: nobody was elected with it
        if not self._reading_controller:
            self._reading_controller = True
            coordinator = self._coordinator
            ctx.pipe_to_self(
                lambda: perform_script(coordinator, _read_controller()),
                lambda result: result,
                lambda error: ControllerRead(0, None, error),
            )
        return None

    def receive(self, ctx: Context[Any], message: GateMessage) -> None:
        match message:
            case ControllerRead():
                self._controller_read(ctx, message)
            case ReadControllerAgain():
                self.release(ctx)
            case _:
                assert_never(message)

    def _controller_read(self, ctx: Context[Any], message: ControllerRead) -> None:
        self._reading_controller = False
        if message.error is not None:
            ctx.log.warning("cannot read the controller from ZooKeeper (%s); retrying", message.error)
            ctx.start_timer("read-controller", ReadControllerAgain(), self._CONTROLLER_READ_RETRY_MS)
            return
        self._zk_controller = (message.controller_epoch, message.controller_id)
        if self._held and self._held[0][0].controller_epoch > message.controller_epoch:
            self._controller_reads += 1
            ctx.start_timer("read-controller", ReadControllerAgain(), self._CONTROLLER_READ_RETRY_MS)
            return
        self._controller_reads = 0
        self.release(ctx)

    def _refuse_unverified(
        self, ctx: Context[Any], request: ControllerRequest, requester: Requester | None, started: int
    ) -> None:
        self._controller_reads = 0
        self.forged_controller_requests_total += 1
        kind = _name(request)
        ctx.log.warning(
            "refusing %s from controller %d with epoch %d: ZooKeeper names controller %s with epoch %s",
            kind, request.controller_id, request.controller_epoch,
            *(("none", "none") if self._zk_controller is None else self._zk_controller),
        )  # fmt: skip
        error = ErrorCode.STALE_CONTROLLER_EPOCH
        self._metrics.count_error(kind, error)
        answer(ctx, requester, _refusal(request, error))
        self._metrics.count_request(kind, ctx.now_ns - started)


def _read_controller() -> Generator[ZkRequest, Any, ControllerRead]:
    """ZooKeeper's controller epoch, then the controller's id (None when nobody holds
    ``/controller``): request values, performed by the script driver outside the actor."""
    raw_epoch, _ = yield ZkGet(zk_data.CONTROLLER_EPOCH_PATH)
    epoch = zk_data.decode_controller_epoch(raw_epoch)
    try:
        data, _ = yield ZkGet(zk_data.CONTROLLER_PATH)
    except NoNodeError:
        return ControllerRead(epoch, None)
    return ControllerRead(epoch, zk_data.decode_controller(data).broker_id)
