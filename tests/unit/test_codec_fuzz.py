"""Hostile input for the internal wire codec (issue 23): any bytes decode or raise ``CodecError``.

The frames come from every kind the brokers register (``ops.codec.wire_codec``), encoded from real
messages and then mutated: bit flips, truncation, splices, length prefixes set to extreme values,
and header JSON values replaced by wrong types, huge numbers, deep nesting or unknown kind names.
Whatever still decodes must be a registered wire message whose fields have their declared types,
as the codec promises. The HTTP body framing (``read_frame``) gets the same bytes.

The suite's runs are derandomized and small; ``FUZZ_EXAMPLES=20000`` makes every fuzzer bigger for
a local campaign.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import os
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.base_protocol import BaseProtocol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.common.client_protocol import CreatableTopic, CreateTopicsRequest, TopicConfigEntry
from actors.common.errors import ErrorCode
from actors.common.protocol import (
    BrokerEndpoint,
    FetchPartition,
    FetchRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    MetadataRequest,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)
from ops.codec import wire_codec
from runtime.codec import WireEnvelope
from runtime.errors import CodecError, DecodeError, FrameError
from runtime.ref import ActorRef
from runtime.transport.http import read_frame

CODEC = wire_codec()
CLASSES = {kind: CODEC._by_kind[kind] for kind in sorted(CODEC.kinds)}
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
MAX_BODY = 1 << 20


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=EXAMPLES or examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ------------------------------------------------------------------------------ real messages

HANDWRITTEN: list[object] = [
    ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        partitions=(ProducePartitionData(topic="orders", partition=0, records=b"\x00" * 61 + b"batch"),),
    ),
    ProduceResponse(
        partitions=(ProducePartitionResponse(topic="orders", partition=0, error_code=ErrorCode.NONE),)
    ),
    FetchRequest(
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=(FetchPartition(topic="orders", partition=3, fetch_offset=17, partition_max_bytes=4096),),
    ),
    LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=4,
        broker_epoch=77,
        partition_states=(
            LeaderAndIsrPartitionState(
                topic="orders",
                partition=0,
                controller_epoch=4,
                leader=1,
                leader_epoch=9,
                isr=(1, 2),
                zk_version=3,
                replicas=(1, 2, 3),
            ),
        ),
        live_leaders=(BrokerEndpoint(broker_id=1, host="127.0.0.1", port=9092),),
    ),
    MetadataRequest(topics=("orders", "payments")),
    CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name="orders",
                num_partitions=3,
                replication_factor=2,
                configs=(TopicConfigEntry(name="retention.ms", value="1000"),),
            ),
        )
    ),
]

_INT64 = st.integers(-(2**63), 2**63 - 1)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    """Messages of any registered shape, built from the same annotations the codec compiles."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        return st.none()
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.one_of(st.integers(-3, 100), _INT64)
    if annotation is str:
        return st.text(max_size=12)
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if annotation is bytes:
        return st.binary(max_size=48)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(annotation)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        hints = typing.get_type_hints(annotation)
        fields = {f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(annotation) if f.init}
        return st.builds(annotation, **fields)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (types.UnionType, typing.Union):
        return st.one_of([strategy_for(arg) for arg in args])
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=3)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
        return st.tuples(*[strategy_for(arg) for arg in args])
    if origin in (frozenset, set):
        return st.frozensets(strategy_for(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(strategy_for(args[0]), strategy_for(args[1]), max_size=3)
    raise AssertionError(f"no strategy for {annotation!r}")


messages = st.one_of(
    st.sampled_from(HANDWRITTEN), st.sampled_from(list(CLASSES.values())).flatmap(strategy_for)
)
envelopes = st.builds(
    WireEnvelope,
    target=st.sampled_from(["replica-manager@1", "controller@1", "x"]),
    message=messages,
    sender=st.none() | st.builds(ActorRef, node_id=st.just("2"), name=st.just("fetcher-0")),
    timeout_ms=st.none() | st.integers(0, 60_000),
)


valid_frames = st.one_of(
    messages.map(CODEC.encode),
    st.lists(envelopes, min_size=1, max_size=3).map(CODEC.encode_envelopes),
)


# ------------------------------------------------------------------------------ mutations

HOSTILE_JSON = [
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"1.5",
    b"1e308",
    b"-1e308",
    b"18446744073709551615",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"340282366920938463463374607431768211456",
    b'""',
    b'"\\u0000\\ud83d\\ude00"',
    b'"' + b"x" * 10_000 + b'"',
    b"[]",
    b"{}",
    b"[0]",
    b"[0, 0]",
    b"[-1, 1]",
    b"[0, 18446744073709551615]",
    b"[9223372036854775807, 9223372036854775807]",
    b'["a", "b"]',
    b'{"kind": "ProduceRequest"}',
    b'"NoSuchKind"',
    b'"ProduceRequest"',
    b'"__init__"',
    b'{"__class__": 1}',
    b"[[1]]",
    b"[" * 990 + b"]" * 990,
    b"[" * 2000 + b"]" * 2000,
    b'{"a":' * 990 + b"1" + b"}" * 990,
    b"[" + b"0," * 50_000 + b"0]",
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON tree (the root included)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


_SENTINEL = "\x00hostile\x00"


def replace_in_header(header: Any, path: tuple[Any, ...], action: str, raw: bytes) -> bytes:
    """The header JSON with the value at ``path`` replaced by ``raw`` JSON, removed, or given a sibling."""
    if not path:
        return raw
    parent = header
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent["unknown_" + str(last)] = _SENTINEL
    else:
        parent[last] = _SENTINEL
    text = orjson.dumps(header)
    return text.replace(orjson.dumps(_SENTINEL), raw)


def framed(header: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(header)) + header + payload


def split(frame: bytes) -> tuple[bytes, bytes]:
    (length,) = struct.unpack_from(">I", frame)
    return frame[4 : 4 + length], frame[4 + length :]


@st.composite
def header_mutants(draw: st.DrawFn) -> bytes:
    frame = draw(valid_frames)
    header_bytes, payload = split(frame)
    header = orjson.loads(header_bytes)
    every = paths(header)
    # Mostly the deepest values (the message's own fields), sometimes the envelope or the header.
    leaves = [p for p in every if len(p) >= 3] or every
    path = draw(st.sampled_from(leaves) | st.sampled_from(every))
    action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
    if action == "delete" and not path:
        action = "replace"
    # Nesting up to orjson's limit of 1024 levels, counting the levels above the replaced value.
    depth = draw(st.integers(max(1, 1000 - len(path)), 1024 - len(path)))
    deep = draw(st.sampled_from([b"[" * depth + b"]" * depth, b'{"a":' * depth + b"0" + b"}" * depth]))
    raw = draw(
        st.sampled_from(HOSTILE_JSON) | st.sampled_from([orjson.dumps(k) for k in CLASSES]) | st.just(deep)
    )
    mutated = replace_in_header(header, path, action, raw)
    if draw(st.booleans()):
        payload = payload[: draw(st.integers(0, len(payload)))]
    return framed(mutated, payload)


@st.composite
def byte_mutants(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(valid_frames))
    how = draw(st.sampled_from(["flip", "truncate", "splice", "prefix", "insert"]))
    if how == "flip":
        for _ in range(draw(st.integers(1, 8))):
            index = draw(st.integers(0, len(frame) - 1))
            frame[index] ^= 1 << draw(st.integers(0, 7))
    elif how == "truncate":
        frame = frame[: draw(st.integers(0, len(frame) - 1))]
    elif how == "splice":
        other = draw(valid_frames)
        frame = frame[: draw(st.integers(0, len(frame)))] + other[draw(st.integers(0, len(other))) :]
    elif how == "prefix":
        length = draw(
            st.sampled_from([0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 1, len(frame), len(frame) - 3])
            | st.integers(0, 2**32 - 1)
        )
        struct.pack_into(">I", frame, 0, max(0, min(length, 2**32 - 1)))
    else:
        index = draw(st.integers(0, len(frame)))
        frame[index:index] = draw(st.binary(min_size=1, max_size=16))
    return bytes(frame)


any_bytes = st.one_of(
    st.binary(max_size=256),
    st.binary(max_size=8).map(lambda prefix: prefix + b"{" * 3),
    byte_mutants(),
    header_mutants(),
)


# ------------------------------------------------------------------------------ checks


def conforms(value: Any, annotation: Any) -> bool:
    """Whether a decoded value has exactly the declared type (no bool for int, no float for an enum)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        return value is None
    if annotation in (bool, int, str, float, bytes):
        return type(value) is annotation
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return type(value) is annotation
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        if type(value) is not annotation:
            return False
        hints = typing.get_type_hints(annotation)
        return all(
            conforms(getattr(value, f.name), hints[f.name]) for f in dataclasses.fields(annotation) if f.init
        )
    if origin is typing.Literal:
        return any(type(value) is type(arg) and value == arg for arg in args)
    if origin in (types.UnionType, typing.Union):
        return any(conforms(value, arg) for arg in args)
    if origin is list:
        return type(value) is list and all(conforms(item, args[0]) for item in value)
    if origin is tuple:
        if type(value) is not tuple:
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(item, args[0]) for item in value)
        return len(value) == len(args) and all(conforms(v, a) for v, a in zip(value, args, strict=True))
    if origin in (frozenset, set):
        return type(value) is frozenset and all(conforms(item, args[0]) for item in value)
    if origin is dict:
        return type(value) is dict and all(
            conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items()
        )
    raise AssertionError(f"no check for {annotation!r}")


def assert_registered(message: object) -> None:
    cls = type(message)
    assert CODEC.knows(message), f"decoded an unregistered {cls.__name__}"
    assert conforms(message, cls), f"decoded a {cls.__name__} with a field of the wrong type: {message!r}"


def decode_every_way(frame: bytes) -> None:
    """Each decoding entry point either gives registered, well-typed messages or a CodecError."""
    decoders: list[Callable[[], object]] = [
        lambda: CODEC.decode(frame),
        lambda: CODEC.decode_envelopes(frame),
    ]
    if len(frame) >= 4:
        header, payload = split(frame)
        decoders += [
            lambda: CODEC.decode_parts(header, payload),
            lambda: CODEC.decode_envelopes_parts(header, payload),
        ]
    for decode in decoders:
        try:
            result = decode()
        except CodecError:
            continue
        for message in result if isinstance(result, list) else [result]:
            assert_registered(message.message if isinstance(message, WireEnvelope) else message)


# ------------------------------------------------------------------------------ the fuzzers


@given(messages)
@fuzz_settings(150)
def test_real_messages_of_every_kind_round_trip(message: object) -> None:
    frame = CODEC.encode(message)
    assert CODEC.decode(frame) == message
    decode_every_way(frame)


@given(any_bytes)
@fuzz_settings(400)
def test_hostile_frames_decode_or_raise_codec_error(frame: bytes) -> None:
    decode_every_way(frame)


@given(header_mutants())
@fuzz_settings(300)
def test_hostile_header_json_decodes_or_raises_codec_error(frame: bytes) -> None:
    decode_every_way(frame)


@pytest.fixture(scope="module")
def loop() -> typing.Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


async def _read(body: bytes, content_length: int | None, max_bytes: int) -> tuple[bytes, bytes]:
    loop = asyncio.get_running_loop()
    stream = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    # Chunks as a socket would deliver them, then the end of the body.
    for start in range(0, len(body), 1000):
        stream.feed_data(body[start : start + 1000])
    stream.feed_eof()
    return await asyncio.wait_for(read_frame(stream, content_length, max_bytes), timeout=5)


@given(any_bytes, st.sampled_from(["exact", "none", "short", "long"]), st.sampled_from([MAX_BODY, 64]))
@fuzz_settings(200)
def test_http_body_framing_reads_or_raises_frame_error(
    loop: asyncio.AbstractEventLoop, body: bytes, length: str, max_bytes: int
) -> None:
    content_length = {
        "exact": len(body),
        "none": None,
        "short": max(0, len(body) - 3),
        "long": len(body) + 7,
    }[length]
    try:
        header, payload = loop.run_until_complete(_read(body, content_length, max_bytes))
    except FrameError:
        return
    if content_length == len(body) and len(body) <= max_bytes:
        assert framed(header, payload) == body
    decode_every_way(framed(header, payload))


# ------------------------------------------------------------------------------ regressions


def _header(body: object, kind: str = "ProduceResponse") -> bytes:
    return orjson.dumps({"v": 1, "kind": kind, "body": body})


@pytest.mark.parametrize("error_code", [[1], {"a": 1}, 1.0, 0.0, True])
def test_an_enum_field_of_the_wrong_json_type_is_a_decode_error(error_code: object) -> None:
    # Found by this fuzzer: a list or an object where an ErrorCode goes raised TypeError (unhashable),
    # and 1.0 decoded to an ErrorCode although a float is not an int.
    body = {"partitions": [{"topic": "t", "partition": 0, "error_code": error_code}]}
    with pytest.raises(DecodeError, match=r"ProduceResponse\.partitions\[0\]\.error_code"):
        CODEC.decode_parts(_header(body), b"")


def test_deeply_nested_json_in_a_scalar_field_is_a_decode_error() -> None:
    # Found by this fuzzer: describing a value nested ~1000 deep in the error message hit
    # RecursionError (orjson accepts nesting up to 1024).
    deep = b"[" * 1000 + b"]" * 1000
    header = b'{"v":1,"kind":"ProduceRequest","body":{"acks":' + deep + b',"timeout_ms":1,"partitions":[]}}'
    with pytest.raises(DecodeError, match=r"ProduceRequest\.acks: expected int, got list"):
        CODEC.decode_parts(header, b"")


@pytest.mark.parametrize("version", [True, 1.0, "1"])
def test_a_frame_version_that_is_not_the_int_1_is_a_frame_error(version: object) -> None:
    header = orjson.dumps({"v": version, "kind": "MetadataRequest", "body": {}})
    with pytest.raises(FrameError, match="unsupported frame version"):
        CODEC.decode_parts(header, b"")
