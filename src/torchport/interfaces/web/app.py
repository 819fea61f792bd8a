"""The read-only web application: Starlette routes that build a Page (pages.py) and answer
with HTML or its JSON twin (``PATH.json`` or ``Accept: application/json``).

The store is opened read-only once and shared (SQLite keeps one connection per thread).
With a token, every request must carry it (``Authorization: Bearer``, ``X-Torchport-Token``
or ``?token=``); the first accepted request sets a cookie so a browser's later clicks carry it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import stat
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from torchport.interfaces.bounds import BadPaging, parse_offset
from torchport.interfaces.web import pages
from torchport.interfaces.web.guard import LOCAL_HOSTS, Guard
from torchport.interfaces.web.html import STATIC, render_page
from torchport.kb import StoreError
from torchport.views.case_history import exact_glob

JSON_FLAG = "torchport.json"
COOKIE = "torchport_token"


# The name profile.trace_path gives a trace: the only kind of file the dashboard serves.
TRACE_NAME = re.compile(r"profile-[A-Za-z0-9_.-]+-[a-z]+-[0-9a-f]{12}\.json")


def _offset(request: Request) -> int:
    """The page's offset; BadPaging (HTTP 400) when it is not a bounded whole number."""
    return parse_offset(request.query_params.get("offset"), "offset")


def trace_file(folder: str, recorded: str) -> str | None:
    """The trace ``recorded`` names, as a file inside ``folder`` (the artifacts folder
    torchport's runs write, resolved); None unless it is a regular file there with a name
    profile.trace_path gives. Only the name is taken from the record: a stored or imported
    path never chooses the folder, and a symlink out of it is refused."""
    name = os.path.basename(recorded)
    if not TRACE_NAME.fullmatch(name):
        return None
    root = os.path.realpath(folder)
    path = os.path.join(root, name)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or os.path.dirname(os.path.realpath(path)) != root:
        return None
    return path


def _after(request: Request) -> dict | None:
    """A compare list page's key (pages.Links.compare ``after``); None when absent or
    malformed (the page is then read by its offset)."""
    q = request.query_params
    if "after_case" not in q or "after_mode" not in q:
        return None
    try:
        gap = float(q["after_gap"]) if "after_gap" in q else None
        return {
            "case": q["after_case"],
            "mode": q["after_mode"],
            "metric": int(q.get("after_metric", "0")),
            "gap": gap,
        }
    except ValueError:
        return None


def _wants_json(request: Request) -> bool:
    if request.scope.get(JSON_FLAG):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def _jsonable(value):
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else str(value)


def respond(request: Request, page: pages.Page) -> Response:
    if _wants_json(request):
        body = json.dumps(page.to_dict(), default=_jsonable, allow_nan=False, indent=1)
        return Response(body, media_type="application/json")
    return HTMLResponse(render_page(page, root=request.scope.get("root_path", "")))


def problem(request: Request, status: int, message: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    page = pages.Page(
        "error", "Not found" if status == 404 else "Bad request", data={"error": message}
    )
    return HTMLResponse(render_page(page), status_code=status)


def create_app(
    store,
    *,
    token: str | None = None,
    artifacts: str = "artifacts",
    hosts: frozenset[str] | None = LOCAL_HOSTS,
) -> Starlette:
    """The application over an open (read-only) store. ``artifacts``: the folder runs wrote
    their traces to (the only files served); ``hosts``: the Host names answered (default:
    the localhost names; None: any, for ``serve`` bound to every address, where the token
    guards)."""
    links = pages.Links("")
    memo = pages.CompareMemo()

    def page_route(path: str, build):
        def endpoint(request: Request) -> Response:  # sync: Starlette runs it in a thread
            try:
                page = build(request)
            except pages.NotFound as exc:
                return problem(request, 404, str(exc))
            except BadPaging as exc:
                return problem(request, 400, str(exc))
            except StoreError as exc:  # a selector that matches nothing, a bad run id
                return problem(request, 404, str(exc))
            return respond(request, page)

        return Route(path, endpoint)

    def runs(request: Request) -> pages.Page:
        filters = {k: request.query_params.get(k, "") for k in pages.RUN_FILTERS}
        return pages.runs_page(store, links, filters)

    def run(request: Request) -> pages.Page:
        return pages.run_page(store, request.path_params["run_id"], links, offset=_offset(request))

    def case(request: Request) -> pages.Page:
        return pages.case_page(store, request.path_params["case"], links)

    def compare(request: Request) -> pages.Page:
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not a or not b:
            raise pages.NotFound("compare needs two runs: /compare?a=RUN&b=RUN (ids or selectors)")
        rows = request.query_params.get("list") or None
        return pages.compare_page(
            store, a, b, links, rows=rows, offset=_offset(request), after=_after(request), memo=memo
        )

    def matrix(request: Request) -> pages.Page:
        from torchport.interfaces.web.matrix_page import matrix_page

        return matrix_page(store, request.path_params["name"], links)

    def evaluations(request: Request) -> pages.Page:
        from torchport.interfaces.web.scorecard_page import evaluations_page

        return evaluations_page(store, links)

    def evaluation(request: Request) -> pages.Page:
        from torchport.interfaces.web.scorecard_page import scorecard_page

        return scorecard_page(store, request.path_params["evaluation"], links)

    def op(request: Request) -> pages.Page:
        return pages.op_page(store, request.path_params["op"], links, offset=_offset(request))

    def search(request: Request) -> pages.Page:
        text = request.query_params.get("q", "")
        return pages.search_page(store, text, links, offset=_offset(request))

    def trace(request: Request) -> Response:
        """The profile trace a result of this run recorded, if the file is on this machine."""
        case_id, mode = request.query_params.get("case", ""), request.query_params.get("mode")
        found = [
            r
            for r in store.results(
                run_id=request.path_params["run_id"], case_glob=exact_glob(case_id)
            )
            if r["mode"] == mode
        ]
        path = (
            ((found[0].get("findings") or {}).get("profile") or {}).get("trace") if found else None
        )
        if not path or not isinstance(path, str):
            return problem(request, 404, f"no profile trace recorded for {case_id} [{mode}]")
        if store.get_run(request.path_params["run_id"], plan=False).get("pid") is None:
            # Imported (its supervisor lived elsewhere): its files stayed where it ran, and
            # the names it carries are not this machine's.
            return problem(request, 404, "an imported run's trace files stay where it ran")
        served = trace_file(artifacts, path)
        if served is None:
            return problem(
                request,
                404,
                f"the trace {os.path.basename(path)} is not on this machine in the artifacts "
                "folder (serve --artifacts DIR names it)",
            )
        return FileResponse(
            served, media_type="application/json", filename=os.path.basename(served)
        )

    def missing(request: Request, exc: Exception) -> Response:
        """A path no route has (``/x``, ``/x.json``), or a method none takes: the error page,
        or its JSON twin, as for every other error."""
        status = getattr(exc, "status_code", 404)
        return problem(request, status, getattr(exc, "detail", "") or "no such page")

    app = _Guarded(
        hosts=hosts,
        exception_handlers={HTTPException: missing},
        routes=[
            page_route("/", runs),
            page_route("/runs", runs),
            page_route("/runs/{run_id}", run),
            Route("/runs/{run_id}/trace", trace),
            page_route("/cases/{case:path}", case),
            page_route("/compare", compare),
            page_route("/matrix/{name}", matrix),
            page_route("/ops/{op}", op),
            page_route("/evaluations", evaluations),
            page_route("/evaluations/{evaluation}", evaluation),
            page_route("/search", search),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
    )
    app.add_middleware(JsonSuffix)
    if token:
        app.add_middleware(TokenGate, token=token)
    return app


class _Guarded(Starlette):
    """Starlette with the guard outside everything, its own 500 page included (Starlette
    puts a middleware added by add_middleware inside the one that answers 500)."""

    def __init__(self, *, hosts: frozenset[str] | None, **kwargs) -> None:
        self.hosts = hosts
        super().__init__(**kwargs)

    def build_middleware_stack(self):
        return Guard(super().build_middleware_stack(), hosts=self.hosts)


class JsonSuffix:
    """``/runs/R.json`` is ``/runs/R`` answered as JSON."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].endswith(".json"):
            path = scope["path"][: -len(".json")] or "/"
            scope = dict(scope, path=path, raw_path=path.encode(), **{JSON_FLAG: True})
        await self.app(scope, receive, send)


class TokenGate:
    """Every request needs the token; one accepted by header or query sets a cookie."""

    def __init__(self, app, *, token: str):
        self.app = app
        self.token = token.encode()
        # The cookie holds a digest, not the token: any token fits in it and none is echoed.
        self.cookie = hashlib.sha256(b"torchport-cookie:" + self.token).hexdigest()

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        cookie = SimpleCookie(headers.get("cookie", ""))
        if COOKIE in cookie and hmac.compare_digest(cookie[COOKIE].value, self.cookie):
            await self.app(scope, receive, send)
            return
        bearer = headers.get("authorization", "")
        given = [
            bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else None,
            headers.get("x-torchport-token"),
            *parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", []),
        ]
        if not any(self._matches(g) for g in given):
            response = Response(
                "torchport: this server needs its token: send 'Authorization: Bearer TOKEN' or "
                "open the page once with ?token=TOKEN\n",
                status_code=401,
                media_type="text/plain",
            )
            await response(scope, receive, send)
            return

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                value = f"{COOKIE}={self.cookie}; HttpOnly; SameSite=Strict; Path=/"
                message = dict(
                    message, headers=[*message["headers"], (b"set-cookie", value.encode())]
                )
            await send(message)

        await self.app(scope, receive, send_with_cookie)
