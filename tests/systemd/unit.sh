#!/usr/bin/env bash
# systemd/costwatch.service under a real systemd (tests/systemd/sandbox):
# READY, windows read from a simulated gateway, the watchdog petted, a good
# and a refused reload, a bad configuration not restarted, a clean stop, and
# a journal without terminal escape codes or second timestamps.
#
# Needs root and the Debian `systemd` package. It writes /etc/costwatch,
# /etc/systemd/system/costwatch.service and the state directory on this
# machine (the sandbox shares the file system) and removes them at the end;
# it refuses to run where any of them already exists.
#
# Usage: tests/systemd/unit.sh PATH/TO/costwatch
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=$(realpath "${1:?usage: tests/systemd/unit.sh PATH/TO/costwatch}")
[ "$(id -u)" = 0 ] || { echo "unit.sh: needs root" >&2; exit 1; }
for path in /etc/costwatch /var/lib/costwatch /var/lib/private/costwatch; do
  if [ -e "$path" ]; then
    echo "unit.sh: $path exists; refusing to overwrite it" >&2
    exit 1
  fi
done

work=$(mktemp -d)
sandbox=""
sim=""
cleanup() {
  [ -n "$sandbox" ] && tests/systemd/sandbox/stop "$sandbox"
  [ -n "$sim" ] && kill "$sim" 2>/dev/null
  rm -rf /etc/costwatch /etc/systemd/system/costwatch.service \
    /var/lib/costwatch /var/lib/private/costwatch "$work"
}
trap cleanup EXIT

failures=0
pass() { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; failures=$((failures + 1)); }
expect() { # expect DESCRIPTION ACTUAL WANTED
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http_status() { python3 - "$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=5).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print(0)
EOF
}

# The simulated gateway, outside the sandbox (the network is shared).
sim_port=$(free_port)
metrics_port=$(free_port)
"$binary" demo --serve "127.0.0.1:$sim_port" --days 2 >"$work/sim.out" 2>&1 &
sim=$!
for _ in $(seq 1 100); do grep -q '^COSTWATCH_WINDOWS__START=' "$work/sim.out" && break; sleep 0.1; done
start=$(sed -n 's/^COSTWATCH_WINDOWS__START=//p' "$work/sim.out")
[ -n "$start" ] || { cat "$work/sim.out"; echo "the simulator did not start" >&2; exit 1; }

install -d -m 0755 /etc/costwatch
printf 'sim-admin-key' >/etc/costwatch/admin_key
chmod 0600 /etc/costwatch/admin_key
good_config() {
  cat <<EOF
source:
  api_url: http://127.0.0.1:$sim_port/v1
windows:
  size: 1h
  settle_lag: 0s
  start: $start
  max_backfill: 3650d
schedule:
  cron: "*/2 * * * * *"
server:
  listen: 127.0.0.1:$metrics_port
EOF
}
good_config >/etc/costwatch/costwatch.yaml
chmod 0644 /etc/costwatch/costwatch.yaml
install -m 0644 systemd/costwatch.service /etc/systemd/system/costwatch.service
install -m 0755 "$binary" /usr/local/bin/costwatch

sandbox=$(tests/systemd/sandbox/start "$work/console.log")
inside() { nsenter -t "$sandbox" -a "$@"; }
show() { inside systemctl show -p "$1" --value costwatch; }
journal() { inside journalctl -u costwatch --no-pager -o cat; }
# Reads the whole journal first: `grep -q` on a pipe would cut journalctl off
# and fail the pipeline (pipefail).
journal_has() { grep -q -- "$1" <<<"$(journal)"; }
wait_for() { # wait_for SECONDS COMMAND...: true once COMMAND succeeds
  local until=$((SECONDS + $1)); shift
  while ! "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$until" ] || return 1
    sleep 0.5
  done
}
inside systemctl daemon-reload

# Type=notify: start returns once the daemon sent READY=1.
if inside systemctl start costwatch; then pass "start returns after READY"; else fail "start"; fi
expect "running after start" "$(show ActiveState)/$(show SubState)" "active/running"
main_pid=$(show MainPID)

healthy() { [ "$(http_status "http://127.0.0.1:$metrics_port/healthz")" = 200 ]; }
ticked() { journal_has 'tick done'; }
if wait_for 60 ticked && wait_for 30 healthy; then
  pass "windows read from the gateway, /healthz 200"
else
  fail "no tick or /healthz not healthy"
fi
if journal_has 'windows=[1-9]'; then
  pass "windows processed"
else
  fail "no window processed"
fi
[ "$(show WatchdogTimestampMonotonic)" != 0 ] && pass "the watchdog is petted" || fail "no watchdog ping"

# A good reload is taken.
if inside systemctl reload costwatch && wait_for 20 journal_has 'configuration reloaded'; then
  pass "reload with a good configuration"
else
  fail "good reload"
fi

# A bad one fails `systemctl reload` and the old configuration keeps running.
sed -i 's/size: 1h/size: 7m/' /etc/costwatch/costwatch.yaml
if inside systemctl reload costwatch 2>"$work/reload.err"; then
  fail "systemctl reload succeeded with an invalid configuration"
else
  pass "systemctl reload fails on an invalid configuration"
fi
if journal_has 'windows.size'; then pass "the journal names the bad field"; else fail "bad field not in the journal"; fi
expect "still running after the refused reload" "$(show ActiveState)/$(show MainPID)" "active/$main_pid"

# A bad configuration at start is not restarted forever.
inside systemctl restart costwatch 2>/dev/null && fail "restart with a bad configuration succeeded"
sleep 7 # RestartSec=5s has passed
expect "a configuration error is not restarted" "$(show ActiveState)/$(show NRestarts)/$(show ExecMainStatus)" "failed/0/2"

# Fixed, it starts again and stops cleanly.
good_config >/etc/costwatch/costwatch.yaml
inside systemctl reset-failed costwatch
inside systemctl start costwatch && pass "starts again with the fixed configuration" || fail "start after fix"
inside systemctl stop costwatch
expect "stop ends with Result=success" "$(show Result)/$(show ActiveState)" "success/inactive"

# What the daemon wrote to the journal: no escape codes, no own timestamps.
journal >"$work/journal.txt"
if grep -q $'\x1b' "$work/journal.txt"; then fail "escape codes in the journal"; else pass "no escape codes in the journal"; fi
if grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z? ' "$work/journal.txt"; then
  fail "the daemon's lines carry their own timestamp"
else
  pass "no second timestamp in the journal"
fi

if [ "$failures" -gt 0 ]; then
  echo "--- journal"; cat "$work/journal.txt"
  echo "--- systemd console"; tail -n 40 "$work/console.log"
  echo "unit.sh: $failures check(s) failed" >&2
  exit 1
fi
echo "unit.sh: all checks passed"
