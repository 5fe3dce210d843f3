"""The console's files ship with the package and are the ones its pages name."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

from weir.broker.http.console import routes

REPO_ROOT = Path(__file__).resolve().parents[3]
CONSOLE_DIR = Path(routes.__file__).parent


def served_files() -> list[str]:
    return sorted(
        path.relative_to(CONSOLE_DIR).as_posix()
        for folder in ("pages", "static")
        for path in (CONSOLE_DIR / folder).rglob("*")
        if path.is_file()
    )


def test_every_console_file_is_in_the_packages_data() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["weir.broker.http.console"]
    missing = [
        name
        for name in served_files()
        if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
    ]
    assert missing == [], f"not installed by `pip install .`: {missing}"


def test_every_script_and_stylesheet_a_page_names_exists() -> None:
    static = set(routes.load_files("static"))
    for page in sorted((CONSOLE_DIR / "pages").glob("*.html")):
        html = page.read_text()
        assert "<script>" not in html, f"{page.name}: inline scripts are refused by the CSP"
        for name in re.findall(r'(?:src|href)="/console/static/([^"]+)"', html):
            assert name in static, f"{page.name} names /console/static/{name}"


def test_licences_and_notes_are_not_served() -> None:
    static = routes.load_files("static")
    assert "vendor/VENDORED.md" not in static
    assert not [name for name in static if name.endswith("LICENSE")]
    assert "vendor/alpine-3.15.3.min.js" in static
