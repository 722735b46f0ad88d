#!/usr/bin/env bash
# Installs the Python test peers (a real SMTP server, aiosmtpd, and the
# official MCP SDK, mcp, for a real MCP server) into a venv and prints the
# venv's python. Idempotent: a second run only checks the pin.
# Also makes sure the openssl CLI is there: the TLS email tests make their
# test CA with it.
#
#   COSTWATCH_PEERS_VENV   where the venv lives (default ~/.cache/costwatch-peers)
#
# Tests find the python through COSTWATCH_PEERS_PYTHON, else
# $COSTWATCH_PEERS_VENV/bin/python.
set -euo pipefail

AIOSMTPD_VERSION="1.4.6"
MCP_VERSION="2.3.0"
VENV="${COSTWATCH_PEERS_VENV:-$HOME/.cache/costwatch-peers}"
PY="$VENV/bin/python"

log() { printf '%s\n' "$*" >&2; }

if ! command -v python3 >/dev/null 2>&1; then
  log "python3 missing: installing it"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >&2
fi

if ! command -v openssl >/dev/null 2>&1; then
  log "openssl missing: installing it"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >&2
fi

if [ ! -x "$PY" ]; then
  # Debian splits venv (and ensurepip) into python3-venv; a half-made venv
  # from a failed attempt is removed first.
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    log "python3 venv module missing: installing python3-venv"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
  fi
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
fi

if ! "$PY" -c "import aiosmtpd, sys; sys.exit(aiosmtpd.__version__ != '$AIOSMTPD_VERSION')" >/dev/null 2>&1; then
  log "installing aiosmtpd==$AIOSMTPD_VERSION into $VENV"
  "$PY" -m pip install --quiet --disable-pip-version-check "aiosmtpd==$AIOSMTPD_VERSION" >&2
fi

if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_VERSION')" >/dev/null 2>&1; then
  log "installing mcp==$MCP_VERSION into $VENV"
  "$PY" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" >&2
fi

"$PY" -c 'import aiosmtpd.handlers' >/dev/null
"$PY" -c 'from mcp.server.mcpserver import MCPServer' >/dev/null
printf '%s\n' "$PY"
