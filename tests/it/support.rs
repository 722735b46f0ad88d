//! Shared helpers: a simulator on loopback, a gateway client that records its
//! backoff instead of sleeping, the shipped rules, and small conversions.

use chrono::{DateTime, Utc};
use costwatch::clock::{Clock, FakeClock, RecordingSleeper};
use costwatch::config::{Rules, load_rules};
use costwatch::detect::{Detector, Finding};
use costwatch::secret::Secret;
use costwatch::source::reference::ReferenceSource;
use costwatch::source::{HttpLimits, Labels};
use costwatch_sim::{Dataset, SimOptions, SimServer};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// The seed window: 26 sessions, one example of each kind of waste.
pub use costwatch_sim::SEED_WINDOW;

/// The seed window as a dataset.
pub fn seed_dataset() -> Dataset {
    Dataset::from_fixture_str(SEED_WINDOW).expect("the seed fixture parses")
}

/// Starts a simulator for `dataset` on 127.0.0.1:0.
pub async fn start_sim(dataset: Dataset) -> SimServer {
    SimServer::start(Arc::new(dataset), SimOptions::default())
        .await
        .expect("the simulator starts")
}

/// Retry limits with short delays (they are only recorded, never slept).
pub fn limits() -> HttpLimits {
    HttpLimits {
        timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
        max_retries: 3,
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_secs(60),
        max_body_bytes: 8 << 20,
    }
}

/// A gateway client for `sim` with the given page size and limits, and the
/// sleeper that records its backoff delays.
pub fn gateway_with(
    sim: &SimServer,
    key: &str,
    page_limit: u32,
    limits: HttpLimits,
) -> (ReferenceSource, RecordingSleeper) {
    let url = url::Url::parse(&sim.base_url()).expect("the simulator url parses");
    let sleeper = RecordingSleeper::default();
    let source = ReferenceSource::new(url, &Secret::new(key), page_limit, Labels::new(), limits)
        .expect("the client builds")
        .with_sleeper(Arc::new(sleeper.clone()));
    (source, sleeper)
}

/// A gateway client for `sim` with the right key and default test limits.
pub fn gateway(sim: &SimServer, page_limit: u32) -> (ReferenceSource, RecordingSleeper) {
    gateway_with(sim, sim.admin_key(), page_limit, limits())
}

/// The workspace's root folder (rules, config, migrations, tests).
pub fn manifest_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The shipped rules in `rules/`.
pub fn shipped_rules() -> Rules {
    load_rules(&[manifest_dir().join("rules")]).expect("the shipped rules load")
}

/// The detector the CLI uses without a configuration file.
pub fn detector() -> Detector {
    Detector {
        rules: shipped_rules(),
        group_by: vec!["feature".to_owned()],
        baseline_samples: 512,
        max_candidates: 10_000,
    }
}

/// An RFC 3339 timestamp.
pub fn ts(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("a valid timestamp")
        .with_timezone(&Utc)
}

/// A clock standing at `at`.
pub fn clock(at: DateTime<Utc>) -> Arc<dyn Clock> {
    Arc::new(FakeClock::new(at))
}

/// The URL of a SQLite state file in `dir`.
pub fn sqlite_url(dir: &TempDir) -> String {
    format!("sqlite://{}", dir.path().join("state.db").display())
}

/// `(kind, session_id)` of each finding.
pub fn keys(findings: &[Finding]) -> Vec<(String, String)> {
    findings
        .iter()
        .map(|f| (f.kind.as_str().to_owned(), f.session_id.clone()))
        .collect()
}

/// `(kind, session_id)` of the findings as a set, asserting there are no duplicates.
pub fn unique_keys(findings: &[Finding]) -> BTreeSet<(String, String)> {
    let list = keys(findings);
    let set: BTreeSet<_> = list.iter().cloned().collect();
    assert_eq!(set.len(), list.len(), "duplicate findings: {list:?}");
    set
}

/// The built binary, run from the crate root, with no `COSTWATCH_*` variable
/// inherited from whoever runs the tests.
pub fn costwatch_command(args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_costwatch"));
    cmd.args(args).current_dir(manifest_dir());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("COSTWATCH_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The value of an unlabelled sample in a Prometheus text page.
pub fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A running `costwatch run`, its stderr collected line by line; killed when
/// dropped.
pub struct Running {
    child: std::process::Child,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Running {
    /// Starts `costwatch run --config config` with `env` added.
    pub fn start(config: &std::path::Path, env: &[(&str, &str)]) -> Running {
        use std::io::{BufRead, BufReader};
        let mut cmd = costwatch_command(&["run", "--config", config.to_str().unwrap()]);
        cmd.envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("costwatch run starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Running { child, log }
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Lines of the log so far that contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        let log = self.log.lock().unwrap();
        log.iter().filter(|l| l.contains(needle)).count()
    }

    /// Waits until `needle` appeared in at least `at_least` lines.
    pub async fn wait_for_log(&self, needle: &str, at_least: usize) {
        eventually(&format!("`{needle}` in the log"), || async {
            (self.count(needle) >= at_least).then_some(())
        })
        .await;
    }

    /// The address `/metrics` and `/healthz` are served on, from the log
    /// (for `server.listen: 127.0.0.1:0`).
    pub async fn ops_addr(&self) -> String {
        eventually("the operations endpoint", || async {
            let log = self.log.lock().unwrap();
            log.iter()
                .filter(|l| l.contains("operations endpoint listening"))
                .find_map(|l| {
                    let at = l.find("addr=")? + "addr=".len();
                    l[at..].split_whitespace().next().map(str::to_owned)
                })
        })
        .await
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 50 ms until it gives a value; fails the test after
/// 90 seconds, naming `what` it waited for.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The daemon's `main` job over 15-minute windows from `start`, read two
/// minutes after they end, reaching back at most a week.
pub fn quarter_hours(start: DateTime<Utc>) -> costwatch::pipeline::Schedule {
    costwatch::pipeline::Schedule {
        job: "main".into(),
        windows: costwatch::config::WindowConfig {
            size: Duration::from_secs(900),
            settle_lag: Duration::from_secs(120),
            start: Some(start),
            max_backfill: Duration::from_secs(7 * 86_400),
        },
    }
}

/// The seed's prices in the shape of the reference API's `GET /models`,
/// for `source.models_file`.
pub fn seed_models_file() -> serde_json::Value {
    let seed = seed_dataset();
    serde_json::json!({ "data": seed.models.iter().map(|m| serde_json::json!({
        "id": m.id,
        "input_usd_per_mtok": m.input_usd_per_mtok,
        "cached_input_usd_per_mtok": m.cached_input_usd_per_mtok,
        "cache_write_usd_per_mtok": m.cache_write_usd_per_mtok,
        "output_usd_per_mtok": m.output_usd_per_mtok,
        "supports_prompt_cache": m.supports_prompt_cache,
    })).collect::<Vec<_>>() })
}

/// Replays `[from, to)` from `source` into the state at `url` with the
/// shipped rules, 15-minute windows and no retries of a failed window.
pub async fn replay_15m<S: costwatch::source::Source + Clone + 'static>(
    source: S,
    url: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> costwatch::backtest::Replay {
    costwatch::backtest::replay(
        source,
        detector(),
        url,
        from,
        to,
        std::time::Duration::from_secs(900),
        4,
        clock(to),
        &costwatch::backtest::WindowRetries::none(),
        |_| {},
    )
    .await
    .unwrap_or_else(|e| panic!("the replay into {url} failed: {e}"))
}

/// The seed window moved into the last quarter hour that ended at least
/// ten minutes ago, 30 seconds after its start, and that quarter hour's
/// start: `costwatch run` reads the whole seed in its first window at once
/// (which sessions a rule flags depends on how windows cut them), its
/// incidents are open, and the tools' default ranges hold them.
pub fn recent_seed() -> (costwatch_sim::Dataset, chrono::DateTime<chrono::Utc>) {
    use chrono::DurationRound;
    let seed = seed_dataset();
    let (first, last) = seed.time_range().unwrap();
    assert!(
        last - first < chrono::TimeDelta::minutes(14),
        "{first} .. {last}"
    );
    let window = (costwatch::clock::Clock::now(&costwatch::clock::SystemClock)
        - chrono::TimeDelta::minutes(25))
    .duration_trunc(chrono::TimeDelta::minutes(15))
    .unwrap();
    (
        seed.shifted(window + chrono::TimeDelta::seconds(30) - first),
        window,
    )
}

/// A test peer's Python: `<VAR>_PYTHON`, else `<VAR>_VENV/bin/python`,
/// else `~/.cache/<venv>/bin/python`. Fails the test when it is missing,
/// saying what it should hold and which script makes it.
pub fn peer_python(var: &str, venv: &str, holds: &str, script: &str) -> PathBuf {
    let python = match std::env::var_os(format!("{var}_PYTHON")) {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os(format!("{var}_VENV"))
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                    .join(".cache")
                    .join(venv)
            })
            .join("bin/python"),
    };
    assert!(
        python.exists(),
        "no Python with {holds} at {}: run {script} first (or set {var}_PYTHON)",
        python.display()
    );
    python
}

/// The venv's python with aiosmtpd and the official `mcp` SDK.
pub fn peers_python() -> PathBuf {
    peer_python(
        "COSTWATCH_PEERS",
        "costwatch-peers",
        "aiosmtpd and the mcp SDK",
        ".ci/python-peers.sh",
    )
}
