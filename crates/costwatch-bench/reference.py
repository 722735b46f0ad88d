#!/usr/bin/env python3
"""The three static rules, as the short script a user writes before costwatch.

Reads every session of [start, end) from the gateway's REST API (paginating
/sessions with the admin key), reads /models for prices, and flags:

- no_cache:        2 or more calls and 0 cached prompt tokens;
- oversized_model: a premium model (input price >= 5x the cheapest model in
                   the catalogue) called with < 1,000 prompt tokens per call;
- retry_loop:      10 or more calls.

This is the reference costwatch is benchmarked against (bench/regenerate.sh,
BENCHMARKS.md). Usage:

    COSTWATCH_ADMIN_KEY=... python3 bench/reference.py --url http://127.0.0.1:8080/v1 \
        --start 2026-11-02T12:00:00Z --end 2026-11-02T13:00:00Z [--out flagged.json] \
        [--window 900]

With --window SECONDS the range is read window by window, as a script run
every few minutes by cron would read it.
"""

import argparse
import json
import os
from datetime import datetime, timedelta, timezone

import requests


def get_all(session, url, params=None):
    """Yields every row of a cursor-paginated listing."""
    params = dict(params or {})
    while True:
        resp = session.get(url, params=params, timeout=30)
        resp.raise_for_status()
        page = resp.json()
        yield from page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return
        params["cursor"] = cursor


def stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def sessions_of(http, base, start, end, window):
    """Every session of [start, end), read in windows of `window` seconds."""
    if not window:
        yield from get_all(http, base + "/sessions", {"start": start, "end": end, "limit": 50})
        return
    t = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(timezone.utc)
    stop = datetime.fromisoformat(end.replace("Z", "+00:00")).astimezone(timezone.utc)
    while t < stop:
        nxt = min(t + timedelta(seconds=window), stop)
        yield from get_all(http, base + "/sessions", {"start": stamp(t), "end": stamp(nxt), "limit": 50})
        t = nxt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="gateway API base, e.g. http://127.0.0.1:8080/v1")
    ap.add_argument("--start", required=True)
    ap.add_argument("--end", required=True)
    ap.add_argument("--out", help="write the flagged session ids per kind as JSON here")
    ap.add_argument("--window", type=int, help="read [start, end) in windows of this many seconds")
    args = ap.parse_args()

    http = requests.Session()
    http.headers["Authorization"] = "Bearer " + os.environ["COSTWATCH_ADMIN_KEY"]
    base = args.url.rstrip("/")

    models = list(get_all(http, base + "/models"))
    cheapest = min(m["input_usd_per_mtok"] for m in models if m["input_usd_per_mtok"] > 0)
    premium = {m["id"] for m in models if m["input_usd_per_mtok"] >= 5 * cheapest}

    flagged = {"no_cache": [], "oversized_model": [], "retry_loop": []}
    sessions = 0
    for s in sessions_of(http, base, args.start, args.end, args.window):
        sessions += 1
        if s["requests"] >= 2 and s.get("cached_tokens", 0) == 0:
            flagged["no_cache"].append(s["session_id"])
        for model, use in s.get("by_model", {}).items():
            calls = use.get("requests", 0)
            if model in premium and calls > 0 and use.get("input_tokens", 0) / calls < 1000:
                flagged["oversized_model"].append(s["session_id"])
                break
        if s["requests"] >= 10:
            flagged["retry_loop"].append(s["session_id"])

    print(f"{sessions} sessions: " + ", ".join(f"{k} {len(v)}" for k, v in flagged.items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(flagged, f)


if __name__ == "__main__":
    main()
