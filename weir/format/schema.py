"""The schema DSL: Kafka messages declared once, with version ranges per field.

A declaration mirrors Kafka's JSON message specs::

    FETCH_REQUEST = Message(
        "FetchRequest",
        valid="4-12",
        flexible="12+",
        fields=[
            Field("cluster_id", STRING, "12+", nullable="12+", tag=0),
            Field("replica_id", INT32, "0-14", default=-1),
            Field("topics", Array(Struct(
                Field("topic", STRING, "0-12"),
                ...
            ))),
        ],
    )

`Message.construct_for(version)` resolves the declaration for one version into a
tree of construct classes (`KStruct`, `KArray`, primitives), and
`Message.compiled_for(version)` `.compile()`s it; both are built lazily and cached.
Compiled code parses consecutive fixed-size fields with one `struct.unpack`,
inlines array loops, and shares the primitives' readers, so both paths obey the
same bounds: every count and length is checked against the bytes remaining in the
frame before anything is allocated.

Decoding: `Message.parse(stream, version)` returns the message's generated class
(a construct `Container` when unbound) with the fields that exist in that version
read from the stream and every other field at its default (known tagged fields get
their default when absent; unknown tags are skipped). Any malformed input raises
`DecodeError`.

Typed values: `weir/wire/codegen.py` generates one dataclass per message and nested
struct (`weir/wire/messages/`), and `Message.bind` attaches them: a bound message
parses into its classes and builds from their attributes. A field that no version
has cannot be constructed (TypeError); one absent in a version keeps its default.
Unbound messages (the embedded consumer protocol) parse into construct Containers.

Encoding: `Message.build_into(stream, body, version)` takes the generated class, or
a mapping converted strictly by `Message.value_of` (a key no version has raises
EncodeError; absent keys take the declared default). None for a non-nullable field
means its default; fields that do not exist in the version are not sent. Tagged
fields equal to their default are not sent.
"""

from __future__ import annotations

import io
import logging
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from construct import Construct, Container, SizeofError

from weir.format import primitives as prim
from weir.format.primitives import DecodeError, EncodeError, FrameIO, KafkaType, Sink

__all__ = [
    "BOOL",
    "BYTES",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "STRING",
    "UINT16",
    "UUID",
    "Api",
    "Array",
    "Field",
    "KArray",
    "KNullableStruct",
    "KStruct",
    "Message",
    "Scalar",
    "Struct",
    "VersionRange",
    "strict_value",
]

log = logging.getLogger(__name__)

_MISSING: Any = object()


# Versions --------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionRange:
    """Kafka's version syntax: "3+", "0-12", "7", or "none"."""

    low: int
    high: int | None  # None: no upper bound

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.low <= version and (self.high is None or version <= self.high)


# Declarations ----------------------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    """A primitive Kafka type by its spec name."""

    kafka_name: str


INT8 = Scalar("int8")
INT16 = Scalar("int16")
INT32 = Scalar("int32")
INT64 = Scalar("int64")
UINT16 = Scalar("uint16")
FLOAT64 = Scalar("float64")
BOOL = Scalar("bool")
UUID = Scalar("uuid")
STRING = Scalar("string")
BYTES = Scalar("bytes")
RECORDS = Scalar("records")

_FIXED_SCALARS: dict[str, prim.FixedType] = {
    "int8": prim.INT8,
    "int16": prim.INT16,
    "int32": prim.INT32,
    "int64": prim.INT64,
    "uint16": prim.UINT16,
    "float64": prim.FLOAT64,
    "bool": prim.BOOL,
}

# (kafka name, compact, nullable) -> primitive
_VARIABLE_SCALARS: dict[tuple[str, bool, bool], prim.KafkaType] = {
    ("uuid", False, False): prim.UUID,
    ("uuid", True, False): prim.UUID,
    ("string", False, False): prim.STRING,
    ("string", False, True): prim.NULLABLE_STRING,
    ("string", True, False): prim.COMPACT_STRING,
    ("string", True, True): prim.COMPACT_NULLABLE_STRING,
    ("bytes", False, False): prim.BYTES,
    ("bytes", False, True): prim.NULLABLE_BYTES,
    ("bytes", True, False): prim.COMPACT_BYTES,
    ("bytes", True, True): prim.COMPACT_NULLABLE_BYTES,
    ("records", False, False): prim.RECORDS,
    ("records", False, True): prim.RECORDS,
    ("records", True, False): prim.COMPACT_RECORDS,
    ("records", True, True): prim.COMPACT_RECORDS,
}


@dataclass(frozen=True, init=False)
class Struct:
    """A nested structure: an ordered list of fields."""

    fields: tuple[Field, ...]

    def __init__(self, *fields: Field) -> None:
        object.__setattr__(self, "fields", tuple(fields))


@dataclass(frozen=True)
class Array:
    element: Scalar | Struct


FieldType = Scalar | Struct | Array


@dataclass(frozen=True)
class Field:
    """One field of a message or struct, as in Kafka's JSON specs.

    `versions`, `nullable` and `tagged` use Kafka's version syntax; `tag` makes the
    field a tagged field (in `tagged` versions, by default all of `versions`).
    `default` is Kafka's default; without it: 0, "" (None when nullable), [], a
    struct of defaults, the zero UUID, None for records and nullable bytes."""

    name: str
    type: FieldType
    versions: str = "0+"
    nullable: str = "none"
    tag: int | None = None
    tagged: str | None = None
    default: Any = _MISSING


class Message:
    """A request or response schema for all of its versions."""

    def __init__(self, name: str, *, valid: str, flexible: str, fields: Sequence[Field]) -> None:
        self.name = name
        self.valid = VersionRange.parse(valid)
        self.flexible = VersionRange.parse(flexible)
        self.root = Struct(*fields)
        self._classes: dict[tuple[str, ...], type] = {}
        self._constructs: dict[int, KStruct] = {}
        self._compiled: dict[int, Construct] = {}

    def bind(self, classes: Mapping[tuple[str, ...], type]) -> None:
        """Parse into, and build from, these generated classes (by field path; `()` is
        the message itself). Called by the generated modules in `weir.wire.messages`."""
        self._classes = dict(classes)
        self._constructs.clear()
        self._compiled.clear()
        for path, value_type in classes.items():
            _BOUND_AT[value_type] = (self, path)

    @property
    def value_type(self) -> type | None:
        """The generated class of this message, once bound."""
        return self._classes.get(())

    def value_of(self, body: object) -> Any:
        """`body` as this message's generated class: an instance is returned as is; a
        mapping is converted strictly (nested mappings too): a key that no version of
        the message has raises TypeError, an absent key takes the declared default."""
        return _convert_struct(self.root, self._classes, (), body, self.name)

    def __repr__(self) -> str:
        return f"<Message {self.name}>"

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def construct_for(self, version: int) -> KStruct:
        """The (interpreted) construct for `version`, built once."""
        cached = self._constructs.get(version)
        if cached is None:
            if version not in self.valid:
                raise ValueError(f"{self.name} has no version {version}")
            cached = _resolve_struct(
                self.root, version, self.is_flexible(version), self._classes, ()
            )
            self._constructs[version] = cached
        return cached

    def compiled_for(self, version: int) -> Construct:
        """The `.compile()`d construct for `version` (the interpreted one if that fails)."""
        cached = self._compiled.get(version)
        if cached is None:
            interpreted = self.construct_for(version)
            try:
                cached = interpreted.compile()
            except Exception:  # pragma: no cover - a bug in code generation
                log.exception("compiling %s v%d failed; using the interpreter", self.name, version)
                cached = interpreted
            self._compiled[version] = cached
        return cached

    def as_container(self, value: object, version: int) -> Any:
        """A decoded value as a construct Container holding only the fields of
        `version` (key and attribute access), for tools that read responses
        generically (the `weir` CLI)."""
        return _as_container(self.construct_for(version), value)

    def parse(self, stream: FrameIO, version: int, *, compiled: bool = True) -> Any:
        """Parse one message from `stream`; raise DecodeError on any malformed input."""
        construct = self.compiled_for(version) if compiled else self.construct_for(version)
        try:
            return construct._parse(stream, None, self.name)
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError(f"malformed {self.name} v{version}: {exc!r}") from exc

    def build_into(self, stream: Sink, body: Any, version: int, *, compiled: bool = True) -> None:
        """Append the encoding of `body` to `stream`; raise EncodeError on bad values."""
        construct = self.compiled_for(version) if compiled else self.construct_for(version)
        value_type = self.value_type
        if value_type is not None and not isinstance(body, value_type):
            try:
                body = self.value_of(body)
            except TypeError as exc:
                raise EncodeError(f"cannot encode {self.name} v{version}: {exc}") from exc
        try:
            construct._build(body, stream, None, self.name)
        except EncodeError:
            raise
        except Exception as exc:
            raise EncodeError(f"cannot encode {self.name} v{version}: {exc!r}") from exc

    def build(self, body: Any, version: int, *, compiled: bool = True) -> bytes:
        stream = io.BytesIO()
        self.build_into(stream, body, version, compiled=compiled)
        return stream.getvalue()


@dataclass(frozen=True)
class Api:
    """One API: its key, request and response schemas, and the versions implemented."""

    key: int
    request: Message
    response: Message
    versions: tuple[int, int]

    def __post_init__(self) -> None:
        low, high = self.versions
        for message in (self.request, self.response):
            if low not in message.valid or high not in message.valid:
                raise ValueError(f"{message.name} does not declare versions {low}-{high}")


# Resolution: declarations -> constructs for one version ----------------------------


@dataclass(frozen=True)
class ResolvedField:
    name: str
    construct: KafkaType
    nullable: bool
    default: Any  # a literal value, [] (copied on use), or _MISSING for a struct's zero
    tag: int | None  # None unless tagged in this version

    def make_default(self) -> Any:
        if isinstance(self.construct, KStruct) and self.default is _MISSING:
            return self.construct.zero()
        if isinstance(self.default, list):
            return list(self.default)
        return self.default

    def default_source(self, code: Any) -> str:
        """A Python expression, in generated code, that evaluates to a fresh default."""
        if isinstance(self.construct, KStruct) and self.default is _MISSING:
            return self.construct.emit_zero(code)
        return _literal(self.default, code)


def _literal(value: Any, code: Any) -> str:
    if isinstance(value, uuid.UUID):
        code.append("import uuid")
        return f"uuid.UUID({str(value)!r})"
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    if isinstance(value, list) and not value:
        return "[]"
    raise TypeError(f"no literal for default {value!r}")


ValueT = TypeVar("ValueT")


def _as_container(construct: KafkaType, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(construct, KNullableStruct):
        return _as_container(construct.inner, value)
    if isinstance(construct, KStruct):
        fields = (*construct.fields, *construct.tagged)
        if isinstance(value, Mapping):
            return Container({f.name: _as_container(f.construct, value[f.name]) for f in fields})
        return Container(
            {f.name: _as_container(f.construct, getattr(value, f.name)) for f in fields}
        )
    if isinstance(construct, KArray):
        return [_as_container(construct.element, item) for item in value]
    return value


# Each generated class -> the message and field path it was bound at.
_BOUND_AT: dict[type, tuple[Message, tuple[str, ...]]] = {}


def strict_value(value_type: type[ValueT], body: Mapping[str, object]) -> ValueT:
    """`body` as the generated class `value_type`, converted like `Message.value_of`:
    a key that no version has raises TypeError. For layers that cannot import the
    generated classes (the pure group coordinators answer with mappings)."""
    bound = _BOUND_AT.get(value_type)
    if bound is None:
        raise TypeError(f"{value_type.__name__} is not a generated message class")
    message, path = bound
    value = _convert_struct(
        _struct_at(message.root, path), message._classes, path, body, value_type.__name__
    )
    assert isinstance(value, value_type)
    return value


def _struct_at(root: Struct, path: tuple[str, ...]) -> Struct:
    struct_type = root
    for name in path:
        declared = next(f for f in struct_type.fields if f.name == name)
        field_type = declared.type.element if isinstance(declared.type, Array) else declared.type
        assert isinstance(field_type, Struct)
        struct_type = field_type
    return struct_type


def _convert_struct(
    struct_type: Struct,
    classes: Mapping[tuple[str, ...], type],
    path: tuple[str, ...],
    body: object,
    where: str,
) -> Any:
    value_type = classes.get(path)
    if value_type is None:
        raise TypeError(f"{where} has no generated class (import weir.wire.messages)")
    if isinstance(body, value_type):
        return body
    if not isinstance(body, Mapping):
        raise TypeError(f"{where}: expected {value_type.__name__} or a mapping, got {body!r}")
    declared = {f.name: f.type for f in struct_type.fields}
    values: dict[str, Any] = {}
    for key, value in body.items():
        field_type = declared.get(key)
        if field_type is None:
            raise TypeError(f"{value_type.__name__} has no field {key!r}")
        values[key] = _convert_value(field_type, classes, (*path, key), value, f"{where}.{key}")
    return value_type(**values)


def _convert_value(
    field_type: FieldType,
    classes: Mapping[tuple[str, ...], type],
    path: tuple[str, ...],
    value: object,
    where: str,
) -> Any:
    if value is None:
        return None
    if isinstance(field_type, Struct):
        return _convert_struct(field_type, classes, path, value, where)
    if isinstance(field_type, Array) and isinstance(field_type.element, Struct):
        if not isinstance(value, Sequence):
            raise TypeError(f"{where}: expected a list, got {value!r}")
        element = field_type.element
        return [_convert_value(element, classes, path, item, where) for item in value]
    return value


def _resolve_struct(
    struct_type: Struct,
    version: int,
    flexible: bool,
    classes: Mapping[tuple[str, ...], type],
    path: tuple[str, ...],
) -> KStruct:
    fields: list[ResolvedField] = []
    tagged: list[ResolvedField] = []
    for declared in struct_type.fields:
        if version not in VersionRange.parse(declared.versions):
            continue
        is_tagged = declared.tag is not None and version in VersionRange.parse(
            declared.tagged or declared.versions
        )
        if is_tagged and not flexible:
            raise ValueError(f"tagged field {declared.name} in a non-flexible version")
        resolved = _resolve_field(
            declared, version, flexible, is_tagged, classes, (*path, declared.name)
        )
        (tagged if is_tagged else fields).append(resolved)
    tagged.sort(key=lambda f: f.tag or 0)
    return KStruct(fields, tagged, flexible, classes.get(path))


def _resolve_field(
    declared: Field,
    version: int,
    flexible: bool,
    tagged: bool,
    classes: Mapping[tuple[str, ...], type],
    path: tuple[str, ...],
) -> ResolvedField:
    nullable = version in VersionRange.parse(declared.nullable)
    construct = _resolve_type(declared.type, version, flexible, nullable, classes, path)
    default = declared.default
    if default is _MISSING and not isinstance(construct, KStruct):
        default = [] if isinstance(construct, KArray) else _scalar_zero(construct, nullable)
    return ResolvedField(
        declared.name, construct, nullable, default, declared.tag if tagged else None
    )


def _scalar_zero(construct: KafkaType, nullable: bool) -> Any:
    zero = construct.zero()
    if nullable and isinstance(zero, str | bytes):
        return None
    return zero


def _resolve_type(
    field_type: FieldType,
    version: int,
    flexible: bool,
    nullable: bool,
    classes: Mapping[tuple[str, ...], type],
    path: tuple[str, ...],
) -> KafkaType:
    if isinstance(field_type, Scalar):
        return _resolve_scalar(field_type, flexible, nullable)
    if isinstance(field_type, Struct):
        struct_type = _resolve_struct(field_type, version, flexible, classes, path)
        return KNullableStruct(struct_type) if nullable else struct_type
    element = _resolve_type(field_type.element, version, flexible, False, classes, path)
    return KArray(element, compact=flexible, nullable=nullable)


def _resolve_scalar(scalar: Scalar, flexible: bool, nullable: bool) -> KafkaType:
    fixed = _FIXED_SCALARS.get(scalar.kafka_name)
    if fixed is not None:
        if nullable:
            raise ValueError(f"{scalar.kafka_name} cannot be nullable")
        return fixed
    return _VARIABLE_SCALARS[(scalar.kafka_name, flexible, nullable)]


# Composite constructs --------------------------------------------------------------


class KArray(KafkaType):
    """An array: int32 count (-1 null) or, when compact, uvarint count + 1 (0 null)."""

    def __init__(self, element: KafkaType, *, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.kafka_name = f"{'compact_' if compact else ''}[]{element.kafka_name}"
        self.size_bytes_min = 1 if compact else 4
        self._read_count = prim.read_compact_array_count if compact else prim.read_array_count
        self._write_count = prim.write_compact_array_count if compact else prim.write_array_count

    def zero(self) -> Any:
        return []

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError(path=path)

    def _parse(self, stream: FrameIO, context: Any, path: str) -> Any:
        count = self._read_count(stream, self.element.size_bytes_min, self.nullable)
        if count < 0:
            return None
        element = self.element
        return [element._parse(stream, context, path) for _ in range(count)]

    def _build(self, obj: Any, stream: Sink, context: Any, path: str) -> Any:
        if obj is None:
            if not self.nullable:
                obj = []
            else:
                self._write_count(stream, -1)
                return obj
        self._write_count(stream, len(obj))
        for item in obj:
            if item is None and isinstance(self.element, KStruct):
                item = self.element.zero()
            self.element._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        name = f"parse_array_{code.allocateId()}"
        reader = self._read_count.__name__
        code.append(f"from weir.format.primitives import {reader}, read_exact")
        if isinstance(self.element, prim.FixedType):
            fmt = self.element.format_char
            size = self.element.size_bytes_min
            items = f"list(struct.unpack('>%d{fmt}' % n, read_exact(io, {size} * n)))"
        else:
            items = f"[{self.element._compileparse(code)} for _ in range(n)]"
        lines = [
            f"n = {reader}(io, {self.element.size_bytes_min}, {self.nullable})",
            "if n < 0:",
            "    return None",
            f"return {items}",
        ]
        _append_function(code, f"def {name}(io, this):", lines)
        return f"{name}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        name = f"build_array_{code.allocateId()}"
        writer = self._write_count.__name__
        code.append(f"from weir.format.primitives import {writer}")
        lines = [
            "if items is None:",
            f"    {writer}(io, {-1 if self.nullable else 0})",
            "    return",
            f"{writer}(io, len(items))",
        ]
        if isinstance(self.element, prim.FixedType):
            fmt = self.element.format_char
            lines.append(f"io.write(struct.pack('>%d{fmt}' % len(items), *items))")
        else:
            lines.append("for obj in items:")
            if isinstance(self.element, KStruct):
                empty = self.element.emit_empty(code)
                lines += ["    if obj is None:", f"        obj = {empty}"]
            lines.append(f"    {self.element._compilebuild(code)}")
        _append_function(code, f"def {name}(items, io, this):", lines)
        return f"{name}(obj, io, this)"


class KStruct(KafkaType):
    """A Kafka struct: fields in order, then (when flexible) a tagged-field buffer.

    Bound to a generated class (`value_type`), it parses into instances of it and
    builds from their attributes; unbound (messages outside the API registry), it
    parses into a Container and builds from any mapping."""

    kafka_name = "struct"

    def __init__(
        self,
        fields: Sequence[ResolvedField],
        tagged: Sequence[ResolvedField],
        flexible: bool,
        value_type: type | None = None,
    ) -> None:
        super().__init__()
        self.fields = tuple(fields)
        self.tagged = tuple(tagged)
        self.flexible = flexible
        self.value_type = value_type
        self.tags = {f.tag: f for f in self.tagged}
        self.size_bytes_min = sum(f.construct.size_bytes_min for f in self.fields) + int(flexible)
        self._tag_default_bytes = {f.tag: _encode_value(f, f.make_default()) for f in self.tagged}

    def zero(self) -> Any:
        values = {f.name: f.make_default() for f in (*self.fields, *self.tagged)}
        if self.value_type is not None:
            return self.value_type(**values)
        return Container(values)

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError(path=path)

    # Interpreted path ------------------------------------------------------------

    def _parse(self, stream: FrameIO, context: Any, path: str) -> Any:
        values = {f.name: f.construct._parse(stream, context, path) for f in self.fields}
        if self.flexible:
            for f in self.tagged:
                values[f.name] = f.make_default()
        result = Container(values) if self.value_type is None else self.value_type(**values)
        if self.flexible:
            self._parse_tags(stream, result, context, path)
        return result

    def _parse_tags(self, stream: FrameIO, result: Any, context: Any, path: str) -> None:
        count = prim.read_uvarint(stream)
        prim.check_remaining(stream, 2 * count, f"{count} tagged fields")
        for _ in range(count):
            tag = prim.read_uvarint(stream)
            size = prim.read_uvarint(stream)
            prim.check_remaining(stream, size, f"tagged field {tag}")
            end = stream.tell() + size
            known = self.tags.get(tag)
            if known is None:
                stream.seek(end)
                continue
            value = known.construct._parse(stream, context, path)
            if self.value_type is None:
                result[known.name] = value
            else:
                setattr(result, known.name, value)
            if stream.tell() != end:
                raise DecodeError(f"tagged field {tag} does not fill its {size} bytes")

    def _build(self, obj: Any, stream: Sink, context: Any, path: str) -> Any:
        if self.value_type is not None and not isinstance(obj, self.value_type):
            raise EncodeError(f"expected {self.value_type.__name__}, got {type(obj).__name__}")
        for f in self.fields:
            f.construct._build(self._field_value(obj, f), stream, context, path)
        if self.flexible:
            self._build_tags(obj, stream)
        return obj

    def _field_value(self, obj: Any, f: ResolvedField) -> Any:
        if self.value_type is None:
            return _field_value(obj, f)
        value = getattr(obj, f.name)
        return f.make_default() if value is None and not f.nullable else value

    def _build_tags(self, obj: Any, stream: Sink) -> None:
        present: list[tuple[int, bytes]] = []
        for f in self.tagged:
            value = obj.get(f.name) if self.value_type is None else getattr(obj, f.name)
            if value is None or f.tag is None:
                continue
            data = _encode_value(f, value)
            if data != self._tag_default_bytes[f.tag]:
                present.append((f.tag, data))
        write_tag_buffer(stream, present)

    # Compiled path ---------------------------------------------------------------

    def _emit_class(self, code: Any) -> str:
        assert self.value_type is not None
        name = self.value_type.__name__
        code.append(f"from {self.value_type.__module__} import {name}")
        return name

    def _access(self, name: str) -> str:
        """The expression, in a build function, that reads field `name` of `objdict`."""
        return f"get({name!r})" if self.value_type is None else f"objdict.{name}"

    def emit_zero(self, code: Any) -> str:
        name = f"zero_struct_{code.allocateId()}"
        items = ", ".join(
            f"{f.name!r}: {f.default_source(code)}" for f in (*self.fields, *self.tagged)
        )
        constructor = "Container" if self.value_type is None else self._emit_class(code)
        code.append(f"""
            def {name}():
                return {constructor}(**{{{items}}})
        """)
        return f"{name}()"

    def emit_empty(self, code: Any) -> str:
        """An expression for a struct standing in for a null element: `{}` or a
        default instance of the generated class."""
        return "{}" if self.value_type is None else f"{self._emit_class(code)}()"

    def _emitparse(self, code: Any) -> str:
        name = f"parse_struct_{code.allocateId()}"
        if self.value_type is None:
            lines = ["result = Container()"]
            target = "result[{!r}]".format
        else:
            lines = []
            target = "v_{}".format
        for group in _group_fixed(self.fields):
            lines.append(_emit_parse_group(group, code, target))
        if self.flexible:
            lines += [f"{target(f.name)} = {f.default_source(code)}" for f in self.tagged]
        if self.value_type is not None:
            arguments = ", ".join(f"{f.name}=v_{f.name}" for f in (*self.fields, *self.tagged))
            lines.append(f"result = {self._emit_class(code)}({arguments})")
        if self.flexible:
            tags = self._emit_parse_tags(code)
            lines += ["tag_count = io.read(1)", "if tag_count != b'\\x00':"]
            lines.append(f"    {tags}(io, this, result, tag_count)")
        lines.append("return result")
        _append_function(code, f"def {name}(io, this):", lines)
        return f"{name}(io, this)"

    def _emit_parse_tags(self, code: Any) -> str:
        name = f"parse_tags_{code.allocateId()}"
        code.append("from weir.format.primitives import read_uvarint, check_remaining, DecodeError")
        lines = [
            "if not tag_count:",
            "    raise DecodeError('truncated tagged fields')",
            "io.seek(-1, 1)",
            "count = read_uvarint(io)",
            "check_remaining(io, 2 * count, 'tagged fields')",
            "for _ in range(count):",
            "    tag = read_uvarint(io)",
            "    size = read_uvarint(io)",
            "    check_remaining(io, size, 'tagged field')",
            "    end = io.tell() + size",
        ]
        keyword = "if"
        for f in self.tagged:
            target = f"result[{f.name!r}]" if self.value_type is None else f"result.{f.name}"
            lines.append(f"    {keyword} tag == {f.tag}:")
            lines.append(f"        {target} = {f.construct._compileparse(code)}")
            keyword = "elif"
        lines += [
            f"    {'else:' if self.tagged else 'if True:'}",
            "        io.seek(end)",
            "        continue",
            "    if io.tell() != end:",
            "        raise DecodeError('tagged field does not fill its size')",
        ]
        _append_function(code, f"def {name}(io, this, result, tag_count):", lines)
        return name

    def _emitbuild(self, code: Any) -> str:
        name = f"build_struct_{code.allocateId()}"
        lines = ["objdict = obj"]
        if self.value_type is None:
            lines.append("get = objdict.get")
        for group in _group_fixed(self.fields):
            lines += _emit_build_group(group, code, self._access)
        if self.flexible:
            lines.append(self._emit_build_tags(code))
        lines.append("return objdict")
        _append_function(code, f"def {name}(obj, io, this):", lines)
        return f"{name}(obj, io, this)"

    def _emit_build_tags(self, code: Any) -> str:
        if not self.tagged:
            return "io.write(b'\\x00')"
        code.append("from weir.format.schema import write_tag_buffer")
        code.append("from io import BytesIO")
        lines = ["present = []"]
        for f in self.tagged:
            encoder = f"encode_tag_{code.allocateId()}"
            _append_function(
                code,
                f"def {encoder}(obj, this):",
                ["io = BytesIO()", f.construct._compilebuild(code), "return io.getvalue()"],
            )
            assert f.tag is not None
            default_bytes = self._tag_default_bytes[f.tag]
            lines += [
                f"obj = {self._access(f.name)}",
                "if obj is not None:",
                f"    data = {encoder}(obj, this)",
                f"    if data != {default_bytes!r}:",
                f"        present.append(({f.tag}, data))",
            ]
        lines.append("write_tag_buffer(io, present)")
        name = f"build_tags_{code.allocateId()}"
        source = "get" if self.value_type is None else "objdict"
        _append_function(code, f"def {name}({source}, io, this):", lines)
        return f"{name}({source}, io, this)"


class KNullableStruct(KafkaType):
    """A struct that may be null: an int8 marker (-1 null, 1 present), then the struct."""

    kafka_name = "nullable struct"
    size_bytes_min = 1

    def __init__(self, inner: KStruct) -> None:
        super().__init__()
        self.inner = inner

    def zero(self) -> Any:
        return None

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError(path=path)

    def _parse(self, stream: FrameIO, context: Any, path: str) -> Any:
        (marker,) = struct.unpack(">b", prim.read_exact(stream, 1))
        return None if marker < 0 else self.inner._parse(stream, context, path)

    def _build(self, obj: Any, stream: Sink, context: Any, path: str) -> Any:
        if obj is None:
            stream.write(b"\xff")
            return None
        stream.write(b"\x01")
        return self.inner._build(obj, stream, context, path)

    def _emitparse(self, code: Any) -> str:
        name = f"parse_nullable_struct_{code.allocateId()}"
        code.append("from weir.format.primitives import DecodeError")
        lines = [
            "marker = io.read(1)",
            "if len(marker) != 1:",
            "    raise DecodeError('truncated nullable struct')",
            "if marker[0] >= 0x80:",
            "    return None",
            f"return {self.inner._compileparse(code)}",
        ]
        _append_function(code, f"def {name}(io, this):", lines)
        return f"{name}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        name = f"build_nullable_struct_{code.allocateId()}"
        lines = [
            "if obj is None:",
            "    io.write(b'\\xff')",
            "    return None",
            "io.write(b'\\x01')",
            f"return {self.inner._compilebuild(code)}",
        ]
        _append_function(code, f"def {name}(obj, io, this):", lines)
        return f"{name}(obj, io, this)"


def write_tag_buffer(stream: Sink, present: Sequence[tuple[int, bytes]]) -> None:
    """Write the tagged-field section: count, then (tag, size, bytes) in tag order."""
    prim.write_uvarint(stream, len(present))
    for tag, data in present:
        prim.write_uvarint(stream, tag)
        prim.write_uvarint(stream, len(data))
        stream.write(data)


def _field_value(obj: Mapping[str, Any], f: ResolvedField) -> Any:
    value = obj.get(f.name, _MISSING)
    if value is _MISSING or (value is None and not f.nullable):
        return f.make_default()
    return value


def _encode_value(f: ResolvedField, value: Any) -> bytes:
    stream = io.BytesIO()
    f.construct._build(value, stream, None, f.name)
    return stream.getvalue()


def _group_fixed(fields: Sequence[ResolvedField]) -> list[list[ResolvedField]]:
    """Split fields into runs: consecutive fixed-size fields share one struct call."""
    groups: list[list[ResolvedField]] = []
    for f in fields:
        fixed = isinstance(f.construct, prim.FixedType)
        if fixed and groups and isinstance(groups[-1][0].construct, prim.FixedType):
            groups[-1].append(f)
        else:
            groups.append([f])
    return groups


def _group_format(group: Sequence[ResolvedField]) -> tuple[str, int]:
    chars = "".join(f.construct.format_char for f in group)  # type: ignore[attr-defined]
    return ">" + chars, struct.calcsize(">" + chars)


def _emit_parse_group(
    group: Sequence[ResolvedField], code: Any, target: Callable[[str], str]
) -> str:
    first = group[0]
    if not isinstance(first.construct, prim.FixedType):
        return f"{target(first.name)} = {first.construct._compileparse(code)}"
    fmt, size = _group_format(group)
    packer = f"fixed_group_{fmt[1:].replace('?', 'o')}"
    code.append(f"{packer} = struct.Struct({fmt!r})")
    targets = ", ".join(target(f.name) for f in group)
    return f"{targets}, = {packer}.unpack(io.read({size}))"


def _emit_build_group(
    group: Sequence[ResolvedField], code: Any, access: Callable[[str], str]
) -> list[str]:
    first = group[0]
    if not isinstance(first.construct, prim.FixedType):
        return [
            *_emit_value(first, code, access),
            first.construct._compilebuild(code),
        ]
    fmt, _ = _group_format(group)
    packer = f"fixed_group_{fmt[1:].replace('?', 'o')}"
    code.append(f"{packer} = struct.Struct({fmt!r})")
    values = ", ".join(
        f"({f.default_source(code)} if (obj := {access(f.name)}) is None else obj)" for f in group
    )
    return [f"io.write({packer}.pack({values}))"]


def _emit_value(f: ResolvedField, code: Any, access: Callable[[str], str]) -> list[str]:
    """Lines binding `obj` to the field's value, defaulted. A generated class always
    holds a value, so only a mapping's absent key (not its None) means the default."""
    reads_mapping = access(f.name) == f"get({f.name!r})"
    if f.nullable and (f.default is None or not reads_mapping):
        return [f"obj = {access(f.name)}"]
    if f.nullable:
        missing = "_MISSING_VALUE"
        code.append(f"{missing} = object()")
        return [
            f"obj = get({f.name!r}, {missing})",
            f"if obj is {missing}:",
            f"    obj = {f.default_source(code)}",
        ]
    return [
        f"obj = {access(f.name)}",
        "if obj is None:",
        f"    obj = {f.default_source(code)}",
    ]


def _append_function(code: Any, signature: str, body: Sequence[str]) -> None:
    lines = [signature] + ["    " + line for line in "\n".join(body).splitlines()]
    code.append("\n".join(lines) + "\n")
