"""The broker's answer to Metadata, with Kafka's automatic topic creation.

Rules
-----
1. Metadata is answered from the metadata cache (the controller's latest UpdateMetadata).
2. With ``auto.create.topics.enable`` and a request that allows it, each named topic that does not
   exist is created with the broker defaults through this node's admin actor and answered
   LEADER_NOT_AVAILABLE until it has a leader; a name that cannot be a topic's is answered
   INVALID_TOPIC_EXCEPTION, as Kafka does.
3. A topic is asked to be created once at a time: names already asked for are not asked again
   until the admin actor has answered (or its ask failed).

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from actors.common.client_protocol import CreatableTopic, CreateTopicsRequest
from actors.common.errors import ErrorCode
from actors.common.names import ADMIN_ACTOR_NAME
from actors.common.protocol import MetadataRequest, MetadataResponse
from actors.common.topic_names import validate_topic_name
from actors.server.config import BrokerConfig
from actors.server.metadata_cache import MetadataCache
from runtime.context import Context
from runtime.ref import ActorRef

__all__ = ["AutoCreated", "TopicAutoCreation"]


@dataclass(frozen=True, slots=True)
class AutoCreated:
    """To the broker: the admin actor is done with topics this broker asked it to create."""

    topics: tuple[str, ...]


class TopicAutoCreation:
    def __init__(self, *, config: BrokerConfig, metadata: MetadataCache) -> None:
        self._config = config
        self._metadata = metadata
        self._creating: set[str] = set()

    def metadata_response(self, ctx: Context[Any], request: MetadataRequest) -> MetadataResponse:
        response = self._metadata.response(request.topics)
        if not (
            self._config.auto_create_topics_enable and request.allow_auto_topic_creation and request.topics
        ):
            return response
        unknown = [t.name for t in response.topics if t.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        missing = [name for name in unknown if validate_topic_name(name) is None]
        if not unknown:
            return response
        fresh = [name for name in missing if name not in self._creating]
        if fresh:
            self._creating.update(fresh)
            ctx.ask(
                ActorRef(node_id=ctx.self_ref.node_id, name=ADMIN_ACTOR_NAME),
                CreateTopicsRequest(topics=tuple(CreatableTopic(name=name) for name in fresh)),
                timeout_ms=self._config.request_timeout_ms,
                on_reply=lambda _reply: AutoCreated(tuple(fresh)),
                on_failure=lambda _failure: AutoCreated(tuple(fresh)),
            )
        answered = {
            name: ErrorCode.LEADER_NOT_AVAILABLE if name in missing else ErrorCode.INVALID_TOPIC_EXCEPTION
            for name in unknown
        }
        return dataclasses.replace(
            response,
            topics=tuple(
                dataclasses.replace(t, error_code=answered[t.name]) if t.name in answered else t
                for t in response.topics
            ),
        )

    def created(self, message: AutoCreated) -> None:
        self._creating.difference_update(message.topics)
