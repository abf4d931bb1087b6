"""Wire codec: message kinds, orjson headers, strict typed decoding and the binary frame.

Frame layout (every internal HTTP body and every reply uses it)::

    [u32 big-endian header length][orjson header][payload bytes]

The header is a small JSON object. Every ``bytes`` value inside a message (record batches, above
all) is *not* put in the JSON: the encoder appends it to the payload and writes ``[offset, length]``
in its place, so bulk data crosses the wire as raw bytes, never base64, never a JSON list.

Messages are frozen dataclasses marked with ``@wire``; a ``Codec`` is built from the classes (or the
modules holding them) that a node may send or receive. Nothing is registered globally: the
composition root decides which kinds exist.

Decoding is strict and type-directed: each field's annotation is compiled once into a converter.
Wrong types, missing fields and unknown fields are rejected with a ``DecodeError`` naming the field
path (``ProduceRequest.partitions[2].acks: expected int, got str``). ``bool`` is never accepted
where ``int`` is expected, and a payload reference outside the payload is a ``FrameError``.
Unions of dataclasses are refused when the codec is built (they would need tags).
"""

from __future__ import annotations

import dataclasses
import enum
import reprlib
import struct
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from runtime.errors import DecodeError, FrameError
from runtime.ref import ActorRef

__all__ = [
    "FRAME_CONTENT_TYPE",
    "FRAME_PREFIX_BYTES",
    "Codec",
    "WireEnvelope",
    "frame_header_length",
    "is_wire",
    "wire",
    "wire_kind",
]

FRAME_CONTENT_TYPE = "application/x-actorlog-frame"
FRAME_VERSION = 1
_HEADER_LENGTH = struct.Struct(">I")
FRAME_PREFIX_BYTES = _HEADER_LENGTH.size
_ENVELOPE_KEYS = frozenset({"target", "sender", "timeout_ms", "kind", "body"})
_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS

T = TypeVar("T")


def wire(cls: type[T]) -> type[T]:
    """Mark a frozen dataclass as a wire message whose kind is its class name."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"@wire needs a dataclass, got {cls!r}")
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if not params.frozen:
        raise TypeError(f"wire message {cls.__name__} must be frozen")
    cls.__wire_kind__ = cls.__name__  # type: ignore[attr-defined]
    return cls


def is_wire(obj: object) -> bool:
    return isinstance(obj, type) and "__wire_kind__" in obj.__dict__


def wire_kind(cls: type) -> str:
    kind: str = cls.__dict__["__wire_kind__"]
    return kind


@dataclass(frozen=True, slots=True)
class WireEnvelope:
    """One message addressed to an actor on the receiving node."""

    target: str
    message: Any
    sender: ActorRef | None = None
    timeout_ms: int | None = None


def frame_header_length(prefix: bytes | memoryview, frame_size: int) -> int:
    """Validate a frame's 4-byte length prefix against the frame size; returns the header length."""
    if len(prefix) < _HEADER_LENGTH.size:
        raise FrameError(f"frame of {frame_size} bytes is shorter than its 4-byte length prefix")
    (header_length,) = _HEADER_LENGTH.unpack_from(prefix)
    if header_length == 0 or _HEADER_LENGTH.size + header_length > frame_size:
        raise FrameError(f"frame header length {header_length} does not fit in a {frame_size}-byte frame")
    return int(header_length)


class _FieldError(Exception):
    """Internal: a conversion failure, with the field path built up while unwinding."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


_Converter = Callable[[Any, bytes], Any]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return type(value).__name__


# Error messages show a value only a few levels deep: a hostile header may nest 1,000 levels.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 40


def _describe(value: object) -> str:
    text = _SHORT_REPR.repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{_type_name(value)} {text}"


class Codec:
    """Encodes and decodes the wire messages it was built with."""

    def __init__(self, classes: Iterable[type]) -> None:
        self._by_kind: dict[str, type] = {}
        self._wire_classes: set[type] = set()
        # Converters for every dataclass met while compiling, wire or nested.
        self._converters: dict[type, _Converter] = {}
        self._building: set[type] = set()
        for cls in classes:
            self.register(cls)

    @classmethod
    def from_modules(cls, *modules: types.ModuleType) -> Codec:
        """A codec for every ``@wire`` class defined in ``modules``."""
        classes: list[type] = []
        classes = [
            value
            for module in modules
            for value in vars(module).values()
            if is_wire(value) and value.__module__ == module.__name__
        ]
        return cls(classes)

    def register(self, cls: type) -> None:
        if not is_wire(cls):
            raise TypeError(f"{cls!r} is not marked @wire")
        kind = wire_kind(cls)
        existing = self._by_kind.get(kind)
        if existing is not None and existing is not cls:
            raise TypeError(f"two wire messages share the kind {kind!r}: {existing!r} and {cls!r}")
        self._by_kind[kind] = cls
        self._wire_classes.add(cls)
        self._dataclass_converter(cls)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self._by_kind)

    def knows(self, message: object) -> bool:
        return type(message) in self._wire_classes

    # ---------------------------------------------------------------------------------- encode

    def encode(self, message: object) -> bytes:
        """A frame holding one message (a reply, a piped result, a stand-alone request)."""
        return b"".join(self.encode_parts(message))

    def encode_parts(self, message: object) -> list[bytes]:
        """The same frame as ``encode``, as [length prefix + header, payload chunks...].

        Writers that can send several buffers (the HTTP transport) use this to avoid copying
        record bytes into one contiguous frame.
        """
        header = {"v": FRAME_VERSION, "kind": self._kind_of(message), "body": message}
        return self._frame_parts(header)

    def encode_envelopes(self, envelopes: Sequence[WireEnvelope]) -> bytes:
        """A frame holding a batch of envelopes (tells, or one ask), in order."""
        return b"".join(self.encode_envelopes_parts(envelopes))

    def encode_envelopes_parts(self, envelopes: Sequence[WireEnvelope]) -> list[bytes]:
        items = [
            {
                "target": envelope.target,
                "sender": None
                if envelope.sender is None
                else [envelope.sender.node_id, envelope.sender.name],
                "timeout_ms": envelope.timeout_ms,
                "kind": self._kind_of(envelope.message),
                "body": envelope.message,
            }
            for envelope in envelopes
        ]
        return self._frame_parts({"v": FRAME_VERSION, "envelopes": items})

    def _kind_of(self, message: object) -> str:
        cls = type(message)
        if cls not in self._wire_classes:
            raise TypeError(f"{cls.__name__} is not registered with this codec")
        return wire_kind(cls)

    def _frame_parts(self, header: dict[str, Any]) -> list[bytes]:
        payload: list[bytes] = []
        offset = 0

        def default(value: object) -> object:
            nonlocal offset
            if isinstance(value, bytes | bytearray | memoryview):
                chunk = bytes(value) if not isinstance(value, bytes) else value
                reference = [offset, len(chunk)]
                payload.append(chunk)
                offset += len(chunk)
                return reference
            if isinstance(value, frozenset | set):
                return sorted(value)
            raise TypeError(f"cannot encode {type(value).__name__}")

        header_bytes = orjson.dumps(header, default=default, option=_JSON_OPTIONS)
        return [_HEADER_LENGTH.pack(len(header_bytes)) + header_bytes, *payload]

    # ---------------------------------------------------------------------------------- decode

    def decode(self, frame: bytes | bytearray | memoryview) -> Any:
        header, payload = self._split(frame)
        return self._decode_item(header, payload, "")

    def decode_parts(self, header_bytes: bytes, payload: bytes) -> Any:
        """Decode a frame already split into its header JSON and its payload."""
        return self._decode_item(self._parse_header(header_bytes), payload, "")

    def decode_envelopes(self, frame: bytes | bytearray | memoryview) -> list[WireEnvelope]:
        header, payload = self._split(frame)
        return self._decode_envelope_items(header, payload)

    def decode_envelopes_parts(self, header_bytes: bytes, payload: bytes) -> list[WireEnvelope]:
        return self._decode_envelope_items(self._parse_header(header_bytes), payload)

    def _decode_envelope_items(self, header: dict[str, Any], payload: bytes) -> list[WireEnvelope]:
        raw_items = header.get("envelopes")
        if not isinstance(raw_items, list):
            raise DecodeError("frame header: 'envelopes' must be a list")
        envelopes: list[WireEnvelope] = []
        for index, item in enumerate(raw_items):
            where = f"envelopes[{index}]"
            if not isinstance(item, dict):
                raise DecodeError(f"{where}: expected object, got {_describe(item)}")
            if not _ENVELOPE_KEYS.issuperset(item):
                raise DecodeError(f"{where}: unknown field(s) {sorted(set(item) - _ENVELOPE_KEYS)}")
            target = item.get("target")
            if not isinstance(target, str) or not target:
                raise DecodeError(f"{where}.target: expected a non-empty str")
            sender = self._decode_sender(item.get("sender"), where)
            timeout_ms = item.get("timeout_ms")
            if timeout_ms is not None and (type(timeout_ms) is not int or timeout_ms < 0):
                raise DecodeError(f"{where}.timeout_ms: expected a non-negative int or null")
            message = self._decode_item(item, payload, where + ".")
            envelopes.append(WireEnvelope(target, message, sender, timeout_ms))
        return envelopes

    @staticmethod
    def _decode_sender(raw: object, where: str) -> ActorRef | None:
        if raw is None:
            return None
        if isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], str) and isinstance(raw[1], str):
            return ActorRef(node_id=raw[0], name=raw[1])
        raise DecodeError(f"{where}.sender: expected [node_id, name] or null")

    def _split(self, frame: bytes | bytearray | memoryview) -> tuple[dict[str, Any], bytes]:
        view = memoryview(frame)
        header_length = frame_header_length(view[: _HEADER_LENGTH.size], view.nbytes)
        end = _HEADER_LENGTH.size + header_length
        return self._parse_header(view[_HEADER_LENGTH.size : end]), bytes(view[end:])

    @staticmethod
    def _parse_header(header_bytes: bytes | memoryview) -> dict[str, Any]:
        try:
            header = orjson.loads(header_bytes)
        except orjson.JSONDecodeError as error:
            raise FrameError(f"frame header is not valid JSON: {error}") from None
        if not isinstance(header, dict):
            raise FrameError("frame header must be a JSON object")
        version = header.get("v")
        if type(version) is not int or version != FRAME_VERSION:
            raise FrameError(f"unsupported frame version {_describe(version)}")
        return header

    def _decode_item(self, item: dict[str, Any], payload: bytes, where: str) -> Any:
        kind = item.get("kind")
        if not isinstance(kind, str):
            raise DecodeError(f"{where}kind: expected str, got {_describe(kind)}")
        cls = self._by_kind.get(kind)
        if cls is None:
            raise DecodeError(f"{where}kind: unknown message kind {kind!r}")
        if "body" not in item:
            raise DecodeError(f"{where}body: missing")
        try:
            return self._converters[cls](item["body"], payload)
        except _FieldError as error:
            path = "".join(reversed(error.path))
            raise DecodeError(f"{where}{kind}{path}: {error.message}") from None

    # -------------------------------------------------------------------- converter compilation

    def _converter_for(self, annotation: Any, owner: str) -> _Converter:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)

        if annotation is Any or annotation is object:
            raise TypeError(f"{owner}: wire fields must be concretely typed, not {annotation!r}")
        if annotation is type(None) or annotation is None:
            return _none_converter
        if annotation is bool:
            return _exact_converter(bool)
        if annotation is int:
            return _exact_converter(int)
        if annotation is str:
            return _exact_converter(str)
        if annotation is float:
            return _float_converter
        if annotation is bytes:
            return _bytes_converter
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return _enum_converter(annotation)
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            return self._dataclass_converter(annotation)
        if origin is typing.Literal:
            return _literal_converter(args)
        if origin in (types.UnionType, typing.Union):
            return self._union_converter(args, owner)
        if origin in (list, Sequence):
            return _list_converter(self._converter_for(args[0], owner), tuple_result=False)
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return _list_converter(self._converter_for(args[0], owner), tuple_result=True)
            return _fixed_tuple_converter([self._converter_for(arg, owner) for arg in args])
        if origin in (frozenset, set):
            return _frozenset_converter(self._converter_for(args[0], owner))
        if origin is dict:
            key_type, value_type = args
            if key_type not in (str, int):
                raise TypeError(f"{owner}: dict keys must be str or int, not {key_type!r}")
            return _dict_converter(key_type is int, self._converter_for(value_type, owner))
        raise TypeError(f"{owner}: unsupported wire field type {annotation!r}")

    def _union_converter(self, args: tuple[Any, ...], owner: str) -> _Converter:
        optional = type(None) in args
        members = [arg for arg in args if arg is not type(None)]
        if sum(1 for m in members if dataclasses.is_dataclass(m)) > 1:
            raise TypeError(f"{owner}: unions of several dataclasses need tags; not supported")
        converters = [self._converter_for(member, owner) for member in members]
        names = " | ".join(getattr(m, "__name__", repr(m)) for m in members)
        if optional:
            names += " | null"

        def convert(value: Any, payload: bytes) -> Any:
            if value is None and optional:
                return None
            for converter in converters:
                try:
                    return converter(value, payload)
                except _FieldError:
                    continue
            raise _FieldError(f"expected {names}, got {_describe(value)}")

        return convert

    def _dataclass_converter(self, cls: type) -> _Converter:
        if cls in self._converters:
            return self._converters[cls]
        if cls in self._building:
            # A recursive type: resolve lazily through the finished table.
            def deferred(value: Any, payload: bytes) -> Any:
                return self._converters[cls](value, payload)

            return deferred
        self._building.add(cls)
        try:
            hints = typing.get_type_hints(cls)
            fields = [f for f in dataclasses.fields(cls) if f.init]
            compiled = [
                (f.name, self._converter_for(hints[f.name], f"{cls.__name__}.{f.name}"), _has_default(f))
                for f in fields
            ]
        finally:
            self._building.discard(cls)
        names = frozenset(name for name, _, _ in compiled)
        class_name = cls.__name__

        def convert(value: Any, payload: bytes) -> Any:
            if type(value) is not dict:
                raise _FieldError(f"expected {class_name} object, got {_describe(value)}")
            if len(value) > len(names) or not names.issuperset(value):
                unknown = sorted(set(value) - names)
                raise _FieldError(f"unknown field(s) {unknown}")
            kwargs: dict[str, Any] = {}
            for name, converter, has_default in compiled:
                if name in value:
                    try:
                        kwargs[name] = converter(value[name], payload)
                    except _FieldError as error:
                        error.path.append(f".{name}")
                        raise
                elif not has_default:
                    missing = _FieldError("missing")
                    missing.path.append(f".{name}")
                    raise missing
            try:
                return cls(**kwargs)
            except (TypeError, ValueError) as error:
                # __post_init__ validation of a dataclass reports through the same channel.
                raise _FieldError(str(error)) from None

        self._converters[cls] = convert
        return convert


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def _none_converter(value: Any, payload: bytes) -> None:
    if value is not None:
        raise _FieldError(f"expected null, got {_describe(value)}")


def _exact_converter(expected: type) -> _Converter:
    name = expected.__name__

    def convert(value: Any, payload: bytes) -> Any:
        if type(value) is not expected:
            raise _FieldError(f"expected {name}, got {_describe(value)}")
        return value

    return convert


def _float_converter(value: Any, payload: bytes) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _FieldError(f"expected float, got {_describe(value)}")


def _bytes_converter(value: Any, payload: bytes) -> bytes:
    if type(value) is not list or len(value) != 2 or type(value[0]) is not int or type(value[1]) is not int:
        raise _FieldError(f"expected a payload reference [offset, length], got {_describe(value)}")
    offset, length = value
    if offset < 0 or length < 0 or offset + length > len(payload):
        raise _FieldError(
            f"payload reference [{offset}, {length}] is outside the {len(payload)}-byte payload"
        )
    if offset == 0 and length == len(payload):
        return payload  # the common case (one record set per frame): no copy
    return payload[offset : offset + length]


def _enum_converter(enum_type: type[enum.Enum]) -> _Converter:
    by_value = {member.value: member for member in enum_type}
    value_types = frozenset(type(value) for value in by_value)
    name = enum_type.__name__

    def convert(value: Any, payload: bytes) -> Any:
        # Exact JSON types only: no bool or float for an int enum, no list or object (unhashable).
        if type(value) not in value_types:
            raise _FieldError(f"expected {name}, got {_describe(value)}")
        member = by_value.get(value)
        if member is None:
            raise _FieldError(f"expected one of {name} {sorted(map(repr, by_value))}, got {value!r}")
        return member

    return convert


def _literal_converter(allowed: tuple[Any, ...]) -> _Converter:
    def convert(value: Any, payload: bytes) -> Any:
        for candidate in allowed:
            if type(value) is type(candidate) and value == candidate:
                return candidate
        raise _FieldError(f"expected one of {list(allowed)!r}, got {_describe(value)}")

    return convert


def _list_converter(item: _Converter, *, tuple_result: bool) -> _Converter:
    def convert(value: Any, payload: bytes) -> Any:
        if type(value) is not list:
            raise _FieldError(f"expected list, got {_describe(value)}")
        out = []
        for index, element in enumerate(value):
            try:
                out.append(item(element, payload))
            except _FieldError as error:
                error.path.append(f"[{index}]")
                raise
        return tuple(out) if tuple_result else out

    return convert


def _fixed_tuple_converter(items: list[_Converter]) -> _Converter:
    def convert(value: Any, payload: bytes) -> Any:
        if type(value) is not list or len(value) != len(items):
            raise _FieldError(f"expected a list of {len(items)} items, got {_describe(value)}")
        out = []
        for index, (converter, element) in enumerate(zip(items, value, strict=True)):
            try:
                out.append(converter(element, payload))
            except _FieldError as error:
                error.path.append(f"[{index}]")
                raise
        return tuple(out)

    return convert


def _frozenset_converter(item: _Converter) -> _Converter:
    as_list = _list_converter(item, tuple_result=False)

    def convert(value: Any, payload: bytes) -> Any:
        return frozenset(as_list(value, payload))

    return convert


def _dict_converter(int_keys: bool, item: _Converter) -> _Converter:
    def convert(value: Any, payload: bytes) -> Any:
        if type(value) is not dict:
            raise _FieldError(f"expected object, got {_describe(value)}")
        out: dict[Any, Any] = {}
        for key, element in value.items():
            converted_key: Any = key
            if int_keys:
                try:
                    converted_key = int(key)
                except ValueError:
                    raise _FieldError(f"expected an integer key, got {key!r}") from None
                if str(converted_key) != key:
                    raise _FieldError(f"expected an integer key, got {key!r}")
            try:
                out[converted_key] = item(element, payload)
            except _FieldError as error:
                error.path.append(f"[{key!r}]")
                raise
        return out

    return convert
