#!/usr/bin/env python3
"""Regenerates default.json, the price table shipped inside costwatch, from
the model cost map bundled in a LiteLLM wheel (MIT licence).

    pip download --no-deps litellm==1.110.2 -d /tmp/ll
    unzip -o -q /tmp/ll/litellm-*.whl -d /tmp/ll
    python3 regenerate.py /tmp/ll/litellm/model_prices_and_context_window_backup.json 1.110.2

Keeps the chat models of OpenAI, Anthropic and Google Gemini that carry both
an input and an output price, under the names their own APIs use (the
`gemini/` prefix is dropped), in the shape of the reference API's
`GET /models` answer.
"""
import datetime
import json
import sys
from pathlib import Path

PROVIDERS = {"openai": "", "anthropic": "", "gemini": "gemini/"}


def per_mtok(v):
    return None if v is None else round(v * 1e6, 6)


def main(src, version):
    cost_map = json.loads(Path(src).read_text())
    rows = {}
    for name, m in cost_map.items():
        prefix = PROVIDERS.get(m.get("litellm_provider"))
        if prefix is None or m.get("mode") != "chat":
            continue
        if prefix and not name.startswith(prefix):
            continue
        model = name[len(prefix):]
        if "/" in model or ":" in model or "ft:" in model:
            continue
        inp, out = m.get("input_cost_per_token"), m.get("output_cost_per_token")
        if inp is None or out is None:
            continue
        cache = bool(m.get("supports_prompt_caching"))
        read = per_mtok(m.get("cache_read_input_token_cost"))
        write = per_mtok(m.get("cache_creation_input_token_cost"))
        rows[model] = {
            "id": model,
            "input_usd_per_mtok": per_mtok(inp),
            "cached_input_usd_per_mtok": read if cache else None,
            # Providers without a write surcharge bill a cache write as input.
            "cache_write_usd_per_mtok": (write if write is not None else per_mtok(inp)) if cache else None,
            "output_usd_per_mtok": per_mtok(out),
            "supports_prompt_cache": cache,
        }
    table = {
        "source": f"LiteLLM {version}, litellm/model_prices_and_context_window_backup.json (MIT licence)",
        "generated": datetime.date.today().isoformat(),
        "providers": sorted(PROVIDERS),
        "data": [rows[k] for k in sorted(rows)],
    }
    out = Path(__file__).with_name("default.json")
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(rows)} models written to {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
