"""Metric labels of request paths, taken from the app's own routes.

A path's label is the path template of the route that serves it (``/encode``, ``/tokenizers/{name}``,
``/tei/{model}/tokenize``; a mount's files are ``/static/{path}``), so a route added to the app is labelled with no
list to keep up to date. Any path that no route matches is :data:`OTHER`: the label set is the route table plus
one, however many distinct paths clients send.

The routes are read through FastAPI's ``iter_route_contexts``, which walks included routers (FastAPI keeps them as
branches of ``app.routes`` and applies their prefixes); FastAPI releases without it keep ``app.routes`` flat.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import fastapi.routing
from starlette.routing import BaseRoute, Mount, compile_path

#: The label of every path that no route matches.
OTHER = "other"


def route_patterns(routes: Sequence[BaseRoute]) -> Iterator[tuple[str, re.Pattern[str]]]:
    """(template, compiled path pattern) of every route under ``routes``, included routers walked, in order. A
    mount's pattern matches every path below it (its template ends in ``/{path}``)."""
    walk = getattr(fastapi.routing, "iter_route_contexts", None)  # FastAPI >= 0.16x; before it: flat routes
    contexts: list[object] = list(walk(routes)) if walk is not None else list(routes)
    for context in contexts:
        route = getattr(context, "original_route", context)
        if isinstance(route, Mount):
            yield route.path_format, route.path_regex
            continue
        path: str | None = getattr(context, "path", None)
        if path:
            regex, template, _ = compile_path(path)
            yield template, regex


class RouteLabels:
    """``label(path)`` -> the path of the route whose path is exactly ``path``, else the template of the first route
    whose pattern matches it, else :data:`OTHER`.

    ``routes`` is the app's live route list (``app.routes``): the table is rebuilt when its length changes, so routes
    added to the app after construction are labelled too."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._routes = routes
        self._size = -1
        self._exact: frozenset[str] = frozenset()
        self._patterns: list[tuple[re.Pattern[str], str]] = []

    def _refresh(self) -> None:
        if len(self._routes) == self._size:
            return
        exact: set[str] = set()
        patterns: list[tuple[re.Pattern[str], str]] = []
        for template, regex in route_patterns(self._routes):
            if "{" in template:
                patterns.append((regex, template))
            else:
                exact.add(template)
        self._exact, self._patterns, self._size = frozenset(exact), patterns, len(self._routes)

    def label(self, path: str) -> str:
        """The label of ``path`` (see the class docstring)."""
        self._refresh()
        if path in self._exact:
            return path
        for regex, template in self._patterns:
            if regex.match(path):
                return template
        return OTHER

    def templates(self) -> list[str]:
        """Every label a matched path can get (distinct, exact paths first, then templates in route order)."""
        self._refresh()
        return [*self._exact, *dict.fromkeys(template for _, template in self._patterns)]
