"""The formats package is neutral ground: it imports no other Weir package, and the
layers that share it (log, txn, groupcoord) do not reach into the wire package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import weir

WEIR_DIR = Path(weir.__file__).parent

# package -> the Weir packages it may import (itself always allowed)
ALLOWED_WEIR_IMPORTS = {
    "format": set(),
    "wire": {"format"},
    "log": {"format", "txn"},
    "txn": {"format"},
    "groupcoord": {"format"},
}


def weir_packages_imported(package: str) -> dict[str, set[str]]:
    """For each module of `weir/<package>`, the Weir packages it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((WEIR_DIR / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        parts = (name.split(".") for name in names)
        found[str(path.relative_to(WEIR_DIR))] = {
            p[1] for p in parts if p[0] == "weir" and len(p) > 1 and p[1] != package
        }
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED_WEIR_IMPORTS))
def test_package_imports_only_the_weir_packages_it_may(package: str) -> None:
    allowed = ALLOWED_WEIR_IMPORTS[package]
    offending = {
        module: sorted(imported - allowed)
        for module, imported in weir_packages_imported(package).items()
        if imported - allowed
    }
    assert offending == {}


def test_the_boundary_check_sees_imports() -> None:
    # The log really uses the formats package; an empty scan would prove nothing.
    imported = set().union(*weir_packages_imported("log").values())
    assert "format" in imported
