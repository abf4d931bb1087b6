"""The wire codec: round trips, strict typed decoding, and frames that never crash the decoder."""

from __future__ import annotations

import contextlib
import enum
import struct
import sys
from dataclasses import dataclass, field

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime.messages
from runtime.codec import Codec, WireEnvelope, is_wire, wire
from runtime.errors import CodecError, DecodeError, FrameError
from runtime.ref import ActorRef
from tests.support import runtime_actors


class Colour(enum.IntEnum):
    RED = 1
    GREEN = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    name: str
    values: tuple[int, ...]
    records: bytes


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class Everything:
    number: int
    ratio: float
    flag: bool
    text: str
    maybe: int | None
    colour: Colour
    inners: list[Inner]
    by_partition: dict[int, Inner]
    tags: frozenset[str] = field(default_factory=frozenset)
    blob: bytes = b""


def _codec() -> Codec:
    return Codec.from_modules(runtime.messages, runtime_actors, sys.modules[__name__])


CODEC = _codec()

inners = st.builds(
    Inner,
    name=st.text(max_size=10),
    values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5).map(tuple),
    records=st.binary(max_size=64),
)
everything = st.builds(
    Everything,
    number=st.integers(-(2**63), 2**63 - 1),
    ratio=st.floats(allow_nan=False, allow_infinity=False),
    flag=st.booleans(),
    text=st.text(max_size=20),
    maybe=st.none() | st.integers(-100, 100),
    colour=st.sampled_from(Colour),
    inners=st.lists(inners, max_size=3),
    by_partition=st.dictionaries(st.integers(0, 1000), inners, max_size=3),
    tags=st.frozensets(st.text(max_size=5), max_size=3),
    blob=st.binary(max_size=256),
)


@given(everything)
@settings(max_examples=200)
def test_every_field_type_round_trips(message: Everything) -> None:
    assert CODEC.decode(CODEC.encode(message)) == message


@given(st.lists(everything, min_size=1, max_size=4))
@settings(max_examples=100)
def test_envelope_batches_round_trip_in_order(messages: list[Everything]) -> None:
    sender = ActorRef(node_id="7", name="partition/t-0")
    envelopes = [WireEnvelope(f"target-{i}", m, sender, i * 10) for i, m in enumerate(messages)]
    assert CODEC.decode_envelopes(CODEC.encode_envelopes(envelopes)) == envelopes


def test_every_registered_kind_round_trips_with_examples() -> None:
    examples = {
        "AskTimedOut": runtime.messages.AskTimedOut(target="x@1", timeout_ms=5),
        "PeerUnavailable": runtime.messages.PeerUnavailable(node_id="2", reason="refused"),
        "UnknownActor": runtime.messages.UnknownActor(target="y@1"),
        "Ping": runtime_actors.Ping(sequence=1, payload=b"\x00\xff"),
        "Pong": runtime_actors.Pong(sequence=2),
        "Note": runtime_actors.Note(sender="a", sequence=3),
        "GetNotes": runtime_actors.GetNotes(),
        "Notes": runtime_actors.Notes(notes=(runtime_actors.Note(sender="a", sequence=1),)),
        "Silence": runtime_actors.Silence(sequence=4),
        "Everything": Everything(
            number=1,
            ratio=0.5,
            flag=True,
            text="t",
            maybe=None,
            colour=Colour.RED,
            inners=[],
            by_partition={},
        ),
    }
    assert set(examples) == CODEC.kinds, "add an example for every registered kind"
    for message in examples.values():
        assert CODEC.decode(CODEC.encode(message)) == message


def test_record_bytes_travel_in_the_payload_not_in_the_json() -> None:
    records = bytes(range(256)) * 4096  # 1 MiB
    frame = CODEC.encode(runtime_actors.Ping(sequence=1, payload=records))
    (header_length,) = struct.unpack_from(">I", frame)
    header = frame[4 : 4 + header_length]
    assert len(header) < 200
    assert len(frame) - 4 - header_length == len(records)
    assert orjson.loads(header)["body"]["payload"] == [0, len(records)]


def _frame(header: object, payload: bytes = b"") -> bytes:
    header_bytes = orjson.dumps(header)
    return struct.pack(">I", len(header_bytes)) + header_bytes + payload


def _body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {"sequence": 1, "payload": [0, 0]}
    body.update(overrides)
    return body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_body(sequence="1"), "Ping.sequence: expected int, got str '1'"),
        (_body(sequence=True), "Ping.sequence: expected int, got bool True"),
        (_body(sequence=1.0), "Ping.sequence: expected int, got float 1.0"),
        ({"payload": [0, 0]}, "Ping.sequence: missing"),
        (_body(extra=1), "Ping: unknown field(s) ['extra']"),
        (_body(payload="AAAA"), "Ping.payload: expected a payload reference"),
        (_body(payload=[0, 10]), "outside the 0-byte payload"),
        ("not an object", "expected Ping object, got str"),
    ],
)
def test_wrong_fields_are_rejected_with_the_field_path(body: object, expected: str) -> None:
    with pytest.raises(DecodeError) as raised:
        CODEC.decode(_frame({"v": 1, "kind": "Ping", "body": body}))
    assert expected in str(raised.value)


def test_nested_field_errors_name_the_full_path() -> None:
    body = {"notes": [{"sender": "a", "sequence": 1}, {"sender": "b", "sequence": "x"}]}
    with pytest.raises(DecodeError, match=r"Notes\.notes\[1\]\.sequence: expected int"):
        CODEC.decode(_frame({"v": 1, "kind": "Notes", "body": body}))


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (b"", FrameError),
        (b"\x00\x00", FrameError),
        (struct.pack(">I", 0), FrameError),
        (struct.pack(">I", 100) + b"{}", FrameError),
        (struct.pack(">I", 3) + b"{x}", FrameError),
        (_frame([1, 2]), FrameError),
        (_frame({"v": 2, "kind": "Ping", "body": _body()}), FrameError),
        (_frame({"v": 1, "kind": "NoSuchKind", "body": {}}), DecodeError),
        (_frame({"v": 1, "kind": "Ping"}), DecodeError),
        (_frame({"v": 1, "kind": 5, "body": {}}), DecodeError),
    ],
)
def test_malformed_frames_are_clear_errors(frame: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        CODEC.decode(frame)


def test_enum_and_literal_values_outside_the_type_are_rejected() -> None:
    good = Everything(
        number=1, ratio=0.5, flag=True, text="t", maybe=None, colour=Colour.RED, inners=[], by_partition={}
    )
    header = orjson.loads(CODEC.encode(good)[4:])
    header["body"]["colour"] = 9
    with pytest.raises(DecodeError, match="colour"):
        CODEC.decode(_frame(header))
    header["body"]["colour"] = 1
    header["body"]["by_partition"] = {"x": {"name": "n", "values": [], "records": [0, 0]}}
    with pytest.raises(DecodeError, match="integer key"):
        CODEC.decode(_frame(header))


@given(st.binary(max_size=512))
@settings(max_examples=500)
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    for decode in (CODEC.decode, CODEC.decode_envelopes):
        with contextlib.suppress(CodecError):
            decode(data)


@given(everything, st.data())
@settings(max_examples=200)
def test_every_truncation_of_a_frame_is_rejected(message: Everything, data: st.DataObject) -> None:
    frame = CODEC.encode(message)
    cut = data.draw(st.integers(0, len(frame) - 1))
    with pytest.raises(CodecError):
        CODEC.decode(frame[:cut])


@given(everything, st.data())
@settings(max_examples=200)
def test_flipped_header_bytes_decode_or_fail_cleanly(message: Everything, data: st.DataObject) -> None:
    frame = bytearray(CODEC.encode(message))
    position = data.draw(st.integers(0, len(frame) - 1))
    frame[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(CodecError):
        CODEC.decode(bytes(frame))


@dataclass(frozen=True)
class _A:
    x: int


@dataclass(frozen=True)
class _B:
    y: int


@dataclass(frozen=True)
class _Ambiguous:
    value: _A | _B


def test_a_codec_refuses_unions_of_dataclasses() -> None:
    # Marked @wire only here, so the module-level CODEC above never sees it.
    with pytest.raises(TypeError, match="unions of several dataclasses"):
        Codec([wire(_Ambiguous)])


def test_encoding_an_unregistered_message_is_a_programming_error() -> None:
    @wire
    @dataclass(frozen=True)
    class Stranger:
        x: int

    assert is_wire(Stranger)
    with pytest.raises(TypeError, match="not registered"):
        CODEC.encode(Stranger(x=1))
