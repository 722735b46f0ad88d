#!/usr/bin/env python3
"""The three static rules over a LiteLLM proxy's spend logs, as the short
script a user writes before costwatch.

Reads every call of [start, end) from the proxy's spend log
(`GET /spend/logs/v2`, pages of 1,000 rows, with the master key), window by
window as a script run by cron every few minutes would, groups each
window's calls by `session_id`, reads `/model/info` for prices, and flags:

- no_cache:        2 or more calls and 0 cached prompt tokens;
- oversized_model: a premium model (input price >= 5x the cheapest model in
                   the catalogue) called with < 1,000 prompt tokens per call;
- retry_loop:      10 or more calls.

This is what costwatch's LiteLLM source is benchmarked against
(crates/costwatch-bench/regenerate.sh, BENCHMARKS.md, "LiteLLM source").
Usage:

    COSTWATCH_ADMIN_KEY=... python3 crates/costwatch-bench/litellm.py \
        --url http://127.0.0.1:4000 --start 2026-06-01T00:00:00Z \
        --end 2026-06-03T00:00:00Z --window 900 [--out flagged.json]
"""

import argparse
import json
import os
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import requests


def parse_time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def stamp(t):
    """A date as /spend/logs/v2 reads it: UTC, to the second, both ends included."""
    return t.strftime("%Y-%m-%d %H:%M:%S")


def calls_of(http, base, start, end):
    """Every call that started in [start, end), page by page."""
    page = 1
    while True:
        resp = http.get(
            base + "/spend/logs/v2",
            params={
                "start_date": stamp(start),
                "end_date": stamp(end),
                "page": page,
                "page_size": 1000,
                "sort_by": "startTime",
                "sort_order": "asc",
            },
            timeout=30,
        )
        resp.raise_for_status()
        rows = resp.json()["data"]
        for row in rows:
            # The end second is included by the proxy: it belongs to the next window.
            if parse_time(row["startTime"]) < end:
                yield row
        if len(rows) < 1000:
            return
        page += 1


def cached_tokens(row):
    """Prompt tokens read from the cache, wherever this LiteLLM wrote them."""
    meta = row.get("metadata") or {}
    if isinstance(meta, str):
        meta = json.loads(meta)
    for key in ("additional_usage_values", "usage_object"):
        usage = meta.get(key) or {}
        if usage.get("cache_read_input_tokens") is not None:
            return usage["cache_read_input_tokens"]
        details = usage.get("prompt_tokens_details") or {}
        if details.get("cached_tokens") is not None:
            return details["cached_tokens"]
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="the proxy's base URL, e.g. http://127.0.0.1:4000")
    ap.add_argument("--start", required=True)
    ap.add_argument("--end", required=True)
    ap.add_argument("--window", type=int, default=900, help="seconds per window")
    ap.add_argument("--out", help="write the flagged session ids per kind as JSON here")
    args = ap.parse_args()

    http = requests.Session()
    http.headers["Authorization"] = "Bearer " + os.environ["COSTWATCH_ADMIN_KEY"]
    base = args.url.rstrip("/")

    models = http.get(base + "/model/info", timeout=30).json()["data"]
    price = {m["model_name"]: (m.get("model_info") or {}).get("input_cost_per_token") or 0 for m in models}
    cheapest = min(p for p in price.values() if p > 0)
    premium = {name for name, p in price.items() if p >= 5 * cheapest}

    flagged = {"no_cache": [], "oversized_model": [], "retry_loop": []}
    calls = 0
    t, stop = parse_time(args.start), parse_time(args.end)
    while t < stop:
        nxt = min(t + timedelta(seconds=args.window), stop)
        sessions = defaultdict(list)
        for row in calls_of(http, base, t, nxt):
            calls += 1
            if row.get("session_id"):
                sessions[row["session_id"]].append(row)
        for sid, rows in sessions.items():
            if len(rows) >= 2 and sum(cached_tokens(r) for r in rows) == 0:
                flagged["no_cache"].append(sid)
            by_model = defaultdict(list)
            for r in rows:
                by_model[r.get("model_group") or r["model"]].append(r["prompt_tokens"])
            if any(m in premium and sum(p) / len(p) < 1000 for m, p in by_model.items()):
                flagged["oversized_model"].append(sid)
            if len(rows) >= 10:
                flagged["retry_loop"].append(sid)
        t = nxt

    print(f"{calls} calls: " + ", ".join(f"{k} {len(v)}" for k, v in flagged.items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(flagged, f)


if __name__ == "__main__":
    main()
