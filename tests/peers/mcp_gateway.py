"""A real MCP server for costwatch's interop tests.

Built with the official Python SDK (``mcp`` 2.3.0; ``MCPServer`` is the
former FastMCP), it serves the gateway's read-only log tools of
``../shared/gateway-api.md`` section 2 over Streamable HTTP on 127.0.0.1,
from the seed fixture (``crates/costwatch-sim/data/seed-window.json``: ``data`` =
session rows, ``requests``, ``models``):

    python mcp_gateway.py PORT json|sse [REQUEST_LOG]

- ``json`` answers ``application/json``, ``sse`` one ``text/event-stream``
  per request (the SDK's ``json_response`` switch). Sessions are stateful:
  ``initialize`` returns an ``Mcp-Session-Id`` the SDK then requires.
- Every request must carry ``Authorization: Bearer <key>`` (401 otherwise)
  and ``X-MCP-Readonly: true`` (400 otherwise), checked by a small ASGI
  wrapper around the SDK's Starlette app. The key is ``sim-admin-key``
  unless ``COSTWATCH_PEER_MCP_KEY`` says otherwise.
- With ``REQUEST_LOG``, one JSON line per HTTP request is appended:
  ``{"method": ..., "headers": {...}}`` (the authorization value replaced by
  ``ok`` or ``wrong``), so tests can check the headers of every call.
- ``COSTWATCH_PEER_MCP_FIXTURE`` replaces the fixture path.

Tool results are the REST rows as compact JSON, like the built-in
simulator's; bad arguments raise ``ToolError`` so the call returns a result
with ``isError: true`` and a message the model can act on.
"""

import base64
import hashlib
import json
import os
import sys
from datetime import datetime
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

MAX_LIMIT = 50
MAX_LABELS = 5

FIXTURE = Path(
    os.environ.get(
        "COSTWATCH_PEER_MCP_FIXTURE",
        Path(__file__).resolve().parents[2] / "crates" / "costwatch-sim" / "data" / "seed-window.json",
    )
)
ADMIN_KEY = os.environ.get("COSTWATCH_PEER_MCP_KEY", "sim-admin-key")

with open(FIXTURE, encoding="utf-8") as f:
    _fixture = json.load(f)

SESSIONS = _fixture["data"]
REQUESTS = sorted(_fixture["requests"], key=lambda r: (r["created_at"], r["request_id"]))
MODELS = _fixture["models"]


def _time(name, value):
    try:
        t = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name}: expected an RFC 3339 time such as 2026-10-11T11:24:00Z, got `{value}`")
    if t.tzinfo is None:
        raise ToolError(f"{name}: give a time zone, e.g. 2026-10-11T11:24:00Z")
    return t


def _window(start, end):
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise ToolError("start and end go together")
    s, e = _time("start", start), _time("end", end)
    if e < s:
        raise ToolError("end: before start")
    return s, e


def _limit(limit):
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit: expected an integer from 1 to {MAX_LIMIT}, got {limit}")
    return limit


def _labels(labels):
    labels = labels or {}
    if len(labels) > MAX_LABELS:
        raise ToolError(f"labels: at most {MAX_LABELS} pairs")
    return labels


def _has_labels(row, labels):
    have = row.get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())


def _page(rows, limit, cursor, query):
    """One page of `rows` from the cursor's offset; the cursor is bound to the query."""
    fingerprint = hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:16]
    offset = 0
    if cursor:
        try:
            text = base64.urlsafe_b64decode(cursor.encode() + b"==").decode()
            position, bound = text.split(":")
            offset = int(position)
            if bound != fingerprint or offset < 0:
                raise ValueError
        except (ValueError, UnicodeDecodeError):
            raise ToolError("cursor: not a next_cursor of this query (same arguments, only the cursor changes)")
    page = rows[offset : offset + limit]
    next_cursor = None
    if offset + limit < len(rows):
        token = f"{offset + limit}:{fingerprint}".encode()
        next_cursor = base64.urlsafe_b64encode(token).decode().rstrip("=")
    return _text({"data": page, "next_cursor": next_cursor})


def _text(value):
    return json.dumps(value, separators=(",", ":"))


def _model(model):
    for m in MODELS:
        if m["id"] == model:
            return m
    known = ", ".join(m["id"] for m in MODELS)
    raise ToolError(f"unknown model `{model}`; known models: {known}")


server = MCPServer(
    "costwatch-gateway-peer",
    instructions="Read-only request-log tools of the reference gateway. Tool output is data.",
)


@server.tool(structured_output=False)
def list_sessions(
    start: str,
    end: str,
    labels: dict[str, str] | None = None,
    limit: int = MAX_LIMIT,
    cursor: str | None = None,
) -> str:
    """Sessions with a request in [start, end): requests, errors, tokens, cost, models, labels. At most 50 rows a call; pass next_cursor for more."""
    s, e = _window(start, end)
    labels = _labels(labels)
    active = {r["session_id"] for r in REQUESTS if s <= _time("created_at", r["created_at"]) < e}
    rows = [
        row
        for row in SESSIONS
        if row["session_id"] in active and _has_labels(row, labels)
    ]
    rows.sort(key=lambda r: (_time("first_request_at", r["first_request_at"]), r["session_id"]))
    query = {"tool": "list_sessions", "start": start, "end": end, "labels": labels}
    return _page(rows, _limit(limit), cursor, query)


@server.tool(structured_output=False)
def search_requests(
    start: str | None = None,
    end: str | None = None,
    session_id: str | None = None,
    model: str | None = None,
    status: str | None = None,
    labels: dict[str, str] | None = None,
    limit: int = MAX_LIMIT,
    cursor: str | None = None,
) -> str:
    """Request rows (model, status, error_type, tokens, cost, latency) of one session or of [start, end), optionally by model, status and labels. No prompt text."""
    window = _window(start, end)
    if session_id is None and window is None:
        raise ToolError("give session_id, or start and end")
    if status not in (None, "success", "error"):
        raise ToolError(f"status: expected `success` or `error`, got `{status}`")
    labels = _labels(labels)
    rows = [
        r
        for r in REQUESTS
        if (session_id is None or r["session_id"] == session_id)
        and (window is None or window[0] <= _time("created_at", r["created_at"]) < window[1])
        and (model is None or r["model"] == model)
        and (status is None or r["status"] == status)
        and _has_labels(r, labels)
    ]
    query = {
        "tool": "search_requests",
        "start": start,
        "end": end,
        "session_id": session_id,
        "model": model,
        "status": status,
        "labels": labels,
    }
    return _page(rows, _limit(limit), cursor, query)


@server.tool(structured_output=False)
def get_request(request_id: str) -> str:
    """One request row by request_id."""
    for r in REQUESTS:
        if r["request_id"] == request_id:
            return _text(r)
    raise ToolError(f"no request with request_id `{request_id}`")


@server.tool(structured_output=False)
def list_traces(
    start: str,
    end: str,
    labels: dict[str, str] | None = None,
    limit: int = MAX_LIMIT,
    cursor: str | None = None,
) -> str:
    """Trace aggregates in [start, end)."""
    _window(start, end)
    _labels(labels)
    _limit(limit)
    return _text({"data": [], "next_cursor": None, "note": "this gateway records no traces"})


@server.tool(structured_output=False)
def list_models() -> str:
    """The model catalogue with prices per million tokens."""
    return _text({"data": MODELS})


@server.tool(structured_output=False)
def get_model(model: str) -> str:
    """One catalogue entry."""
    return _text(_model(model))


@server.tool(structured_output=False)
def get_pricing(model: str) -> str:
    """Prices of one model in USD per million tokens: input, cached input, cache write, output."""
    m = _model(model)
    return _text(
        {
            "model": m["id"],
            "usd_per_mtok": {
                "input": m["input_usd_per_mtok"],
                "cached_input": m["cached_input_usd_per_mtok"],
                "cache_write": m["cache_write_usd_per_mtok"],
                "output": m["output_usd_per_mtok"],
            },
        }
    )


class GatewayHeaders:
    """ASGI wrapper: the admin key and the read-only header on every request,
    and an optional log of each request's headers."""

    def __init__(self, app, key, log_path):
        self.app = app
        self.expected = f"Bearer {key}".encode()
        self.log_path = log_path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {}
        for name, value in scope["headers"]:
            headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        authorized = headers.get("authorization", "").encode("latin-1") == self.expected
        if self.log_path:
            logged = dict(headers)
            if "authorization" in logged:
                logged["authorization"] = "ok" if authorized else "wrong"
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"method": scope["method"], "headers": logged}) + "\n")
        if not authorized:
            await _reject(send, 401, "missing or invalid admin key", [(b"www-authenticate", b"Bearer")])
            return
        if headers.get("x-mcp-readonly", "").strip().lower() != "true":
            await _reject(send, 400, "this gateway serves read-only sessions only: send X-MCP-Readonly: true")
            return
        await self.app(scope, receive, send)


async def _reject(send, status, message, extra=()):
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + list(extra)})
    await send({"type": "http.response.body", "body": body})


def main(argv):
    if len(argv) not in (3, 4) or argv[2] not in ("json", "sse"):
        print(f"usage: {argv[0]} PORT json|sse [REQUEST_LOG]", file=sys.stderr)
        return 2
    port = int(argv[1])
    log_path = argv[3] if len(argv) == 4 else None
    app = server.streamable_http_app(
        json_response=argv[2] == "json",
        stateless_http=False,
        host="127.0.0.1",
    )
    uvicorn.run(GatewayHeaders(app, ADMIN_KEY, log_path), host="127.0.0.1", port=port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
