#!/usr/bin/env bash
# Regenerates BENCHMARKS.md in one command: builds the release binaries, runs
# the detection-quality report and the performance benchmark, and writes the
# figures with the machine and the exact commands they came from.
#
#   crates/costwatch-bench/regenerate.sh            # about 20 minutes on 2 cores with a warm build
#   SKIP_QUALITY=1 SKIP_PERF=1 crates/costwatch-bench/regenerate.sh   # only the window sweep
#   ONLY=litellm crates/costwatch-bench/regenerate.sh      # only the LiteLLM source: rewrites its section alone
#   ONLY=langfuse crates/costwatch-bench/regenerate.sh     # likewise the Langfuse source
#   ONLY=otlp-files crates/costwatch-bench/regenerate.sh   # likewise the OTLP files source
#   ONLY=otlp-receiver crates/costwatch-bench/regenerate.sh  # likewise the OTLP/HTTP receiver
#
# SKIP_BUILD=1 measures the release binaries already built. A skipped step reuses its last output, kept under $CARGO_TARGET_DIR/bench-work.
#
# Needs: cargo, python3 (with venv), /usr/bin/time (installed with apt-get
# when missing and run as root). The Python reference's `requests` goes into
# a virtual environment under ~/.cache, created here.
set -euo pipefail

cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/costwatch-target}"
VENV="${COSTWATCH_BENCH_VENV:-$HOME/.cache/costwatch-bench-venv}"
SEEDS="${SEEDS:-7,11,23,42,99}"
RUNS="${RUNS:-3}"
SESSIONS="${SESSIONS:-1000000}"
IDLE_SECS="${IDLE_SECS:-60}"
LONG_DAYS="${LONG_DAYS:-90}"
SKIP_QUALITY="${SKIP_QUALITY:-}"
SKIP_PERF="${SKIP_PERF:-}"
SKIP_SWEEP="${SKIP_SWEEP:-}"
SKIP_LITELLM="${SKIP_LITELLM:-}"
SKIP_LANGFUSE="${SKIP_LANGFUSE:-}"
SKIP_OTLP_FILES="${SKIP_OTLP_FILES:-}"
SKIP_OTLP_RECEIVER="${SKIP_OTLP_RECEIVER:-}"
ONLY="${ONLY:-}"
WORK="$CARGO_TARGET_DIR/bench-work"
OUT="BENCHMARKS.md"

log() { echo "regenerate: $*" >&2; }

if [ ! -x /usr/bin/time ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing /usr/bin/time"
        apt-get install -y -qq time >/dev/null
    else
        echo "regenerate: /usr/bin/time is missing (apt-get install time)" >&2
        exit 1
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    log "creating the Python environment in $VENV"
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import requests' 2>/dev/null || "$VENV/bin/pip" install -q requests

if [ -z "${SKIP_BUILD:-}" ]; then
    log "building release binaries"
    cargo build --release -q -p costwatch -p costwatch-bench
fi
BIN="$CARGO_TARGET_DIR/release"

QUALITY_CMD="costwatch-bench quality --seeds $SEEDS --days 4"
HELD_OUT_CMD="costwatch-bench quality --held-out --days 4"
PERF_CMD="costwatch-bench perf --sessions $SESSIONS --runs $RUNS --scenario-runs $RUNS --idle-secs $IDLE_SECS --python \$VENV/bin/python"
LITELLM_CMD="costwatch-bench litellm --days 2 --per-day 12000 --window 15m --runs $RUNS --profile --python \$VENV/bin/python"
LANGFUSE_CMD="costwatch-bench langfuse --days 2 --per-day 12000 --window 15m --runs $RUNS --profile --python \$VENV/bin/python"
OTLP_RECEIVER_CMD="costwatch-bench otlp-receiver --days 2 --per-day 12000 --runs $RUNS --postgres \$PG_URL"
OTLP_FILES_CMD="costwatch-bench otlp-files --days 2 --per-day 12000 --window 15m --multiples 1,2,4 --runs $RUNS --profile"
SWEEP_CMD="costwatch-bench sweep --days 2 --per-day 12000 --windows 5m,15m,1h,6h --long-days $LONG_DAYS --long-per-day 10000 --long-window 5m --runs $RUNS --python \$VENV/bin/python"

# Each step's output is kept in $WORK; a skipped step reuses the last one.
mkdir -p "$WORK"
kept() {
    if [ ! -f "$WORK/$1.md" ]; then
        echo "regenerate: no earlier output of $1 in $WORK: run it once without SKIP_" >&2
        exit 1
    fi
    cat "$WORK/$1.md"
}

# Where a source's section was measured: the date, the machine, the build.
measured_on() {
    echo "Measured $(date -u +%Y-%m-%d) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores), costwatch $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
}

# The LiteLLM source beside the script a user would write for it
# (crates/costwatch-bench/litellm.py), with its profile.
litellm_section() {
    local started secs figures
    started=$(date +%s)
    figures=$("$BIN/costwatch-bench" litellm --days 2 --per-day 12000 --window 15m --runs "$RUNS" --profile \
        --python "$VENV/bin/python" --workdir "$WORK" --markdown)
    secs=$(( $(date +%s) - started ))
    cat <<SECTION
## LiteLLM source

The simulator serves two days of the window sweep's scenario (seed 7,
12,000 base sessions a day) as a LiteLLM proxy's spend logs
(\`GET /spend/logs/v2\`, rows of about 1.7 KB shaped as LiteLLM 1.110.2
writes them: \`crates/costwatch-sim/src/litellm\`), from its own process
on 127.0.0.1. Two readers and the floor of their path go through the
same range with 15-minute windows, each a child process under
\`/usr/bin/time -v\` (CPU = user + system of the whole process as
\`wait4\` reports it, peak RSS):

- \`costwatch backtest\` with \`source.kind: litellm\`: the pipeline the
  daemon runs, reading each window's pages of 500 rows (the default
  \`source.page_limit\`) through the LiteLLM source (each page parsed
  once, into borrowed typed rows: only the columns and the keys of
  \`metadata\` it uses), the shipped \`rules/\`, drill-downs and all;
- \`costwatch-bench fetch-pages --source litellm\`, the floor of this
  path: the requests the LiteLLM source makes, the same URLs in the same
  order (\`/model/info\` once, then each window's pages, the first with
  its 6-hour session lookback; compared under strace on 2026-12-06),
  fetched one after the other on one thread with costwatch's own HTTP
  client (\`costwatch::http::HttpClient\`: reqwest, its settings and its
  capped body reader), nothing parsed but what paging needs, found in
  the bytes: each page's rows counted by their \`"startTime"\` keys (a
  page of fewer rows than asked for is the last; one cut off is an
  error), and the times of its first and last rows. The benchmark checks
  it listed every call of the range once. What costwatch spends above it
  is its own: reading the rows, the sessions, the rules, drill-downs,
  state and output;
- \`crates/costwatch-bench/litellm.py\`: what a user writes first
  (Python, \`requests\`): the same pages, rows grouped by \`session_id\`
  per window, the three static rules of the quality baseline.

CPU per call divides the whole process's CPU (start-up, the catalogue,
paging, parsing, sessions, rules, drill-downs) by the calls served. The
profile is one more backtest under \`perf record\` (\`perf report
--no-children --sort dso,symbol\`): each function's own share of the
samples. $(measured_on), $("$VENV/bin/python" --version 2>&1), in ${secs}s:

\`\`\`sh
ONLY=litellm crates/costwatch-bench/regenerate.sh   # this section alone
$LITELLM_CMD
\`\`\`

$figures
SECTION
}

# The Langfuse source beside the script a user would write for it
# (crates/costwatch-bench/langfuse.py), with its profile.
langfuse_section() {
    local started secs figures
    started=$(date +%s)
    figures=$("$BIN/costwatch-bench" langfuse --days 2 --per-day 12000 --window 15m --runs "$RUNS" --profile \
        --python "$VENV/bin/python" --workdir "$WORK" --markdown)
    secs=$(( $(date +%s) - started ))
    cat <<SECTION
## Langfuse source

The simulator serves the same two days (seed 7, 12,000 base sessions a
day) as a Langfuse project's generations, one observation per call
(\`GET /api/public/v2/observations\`, shaped as Langfuse v4 writes them,
\`usageDetails\` in the spelling of the integration that traced the
call, and the project's model definitions at \`GET /api/public/models\`:
\`crates/costwatch-sim/src/langfuse\`), from its own process on
127.0.0.1, behind HTTP Basic with the project's public and secret key.
Two readers and the floor of their path go through the same range with
15-minute windows, each a child process under \`/usr/bin/time -v\` (CPU
= user + system of the whole process as \`wait4\` reports it, peak RSS):

- \`costwatch backtest\` with \`source.kind: langfuse\`: the pipeline the
  daemon runs, reading each window's pages of 500 generations (the
  default \`source.page_limit\`) through the Langfuse source (the field
  groups it uses, the model definitions matched to each call), the
  shipped \`rules/\`, drill-downs and all;
- \`costwatch-bench fetch-pages --source langfuse\`, the floor of this
  path: the requests the Langfuse source makes, the same URLs in the
  same order (every page of the model definitions once, then each
  window's generations, the first with its 6-hour session lookback;
  compared under strace on 2026-12-06), fetched as for LiteLLM with
  costwatch's own HTTP client, nothing parsed but each page's
  \`meta.cursor\`, found from its end (a page that does not end with a
  whole \`meta\` is an error). A page with a cursor counts as full, the
  last page's rows are counted by their \`"startTime"\` keys, and the
  benchmark checks it listed every call of the range once;
- \`crates/costwatch-bench/langfuse.py\`: what a Langfuse user writes
  first (Python, \`requests\`): the same observations with
  \`meta.cursor\` paging, grouped by \`sessionId\` per window, the
  premium models from the definitions in force, the three static rules
  of the quality baseline. The benchmark fails unless it counts every
  call of the range.

CPU per call divides the whole process's CPU (start-up, the model
definitions, paging, parsing, sessions, rules, drill-downs) by the calls
served. The profile is one more backtest under \`perf record\`, read as
for LiteLLM. $(measured_on), $("$VENV/bin/python" --version 2>&1), in ${secs}s:

\`\`\`sh
ONLY=langfuse crates/costwatch-bench/regenerate.sh   # this section alone
$LANGFUSE_CMD
\`\`\`

$figures
SECTION
}

# The OTLP files source over a Collector file exporter's folder, and its
# peak RSS as the folder grows.
otlp_files_section() {
    local started secs figures
    started=$(date +%s)
    figures=$("$BIN/costwatch-bench" otlp-files --days 2 --per-day 12000 --window 15m --multiples 1,2,4 \
        --runs "$RUNS" --profile --workdir "$WORK" --markdown)
    secs=$(( $(date +%s) - started ))
    cat <<SECTION
## OTLP files source

The simulator writes the same two days (seed 7, 12,000 base sessions a
day) as OpenTelemetry GenAI spans, one per call, in export requests of
512 spans as a batch span processor sends them, into a folder as the
Collector's file exporter writes them (\`format: json\`, one request per
line, rotated at 100 MB: \`crates/costwatch-sim/src/otlp/files.rs\`).
\`costwatch backtest\` with \`source.kind: otlp_files\` reads the folder
with 15-minute windows, a child process under \`/usr/bin/time -v\`
(CPU = user + system of the whole process, peak RSS), the shipped
\`rules/\`, drill-downs and all. The same is done over folders of the
same scenario twice and four times as long (4 and 8 days), to show
whether memory stays flat as the folder grows. Spans carry no cost and
a failed call no usage, so the findings are not those of the HTTP
sources; there is no script beside it here.

CPU per call divides the whole process's CPU by the calls in the
folder. The profile is one more backtest over the 2-day folder under
\`perf record\`, read as for LiteLLM. $(measured_on), in ${secs}s:

\`\`\`sh
ONLY=otlp-files crates/costwatch-bench/regenerate.sh   # this section alone
$OTLP_FILES_CMD
\`\`\`

$figures
SECTION
}

# A throwaway PostgreSQL cluster for the receiver's PostgreSQL rows (as the
# integration tests start theirs: initdb, pg_ctl, as the postgres user
# when run as root), stopped on exit; fsync stays on, as SQLite's does.
PG_DIR=""
stop_postgres() {
    if [ -n "$PG_DIR" ]; then
        as_postgres "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
        rm -rf "$PG_DIR"
    fi
}
as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
start_postgres() {
    PG_BIN=$(pg_config --bindir 2>/dev/null || true)
    if [ ! -x "$PG_BIN/initdb" ]; then
        PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    fi
    if [ ! -x "$PG_BIN/initdb" ]; then
        log "PostgreSQL is not installed (apt-get install postgresql): the receiver is measured on SQLite only"
        return 1
    fi
    PG_DIR=$(mktemp -d /tmp/costwatch-bench-pg.XXXXXX)
    trap stop_postgres EXIT
    if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$PG_DIR"; fi
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_postgres "$PG_BIN/initdb" -A trust -U postgres -D "$PG_DIR/data" >/dev/null
    as_postgres "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
        -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null
    PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
}

# The OTLP/HTTP receiver of costwatch run under the exporter's own batches.
otlp_receiver_section() {
    local started secs figures pg=()
    started=$(date +%s)
    if start_postgres; then pg=(--postgres "$PG_URL"); fi
    figures=$("$BIN/costwatch-bench" otlp-receiver --days 2 --per-day 12000 --runs "$RUNS" "${pg[@]}" \
        --workdir "$WORK" --markdown)
    stop_postgres
    secs=$(( $(date +%s) - started ))
    cat <<SECTION
## OTLP receiver

The same two days (seed 7, 12,000 base sessions a day, moved to end at
the hour of the run) as OpenTelemetry GenAI spans, one per call, in the
export requests a fleet of batch span processors sends (at most 512
spans each: \`costwatch_sim::otlp::export_requests\`), encoded once as
binary protobuf and once as OTLP/JSON. \`costwatch run\` with
\`source.kind: otlp\` receives them on loopback into a new SQLite file
(\`synchronous = FULL\`: an answered export survives a power loss), then
into a new PostgreSQL database (a local server, \`fsync\` on); a loader in
\`costwatch-bench\` posts every request, two in flight, as an exporter
does (a 429 or 503 is retried). The receiver's CPU (user + system of the
whole \`costwatch run\` process, from \`/proc/PID/stat\`) is read before
the first request and after the last answer: spans per CPU-second are the
spans stored over it. Meanwhile the detection tick fires every two
seconds (\`*/2 * * * * *\`) with no window due, so what it measures is
the daemon's own work (schedule, state, alerts) beside the flood: its
latency, from the instant it fired to its \`tick done\` line, with the
loader quiet and during the flood. $(measured_on), in ${secs}s:

\`\`\`sh
ONLY=otlp-receiver crates/costwatch-bench/regenerate.sh   # this section alone
$OTLP_RECEIVER_CMD
\`\`\`

$figures
SECTION
}

# The sources' sections: ONLY value, heading, function that writes it,
# the command it runs.
SOURCES="litellm langfuse otlp-files otlp-receiver"
source_heading() {
    case "$1" in
        litellm) echo "LiteLLM source" ;;
        langfuse) echo "Langfuse source" ;;
        otlp-files) echo "OTLP files source" ;;
        otlp-receiver) echo "OTLP receiver" ;;
    esac
}
source_cmd() {
    case "$1" in
        litellm) echo "$LITELLM_CMD" ;;
        langfuse) echo "$LANGFUSE_CMD" ;;
        otlp-files) echo "$OTLP_FILES_CMD" ;;
        otlp-receiver) echo "$OTLP_RECEIVER_CMD" ;;
    esac
}

# Rewrites the section headed "## $2" of $OUT with the file $3; a new
# section goes before "Reading the figures", after the sources before it.
rewrite_section() {
    python3 - "$OUT" "$2" "$3" <<'PY'
import sys
path, heading, section = sys.argv[1], sys.argv[2], open(sys.argv[3]).read().rstrip("\n") + "\n\n"
text = open(path).read()
start = text.find("\n## " + heading + "\n")
if start >= 0:
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    text = text[: start + 1] + section + text[end + 1 :]
else:
    at = text.find("\n## Reading the figures\n")
    at = len(text) if at < 0 else at
    text = text[: at + 1] + section + text[at + 1 :]
open(path, "w").write(text)
PY
}

if [ -n "$ONLY" ]; then
    case " $SOURCES " in
        *" $ONLY "*) ;;
        *) echo "regenerate: ONLY is one of: $SOURCES" >&2; exit 1 ;;
    esac
    log "$ONLY: $(source_cmd "$ONLY")"
    "${ONLY//-/_}_section" > "$WORK/$ONLY.md"
    rewrite_section "$ONLY" "$(source_heading "$ONLY")" "$WORK/$ONLY.md"
    log "wrote the $(source_heading "$ONLY") section of $OUT"
    exit 0
fi

quality_secs=0 held_out_secs=0 perf_secs=0 sweep_secs=0
if [ -z "$SKIP_QUALITY" ]; then
    log "quality: $QUALITY_CMD"
    started=$(date +%s)
    quality="$(measured_on).

$("$BIN/costwatch-bench" quality --seeds "$SEEDS" --days 4 --markdown)"
    quality_secs=$(( $(date +%s) - started ))

    log "held-out: $HELD_OUT_CMD"
    started=$(date +%s)
    held_out="$(measured_on).

$("$BIN/costwatch-bench" quality --held-out --days 4 --markdown)"
    held_out_secs=$(( $(date +%s) - started ))
    printf '%s\n' "$quality" > "$WORK/quality.md"
    printf '%s\n' "$held_out" > "$WORK/held-out.md"
else
    log "quality skipped: its sections are kept"
    quality=$(kept quality)
    held_out=$(kept held-out)
fi

if [ -z "$SKIP_PERF" ]; then
    log "perf: $PERF_CMD"
    started=$(date +%s)
    perf=$("$BIN/costwatch-bench" perf --sessions "$SESSIONS" --runs "$RUNS" --scenario-runs "$RUNS" --idle-secs "$IDLE_SECS" \
        --python "$VENV/bin/python" --workdir "$WORK" --markdown)
    perf_secs=$(( $(date +%s) - started ))
    printf '%s\n' "$perf" > "$WORK/perf.md"
else
    log "perf skipped: its tables are kept"
    perf=$(kept perf)
fi

if [ -z "$SKIP_SWEEP" ]; then
    log "sweep: $SWEEP_CMD"
    started=$(date +%s)
    sweep=$("$BIN/costwatch-bench" sweep --days 2 --per-day 12000 --windows 5m,15m,1h,6h --long-days "$LONG_DAYS" \
        --long-per-day 10000 --long-window 5m --runs "$RUNS" --python "$VENV/bin/python" --workdir "$WORK" --markdown)
    sweep_secs=$(( $(date +%s) - started ))
    printf '%s\n' "$sweep" > "$WORK/sweep.md"
else
    log "sweep skipped: its tables are kept"
    sweep=$(kept sweep)
fi

if [ -z "$SKIP_LITELLM" ]; then
    log "litellm: $LITELLM_CMD"
    litellm_section > "$WORK/litellm.md"
else
    log "litellm skipped: its section is kept"
fi
litellm=$(kept litellm)

if [ -z "$SKIP_LANGFUSE" ]; then
    log "langfuse: $LANGFUSE_CMD"
    langfuse_section > "$WORK/langfuse.md"
else
    log "langfuse skipped: its section is kept"
fi
langfuse=$(kept langfuse)

if [ -z "$SKIP_OTLP_FILES" ]; then
    log "otlp-files: $OTLP_FILES_CMD"
    otlp_files_section > "$WORK/otlp-files.md"
else
    log "otlp-files skipped: its section is kept"
fi
otlp_files=$(kept otlp-files)

if [ -z "$SKIP_OTLP_RECEIVER" ]; then
    log "otlp-receiver: $OTLP_RECEIVER_CMD"
    otlp_receiver_section > "$WORK/otlp-receiver.md"
else
    log "otlp-receiver skipped: its section is kept"
fi
otlp_receiver=$(kept otlp-receiver)

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mem=$(free -h | awk '/^Mem:/ {print $2}')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null | head -1)" ]; then commit="$commit (with uncommitted changes)"; fi

# The sections measured by hand or by the tests (from "## Binary size" on)
# are kept as they are.
hand=""
if [ -f "$OUT" ]; then
    hand=$(sed -n '/^## Binary size/,$p' "$OUT")
fi

cat > "$OUT" <<EOF
# Benchmarks

Measured, not claimed. Everything below was produced by one command,
\`crates/costwatch-bench/regenerate.sh\`, on the machine described here; run it again to check
the figures on yours (they should match within noise on similar hardware).

## Machine

| | |
|---|---|
| date (UTC) | $(date -u +%Y-%m-%dT%H:%M:%SZ) |
| CPU | $cpu |
| cores (\`nproc\`) | $(nproc) |
| memory (\`free -h\`) | $mem |
| kernel | $(uname -sr) |
| rustc | $(rustc --version) |
| python | $("$VENV/bin/python" --version 2>&1), requests $("$VENV/bin/python" -c 'import requests; print(requests.__version__)') |
| costwatch | $commit |

## Commands

\`\`\`sh
crates/costwatch-bench/regenerate.sh     # all of the below, then rewrites this file
# which runs, after cargo build --release -p costwatch -p costwatch-bench:
$QUALITY_CMD
$HELD_OUT_CMD
$PERF_CMD
$SWEEP_CMD
$LITELLM_CMD
$LANGFUSE_CMD
$OTLP_FILES_CMD
$OTLP_RECEIVER_CMD
\`\`\`

Quality took ${quality_secs}s, the held-out report ${held_out_secs}s, performance ${perf_secs}s and the window sweep ${sweep_secs}s of wall time in this run (0s: the step was skipped and its figures kept from an earlier run).

## Detection quality

For each seed the simulator generates four days of labelled traffic (about
10,000 sessions and 59,000 calls from ten features: incidents clustered in
time and touching only a fraction of sessions, and look-alikes that must stay
quiet) and serves it on 127.0.0.1 with the gateway's REST contract.
costwatch reads it through \`backtest::replay\`, the pipeline the daemon runs
(15-minute windows, the shipped \`rules/\`, throwaway SQLite state). The
static baseline is the three rules a user writes first, read through the
same REST API window by window:

- no_cache: 2 or more calls and 0 cached prompt tokens;
- oversized_model: a premium model (input price at least 5x the cheapest in
  the catalogue) with under 1,000 prompt tokens per call on it;
- retry_loop: 10 or more calls.

P, R and F1 are per session, against the simulator's truth, with
\`backtest::score\`. **Alerts per incident**: findings become incidents the
way the daemon groups them (one per kind, rule and peer group; a new
episode after 2 hours without a finding; one alert per episode, the
default, which re-alerts never, evaluated after every window);
the alerts sent are divided by the real incidents (clusters of truly
wasteful sessions of one kind in one feature, less than 2 hours apart). A
**missed incident** is a real one none of whose sessions is in an episode
that alerted (under 1.0 alerts per incident can hide some: one alert
covering two incidents, another incident never told). A
false alert is one whose episode holds no truly wasteful session. The
baseline's findings are grouped the same way by feature, which is kinder to
it than one alert per session.

$quality

## Held-out seeds: both families

The figures above come from seeds the detectors were tuned on, in a
simulator written together with them. Here two families of labelled
traffic are scored on seeds nobody tunes against. Detection is tuned on
each family's tuning seeds; the held-out seeds of both families are only
ever reported (CONTRIBUTING.md, "Changing detection").

| family | what it is | tuning seeds | held-out seeds | served |
|---|---|---|---|---|
| base | the simulator's first family (\`costwatch_sim::scenario\`), the one above | 7, 11, 23, 42, 99 | 1234, 5678, 31337, 271828, 314159 | historically: every call exists, as above |
| adversarial | a second, independent family (\`costwatch_sim::scenario::adversarial\`), built to break the detectors | 3, 17, 101, 2026, 65537 | 1234, 5678, 31337, 271828, 314159 | live: a window sees only the calls made by its end plus the daemon's 2-minute settle lag, so a session crossing windows is first judged on its beginning |

The adversarial family (four days, about 11,000 sessions and 80,000 calls
per seed, twelve features) is labelled by the definition of waste, applied
to each session's request rows and to what the rows do not show (which
prompts share a prefix by design, which call resends which, which model the
group's design meant for a call), not by what a detector can see:

- **no_cache**: the session never read the prompt cache, yet at least
  two successful calls could have: for each, an earlier successful call on
  the same model, ended at most five minutes before, had a prompt of at
  least the model's minimum cacheable prefix (1,024 tokens for Luna, Sol
  and Sonnet, 2,048 for Haiku, 4,096 for Opus) and shares at least that
  much with it. A single such miss (a two-call session whose second call
  missed) is the providers' best-effort caching, not waste;
- **retry_loop**: five or more calls in a row, each at most a minute after
  the previous, resend a request the session already sent (the same call,
  or a cycle of two); three retries and giving up is not a loop;
- **oversized_model**: a successful tiny call (at most 1,000 prompt and 500
  completion tokens) went to a premium-tier model (Sol, Sonnet, Opus) when
  the group's design meant it for a small one, however many of the group's
  sessions do it. A group whose design is a premium model, from the start
  or after a move its team declared, is not wasting; a move nobody
  declared is; Haiku is a small model.

Its situations, true waste and look-alikes side by side: conversations
whose prompts stay below the cache minimum or cross it only on the last
call (775, 1,018, 1,282 tokens); conversations whose pauses outlive the
cache; caching that starts partway through a session; Haiku and Opus
sessions between Luna's minimum and their own; a deploy, a template change
and an old client version that break the cached prefix; agent tool loops
with heavy-tailed call counts, some cut to a fixed context budget (prompts
of one size, each a new step); validation loops of 8-13 identical
successful calls seconds apart, two-call cycles, and tool calls refused
and asked for again 8-40 times, each resend growing the prompt by the
same amount, in that spread-out group; checkout loops on failures beside bounded retries through a
provider outage; bursty batch fan-outs whose shared template is below the
minimum, one burst meeting a rate-limit storm; sub-agents misrouted to a
premium model, escalating a hard case on purpose, or failing over to
Haiku; a sub-step moving to a premium model nobody declared for hours, in
every session of a feature or in about half of them; sessions mixing three
models, with tiny premium calls beside a big one on the same model; a
feature served without a per-model breakdown; a group moving to a premium
model mid-run on purpose; a thin new group whose design is
a premium model on short prompts; tiny sessions of about \$0.0001 around the
cache minimum. \`crates/costwatch-sim/src/scenario/adversarial/mod.rs\`
describes each one and its schedule.

costwatch runs on it with the shipped \`rules/\`, told what a user of
Haiku and Opus writes in them: the models' published cache minimums
(\`model_min_cacheable_tokens: {claude-haiku-5: 2048, claude-opus-5:
4096}\`, which the gateway's catalogue does not carry), and what the team
that moved \`summarize\` to Sonnet on purpose declares (a rule
\`summarize-by-design\` with \`match: {feature: summarize}\` and
\`design_model: claude-sonnet-5.5\`). Without them
costwatch judges those models by the default 1,024 and flags the Haiku and
Opus sessions that stay between 1,024 and their model's minimum.

The first table gives the median over each family's held-out seeds (the
columns as in the table above); the second says where the adversarial
family's sessions were found or missed: per situation, the truly wasteful
sessions of each kind, how many of them costwatch found, and how many
sessions it flagged for a kind they do not carry. The third sums why the
no_cache findings' calls missed the cache (\`cache_miss_causes\`, the manual's
"What each detector sees"): the calls of each cause and what a working
cache would have saved on them (for \`written_never_read\`, the write
premium paid); only the causes marked count in a finding's impact. The
reference gateway names no provider, so \`provider_switch\` is 0 here.
Per-seed tables follow.

$held_out

## Performance

One window of $SESSIONS sessions (one hour; 2.6 calls per session on average:
the scenario's features with few calls each, 0.2% truly wasteful, and
look-alikes that a static threshold flags) is generated and served by the
built-in simulator in its own process (\`costwatch-bench serve\`), so the
measured processes are only the readers, on loopback:

- \`costwatch backtest\` with a configuration of one-hour windows, as a child
  process under \`/usr/bin/time -v\` (CPU = user + system, peak RSS). The
  first window uses a lean mix where under 1% of sessions are nominated for
  a closer look; the second uses the scenario's feature shares (5% of
  sessions always on a premium model with short prompts, 4% long
  conversations), which nominates about 9% of the sessions, far over
  \`detection.max_candidates\` (10,000): such a window is read a second
  time, once its baselines are complete, and judged as it streams by;
- \`costwatch-bench fetch-pages\`, the floor of this path: the same pages
  fetched one after the other on one thread with costwatch's own HTTP
  client (\`costwatch::http::HttpClient\`: reqwest, its settings and its
  capped body reader), each page's \`next_cursor\` found from its end and
  nothing else parsed, under \`/usr/bin/time -v\`; the benchmark checks it
  read every page of the window. What costwatch spends above it is its
  own: reading the sessions, judging them, its state and output;
- \`crates/costwatch-bench/reference.py\`, the three static rules as the short Python script a
  user would write (\`requests\` + loops, paginating \`/sessions\` and reading
  \`/models\` with the admin key), under \`/usr/bin/time -v\` against the same
  server; the benchmark checks that it flags exactly the sessions the Rust
  implementation of the same rules flags;
- the idle daemon: \`costwatch run\` against the same server with a daily
  cron; its first tick reads the served window and catches up (empty
  windows) to now, then its RSS and CPU are sampled from \`/proc\` every
  second for a minute between ticks. Once after a window of a hundredth
  the size (an ordinary busy hour), once after the million-session window.

Each program runs $RUNS times; the figures are medians. Wall time includes
waiting for the simulator, which shares the machine's cores with the reader.

$perf

## Many small windows

Real use is the other shape: thousands of small windows, in the daemon and
above all in \`backtest\` when rules are tuned over months. The simulator
serves two days of its scenario (the features, incidents and daily curve
of the quality report at five times the volume: 12,000 base sessions a
day) from its own process, and the same range is read with windows of 5
minutes, 15 minutes, an hour and 6 hours:

- \`costwatch backtest\` with that window size, under \`/usr/bin/time -v\`
  (CPU = user + system of the whole process);
- \`crates/costwatch-bench/reference.py --window SECONDS\`, the same three
  static rules reading the range window by window, as a script run by
  cron would.

The fixed cost per window is the least-squares slope of costwatch's CPU
over the number of windows: the sessions are the same in every run, so
what grows with the window count is what each window costs beyond its
sessions (the page requests a window needs even when small, the
statistics of its groups, its commit into the backtest's in-memory state,
and the request drill-downs of its candidates, among them the retry-loop
suspects at or above \`suspect_min_suspicion\` whose calls average at
most \`suspect_max_mean_gap_seconds\` apart, read within
\`drilldown_budget\` a rule and window). The slope also holds work that
is not fixed: a session active in several windows is read again in each.
So what a window costs whatever its sessions is measured on its own:
backtests over one day and over eight, a week after the served range,
where the gateway lists no session, with the sweep's smallest window;
once with the default in-memory state and once with a new SQLite file
(\`--state sqlite://...\`, each window the statements and commit of
\`costwatch run\`). Its cost per window is the difference of the two
ranges' CPU over the difference of their window counts, so start-up
cancels out.
The long backtest replays 90 days of the scenario at 10,000 base sessions
a day with 5-minute windows (25,920 windows), from Monday 2026-06-01: a
backtest stops at the current time, so the range must have ended, and the
sweep fails if a run's summary line does not count its range's windows.
Until 2026-12-01 this run started on 2026-11-02 and so stopped at the day
it ran: its figures before then covered only part of the range. Each
program runs $RUNS times; the figures are medians.

$sweep

$litellm

$langfuse

$otlp_files

$otlp_receiver

## Reading the figures

- **One parser.** Since 2026-12-07 every page (the reference gateway's,
  LiteLLM's, Langfuse's, the price lists) is read by serde's derived
  readers alone, borrowing from the page and skipping the fields no row
  uses; the hand-written one-pass readers are gone. The engine was chosen
  by measuring: the same 30 simulator pages of each source, read into
  copies of costwatch's wire types (at 3834150), median of 25 passes, on
  AMD EPYC (2 cores), in microseconds per row:

  | engine | LiteLLM | Langfuse |
  | --- | ---: | ---: |
  | serde_json \`from_str\` after one \`from_utf8\` (chosen) | 2.99 | 1.76 |
  | sonic-rs \`from_slice\` | 2.62 | 1.48 |
  | simd-json, its copy of the page included | 3.90 | 2.26 |
  | serde_json skipping the page whole (\`IgnoredAny\`): the floor | 1.47 | 0.90 |

  sonic-rs is 12–16% faster at reading a row, about 0.4 µs of the 7.9 µs
  a LiteLLM call costs all in (5%), for a second JSON engine with its own
  SIMD code beside serde_json, which the rest of costwatch uses; simd-json
  is slower here, as it copies the page first. serde_json is kept. What
  the hand-written readers bought, measured in one sitting on Intel Xeon
  (2 cores), three runs each, the medians, the older build against
  93fda04: LiteLLM 1.07 s against 1.12 s (+5%), Langfuse 0.68 s against
  0.71 s (+4%), the reference path at 15-minute windows 0.23 s against
  0.24 s (+4%), the same findings.
- **CPU per session** is the whole \`costwatch\` process (start-up, the
  catalogue, the state, drill-downs, output) divided by the sessions in
  the window. A profile (perf, 2026-12-04) puts about a quarter of it in
  reading each page's JSON into owned session records (one pass over the
  text, by the hand-written reader of that day; serde's derived readers
  took about a third before it), a little more than a quarter in the kernel's loopback TCP and
  wake-ups (one request per 50 sessions, the API's largest page), about a
  tenth in the HTTP client, and about a tenth in the per-session checks.
  The fetch-pages row measures the kernel's and the HTTP client's part on
  its own: the pages, fetched and read whole, cost more than half of
  costwatch's CPU before one session is read (1.7 to 2.3 us a session in
  the runs of 2026-12-04), so the 2 us target leaves a few tenths of a
  microsecond a session, or nothing, for reading and judging the sessions
  (serde_json alone needs about 460 ns to skip a row of 360 bytes, below).
  In reqwest's own work each
  request parses its URL twice (its redirect layer, on the request and on
  the answer, even with redirects off), about 4.5% of the CPU of a
  one-hour window replay (perf, 2026-12-04).
- **Noise.** On the 2-core virtual machine these figures were first
  produced on, the same build measured between 2.6 and 3.5 us per session
  in runs an hour apart, most of the difference in system time (the
  loopback round trips and wake-ups), while the Python reference moved
  far less. The range column shows the spread within this run. Between
  runs hours or days apart the whole machine moves more: the Python
  reference's CPU on the same work moved by up to 40% between the runs of
  2026-12-01 and 2026-12-02, and costwatch's likewise. Across runs,
  compare the ratios, not the seconds; a change to the code is measured
  by instruction counts (callgrind) or by both builds in one sitting.
  The window sweep's slope is the noisiest figure: on 2026-12-02 at 19:07
  this script measured 0.584 ms, while by hand in the same hour
  (\`costwatch-bench sweep --long-days 0 --runs 5 --windows 5m,6h\`, the
  build of that run and the one before it, each twice) it came out at
  1.07 to 1.13 ms for both.
- **The Python reference** does far less per session (three thresholds, no
  baselines, no state) and parses JSON in C, which bounds the ratio; its
  precision on the same window is in the scores table.
- **A window with too many candidates** is read twice (the second row):
  the result is exact, at the cost of parsing the window twice and judging
  every nominated session in the second read.
- **Idle RSS** is mostly the binary's own code: measured by hand
  (\`/proc/PID/smaps_rollup\`, 2026-12-02) an idle daemon held 17 to 20 MB
  of file-backed pages (the code it ran, faulted in 64 KB at a time) and
  about 8 MB anonymous; the \`dist\` build (\`cargo install --profile
  dist\`) holds about 3 MB less code. The allocator is jemalloc, with its
  background thread on in \`costwatch run\`: with glibc's, a daemon that
  had read the million-session window stayed at 44 to 49 MB, its main heap
  holding 20 MB of which 0.5 MB was in use (a few live blocks at the top
  pin the rest, and only \`malloc_trim\`, which needs unsafe code, would
  release it; \`GLIBC_TUNABLES\` arena, trim and mmap thresholds changed
  it by at most 5 MB); with jemalloc the freed pages go back as they decay,
  within seconds to a minute (on 2026-12-02 the idle minute after the
  million-session tick fell from 48.1 to 30.2 MiB; the target row takes
  the minute's maximum). After an ordinary window jemalloc costs about
  2 MB more than glibc. mimalloc was tried earlier and measured worse (38 MB idle
  after an ordinary window, 41 MB after the big one, 51 MB peak).
- **The fixed cost per window** is what a window costs whatever its
  sessions: at least one page request to the gateway, the statistics of
  each group with a nominated session, and the window's commit. A
  backtest with its default throwaway state (\`--state sqlite::memory:\`)
  commits into \`MemoryStore\`, the window path's state in process memory
  (ARCHITECTURE.md, "store/"); with \`--state URL\` each window is the
  database's statements, as in the daemon (the watermark's
  compare-and-set, one statement per finding, one multi-row statement for
  the groups' packed baselines and one for the models, the window's row,
  the commit; each a round trip to SQLite's worker thread and back).
  An empty window with a SQLite file made, by \`strace -f -c\` on
  2026-12-04, about 17 futex calls, 8 \`epoll_wait\`s and 7 eventfd
  writes (the hops to the worker thread for the begin, the
  compare-and-set, the window's row and the commit), 7 \`pwrite64\`s and
  one \`fsync\`: the write-ahead log is synced at every commit
  (\`synchronous = FULL\`), so a window committed, and an alert marked
  sent, survive a power loss. The daemon commits a window every few
  minutes, where that costs nothing; a backtest with \`--state URL\` over
  90 days of 5-minute windows pays it 25,920 times (about 10 s).
  Smaller windows also read a session again in each window it is active
  in (at 5-minute windows 32,221 session rows against 25,809 at 6 hours),
  and judge a candidate again in each (880 drill-downs against 474 with
  the shipped rules; 5,863 against 912 before suspects had to average
  calls at most \`suspect_max_mean_gap_seconds\` apart, most of them the
  long, slow support conversations of this scenario, read again in every
  window they were active in, none of them a loop; a replay reads a
  session's request rows again only when its aggregate changed): that is
  in the slope too. The Python reference
  has no state to keep, so its CPU barely moves with the window size: the
  ratio falls as windows get smaller.
- **What the in-memory commit changed**, measured by hand on 2026-12-03
  with the sweep's scenario (seed 7), both builds in one sitting, seven
  runs each, median task-clock (\`perf stat\`): 576 empty 5-minute
  windows 444 ms before, 152 ms after (10 context switches a window
  before, 1 after: only the page request is left); the two days at
  5-minute windows 830 ms before, 521 ms after with the shipped rules,
  1,491 ms and 237 ms with \`suspect_min_suspicion: 1000\` (no suspects
  drilled), 253 ms and 211 ms at 6-hour windows. The findings were byte
  for byte the same, and so were the quality and held-out tables. The
  SQLite build's figures are the noisier (its thread wake-ups depend on
  how the virtual machine schedules them): its seven runs spread from 588
  to 2,010 ms without suspects, the in-memory build's from 232 to 257 ms.
- **Where a window's cost goes**, measured by hand on this scenario with
  seed 42 (the sweep's is 7; 25,461 sessions) (callgrind, strace and perf
  stat, 2026-12-02, not by this script, with the replay's state still in
  SQLite). With
  \`drilldown_budget: 0\`, the 5-minute replay runs about 0.8M
  instructions a window more than the 6-hour one: SQLite's worker and the
  commit about 345k (most of it the upsert of the packed baselines, about
  6 KB for each group seen in the window, which changes every window a
  group is seen since its model weights decay: overflow pages and their
  rollback journal), reading again the sessions active in more than one
  window about 190k, and merging and judging the groups about 125k. Each
  statement is two thread wake-ups (SQLite's worker and back): the 5-minute
  replay makes about 27 context switches a window, and about a quarter of
  its CPU is system time; without the commit it used 15 to 20% less CPU.
  With the shipped rules, drill-downs are the larger part at small
  windows: at 15 minutes, 3,964 against 257 with \`drilldown_budget: 0\`
  (the same findings on this scenario; on the adversarial family's tuning
  seeds these suspects are retry_loop's recall, 0.49 to 0.70 without
  them), about 60 us of CPU each (perf
  stat), of which parsing the request rows is about a quarter and the
  rest the HTTP exchange and the kernel's loopback. For scale, serde_json
  alone needs about 460 ns to skip a request row of 360 bytes and about
  780 ns to read it into owned strings (a microbenchmark on this
  machine).
- **The per-session path**: callgrind counts about 22k instructions a
  session row in the 6-hour replay (25,809 rows), 46% of them reading
  pages: about 8.3k a session row of about 460 bytes, about half of it in
  finding where strings end and copying the rows' strings, labels and models into
  their own allocations. The one-pass reader of 2026-12-04 took the pages'
  share from 326M to 264M instructions, 10.6% fewer for the whole 6-hour
  replay and 10.1% fewer at 15 minutes (both builds in one sitting,
  findings byte-identical); it hands any page outside the plain shape to
  serde_json, which names a failing field as before. That reader is gone
  since 2026-12-07 ("One parser", above).
  Since the figures of 2026-12-01, foldhash replaced SipHash in the maps
  looked up for every session (catalogue, groups: 2.4% fewer
  instructions), the backtest writes a window's rows in one call (1.5%),
  and jemalloc replaced glibc's allocator (measured in one sitting, five
  runs each: about 10% less CPU with 15- and 5-minute windows, the same
  with 6-hour ones).
EOF
if [ -n "$hand" ]; then
    printf '\n%s\n' "$hand" >> "$OUT"
fi
log "wrote $OUT"
