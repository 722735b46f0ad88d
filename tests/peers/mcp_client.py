"""A real MCP client for costwatch's own MCP server, in its interop tests.

Built with the official Python SDK (``mcp`` 2.3.0, ``mcp.Client``), it
connects to costwatch over Streamable HTTP (``/mcp`` of ``costwatch run``)
or over stdio (it starts ``costwatch mcp --config FILE`` itself), lists the
tools, calls each of them once and prints one JSON report on stdout for the
Rust test to check:

    python mcp_client.py --mode MODE --plan PLAN.json http URL [--token-env VAR]
    python mcp_client.py --mode MODE --plan PLAN.json stdio BINARY CONFIG

- ``MODE`` is the SDK's ``mode``: ``legacy`` (the ``initialize``
  handshake), ``auto`` (``server/discover``, falling back to
  ``initialize``) or a modern revision such as ``2026-07-28`` (no
  handshake).
- With ``--token-env VAR`` every request carries ``Authorization: Bearer``
  with the value of environment variable ``VAR``, through an
  ``httpx2.AsyncClient`` of the client's own, as the SDK documents; the
  HTTP statuses it got are in the report (``http_statuses``) and in the
  message of a failure (the SDK turns a 401 into a JSON-RPC error
  without the status).
- Over stdio the server gets the client's ``COSTWATCH_*`` variables (its
  source's key); its stderr is passed on to this script's.
- ``PLAN.json`` gives the arguments: ``{"start": ..., "end": ...,
  "session_id": ...}`` (a range of at most 24 hours holding findings, and
  a session of the source).

The report::

    {"protocol_version": "...", "server_info": {...} | null,
     "instructions": "...",
     "tools": [{"name", "title", "read_only_hint", "destructive_hint",
                "idempotent_hint", "open_world_hint", "input_schema",
                "output_schema"}],
     "http_statuses": [200, ...],
     "calls": [{"label", "tool", "arguments", "is_error", "text",
                "structured_content", "text_is_structured_content"}
               | {"label", "tool", "arguments", "exception", "code"}]}

A call the SDK refuses (a JSON-RPC error, or a result that does not
conform to the tool's output schema) is reported with its ``exception``
(and the JSON-RPC ``code`` when there is one), never raised: the test says
which calls must succeed. A failure to connect exits 1 with a message on
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


# The HTTP statuses of every response, with --token-env.
STATUSES: list[int] = []


async def record_status(response: httpx2.Response) -> None:
    STATUSES.append(response.status_code)


def target(args: argparse.Namespace) -> Any:
    """What ``mcp.Client`` connects to."""
    if args.transport == "stdio":
        env = {k: v for k, v in os.environ.items() if k.startswith("COSTWATCH_")}
        return StdioServerParameters(
            command=args.binary, args=["mcp", "--config", args.config], env=env
        )
    if args.token_env is None:
        return args.url
    token = os.environ[args.token_env]
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(60.0),
        event_hooks={"response": [record_status]},
    )
    return streamable_http_client(args.url, http_client=http)


def tool_row(tool: Any) -> dict[str, Any]:
    a = tool.annotations
    return {
        "name": tool.name,
        "title": tool.title,
        "read_only_hint": a.read_only_hint if a else None,
        "destructive_hint": a.destructive_hint if a else None,
        "idempotent_hint": a.idempotent_hint if a else None,
        "open_world_hint": a.open_world_hint if a else None,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
    }


async def call(client: Client, label: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"label": label, "tool": tool, "arguments": arguments}
    try:
        result = await client.call_tool(tool, arguments)
    except MCPError as e:
        row.update(exception=str(e), code=e.code)
        return row
    except Exception as e:  # noqa: BLE001 - reported, the test decides
        row.update(exception=f"{type(e).__name__}: {e}", code=None)
        return row
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    text = texts[0] if texts else None
    try:
        parsed = json.loads(text) if text is not None else None
    except ValueError:
        parsed = None
    row.update(
        is_error=result.is_error,
        text=text,
        content_items=len(result.content),
        structured_content=result.structured_content,
        text_is_structured_content=(
            result.structured_content is not None and parsed == result.structured_content
        ),
    )
    return row


def data_of(row: dict[str, Any]) -> list[Any]:
    sc = row.get("structured_content") or {}
    return sc.get("data") or []


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    start, end, session = plan["start"], plan["end"], plan["session_id"]
    async with Client(target(args), mode=args.mode, read_timeout_seconds=60) as client:
        info = client.server_info
        report: dict[str, Any] = {
            "protocol_version": client.protocol_version,
            "server_info": info.model_dump(mode="json", exclude_none=True) if info else None,
            "instructions": client.instructions,
        }
        listed = await client.list_tools()
        report["tools"] = [tool_row(t) for t in listed.tools]
        report["next_cursor"] = listed.next_cursor
        calls = []
        rng = {"start": start, "end": end}
        calls.append(await call(client, "list_sessions", "list_sessions", rng))
        calls.append(
            await call(client, "search_requests", "search_requests", {"session_id": session})
        )
        calls.append(
            await call(client, "search_requests_range", "search_requests", {**rng, "limit": 5})
        )
        rows = data_of(calls[1])
        request_id = rows[0]["request_id"] if rows else "none"
        calls.append(await call(client, "get_request", "get_request", {"request_id": request_id}))
        calls.append(await call(client, "list_traces", "list_traces", rng))
        calls.append(await call(client, "list_findings", "list_findings", {}))
        calls.append(await call(client, "list_incidents", "list_incidents", {}))
        incidents = data_of(calls[-1])
        fingerprint = incidents[0]["fingerprint"] if incidents else "none"
        calls.append(await call(client, "get_incident", "get_incident", {"fingerprint": fingerprint}))
        findings = data_of(calls[5])
        group = findings[0]["group"] if findings else "none"
        calls.append(await call(client, "get_baseline", "get_baseline", {"group": group}))
        # What a client gets wrong: a bad argument is a result, an unknown
        # tool a JSON-RPC error.
        calls.append(await call(client, "bad_start", "list_findings", {"start": "x"}))
        calls.append(
            await call(client, "bad_range", "search_requests", {"start": "x", "end": end})
        )
        calls.append(await call(client, "unknown_tool", "delete_everything", {}))
        report["calls"] = calls
        report["http_statuses"] = STATUSES
        return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", required=True)
    p.add_argument("--plan", required=True)
    sub = p.add_subparsers(dest="transport", required=True)
    h = sub.add_parser("http")
    h.add_argument("url")
    h.add_argument("--token-env")
    s = sub.add_parser("stdio")
    s.add_argument("binary")
    s.add_argument("config")
    args = p.parse_args()
    try:
        report = asyncio.run(run(args))
    except BaseException as e:  # noqa: BLE001 - a connection failure, said plainly
        if isinstance(e, KeyboardInterrupt):
            raise
        detail = e
        while isinstance(detail, BaseExceptionGroup) and detail.exceptions:
            detail = detail.exceptions[0]
        print(
            f"mcp_client: {type(detail).__name__}: {detail} (HTTP statuses: {STATUSES})",
            file=sys.stderr,
        )
        sys.exit(1)
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
