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
  ``{"method": ..., "headers": {...}, "body": ...}`` (the HTTP method, the
  headers with the authorization value replaced by ``ok`` or ``wrong``, and
  the JSON-RPC message, or null), so tests can check every call.
- ``COSTWATCH_PEER_MCP_FIXTURE`` replaces the fixture path.
- ``COSTWATCH_PEER_MCP_REVISION`` restricts the protocol revisions served;
  unset, the SDK serves both eras (``initialize`` for 2024-11-05 to
  2025-11-25, and 2026-07-28 chosen by the ``MCP-Protocol-Version`` header).
  The wrapper refuses the rest as a server that does not speak them answers:

  - ``2026-07-28``, a server of that revision only: ``GET`` and ``DELETE``
    get 405; ``initialize`` and a request naming another revision in
    ``MCP-Protocol-Version`` get 400 with ``UnsupportedProtocolVersion``
    (-32022, ``data: {"supported": ["2026-07-28"], "requested": ...}``); a
    request without the header gets 400 with ``HeaderMismatch`` (-32020).
  - ``2025-11-25``, a server of the ``initialize`` era that speaks only that
    revision (its specification): a request whose ``MCP-Protocol-Version``
    is another revision, or which has none (2025-03-26 assumed) and is not
    ``initialize``, gets 400 with a JSON-RPC ``Invalid Request`` error
    (-32600, no 2026-07-28 error: such a server knows none); ``initialize``
    asking for another revision is answered with 2025-11-25 (the request is
    passed on asking for it).

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
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
REVISION = os.environ.get("COSTWATCH_PEER_MCP_REVISION") or None
if REVISION not in (None, MODERN, LEGACY):
    sys.exit(f"COSTWATCH_PEER_MCP_REVISION: expected {MODERN} or {LEGACY}, got {REVISION}")

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
    the revisions served (``COSTWATCH_PEER_MCP_REVISION``), and an optional
    log of each request."""

    def __init__(self, app, key, log_path, revision):
        self.app = app
        self.expected = f"Bearer {key}".encode()
        self.log_path = log_path
        self.revision = revision

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {}
        for name, value in scope["headers"]:
            headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        body = b""
        if scope["method"] == "POST":
            body, receive = await _buffered(receive)
        message = _json(body)
        authorized = headers.get("authorization", "").encode("latin-1") == self.expected
        if self.log_path:
            logged = dict(headers)
            if "authorization" in logged:
                logged["authorization"] = "ok" if authorized else "wrong"
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"method": scope["method"], "headers": logged, "body": message}) + "\n")
        if not authorized:
            await _reject(send, 401, "missing or invalid admin key", [(b"www-authenticate", b"Bearer")])
            return
        if headers.get("x-mcp-readonly", "").strip().lower() != "true":
            await _reject(send, 400, "this gateway serves read-only sessions only: send X-MCP-Readonly: true")
            return
        if self.revision == MODERN:
            refused = await _modern_only(scope, headers, message, send)
        elif self.revision == LEGACY:
            refused, scope, receive = await _legacy_only(scope, headers, message, receive, send)
        else:
            refused = False
        if not refused:
            await self.app(scope, receive, send)


async def _buffered(receive):
    """The whole request body, and a `receive` that hands it on again."""
    chunks = []
    while True:
        event = await receive()
        if event["type"] != "http.request":
            break
        chunks.append(event.get("body", b""))
        if not event.get("more_body", False):
            break
    body = b"".join(chunks)
    return body, _replaying(body, receive)


def _replaying(body, receive):
    """A `receive` that gives `body` first, then what `receive` gives."""
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _json(body):
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _rpc(message, key):
    return message.get(key) if isinstance(message, dict) else None


async def _modern_only(scope, headers, message, send):
    """Refuses what a server of 2026-07-28 alone refuses; True when it did."""
    if scope["method"] in ("GET", "DELETE"):
        await _send(send, 405, b"", [(b"allow", b"POST")])
        return True
    if scope["method"] != "POST":
        return False
    version = headers.get("mcp-protocol-version")
    request_id = _rpc(message, "id")
    if _rpc(message, "method") == "initialize":
        asked = (_rpc(message, "params") or {}).get("protocolVersion")
        await _reject(send, 400, "Unsupported protocol version", code=-32022, request_id=request_id,
                      data={"supported": [MODERN], "requested": asked})
        return True
    if version is None:
        await _reject(send, 400, "Header mismatch: the MCP-Protocol-Version header is missing",
                      code=-32020, request_id=request_id)
        return True
    if version != MODERN:
        await _reject(send, 400, "Unsupported protocol version", code=-32022, request_id=request_id,
                      data={"supported": [MODERN], "requested": version})
        return True
    return False


async def _legacy_only(scope, headers, message, receive, send):
    """Refuses what a server of 2025-11-25 alone refuses, and has
    `initialize` ask for that revision; returns (refused, scope, receive)."""
    if scope["method"] != "POST":
        return False, scope, receive
    version = headers.get("mcp-protocol-version")
    if _rpc(message, "method") == "initialize" and version is None:
        params = _rpc(message, "params")
        if isinstance(params, dict) and params.get("protocolVersion") != LEGACY:
            asked = dict(message, params=dict(params, protocolVersion=LEGACY))
            body = json.dumps(asked).encode()
            scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k != b"content-length"]
                         + [(b"content-length", str(len(body)).encode())])
            await receive()  # the buffered body, replaced by this one
            receive = _replaying(body, receive)
        return False, scope, receive
    if version != LEGACY:
        shown = version if version is not None else "none (2025-03-26 assumed)"
        await _reject(send, 400, f"Bad Request: Unsupported protocol version: {shown}; supported: {LEGACY}",
                      code=-32600)
        return True, scope, receive
    return False, scope, receive


async def _reject(send, status, message, extra=(), code=-32001, request_id=None, data=None):
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    await _send(send, status, body, [(b"content-type", b"application/json")] + list(extra))


async def _send(send, status, body, headers):
    headers = list(headers) + [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
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
    uvicorn.run(GatewayHeaders(app, ADMIN_KEY, log_path, REVISION), host="127.0.0.1", port=port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
