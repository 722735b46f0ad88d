#!/usr/bin/env python3
"""The three static rules over a Langfuse project's generations, as the
short script a user writes before costwatch.

Reads every generation of [start, end) from Langfuse's public API
(`GET /api/public/v2/observations`, pages of 1,000 with `meta.cursor`,
HTTP Basic with the project's public and secret key), window by window as
a script run by cron every few minutes would, groups each window's calls
by `sessionId`, reads the project's model definitions
(`GET /api/public/models`) for prices, and flags:

- no_cache:        2 or more calls and 0 cached prompt tokens;
- oversized_model: a premium model (input price >= 5x the cheapest model in
                   the definitions) called with < 1,000 prompt tokens per call;
- retry_loop:      10 or more calls.

This is what costwatch's Langfuse source is benchmarked against
(crates/costwatch-bench/regenerate.sh, BENCHMARKS.md, "Langfuse source").
Usage:

    LANGFUSE_SECRET_KEY=sk-lf-... python3 crates/costwatch-bench/langfuse.py \
        --url http://127.0.0.1:3000 --public-key pk-lf-... \
        --start 2026-06-01T00:00:00Z --end 2026-06-03T00:00:00Z --window 900 \
        [--out flagged.json]
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
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def generations(http, base, start, end):
    """Every generation that started in [start, end), page by page."""
    params = {
        "type": "GENERATION",
        "fromStartTime": stamp(start),
        "toStartTime": stamp(end),
        "fields": "core,basic,model,usage",
        "limit": 1000,
    }
    while True:
        resp = http.get(base + "/api/public/v2/observations", params=params, timeout=30)
        resp.raise_for_status()
        page = resp.json()
        yield from page["data"]
        cursor = (page.get("meta") or {}).get("cursor")
        if not cursor:
            return
        params["cursor"] = cursor


def input_prices(http, base, at):
    """Each model's input price per token in the definition in force at `at`."""
    newest = {}
    page = 1
    while True:
        resp = http.get(base + "/api/public/models", params={"page": page, "limit": 100}, timeout=30)
        resp.raise_for_status()
        body = resp.json()
        for m in body["data"]:
            start = m.get("startDate")
            if start and parse_time(start) > at:
                continue
            if m.get("inputPrice") is None:
                continue
            name = m["modelName"]
            if name not in newest or (start or "") > (newest[name][0] or ""):
                newest[name] = (start, float(m["inputPrice"]))
        if page >= body["meta"]["totalPages"]:
            break
        page += 1
    return {name: price for name, (_, price) in newest.items()}


def cached_tokens(obs):
    """Prompt tokens read from the cache, whatever the integration called them."""
    usage = obs.get("usageDetails") or {}
    return sum(v for k, v in usage.items() if "cache_read" in k or "cached" in k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("LANGFUSE_HOST"), help="the Langfuse host, e.g. https://cloud.langfuse.com")
    ap.add_argument("--public-key", default=os.environ.get("LANGFUSE_PUBLIC_KEY"))
    ap.add_argument("--start", required=True)
    ap.add_argument("--end", required=True)
    ap.add_argument("--window", type=int, default=900, help="seconds per window")
    ap.add_argument("--out", help="write the flagged session ids per kind as JSON here")
    args = ap.parse_args()

    http = requests.Session()
    http.auth = (args.public_key, os.environ["LANGFUSE_SECRET_KEY"])
    base = args.url.rstrip("/")

    t, stop = parse_time(args.start), parse_time(args.end)
    price = input_prices(http, base, t)
    cheapest = min(p for p in price.values() if p > 0)
    premium = {name for name, p in price.items() if p >= 5 * cheapest}

    flagged = {"no_cache": [], "oversized_model": [], "retry_loop": []}
    calls = 0
    while t < stop:
        nxt = min(t + timedelta(seconds=args.window), stop)
        sessions = defaultdict(list)
        for obs in generations(http, base, t, nxt):
            calls += 1
            if obs.get("sessionId"):
                sessions[obs["sessionId"]].append(obs)
        for sid, rows in sessions.items():
            if len(rows) >= 2 and sum(cached_tokens(r) for r in rows) == 0:
                flagged["no_cache"].append(sid)
            by_model = defaultdict(list)
            for r in rows:
                by_model[r.get("model")].append(r.get("inputUsage") or 0)
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
