//! The whole-process performance benchmark.
//!
//! The simulator serves the [`compact`](super::compact) dataset from its own
//! process (`costwatch-bench serve`), so the processes measured are only
//! the readers: `costwatch backtest` over the one-hour window holding every
//! session, and `crates/costwatch-bench/reference.py` over the same window and server. Each
//! runs several times under `/usr/bin/time -v`; medians are reported. Then
//! `costwatch run` is started against the same server, and once its first
//! tick has processed that window, its RSS and CPU are sampled for a minute
//! between ticks.

use super::compact::{CompactParams, Mix};
use super::measure::{self, TimeReport};
use super::quality::median;
use super::{BenchError, baseline};
use costwatch::backtest::{self, ClassScore};
use costwatch::clock::Clock;
use costwatch::detect::{Finding, Kind};
use costwatch::source::Window;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// What to measure and with which programs.
#[derive(Debug, Clone)]
pub struct PerfOptions {
    /// Sessions in the window.
    pub sessions: usize,
    /// Dataset seed.
    pub seed: u64,
    /// Runs of each measured command.
    pub runs: usize,
    /// The `costwatch` binary.
    pub costwatch: PathBuf,
    /// The `costwatch-bench` binary (for `serve`).
    pub bench: PathBuf,
    /// The Python interpreter with `requests`; `None` skips the reference.
    pub python: Option<PathBuf>,
    /// `crates/costwatch-bench/reference.py`.
    pub reference: PathBuf,
    /// The rules directory.
    pub rules: PathBuf,
    /// How long the idle daemon is sampled; zero skips it.
    pub idle: Duration,
    /// Runs of `costwatch backtest` over a window with the scenario's
    /// feature shares (far more candidates than `max_candidates`); zero
    /// skips them.
    pub scenario_runs: usize,
    /// Where configs, outputs and reports go.
    pub workdir: PathBuf,
}

/// The simulator process; stops when dropped.
pub struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    /// API base URL.
    pub url: String,
    /// The admin key it accepts.
    pub admin_key: String,
    /// Sessions served.
    pub sessions: usize,
    /// Calls served.
    pub requests: usize,
    /// Calls served in the range of the scenario's days (all of them for
    /// one window of sessions).
    pub in_range: usize,
    /// Seconds it took to generate and index the dataset.
    pub generate_secs: f64,
}

impl Served {
    /// The simulator's root, the base URL of the LiteLLM proxy and of
    /// Langfuse: it serves their routes there, beside the API under `/v1`.
    pub fn root_url(&self) -> &str {
        self.url.strip_suffix("/v1").unwrap_or(&self.url)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Closing stdin asks `serve` to stop; the kill is the fallback.
        self.stdin.take();
        measure::reap_within(&mut self.child, Duration::from_secs(5));
    }
}

/// The line protocol of `costwatch-bench serve` on stdout.
/// `in_range` counts the calls of the range served (the scenario's days;
/// every call for one window of sessions).
pub fn serve_announcement(
    url: &str,
    key: &str,
    (sessions, requests, in_range): (usize, usize, usize),
    secs: f64,
) -> String {
    format!(
        "serving url={url} key={key} sessions={sessions} requests={requests} in_range={in_range} generate_secs={secs:.2}"
    )
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Starts `costwatch-bench serve` and waits for its announcement.
pub fn serve(opts: &PerfOptions, mix: Mix, truth: &Path) -> Result<Served, BenchError> {
    let args = [
        "--sessions".to_owned(),
        opts.sessions.to_string(),
        "--seed".to_owned(),
        opts.seed.to_string(),
        "--mix".to_owned(),
        mix.as_str().to_owned(),
        "--truth".to_owned(),
        truth.display().to_string(),
    ];
    serve_with(&opts.bench, &args)
}

/// Starts `bench serve ARGS` and waits for its announcement.
pub fn serve_with(bench: &Path, args: &[String]) -> Result<Served, BenchError> {
    let mut child = Command::new(bench)
        .arg("serve")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::setup("cannot start costwatch-bench serve", e))?;
    let stdin = child.stdin.take();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| BenchError::Setup("serve has no stdout".into()))?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| BenchError::setup("serve announcement", e))?;
    let parse = |k: &str| field(&line, k).map(str::to_owned);
    let served = (|| {
        Some(Served {
            url: parse("url")?,
            admin_key: parse("key")?,
            sessions: parse("sessions")?.parse().ok()?,
            requests: parse("requests")?.parse().ok()?,
            in_range: parse("in_range")?.parse().ok()?,
            generate_secs: parse("generate_secs")?.parse().ok()?,
            child,
            stdin,
        })
    })();
    served.ok_or_else(|| BenchError::Setup(format!("serve did not start: `{}`", line.trim())))
}

/// A configuration for `costwatch` against the served window.
pub fn config_yaml(url: &str, rules: &Path, state: &Path, extra: &str) -> String {
    config_with_source(&format!("  api_url: {url}\n"), rules, state, extra)
}

/// [`config_yaml`] with `source` (its indented lines) as the source
/// section.
pub fn config_with_source(source: &str, rules: &Path, state: &Path, extra: &str) -> String {
    format!(
        "source:\n{source}windows:\n  size: 1h\n  settle_lag: 0s\ngroup_by: [feature]\n\
         state:\n  url: sqlite://{}\nrules: [{}]\n{extra}",
        state.display(),
        rules.display()
    )
}

/// Medians of several runs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Medians {
    /// CPU seconds (user + system).
    pub cpu_secs: f64,
    /// Wall seconds.
    pub wall_secs: f64,
    /// Peak RSS in MiB.
    pub max_rss_mib: f64,
}

impl Medians {
    /// The medians of `runs`.
    pub fn of(runs: &[TimeReport]) -> Medians {
        let pick = |f: fn(&TimeReport) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        Medians {
            cpu_secs: pick(TimeReport::cpu_secs),
            wall_secs: pick(|r| r.wall_secs),
            max_rss_mib: pick(|r| r.max_rss_kib as f64 / 1024.0),
        }
    }

    /// CPU microseconds per session.
    pub fn cpu_us_per_session(&self, sessions: usize) -> f64 {
        self.cpu_secs * 1e6 / sessions.max(1) as f64
    }
}

/// The idle daemon over a minute.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IdleReport {
    /// Sessions in the window its first tick read.
    pub sessions: usize,
    /// Seconds the first tick (the big window and the catch-up) took.
    pub first_tick_secs: f64,
    /// RSS at the start of the idle minute, MiB.
    pub rss_start_mib: f64,
    /// RSS at its end, MiB.
    pub rss_end_mib: f64,
    /// Largest RSS during the minute, MiB.
    pub rss_max_mib: f64,
    /// Peak RSS of the process's life (the first tick), MiB.
    pub hwm_mib: f64,
    /// CPU seconds spent during the minute.
    pub cpu_secs: f64,
    /// Seconds sampled.
    pub span_secs: f64,
}

/// Everything the benchmark measured.
#[derive(Debug, Clone)]
pub struct PerfReport {
    /// Sessions in the window.
    pub sessions: usize,
    /// Calls behind them.
    pub requests: usize,
    /// costwatch backtest runs.
    pub costwatch: Vec<TimeReport>,
    /// costwatch's findings scored against the dataset's truth.
    pub costwatch_scores: Vec<ClassScore>,
    /// costwatch backtest runs over the window with the scenario's shares.
    pub scenario: Vec<TimeReport>,
    /// Their findings scored against that dataset's truth.
    pub scenario_scores: Vec<ClassScore>,
    /// Runs fetching the window's pages and parsing nothing (the floor of
    /// the page path, [`floor`]).
    pub floor: Vec<TimeReport>,
    /// Python reference runs.
    pub python: Vec<TimeReport>,
    /// Sessions the Python reference flagged, per kind.
    pub python_flagged: BTreeMap<String, usize>,
    /// Whether the Python reference flagged exactly the sessions the Rust
    /// implementation of the same rules ([`baseline`]) flags.
    pub python_matches_rust: Option<bool>,
    /// The Python reference's flags scored against the truth.
    pub python_scores: Vec<ClassScore>,
    /// The idle daemon after a typical window and after the big one, or
    /// why it was not measured.
    pub idle: Result<Vec<IdleReport>, String>,
}

impl PerfReport {
    /// A report of a window of `sessions` sessions and `requests` calls,
    /// nothing measured yet.
    pub fn new(sessions: usize, requests: usize) -> Self {
        PerfReport {
            sessions,
            requests,
            costwatch: Vec::new(),
            costwatch_scores: Vec::new(),
            scenario: Vec::new(),
            scenario_scores: Vec::new(),
            floor: Vec::new(),
            python: Vec::new(),
            python_flagged: BTreeMap::new(),
            python_matches_rust: None,
            python_scores: Vec::new(),
            idle: Err("not measured".into()),
        }
    }
}

/// Runs the Python reference `script` over `[from, to)` of `served` once
/// (run `i`, its output kept in `dir`), with `extra` arguments.
fn reference_run(
    python: &Path,
    script: &Path,
    served: &Served,
    (from, to): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    extra: &[String],
    dir: &Path,
    i: usize,
) -> Result<TimeReport, BenchError> {
    let mut args: Vec<String> = vec![
        script.display().to_string(),
        "--url".into(),
        served.url.clone(),
        "--start".into(),
        rfc(from),
        "--end".into(),
        rfc(to),
    ];
    args.extend_from_slice(extra);
    let env = [("COSTWATCH_ADMIN_KEY", served.admin_key.as_str())];
    measure::timed(
        python,
        &args,
        &env,
        &dir.join(format!("stdout-{i}")),
        &dir.join(format!("stderr-{i}")),
    )
}

/// `costwatch backtest`'s arguments over `(from, to)` with `config`,
/// findings as JSON lines.
pub fn backtest_args(
    config: &std::path::Path,
    (from, to): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
) -> Vec<String> {
    vec![
        "backtest".into(),
        "--config".into(),
        config.display().to_string(),
        "--from".into(),
        rfc(from),
        "--to".into(),
        rfc(to),
        "--format".into(),
        "jsonl".into(),
    ]
}

/// A time as the reference script and the backtest take it.
pub fn rfc(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The folder `name` below `workdir`, made if missing.
pub fn run_dir(workdir: &Path, name: &str) -> Result<PathBuf, BenchError> {
    let dir = workdir.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::setup("work directory", e))?;
    Ok(dir)
}

/// Reads `costwatch backtest --format jsonl` output as findings (kind and
/// session only).
pub fn read_jsonl_findings(text: &str) -> Vec<Finding> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let kind = Kind::parse(v.get("kind")?.as_str()?)?;
            let id = v.get("session_id")?.as_str()?;
            Some(stub_finding(kind, id))
        })
        .collect()
}

fn stub_finding(kind: Kind, id: &str) -> Finding {
    Finding {
        kind,
        session_id: id.to_owned(),
        window: Window {
            start: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
            end: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        },
        severity: costwatch::config::Severity::Warning,
        rule: String::new(),
        group: String::new(),
        labels: Default::default(),
        cost_usd: 0.0,
        impact_usd: 0.0,
        evidence: serde_json::Value::Null,
        explanation: String::new(),
    }
}

type Flagged = BTreeMap<String, BTreeSet<String>>;

fn as_findings(flagged: &Flagged) -> Vec<Finding> {
    flagged
        .iter()
        .filter_map(|(k, ids)| Some((Kind::parse(k)?, ids)))
        .flat_map(|(k, ids)| ids.iter().map(move |id| stub_finding(k, id)))
        .collect()
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, BenchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::setup(&path.display().to_string(), e))?;
    serde_json::from_str(&text).map_err(|e| BenchError::setup(&path.display().to_string(), e))
}

/// Runs `costwatch backtest` over the served window `runs` times; returns
/// the measurements and the first run's findings scored against `truth`.
fn backtests(
    opts: &PerfOptions,
    served: &Served,
    name: &str,
    runs: usize,
    truth: &Flagged,
    progress: &mut impl FnMut(&str),
) -> Result<(Vec<TimeReport>, Vec<ClassScore>), BenchError> {
    let (from, to) = CompactParams::new(opts.sessions, opts.seed).window();
    let env = [("COSTWATCH_ADMIN_KEY", served.admin_key.as_str())];
    let dir = run_dir(&opts.workdir, name)?;
    let config = dir.join("costwatch.yaml");
    std::fs::write(
        &config,
        config_yaml(&served.url, &opts.rules, &dir.join("unused.db"), ""),
    )
    .map_err(|e| BenchError::setup("config", e))?;
    let args: Vec<String> = [
        "backtest",
        "--config",
        &config.display().to_string(),
        "--from",
        &rfc(from),
        "--to",
        &rfc(to),
        "--format",
        "jsonl",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut out_runs = Vec::new();
    let mut scores = Vec::new();
    for i in 0..runs {
        let out = dir.join(format!("findings-{i}.jsonl"));
        let r = measure::timed(
            &opts.costwatch,
            &args,
            &env,
            &out,
            &dir.join(format!("stderr-{i}")),
        )?;
        progress(&format!(
            "costwatch backtest ({name}) run {}: {}",
            i + 1,
            r.summary()
        ));
        out_runs.push(r);
        if i == 0 {
            let text =
                std::fs::read_to_string(&out).map_err(|e| BenchError::setup("findings", e))?;
            scores = backtest::score(&read_jsonl_findings(&text), truth);
        }
    }
    Ok((out_runs, scores))
}

/// Runs `costwatch-bench fetch-pages` over the served window `runs`
/// times, and checks each read every page.
fn floor_runs(
    opts: &PerfOptions,
    served: &Served,
    progress: &mut impl FnMut(&str),
) -> Result<Vec<TimeReport>, BenchError> {
    let (from, to) = CompactParams::new(opts.sessions, opts.seed).window();
    let dir = run_dir(&opts.workdir, "floor")?;
    let args: Vec<String> = vec![
        "fetch-pages".into(),
        "--url".into(),
        served.url.clone(),
        "--from".into(),
        rfc(from),
        "--to".into(),
        rfc(to),
    ];
    let env = [("COSTWATCH_ADMIN_KEY", served.admin_key.as_str())];
    let want = floor::pages_for(served.sessions);
    let (runs, _) = floor::timed_runs(&opts.bench, &args, &env, opts.runs, &dir, progress, |f| {
        if f.pages == want {
            Ok(())
        } else {
            Err(format!(
                "read {} pages of the window, not its {want}",
                f.pages
            ))
        }
    })?;
    Ok(runs)
}

/// Runs the whole benchmark; `progress` hears what is going on.
pub async fn run(
    opts: &PerfOptions,
    mut progress: impl FnMut(&str),
) -> Result<PerfReport, BenchError> {
    std::fs::create_dir_all(&opts.workdir).map_err(|e| BenchError::setup("work directory", e))?;
    let truth_path = opts.workdir.join("truth.json");
    progress(&format!(
        "generating {} sessions and starting the simulator",
        opts.sessions
    ));
    let served = serve(opts, Mix::Lean, &truth_path)?;
    progress(&format!(
        "simulator at {} ({} sessions, {} calls, generated in {:.1} s)",
        served.url, served.sessions, served.requests, served.generate_secs
    ));
    let truth: Flagged = read_json(&truth_path)?;
    let (from, to) = CompactParams::new(opts.sessions, opts.seed).window();
    let mut report = PerfReport::new(served.sessions, served.requests);

    let (runs, scores) = backtests(opts, &served, "backtest", opts.runs, &truth, &mut progress)?;
    (report.costwatch, report.costwatch_scores) = (runs, scores);
    report.floor = floor_runs(opts, &served, &mut progress)?;

    if let Some(python) = &opts.python {
        let dir = run_dir(&opts.workdir, "python")?;
        for i in 0..opts.runs {
            let out = dir.join(format!("flagged-{i}.json"));
            let extra = ["--out".to_owned(), out.display().to_string()];
            let r = reference_run(
                python,
                &opts.reference,
                &served,
                (from, to),
                &extra,
                &dir,
                i,
            )?;
            progress(&format!("python reference run {}: {}", i + 1, r.summary()));
            report.python.push(r);
            if i == 0 {
                let flagged: Flagged = read_json(&out)?;
                report.python_flagged = flagged.iter().map(|(k, v)| (k.clone(), v.len())).collect();
                report.python_scores = backtest::score(&as_findings(&flagged), &truth);
                let source = super::quality::sim_source(&served.url, &served.admin_key)?;
                let rust = baseline::run(&source, from, to, Duration::from_secs(3600)).await?;
                let mut rust_flagged: Flagged = Kind::ALL
                    .iter()
                    .map(|k| (k.as_str().to_owned(), BTreeSet::new()))
                    .collect();
                for f in rust {
                    rust_flagged
                        .entry(f.kind.as_str().to_owned())
                        .or_default()
                        .insert(f.session_id);
                }
                let mut py = flagged.clone();
                for k in Kind::ALL {
                    py.entry(k.as_str().to_owned()).or_default();
                }
                report.python_matches_rust = Some(py == rust_flagged);
            }
        }
    }

    if !opts.idle.is_zero() {
        report.idle = idle(opts, &served, from, "idle-big", &mut progress).map(|r| vec![r]);
    }
    drop(served);
    if opts.scenario_runs > 0 {
        let path = opts.workdir.join("truth-scenario.json");
        progress(&format!(
            "generating {} sessions with the scenario's feature shares",
            opts.sessions
        ));
        let served = serve(opts, Mix::Scenario, &path)?;
        let truth: Flagged = read_json(&path)?;
        let (runs, scores) = backtests(
            opts,
            &served,
            "backtest-scenario",
            opts.scenario_runs,
            &truth,
            &mut progress,
        )?;
        (report.scenario, report.scenario_scores) = (runs, scores);
    }
    if !opts.idle.is_zero()
        && let Ok(list) = &mut report.idle
    {
        // The same daemon after a window of a hundredth the size: a busy
        // gateway's ordinary hour.
        let small = PerfOptions {
            sessions: (opts.sessions / 100).max(1),
            ..opts.clone()
        };
        progress(&format!(
            "starting a simulator with {} sessions",
            small.sessions
        ));
        let served = serve(&small, Mix::Lean, &opts.workdir.join("truth-small.json"))?;
        match idle(&small, &served, from, "idle-small", &mut progress) {
            Ok(r) => list.insert(0, r),
            Err(e) => report.idle = Err(e),
        }
    }
    Ok(report)
}

/// Whether `costwatch run` exists in this build.
fn has_run(costwatch: &Path) -> bool {
    Command::new(costwatch)
        .args(["run", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16, BenchError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| BenchError::setup("free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| BenchError::setup("free port", e))
}

/// Starts `costwatch run`, waits for its first tick (which processes the
/// served window and catches up to now), then samples it between ticks.
fn idle(
    opts: &PerfOptions,
    served: &Served,
    from: chrono::DateTime<chrono::Utc>,
    name: &str,
    progress: &mut impl FnMut(&str),
) -> Result<IdleReport, String> {
    if !has_run(&opts.costwatch) {
        return Err("pending: this build of costwatch has no `run` subcommand".into());
    }
    let err = |e: BenchError| e.to_string();
    let dir = run_dir(&opts.workdir, name).map_err(err)?;
    let port = free_port().map_err(err)?;
    let state = dir.join("state.db");
    let _ = std::fs::remove_file(&state);
    // Windows from the served hour to now: the first tick reads the big
    // window, then empty ones. The cron fires once a day at 03:17 UTC so
    // the sampled minute is between ticks.
    let days = (costwatch::clock::SystemClock.now() - from).num_days() + 2;
    let extra = format!(
        "schedule:\n  cron: \"17 3 * * *\"\n  max_catch_up_windows: {}\nserver:\n  listen: 127.0.0.1:{port}\n",
        days * 24
    );
    let mut cfg = config_yaml(&served.url, &opts.rules, &state, &extra);
    cfg = cfg.replace(
        "  settle_lag: 0s\n",
        &format!(
            "  settle_lag: 0s\n  start: {}\n  max_backfill: {days}d\n",
            from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
    );
    let config = dir.join("costwatch.yaml");
    std::fs::write(&config, cfg).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("stderr")).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut child = Command::new(&opts.costwatch)
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("COSTWATCH_ADMIN_KEY", &served.admin_key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start costwatch run: {e}"))?;
    let pid = child.id();
    let result = (|| {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("costwatch run exited early: {status}"));
            }
            if Instant::now() > deadline {
                return Err("costwatch run did not finish its first tick in 10 minutes".into());
            }
            if first_tick_done(port) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let first_tick_secs = started.elapsed().as_secs_f64();
        progress(&format!(
            "costwatch run: first tick done after {first_tick_secs:.1} s; sampling {} s",
            opts.idle.as_secs()
        ));
        // Let the tick's last writes and the first delivery pass settle.
        std::thread::sleep(Duration::from_secs(2));
        let (first, last, max_rss) =
            measure::observe(pid, opts.idle, Duration::from_secs(1)).map_err(err)?;
        Ok(IdleReport {
            sessions: served.sessions,
            first_tick_secs,
            rss_start_mib: first.rss_kib as f64 / 1024.0,
            rss_end_mib: last.rss_kib as f64 / 1024.0,
            rss_max_mib: max_rss as f64 / 1024.0,
            hwm_mib: last.hwm_kib as f64 / 1024.0,
            cpu_secs: last.cpu_secs - first.cpu_secs,
            span_secs: opts.idle.as_secs_f64(),
        })
    })();
    // SIGTERM, then wait: the daemon stops cleanly.
    let _ = Command::new("kill").arg(pid.to_string()).status();
    measure::reap_within(&mut child, Duration::from_secs(15));
    result
}

/// Whether `/healthz` reports a completed tick (a plain HTTP/1.0 GET).
fn first_tick_done(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    if conn
        .write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut text = String::new();
    let _ = conn.read_to_string(&mut text);
    text.split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(body).ok())
        .and_then(|v| v.get("last_tick").map(|t| !t.is_null()))
        .unwrap_or(false)
}

pub mod floor;
mod report;
pub mod sweep;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use report::{scores_table, table, targets};
