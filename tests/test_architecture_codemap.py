"""ARCHITECTURE.md's codemap names every module of the `weir` package: a module added
or moved without its line there fails here."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Generated or declarative trees the codemap describes as a whole.
DESCRIBED_AS_A_WHOLE = ("weir/wire/messages", "weir/wire/apis")


def _codemap() -> str:
    text = (REPO_ROOT / "ARCHITECTURE.md").read_text()
    return text[text.index("## Codemap") : text.index("## Boundaries")]


def _package_heading(module: Path) -> str:
    """The codemap section a module's line belongs in: its top package under weir."""
    return "### `weir/" + module.relative_to(REPO_ROOT / "weir").parts[0] + "/`"


def test_every_module_of_weir_has_a_line_in_its_packages_codemap_section() -> None:
    codemap = _codemap()
    sections = {"### " + part.split("\n", 1)[0]: part for part in codemap.split("\n### ")[1:]}
    missing = []
    for module in sorted((REPO_ROOT / "weir").rglob("*.py")):
        relative = module.relative_to(REPO_ROOT).as_posix()
        if module.name == "__init__.py" or relative.startswith(DESCRIBED_AS_A_WHOLE):
            continue
        section = sections.get(_package_heading(module), "")
        if f"`{module.name}`" not in section:
            missing.append(relative)
    assert missing == [], f"modules without a line in ARCHITECTURE.md's codemap: {missing}"
