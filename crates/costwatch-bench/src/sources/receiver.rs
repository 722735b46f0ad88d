//! The OTLP/HTTP receiver under the exporter's own batches.
//!
//! The simulator's scenario (the sweep's, by default two days at 12,000
//! base sessions a day, moved so that it ends at the current hour) becomes
//! the export requests a fleet of batch span processors sends: at most 512
//! spans each (`costwatch_sim::otlp::export_requests`), encoded once as
//! binary protobuf (`application/x-protobuf`) and once as OTLP/JSON
//! (`application/json`, the encoding of the Collector's file exporter).
//! `costwatch run` receives them with `source.kind: otlp` on loopback,
//! storing into a new SQLite file (or PostgreSQL); a loader in this
//! process posts every request, a few at a time, retrying a `429`/`503`
//! as an exporter does. The receiver's CPU is read from `/proc/<pid>/stat`
//! before the first request and after the last answer: spans per
//! CPU-second is the spans stored over that CPU.
//!
//! Meanwhile the daemon's detection tick fires every two seconds: its
//! latency (from the cron's instant to its `tick done` line) is read from
//! the daemon's JSON log, with the loader quiet and during the flood; the
//! tick at start-up is left out, since no cron instant started it.

use crate::BenchError;
use crate::measure;
use crate::perf::sweep::scenario_params;
use crate::perf::{free_port, run_dir};
use crate::quality::{Target, render, targets_table};
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use costwatch::clock::{Clock, SystemClock};
use prost::Message;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The targets: spans stored per CPU-second with bodies of 512
/// spans.
pub const MIN_PROTOBUF_SPANS_PER_CPU_SEC: f64 = 50_000.0;
/// The same for OTLP/JSON bodies.
pub const MIN_JSON_SPANS_PER_CPU_SEC: f64 = 20_000.0;

/// Spans per export request, as the batch span processor sends them.
pub const SPANS_PER_REQUEST: usize = 512;

/// How often the daemon's tick fires during the measurement (6-field
/// cron, seconds first).
const TICK_CRON: &str = "*/2 * * * * *";
const TICK_PERIOD_SECS: i64 = 2;

/// What to measure and with which program.
#[derive(Debug, Clone)]
pub struct ReceiverOptions {
    /// Days of the scenario posted.
    pub days: u32,
    /// Base sessions per day.
    pub per_day: u32,
    /// Scenario seed.
    pub seed: u64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Runs of each encoding (medians are reported).
    pub runs: usize,
    /// Where state goes: `sqlite` (a new file per run) or a PostgreSQL URL
    /// (emptied before each run).
    pub states: Vec<String>,
    /// The `costwatch` binary.
    pub costwatch: PathBuf,
    /// Where configs and logs go.
    pub workdir: PathBuf,
    /// Seconds of quiet ticks measured before the flood.
    pub quiet_secs: u64,
}

/// One encoding's bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf`.
    Protobuf,
    /// `application/json`.
    Json,
}

impl Encoding {
    /// The name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Protobuf => "protobuf",
            Encoding::Json => "JSON",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }

    fn target(self) -> f64 {
        match self {
            Encoding::Protobuf => MIN_PROTOBUF_SPANS_PER_CPU_SEC,
            Encoding::Json => MIN_JSON_SPANS_PER_CPU_SEC,
        }
    }
}

/// One run of one encoding into one state.
#[derive(Debug, Clone)]
pub struct ReceiverRun {
    /// `SQLite` or `PostgreSQL`.
    pub state: String,
    /// The bodies' encoding.
    pub encoding: Encoding,
    /// Spans the receiver answered as stored.
    pub spans: u64,
    /// Requests posted.
    pub requests: usize,
    /// Answers that asked to come back later (429/503), each retried.
    pub retries: u64,
    /// The receiver's CPU over the flood (user + system).
    pub cpu_secs: f64,
    /// The database server's CPU over the flood (PostgreSQL's processes;
    /// 0 for SQLite, which runs inside the receiver).
    pub server_cpu_secs: f64,
    /// Wall time of the flood.
    pub wall_secs: f64,
    /// The daemon's peak RSS by the end of the flood, in MiB.
    pub hwm_mib: f64,
    /// Tick latencies, in seconds, before the flood.
    pub quiet_ticks: Vec<f64>,
    /// Tick latencies during the flood.
    pub flood_ticks: Vec<f64>,
}

impl ReceiverRun {
    /// Spans stored per CPU-second of the receiver's process.
    pub fn spans_per_cpu_sec(&self) -> f64 {
        self.spans as f64 / self.cpu_secs.max(1e-9)
    }
}

/// What was measured.
#[derive(Debug, Clone)]
pub struct ReceiverReport {
    /// Days posted.
    pub days: u32,
    /// Spans in the scenario.
    pub spans: u64,
    /// Export requests per encoding.
    pub requests: usize,
    /// Bytes of all protobuf bodies and of all JSON bodies.
    pub body_bytes: (usize, usize),
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Every run.
    pub runs: Vec<ReceiverRun>,
}

/// The scenario's spans as export requests, moved to end at the current
/// hour, each request encoded both ways.
fn bodies(opts: &ReceiverOptions) -> (u64, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let now = SystemClock.now();
    let hour = now
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(now);
    let mut params = scenario_params(opts.seed, opts.days, opts.per_day);
    params.start = hour - TimeDelta::days(i64::from(opts.days));
    let dataset = costwatch_sim::scenario::generate(&params);
    let requests = match dataset.time_range() {
        Some((first, last)) => costwatch_sim::otlp::export_requests(
            &dataset,
            first,
            last + TimeDelta::seconds(1),
            SPANS_PER_REQUEST,
        ),
        None => Vec::new(),
    };
    let spans = requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len() as u64)
        .sum();
    let protobuf = requests.iter().map(|r| r.encode_to_vec()).collect();
    let json = requests
        .iter()
        .filter_map(|r| serde_json::to_vec(r).ok())
        .collect();
    (spans, protobuf, json)
}

/// Posts the scenario with each encoding into each state, `runs` times.
pub async fn run(
    opts: &ReceiverOptions,
    mut progress: impl FnMut(&str),
) -> Result<ReceiverReport, BenchError> {
    progress(&format!(
        "generating {} days of the scenario at {} base sessions a day",
        opts.days, opts.per_day
    ));
    let (spans, protobuf, json) = bodies(opts);
    if protobuf.len() != json.len() {
        return Err(BenchError::Setup(
            "a request could not be encoded as JSON".into(),
        ));
    }
    let mut report = ReceiverReport {
        days: opts.days,
        spans,
        requests: protobuf.len(),
        body_bytes: (
            protobuf.iter().map(Vec::len).sum(),
            json.iter().map(Vec::len).sum(),
        ),
        concurrency: opts.concurrency,
        runs: Vec::new(),
    };
    progress(&format!(
        "{spans} spans in {} requests ({:.1} MB protobuf, {:.1} MB JSON)",
        report.requests,
        report.body_bytes.0 as f64 / 1e6,
        report.body_bytes.1 as f64 / 1e6
    ));
    let protobuf = Arc::new(protobuf);
    let json = Arc::new(json);
    for state in &opts.states {
        for (encoding, bodies) in [(Encoding::Protobuf, &protobuf), (Encoding::Json, &json)] {
            for i in 0..opts.runs {
                let r = one_run(opts, state, encoding, bodies.clone(), i).await?;
                progress(&format!(
                    "{} {} run {}: {} spans, {:.2} s CPU, {:.0} spans per CPU-second, {} retries",
                    r.state,
                    encoding.name(),
                    i + 1,
                    r.spans,
                    r.cpu_secs,
                    r.spans_per_cpu_sec(),
                    r.retries
                ));
                if r.spans != spans {
                    return Err(BenchError::Setup(format!(
                        "the receiver stored {} of the {spans} spans",
                        r.spans
                    )));
                }
                report.runs.push(r);
            }
        }
    }
    Ok(report)
}

/// The daemon under test, stopped with SIGTERM when dropped.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        measure::reap_within(&mut self.child, Duration::from_secs(15));
    }
}

fn start_daemon(
    opts: &ReceiverOptions,
    state: &str,
    name: &str,
    port: u16,
) -> Result<(Daemon, String), BenchError> {
    let server_port = free_port()?;
    let dir = run_dir(&opts.workdir, name)?;
    let (url, label) = if state == "sqlite" {
        let file = dir.join("state.db");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
        (format!("sqlite://{}", file.display()), "SQLite".to_owned())
    } else {
        (state.to_owned(), "PostgreSQL".to_owned())
    };
    // Windows start in a day: no window is due while the flood arrives,
    // so the tick measured is the daemon's own (schedule, state, alerts).
    let start = (SystemClock.now() + TimeDelta::days(1)).format("%Y-%m-%dT00:00:00Z");
    let yaml = format!(
        "source:\n  kind: otlp\n  listen: 127.0.0.1:{port}\n  retention: 30d\n  \
         max_requests_per_second: 100000\n  max_request_bytes: 67108864\n\
         windows:\n  size: 15m\n  start: {start}\ngroup_by: [feature]\n\
         schedule:\n  cron: \"{TICK_CRON}\"\nstate:\n  url: {url}\n\
         server:\n  listen: 127.0.0.1:{server_port}\n"
    );
    let config = dir.join("costwatch.yaml");
    std::fs::write(&config, yaml).map_err(|e| BenchError::setup("config", e))?;
    let log = dir.join("stderr");
    let err = std::fs::File::create(&log).map_err(|e| BenchError::setup("log", e))?;
    let child = Command::new(&opts.costwatch)
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("COSTWATCH_LOG_FORMAT", "json")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .map_err(|e| BenchError::setup("costwatch run", e))?;
    Ok((Daemon { child, log }, label))
}

async fn one_run(
    opts: &ReceiverOptions,
    state: &str,
    encoding: Encoding,
    bodies: Arc<Vec<Vec<u8>>>,
    index: usize,
) -> Result<ReceiverRun, BenchError> {
    if state != "sqlite" {
        empty_postgres(state)?;
    }
    let port = free_port()?;
    let name = format!("receiver-{}-{}-{index}", state_name(state), encoding.name());
    let (mut daemon, label) = start_daemon(opts, state, &name, port)?;
    let endpoint = format!("http://127.0.0.1:{port}/v1/traces");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| BenchError::setup("HTTP client", e))?;
    wait_listening(&client, &endpoint, &mut daemon).await?;
    // Quiet ticks first, then the flood.
    tokio::time::sleep(Duration::from_secs(opts.quiet_secs)).await;
    let pid = daemon.child.id();
    let flood_from = SystemClock.now();
    let server_before = measure::cpu_by_name("postgres");
    let before = measure::sample(pid)?;
    let started = Instant::now();
    let requests = bodies.len();
    let (spans, retries) = load(&client, &endpoint, encoding, bodies, opts.concurrency).await?;
    let wall_secs = started.elapsed().as_secs_f64();
    let after = measure::sample(pid)?;
    let server_cpu_secs = if state == "sqlite" {
        0.0
    } else {
        measure::cpu_by_name("postgres")
            .iter()
            .map(|(pid, cpu)| cpu - server_before.get(pid).copied().unwrap_or(0.0))
            .sum()
    };
    let flood_to = SystemClock.now();
    // The tick that fired during the flood's last moments logs after it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = std::fs::read_to_string(&daemon.log).map_err(|e| BenchError::setup("log", e))?;
    // The first tick runs at start-up, not at a cron instant.
    let ticks: Vec<(DateTime<Utc>, f64)> = tick_latencies(&log).into_iter().skip(1).collect();
    let quiet_ticks = ticks
        .iter()
        .filter(|(fired, _)| *fired < flood_from)
        .map(|(_, l)| *l)
        .collect();
    let flood_ticks = ticks
        .iter()
        .filter(|(fired, _)| *fired >= flood_from && *fired <= flood_to)
        .map(|(_, l)| *l)
        .collect();
    Ok(ReceiverRun {
        state: label,
        encoding,
        spans,
        requests,
        retries,
        cpu_secs: after.cpu_secs - before.cpu_secs,
        server_cpu_secs,
        wall_secs,
        hwm_mib: after.hwm_kib as f64 / 1024.0,
        quiet_ticks,
        flood_ticks,
    })
}

fn state_name(state: &str) -> &'static str {
    if state == "sqlite" {
        "sqlite"
    } else {
        "postgres"
    }
}

/// Drops costwatch's tables from the PostgreSQL database so each run
/// starts from an empty state, as `costwatch run` on a new database does.
fn empty_postgres(url: &str) -> Result<(), BenchError> {
    let status = Command::new("psql")
        .arg(url)
        .arg("-q")
        .arg("-c")
        .arg("SET client_min_messages = warning; DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        .stdout(Stdio::null())
        .status()
        .map_err(|e| BenchError::setup("psql", e))?;
    if !status.success() {
        return Err(BenchError::Setup(format!("psql {url}: {status}")));
    }
    Ok(())
}

/// Waits until the receiver answers (an empty export is a 200).
async fn wait_listening(
    client: &reqwest::Client,
    endpoint: &str,
    daemon: &mut Daemon,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = daemon.child.try_wait() {
            return Err(BenchError::Setup(format!(
                "costwatch run exited early: {status} (see {})",
                daemon.log.display()
            )));
        }
        let answer = client
            .post(endpoint)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await;
        if answer.is_ok_and(|a| a.status().is_success()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Setup(format!(
                "the receiver did not answer in 2 minutes (see {})",
                daemon.log.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Posts every body, `concurrency` at a time; returns the spans the
/// receiver took and the retries it asked for.
async fn load(
    client: &reqwest::Client,
    endpoint: &str,
    encoding: Encoding,
    bodies: Arc<Vec<Vec<u8>>>,
    concurrency: usize,
) -> Result<(u64, u64), BenchError> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (client, endpoint, bodies, next) = (
            client.clone(),
            endpoint.to_owned(),
            bodies.clone(),
            next.clone(),
        );
        workers.spawn(async move {
            let mut retries = 0u64;
            let mut answers = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else {
                    return Ok::<_, BenchError>((answers, retries));
                };
                loop {
                    let answer = client
                        .post(&endpoint)
                        .header("content-type", encoding.content_type())
                        .body(body.clone())
                        .send()
                        .await
                        .map_err(|e| BenchError::setup("post", e))?;
                    let status = answer.status().as_u16();
                    if status == 429 || status == 503 {
                        retries += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    let bytes = answer
                        .bytes()
                        .await
                        .map_err(|e| BenchError::setup("answer", e))?;
                    if status != 200 {
                        return Err(BenchError::Setup(format!(
                            "request {i} refused with {status}: {}",
                            String::from_utf8_lossy(&bytes)
                        )));
                    }
                    answers.push((i, bytes));
                    break;
                }
            }
        });
    }
    let mut rejected = 0u64;
    let mut retries = 0u64;
    while let Some(done) = workers.join_next().await {
        let (answers, r) = done.map_err(|e| BenchError::Setup(format!("loader: {e}")))??;
        retries += r;
        for (_, bytes) in answers {
            rejected += rejected_spans(encoding, &bytes);
        }
    }
    let sent: u64 = bodies.iter().map(|b| span_count(encoding, b)).sum::<u64>();
    Ok((sent.saturating_sub(rejected), retries))
}

fn span_count(encoding: Encoding, body: &[u8]) -> u64 {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let request = match encoding {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(body).ok(),
        Encoding::Json => serde_json::from_slice::<ExportTraceServiceRequest>(body).ok(),
    };
    request.map_or(0, |r| {
        r.resource_spans
            .iter()
            .flat_map(|rs| &rs.scope_spans)
            .map(|ss| ss.spans.len() as u64)
            .sum()
    })
}

fn rejected_spans(encoding: Encoding, body: &[u8]) -> u64 {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    let answer = match encoding {
        Encoding::Protobuf => ExportTraceServiceResponse::decode(body).ok(),
        Encoding::Json => serde_json::from_slice::<ExportTraceServiceResponse>(body).ok(),
    };
    answer
        .and_then(|a| a.partial_success)
        .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0))
}

/// Each `tick done` line of the daemon's JSON log: the cron instant it
/// fired at (its timestamp rounded down to the tick period) and its
/// latency in seconds.
pub fn tick_latencies(log: &str) -> Vec<(DateTime<Utc>, f64)> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v.get("message").and_then(|m| m.as_str()) == Some("tick done"))
        .filter_map(|v| {
            let at: DateTime<Utc> = v.get("timestamp")?.as_str()?.parse().ok()?;
            let secs = at.timestamp();
            let fired_secs = secs - secs.rem_euclid(TICK_PERIOD_SECS);
            let fired = DateTime::from_timestamp(fired_secs, 0)?;
            let latency = (at - fired).num_microseconds()? as f64 / 1e6;
            Some((fired, latency))
        })
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// The runs of `state` and `encoding`.
fn runs_of<'a>(
    r: &'a ReceiverReport,
    state: &'a str,
    encoding: Encoding,
) -> impl Iterator<Item = &'a ReceiverRun> {
    r.runs
        .iter()
        .filter(move |x| x.state == state && x.encoding == encoding)
}

/// The median spans per CPU-second of `state` and `encoding`.
pub fn median_rate(r: &ReceiverReport, state: &str, encoding: Encoding) -> Option<f64> {
    let rates: Vec<f64> = runs_of(r, state, encoding)
        .map(ReceiverRun::spans_per_cpu_sec)
        .collect();
    (!rates.is_empty()).then(|| median(&rates))
}

/// The report as text or Markdown: the rates, the ticks, the targets.
pub fn render_report(r: &ReceiverReport, markdown: bool) -> String {
    let mut states: Vec<&str> = r.runs.iter().map(|x| x.state.as_str()).collect();
    states.dedup();
    let mut rows = Vec::new();
    for state in &states {
        for encoding in [Encoding::Protobuf, Encoding::Json] {
            let runs: Vec<&ReceiverRun> = runs_of(r, state, encoding).collect();
            if runs.is_empty() {
                continue;
            }
            let cpu: Vec<f64> = runs.iter().map(|x| x.cpu_secs).collect();
            let server: Vec<f64> = runs.iter().map(|x| x.server_cpu_secs).collect();
            let wall: Vec<f64> = runs.iter().map(|x| x.wall_secs).collect();
            let rates: Vec<f64> = runs.iter().map(|x| x.spans_per_cpu_sec()).collect();
            let quiet: Vec<f64> = runs.iter().flat_map(|x| x.quiet_ticks.clone()).collect();
            let flood: Vec<f64> = runs.iter().flat_map(|x| x.flood_ticks.clone()).collect();
            let retries: u64 = runs.iter().map(|x| x.retries).sum();
            let hwm = median(&runs.iter().map(|x| x.hwm_mib).collect::<Vec<_>>());
            rows.push(vec![
                (*state).to_owned(),
                encoding.name().to_owned(),
                format!("{:.2} s", median(&cpu)),
                if *state == "SQLite" {
                    "(in the receiver)".to_owned()
                } else {
                    format!("{:.2} s", median(&server))
                },
                format!("{:.2} s", median(&wall)),
                format!("{:.0}", median(&rates)),
                format!("{:.1} us", 1e6 / median(&rates).max(1e-9)),
                format!("{:.0} MiB", hwm),
                format!(
                    "{:.0} / {:.0} ms ({})",
                    median(&quiet) * 1e3,
                    max(&quiet) * 1e3,
                    quiet.len()
                ),
                format!(
                    "{:.0} / {:.0} ms ({})",
                    median(&flood) * 1e3,
                    max(&flood) * 1e3,
                    flood.len()
                ),
                retries.to_string(),
            ]);
        }
    }
    let mut out = format!(
        "{} spans ({} days) in {} export requests of at most {SPANS_PER_REQUEST} spans: \
         {:.1} MB as protobuf, {:.1} MB as JSON, {} in flight at once.\n\n",
        r.spans,
        r.days,
        r.requests,
        r.body_bytes.0 as f64 / 1e6,
        r.body_bytes.1 as f64 / 1e6,
        r.concurrency
    );
    out.push_str(&render(
        &[
            "state",
            "bodies",
            "receiver CPU",
            "database server CPU",
            "wall",
            "spans per receiver CPU-second",
            "receiver CPU per span",
            "peak RSS",
            "tick, quiet: median / max (ticks)",
            "tick, flood: median / max (ticks)",
            "retried answers",
        ],
        &rows,
        markdown,
    ));
    out.push('\n');
    out.push_str(&targets_table(&targets(r), markdown));
    out
}

/// The targets, from the SQLite runs.
pub fn targets(r: &ReceiverReport) -> Vec<Target> {
    [Encoding::Protobuf, Encoding::Json]
        .into_iter()
        .filter_map(|encoding| {
            let rate = median_rate(r, "SQLite", encoding)?;
            Some(Target {
                what: format!(
                    "OTLP receiver into SQLite, {} bodies of 512 spans: ≥ {:.0} spans per CPU-second",
                    encoding.name(),
                    encoding.target()
                ),
                result: format!("{rate:.0}"),
                met: rate >= encoding.target(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_is_timed_from_the_instant_its_cron_fired() {
        let log = concat!(
            "{\"timestamp\":\"2026-12-05T10:00:04.250Z\",\"level\":\"INFO\",\"message\":\"tick done\"}\n",
            "{\"timestamp\":\"2026-12-05T10:00:05.100Z\",\"level\":\"INFO\",\"message\":\"other\"}\n",
            "not json\n",
            "{\"timestamp\":\"2026-12-05T10:00:07.900Z\",\"level\":\"INFO\",\"message\":\"tick done\"}\n",
        );
        let ticks = tick_latencies(log);
        assert_eq!(ticks.len(), 2);
        assert_eq!(ticks[0].0.to_rfc3339(), "2026-12-05T10:00:04+00:00");
        assert!((ticks[0].1 - 0.25).abs() < 1e-9);
        assert_eq!(ticks[1].0.to_rfc3339(), "2026-12-05T10:00:06+00:00");
        assert!((ticks[1].1 - 1.9).abs() < 1e-9);
    }

    #[test]
    fn the_target_is_spans_per_cpu_second_of_the_sqlite_runs() {
        let run = |state: &str, encoding, cpu_secs| ReceiverRun {
            state: state.to_owned(),
            encoding,
            spans: 100_000,
            requests: 196,
            retries: 0,
            cpu_secs,
            server_cpu_secs: 0.0,
            wall_secs: 1.0,
            hwm_mib: 30.0,
            quiet_ticks: vec![],
            flood_ticks: vec![],
        };
        let report = ReceiverReport {
            days: 2,
            spans: 100_000,
            requests: 196,
            body_bytes: (1, 1),
            concurrency: 2,
            runs: vec![
                run("SQLite", Encoding::Protobuf, 1.0),
                run("SQLite", Encoding::Json, 10.0),
                run("PostgreSQL", Encoding::Json, 1.0),
            ],
        };
        let t = targets(&report);
        assert_eq!(t.len(), 2);
        assert!(t[0].met, "100,000 spans per CPU-second meets 50,000");
        assert!(!t[1].met, "10,000 per CPU-second misses 20,000");
    }
}
