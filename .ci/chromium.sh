#!/usr/bin/env bash
# Installs Debian's chromium for the status page's browser test and prints
# the path of its binary. Idempotent: when the binary is there, nothing is
# installed and nothing is fetched.
#
#   COSTWATCH_CHROMIUM   a browser to use instead (checked, never installed)
#
# The test finds the browser through COSTWATCH_CHROMIUM; `.ci/run` exports
# what this prints. Under CI a missing browser fails that test.
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }

if [ -n "${COSTWATCH_CHROMIUM:-}" ]; then
  if [ ! -x "$COSTWATCH_CHROMIUM" ]; then
    log "COSTWATCH_CHROMIUM=$COSTWATCH_CHROMIUM is not an executable"
    exit 1
  fi
  printf '%s\n' "$COSTWATCH_CHROMIUM"
  exit 0
fi

find_browser() { command -v chromium 2>/dev/null || true; }

browser="$(find_browser)"
if [ -z "$browser" ]; then
  log "chromium missing: installing Debian's chromium package"
  started=$(date +%s)
  # The package lists may be missing (a fresh image) or stale (a candidate
  # that is no longer on the mirror): refresh them once and retry.
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
  log "chromium installed in $(( $(date +%s) - started ))s"
  browser="$(find_browser)"
fi

if [ -z "$browser" ]; then
  log "chromium is still missing after installing it"
  exit 1
fi
"$browser" --version >&2
printf '%s\n' "$browser"
