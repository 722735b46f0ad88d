# Sourced by the peer scripts: `pinned_venv VENV PIN...` makes the venv at
# VENV when it is missing (python3 and python3-venv installed first where
# Debian lacks them; a half-made venv from a failed attempt removed) and
# installs the pins in one pip run when any is off, so the resolver sees
# them together; it fails when they are still not met. Logs go to stderr.

log() { printf '%s\n' "$*" >&2; }

pinned_venv() {
  local venv="$1"
  shift
  local py="$venv/bin/python"
  if ! command -v python3 >/dev/null 2>&1; then
    log "python3 missing: installing it"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >&2
  fi
  if [ ! -x "$py" ]; then
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
      log "python3 venv module missing: installing python3-venv"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    fi
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2
  fi
  if ! pins_met "$py" "$@"; then
    log "installing $* into $venv"
    "$py" -m pip install --quiet --disable-pip-version-check "$@" >&2
  fi
  pins_met "$py" "$@" || { log "the pins are still not met in $venv"; return 1; }
}

# Whether every `name==version` pin is installed in PY's environment.
pins_met() {
  local py="$1"
  shift
  "$py" - "$@" <<'PYEOF' >/dev/null 2>&1
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    if m.version(name) != version:
        sys.exit(1)
PYEOF
}
