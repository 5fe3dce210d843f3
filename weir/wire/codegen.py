"""Typed message classes generated from the schema declarations.

Each module `weir/wire/apis/<family>.py` declares its messages once; this writes
`weir/wire/messages/<family>.py` with one `@dataclass(slots=True)` class per
message and per nested struct. A class has the union of the fields of every
version, with the declared defaults; a field absent in a version keeps its
default when parsed and is not sent when built, and a field no version has is a
TypeError at construction. The generated module ends by binding its classes to
the declarations (`Message.bind`), so the parsers construct them and the
builders read their attributes.

Run `python -m weir.wire.codegen` after changing a declaration; a test fails
when the checked-in modules differ from what this writes.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import weir.wire.apis
from weir.format.schema import Array, Field, FieldType, Message, Scalar, Struct, VersionRange

MESSAGES_DIR = Path(__file__).parent / "messages"

_SCALAR_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "float64": "float",
    "bool": "bool",
    "uuid": "uuid.UUID",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes | bytearray | memoryview",
}


@dataclass(frozen=True)
class _Slot:
    """One dataclass field: its name, annotation and default (a source expression)."""

    name: str
    annotation: str
    default_source: str
    factory: bool  # default_source is a callable for field(default_factory=...)


@dataclass
class _Class:
    name: str
    struct: Struct
    slots: list[_Slot]


@dataclass
class _ModulePlan:
    classes: list[_Class]
    bindings: list[tuple[str, str, dict[tuple[str, ...], str]]]  # message var, root, paths


def family_modules() -> list[str]:
    """The declaration modules under weir/wire/apis, by name."""
    return sorted(
        info.name for info in pkgutil.iter_modules(weir.wire.apis.__path__) if not info.ispkg
    )


def _messages_of(module_name: str) -> list[tuple[str, Message]]:
    module = importlib.import_module(f"weir.wire.apis.{module_name}")
    return [(name, value) for name, value in vars(module).items() if isinstance(value, Message)]


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _singular(name: str) -> str:
    if name.endswith("ches"):  # acknowledgement_batches -> ...Batch
        return name[:-2]
    if name.endswith("s") and not name.endswith(("ss", "us")):
        return name[:-1]
    return name


def _nullable_anywhere(declared: Field) -> bool:
    return VersionRange.parse(declared.nullable) != VersionRange.parse("none")


class _Planner:
    """Names a class for each distinct struct of one module's messages."""

    def __init__(self) -> None:
        self.classes: list[_Class] = []
        self._by_struct: dict[int, _Class] = {}
        self._names: set[str] = set()

    def plan_message(self, message: Message) -> dict[tuple[str, ...], str]:
        self._by_struct.clear()  # structs shared between messages get a class each
        paths: dict[tuple[str, ...], str] = {}
        self._plan_struct(message.root, message.name, message.name, (), paths)
        return paths

    def _plan_struct(
        self,
        struct: Struct,
        name: str,
        message_name: str,
        path: tuple[str, ...],
        paths: dict[tuple[str, ...], str],
    ) -> _Class:
        existing = self._by_struct.get(id(struct))
        if existing is not None:
            self._register_paths(struct, path, paths)
            return existing
        if name in self._names:
            raise ValueError(f"two structs would be named {name}")
        planned = _Class(name, struct, [])
        self._names.add(name)
        self._by_struct[id(struct)] = planned
        paths[path] = name
        for declared_name, declarations in _fields_by_name(struct).items():
            planned.slots.append(
                self._plan_slot(declared_name, declarations, name, message_name, path, paths)
            )
        self.classes.append(planned)  # after its nested structs: defaults refer to them
        return planned

    def _register_paths(
        self, struct: Struct, path: tuple[str, ...], paths: dict[tuple[str, ...], str]
    ) -> None:
        """A struct met again at another path: its classes, at that path too."""
        paths[path] = self._by_struct[id(struct)].name
        for declared in struct.fields:
            element = declared.type.element if isinstance(declared.type, Array) else declared.type
            if isinstance(element, Struct):
                self._register_paths(element, (*path, declared.name), paths)

    def _child_name(self, parent: str, message_name: str, field_name: str) -> str:
        short = message_name + _camel(_singular(field_name))
        if short not in self._names:
            return short
        return parent + _camel(_singular(field_name))

    def _plan_slot(
        self,
        name: str,
        declarations: list[Field],
        parent: str,
        message_name: str,
        path: tuple[str, ...],
        paths: dict[tuple[str, ...], str],
    ) -> _Slot:
        declared = declarations[0]
        nullable = any(_nullable_anywhere(d) for d in declarations)
        element = declared.type.element if isinstance(declared.type, Array) else declared.type
        for other in declarations[1:]:
            if _shape(other.type) != _shape(declared.type):
                raise ValueError(f"{parent}.{name} changes type between versions")
        if isinstance(element, Struct):
            existing = self._by_struct.get(id(element))
            child_name = existing.name if existing else self._child_name(parent, message_name, name)
            self._plan_struct(element, child_name, message_name, (*path, name), paths)
            element_type = child_name
        else:
            element_type = _SCALAR_TYPES[element.kafka_name]
        if isinstance(declared.type, Array):
            return _array_slot(name, element_type, declared, nullable)
        if isinstance(element, Struct):
            return _struct_slot(name, element_type, nullable)
        return _scalar_slot(name, element_type, declared, nullable)


def _shape(field_type: FieldType) -> str:
    if isinstance(field_type, Array):
        return "[]" + _shape(field_type.element)
    if isinstance(field_type, Struct):
        return "struct"
    return field_type.kafka_name


def _fields_by_name(struct: Struct) -> dict[str, list[Field]]:
    by_name: dict[str, list[Field]] = {}
    for declared in struct.fields:
        by_name.setdefault(declared.name, []).append(declared)
    return by_name


def _has_default(declared: Field) -> bool:
    return declared.default is not Field.__dataclass_fields__["default"].default


def _array_slot(name: str, element_type: str, declared: Field, nullable: bool) -> _Slot:
    annotation = f"list[{element_type}]" + (" | None" if nullable else "")
    if _has_default(declared) and declared.default is None:
        return _Slot(name, annotation, "None", False)
    return _Slot(name, annotation, "list", True)


def _struct_slot(name: str, class_name: str, nullable: bool) -> _Slot:
    if nullable:
        return _Slot(name, f"{class_name} | None", "None", False)
    return _Slot(name, class_name, class_name, True)


def _scalar_slot(name: str, python_type: str, declared: Field, nullable: bool) -> _Slot:
    kafka_name = declared.type.kafka_name if isinstance(declared.type, Scalar) else ""
    if kafka_name == "records":
        nullable = True  # Kafka's records are always nullable on the wire
    annotation = python_type + (" | None" if nullable else "")
    if _has_default(declared):
        return _Slot(name, annotation, _literal(declared.default), False)
    if nullable and kafka_name in ("string", "bytes", "records"):
        return _Slot(name, annotation, "None", False)
    zeros = {"int": "0", "float": "0.0", "bool": "False", "str": '""', "bytes": 'b""'}
    if python_type == "uuid.UUID":
        return _Slot(name, annotation, "uuid.UUID(int=0)", False)
    return _Slot(name, annotation, zeros[python_type], False)


def _literal(value: object) -> str:
    if isinstance(value, uuid.UUID):
        return f"uuid.UUID({str(value)!r})"
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    raise TypeError(f"no literal for default {value!r}")


def plan_module(module_name: str) -> _ModulePlan:
    planner = _Planner()
    bindings: list[tuple[str, str, dict[tuple[str, ...], str]]] = []
    for variable, message in _messages_of(module_name):
        paths = planner.plan_message(message)
        bindings.append((variable, message.name, paths))
    return _ModulePlan(planner.classes, bindings)


def _render_class(planned: _Class) -> Iterator[str]:
    yield ""
    yield ""
    yield "@dataclass(slots=True)"
    yield f"class {planned.name}:"
    if not planned.slots:
        yield "    pass"
    for slot in planned.slots:
        default = slot.default_source
        if slot.factory:
            default = f"field(default_factory={default})"
        yield f"    {slot.name}: {slot.annotation} = {default}"


def render_module(module_name: str) -> str:
    """The source of weir/wire/messages/<module_name>.py, ruff-formatted."""
    plan = plan_module(module_name)
    variables = ", ".join(sorted(variable for variable, _, _ in plan.bindings))
    body = [line for planned in plan.classes for line in _render_class(planned)]
    uses_uuid = any("uuid." in line for line in body)
    uses_field = any("field(" in line for line in body)
    lines = [
        f'"""Generated by `python -m weir.wire.codegen` from weir/wire/apis/{module_name}.py.',
        "",
        'Do not edit: change the declaration and regenerate."""',
        "",
        "from __future__ import annotations",
        "",
        *(["import uuid"] if uses_uuid else []),
        "from dataclasses import dataclass" + (", field" if uses_field else ""),
        "",
        f"from weir.wire.apis.{module_name} import {variables}",
        *body,
    ]
    lines += ["", ""]
    for variable, _, paths in plan.bindings:
        entries = ", ".join(f"{path!r}: {name}" for path, name in paths.items())
        lines.append(f"{variable}.bind({{{entries}}})")
    lines.append(f"__all__ = {[c.name for c in plan.classes]!r}")
    return _ruff_format("\n".join(lines) + "\n")


def render_package_init(modules: list[str]) -> str:
    lines = [
        '"""Typed request and response classes, generated by `python -m weir.wire.codegen`.',
        "",
        "Importing this package binds every class to its declaration; the wire layer",
        'imports it before it compiles a parser."""',
        "",
        "from weir.wire.messages import " + ", ".join(modules),
        "",
        f"__all__ = {modules!r}",
    ]
    return _ruff_format("\n".join(lines) + "\n")


def _ruff_format(source: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "generated.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def rendered_files() -> dict[Path, str]:
    """Every generated file by path, as the declarations say it should be."""
    modules = family_modules()
    files = {MESSAGES_DIR / f"{name}.py": render_module(name) for name in modules}
    files[MESSAGES_DIR / "__init__.py"] = render_package_init(modules)
    return files


def main() -> None:
    MESSAGES_DIR.mkdir(exist_ok=True)
    for path, source in rendered_files().items():
        path.write_text(source)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
