#!/usr/bin/env bash
# Installs the official MCP Inspector (npm @modelcontextprotocol/inspector)
# for the test that lists costwatch's MCP tools with its CLI mode, and
# prints the path of its executable. Idempotent: when the pinned versions
# are installed, nothing is fetched.
#
#   COSTWATCH_INSPECTOR_DIR   where it is installed (default ~/.cache/costwatch-inspector)
#   COSTWATCH_MCP_INSPECTOR   an Inspector to use instead (checked, never installed)
#
# The test finds the Inspector through COSTWATCH_MCP_INSPECTOR; `.ci/run`
# exports what this prints. Without it that test fails.
#
# Why these pins: every Inspector from 0.16.0 on declares
# `engines.node >=22.7.5` (2.x: >=22.19.0), and CI has Node 20; 0.15.0 is
# the newest that declares no newer Node and its CLI already speaks
# Streamable HTTP (`--transport http`). Its TypeScript SDK dependency
# (^1.13.1) is pinned too, at the version it resolved to when this was
# written (1.32.2, `engines.node >=18`, initialize asking for 2025-11-25),
# so a new SDK release cannot change the test.
set -euo pipefail

INSPECTOR_VERSION="0.15.0"
SDK_VERSION="1.32.2"
DIR="${COSTWATCH_INSPECTOR_DIR:-$HOME/.cache/costwatch-inspector}"
BIN="$DIR/node_modules/.bin/mcp-inspector"

log() { printf '%s\n' "$*" >&2; }

if [ -n "${COSTWATCH_MCP_INSPECTOR:-}" ]; then
  if [ ! -x "$COSTWATCH_MCP_INSPECTOR" ]; then
    log "COSTWATCH_MCP_INSPECTOR=$COSTWATCH_MCP_INSPECTOR is not an executable"
    exit 1
  fi
  printf '%s\n' "$COSTWATCH_MCP_INSPECTOR"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  log "npm missing: installing Debian's nodejs and npm"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >&2
fi

# The version of an installed package, empty when it is not installed.
installed() {
  local manifest="$DIR/node_modules/$1/package.json"
  [ -f "$manifest" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$manifest"
}

if [ "$(installed @modelcontextprotocol/inspector)" != "$INSPECTOR_VERSION" ] \
   || [ "$(installed @modelcontextprotocol/sdk)" != "$SDK_VERSION" ] \
   || [ ! -x "$BIN" ]; then
  log "installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into $DIR"
  started=$(date +%s)
  rm -rf "$DIR"
  mkdir -p "$DIR"
  npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --save-exact \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" \
    "@modelcontextprotocol/sdk@$SDK_VERSION" >&2
  log "the Inspector installed in $(( $(date +%s) - started ))s"
fi

if [ ! -x "$BIN" ]; then
  log "$BIN is missing after installing the Inspector"
  exit 1
fi
log "MCP Inspector $(installed @modelcontextprotocol/inspector) (TypeScript SDK $(installed @modelcontextprotocol/sdk)) on node $(node --version)"
printf '%s\n' "$BIN"
