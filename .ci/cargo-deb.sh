#!/usr/bin/env bash
# Installs cargo-deb, which builds the Debian package, and prints the path of
# its binary. Idempotent: a second run only checks the pin. The first run
# compiles it from crates.io (a few minutes of two cores); its build folder
# stays under ~/.cache, so a new pin builds on the old one.
#
#   COSTWATCH_TOOLS_VENV   where the tools live (default ~/.cache/costwatch-tools);
#                          cargo-deb goes to its bin/, beside cargo-deny
set -euo pipefail

CARGO_DEB_VERSION="3.8.0"
ROOT="${COSTWATCH_TOOLS_VENV:-$HOME/.cache/costwatch-tools}"
BIN="$ROOT/bin/cargo-deb"

log() { printf '%s\n' "$*" >&2; }

if ! "$BIN" --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB_VERSION"; then
  log "installing cargo-deb $CARGO_DEB_VERSION into $ROOT"
  mkdir -p "$ROOT"
  CARGO_TARGET_DIR="$HOME/.cache/costwatch-tools-target" \
    cargo install --locked --quiet --root "$ROOT" "cargo-deb@$CARGO_DEB_VERSION" >&2
fi

"$BIN" --version >&2
printf '%s\n' "$BIN"
