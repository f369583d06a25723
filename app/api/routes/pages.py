"""Pages for people: ``GET /`` (the token playground) and ``/docs``, ``/redoc`` (the API reference), all offline.

Every asset is package data under ``app/api/static/`` and is served by the service itself from ``/static/``: the
playground's hand-written HTML, CSS and JavaScript, and the licensed Swagger UI and ReDoc bundles in
``static/vendor/`` (provenance, the one change made to ReDoc, and sha256 sums in ``static/vendor/README.md`` and
``SHA256SUMS``). No page references
another host, and each carries a Content-Security-Policy that lets the browser load nothing from one.

The playground page and ``/static/`` are served without the bearer token (they hold no data: the page asks for
the token and sends it with its API calls); ``/docs`` and ``/redoc`` stay behind it like the OpenAPI document.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
STATIC_URL = "/static"

#: The playground runs only its own files and talks only to this service.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: Swagger UI and ReDoc start from an inline script and use inline styles, data: images and a blob: worker.
DOCS_CSP = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SWAGGER_PARAMETERS = {"validatorUrl": None, "tryItOutEnabled": True, "displayRequestDuration": True}


@cache
def _playground_html(auth_required: bool) -> str:
    html = (STATIC_DIR / "playground" / "index.html").read_text(encoding="utf-8")
    return html.replace('data-auth="none"', f'data-auth="{"required" if auth_required else "none"}"', 1)


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


async def playground(request: Request) -> HTMLResponse:
    """The token playground (``static/playground``); tells the page whether to ask for the bearer token first."""
    auth_required = bool(request.app.state.settings.auth_token)
    return HTMLResponse(_playground_html(auth_required), headers={"Content-Security-Policy": PAGE_CSP})


async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI from the vendored bundle."""
    root = _root(request)
    page = get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}", title=f"{request.app.title} - Swagger UI",
        oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
        swagger_js_url=f"{root}{STATIC_URL}/vendor/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{STATIC_URL}/vendor/swagger-ui/swagger-ui.css",
        swagger_favicon_url=f"{root}{STATIC_URL}/vendor/swagger-ui/favicon-32x32.png",
        swagger_ui_parameters=SWAGGER_PARAMETERS)
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


async def swagger_ui_redirect() -> HTMLResponse:
    """Swagger UI's OAuth2 redirect helper (no external references)."""
    page = get_swagger_ui_oauth2_redirect_html()
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


async def redoc(request: Request) -> HTMLResponse:
    """ReDoc from the vendored bundle, without web fonts (system fonts instead)."""
    root = _root(request)
    page = get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}", title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}{STATIC_URL}/vendor/redoc/redoc.standalone.js",
        redoc_favicon_url=f"{root}{STATIC_URL}/vendor/swagger-ui/favicon-32x32.png", with_google_fonts=False)
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


def install(app: FastAPI) -> None:
    """Add the pages and mount the static files (call with ``docs_url=None, redoc_url=None`` on the app).

    The pages are routes of the app itself (not of an included router), like FastAPI's own docs routes."""
    for path, endpoint in (("/", playground), ("/docs", swagger_ui), ("/docs/oauth2-redirect", swagger_ui_redirect),
                           ("/redoc", redoc)):
        app.add_api_route(path, endpoint, methods=["GET"], response_class=HTMLResponse, include_in_schema=False)
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="static")

