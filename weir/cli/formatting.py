"""Rendering results for people (aligned tables) and for scripts (JSON)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

TABLE = "text"
# Accepted for --format text: the spelling of earlier releases.
TABLE_ALIAS = "table"
JSON = "json"
FORMATS = (TABLE, JSON)
COLUMN_GAP = "  "


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns under upper-case headers; no trailing spaces; ends with a newline."""
    cells = [[str(h) for h in headers]] + [[cell_text(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        COLUMN_GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    return "\n".join(lines) + "\n"


def headers_for(fields: Sequence[str]) -> tuple[str, ...]:
    """Table headers named after JSON fields: `leader_epoch` -> `LEADER-EPOCH`."""
    return tuple(field.upper().replace("_", "-") for field in fields)


def counted(count: int, noun: str) -> str:
    """`1 partition`, `2 partitions`, `0 partitions`: a count and its noun, in agreement."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def render_json(document: Any) -> str:
    """One JSON document on one line, keys in insertion order, ending with a newline."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"


def bytes_fields(name: str, value: bytes | None) -> dict[str, str | None]:
    """A key or value for JSON: `{name: text}` when it is UTF-8, else `{name_base64: ...}`."""
    if value is None:
        return {name: None}
    try:
        return {name: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(value).decode("ascii")}
