"""The web console's routes: its pages (`/console/<page>`, static HTML from
`pages/`) and their scripts and styles (`/console/static/...`, from `static/`),
read once into memory at start-up and served with an ETag; and `GET /`, which
redirects a browser to the console.

The pages are static: their scripts (Alpine.js components in `static/*.js`)
fetch everything they show from the same HTTP API a script would use (`/v3`,
`/v1`, `/metrics`), as the logged-in user, so the console has no access of its
own and every view works against any broker of a cluster. docs/console.md is
the user's guide; ARCHITECTURE.md says why Alpine.js and uPlot.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

CONSOLE_PATH = "/console"
STATIC_PATH = CONSOLE_PATH + "/static"
HOME_PAGE = "overview"

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# Scripts and styles only from the broker itself; Alpine.js evaluates its
# attribute expressions with `new Function` ('unsafe-eval'); no frames.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)


@dataclass(frozen=True)
class ConsoleFile:
    body: bytes
    content_type: str
    etag: str


def load_files(folder: str) -> dict[str, ConsoleFile]:
    """Every file under `folder` of this package, by its path relative to it."""
    files: dict[str, ConsoleFile] = {}
    root = Path(__file__).parent / folder  # package data (pyproject's package-data)

    def walk(node: Path, prefix: str) -> None:
        for child in sorted(node.iterdir()):
            name = prefix + child.name
            if child.is_dir():
                walk(child, name + "/")
                continue
            suffix = "." + child.name.rsplit(".", 1)[-1] if "." in child.name else ""
            content_type = _CONTENT_TYPES.get(suffix)
            if content_type is None:
                continue  # licences and notes stay in the package, unserved
            body = child.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            files[name] = ConsoleFile(body, content_type, etag)

    walk(root, "")
    return files


def _serve(request: Request, file: ConsoleFile | None) -> Response:
    if file is None:
        return PlainTextResponse("no such console page\n", status_code=404)
    headers = {
        "ETag": file.etag,
        "Cache-Control": "no-cache",  # revalidate: an upgraded broker serves new files
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
    }
    if request.headers.get("if-none-match") == file.etag:
        return Response(status_code=304, headers=headers)
    return Response(file.body, media_type=file.content_type, headers=headers)


def console_routes() -> list[BaseRoute]:
    pages = {
        name.removesuffix(".html"): file
        for name, file in load_files("pages").items()
        if name.endswith(".html")
    }
    static = load_files("static")

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{CONSOLE_PATH}/{HOME_PAGE}", status_code=302)

    async def page(request: Request) -> Response:
        return _serve(request, pages.get(request.path_params["page"]))

    async def static_file(request: Request) -> Response:
        return _serve(request, static.get(request.path_params["path"]))

    return [
        Route("/", home, methods=["GET", "HEAD"]),
        Route(CONSOLE_PATH, home, methods=["GET", "HEAD"]),
        Route(CONSOLE_PATH + "/", home, methods=["GET", "HEAD"]),
        Route(STATIC_PATH + "/{path:path}", static_file, methods=["GET", "HEAD"]),
        Route(CONSOLE_PATH + "/{page}", page, methods=["GET", "HEAD"]),
    ]
