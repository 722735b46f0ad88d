//! `costwatch run` as a process: signals, reloads and durable delivery across
//! a crash, against the simulator and a real HTTP receiver on loopback.

use crate::support::{costwatch_command, free_port, manifest_dir, metric, seed_dataset, start_sim};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use costwatch::store::{SqlStore, Store, WindowStore};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A webhook receiver that records every request and can leave the first
/// one hanging (no answer), like a receiver that stalls mid-delivery.
#[derive(Clone, Default)]
struct Receiver {
    requests: Arc<Mutex<Vec<(String, String)>>>,
    hang_first: Arc<AtomicBool>,
}

impl Receiver {
    fn keys(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(k, _)| k.clone())
            .collect()
    }
}

async fn hook(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    let key = headers
        .get("x-costwatch-idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    r.requests.lock().unwrap().push((key, body));
    if r.hang_first.swap(false, Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    StatusCode::NO_CONTENT
}

async fn start_receiver() -> (Receiver, String) {
    let r = Receiver::default();
    let app = axum::Router::new()
        .route("/hook", post(hook))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (r, url)
}

/// A running `costwatch run`, with its stderr collected line by line.
struct Daemon {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn start(config: &Path, sim_url: &str, state: &str) -> Daemon {
        Daemon::start_with(config, sim_url, state, &[])
    }

    /// Like [`Daemon::start`], with more environment for the child.
    fn start_with(config: &Path, sim_url: &str, state: &str, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = costwatch_command(&["run", "--config", config.to_str().unwrap()]);
        cmd.envs(env.iter().copied());
        cmd.env("COSTWATCH_SOURCE__API_URL", sim_url)
            .env("COSTWATCH_ADMIN_KEY", "sim-admin-key")
            .env("COSTWATCH_STATE__URL", state)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("costwatch run starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon { child, log }
    }

    /// Like [`Daemon::start`], with a SQLite state file in `dir` and
    /// `server.listen` on a free loopback port, which it returns.
    fn start_listening(config: &Path, sim_url: &str, dir: &TempDir) -> (Daemon, String) {
        let state = format!("sqlite://{}", dir.path().join("state.db").display());
        let listen = format!("127.0.0.1:{}", free_port());
        let env = [("COSTWATCH_SERVER__LISTEN", listen.as_str())];
        (Daemon::start_with(config, sim_url, &state, &env), listen)
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn count(&self, needle: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    async fn wait_for_log(&self, needle: &str, at_least: usize) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.count(needle) < at_least {
            assert!(
                Instant::now() < deadline,
                "no `{needle}` in:\n{}",
                self.log.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the exit; returns the code and how long it took.
    async fn wait_exit(&mut self, within: Duration) -> (Option<i32>, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), started.elapsed());
            }
            assert!(started.elapsed() < within, "still running after {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Daily windows from the seed day to now (about 50, a catch-up that sends
/// one summary), a tick every 2 seconds, one webhook channel.
fn config(dir: &TempDir, rules: &Path, webhook: &str) -> PathBuf {
    let path = dir.path().join("costwatch.yaml");
    let yaml = format!(
        "source:\n  api_url: http://127.0.0.1:9/v1\n  max_retries: 1\n  retry_base: 100ms\n\
         windows:\n  size: 24h\n  settle_lag: 0s\n  start: 2026-10-11T00:00:00Z\n  max_backfill: 3650d\n\
         schedule:\n  cron: \"*/2 * * * * *\"\n  max_catch_up_windows: 5000\n\
         alerts:\n  retry_base: 1s\n  retry_max: 2s\n\
         notify:\n  webhooks:\n    - name: receiver\n      url: {webhook}\n      timeout: 5s\n\
         server:\n  listen: null\n\
         rules: [{}]\n",
        rules.display()
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

fn copy_rules(dir: &TempDir) -> PathBuf {
    let to = dir.path().join("rules");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(manifest_dir().join("rules")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_storing_and_sending_delivers_once_after_restart() {
    let sim = start_sim(seed_dataset()).await;
    let (receiver, url) = start_receiver().await;
    receiver.hang_first.store(true, Ordering::SeqCst);
    let dir = TempDir::new().unwrap();
    let cfg = config(&dir, &manifest_dir().join("rules"), &url);
    let state = format!("sqlite://{}", dir.path().join("state.db").display());

    // The alert is stored, then the send starts and never gets an answer.
    let mut first = Daemon::start(&cfg, &sim.base_url(), &state);
    let deadline = Instant::now() + Duration::from_secs(90);
    while receiver.keys().is_empty() {
        assert!(
            Instant::now() < deadline,
            "{}",
            first.log.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(10)).await;
    let store = SqlStore::open(&state).await.unwrap();
    let rows = store.outbox().await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0].status, "pending",
        "stored, not marked sent: the crash came mid-send"
    );
    store.close().await;

    // After the restart the alert goes out again, under the same key, and is marked sent.
    let _second = Daemon::start(&cfg, &sim.base_url(), &state);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let store = SqlStore::open(&state).await.unwrap();
        let sent = store
            .outbox()
            .await
            .unwrap()
            .iter()
            .all(|r| r.status == "sent");
        store.close().await;
        if sent {
            break;
        }
        assert!(Instant::now() < deadline, "never marked sent");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let keys = receiver.keys();
    assert_eq!(keys.len(), 2, "delivered again after the crash: {keys:?}");
    assert_eq!(keys[0], keys[1], "with the same idempotency key");
    let unique: std::collections::BTreeSet<&String> = keys.iter().collect();
    assert_eq!(
        unique.len(),
        1,
        "a receiver deduplicating by key sees it exactly once"
    );
    let bodies: Vec<String> = receiver
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| b.clone())
        .collect();
    assert_eq!(bodies[0], bodies[1], "the same alert, byte for byte");
    assert!(bodies[0].contains("catch_up_summary"), "{}", bodies[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_and_quickly() {
    let sim = start_sim(seed_dataset()).await;
    let (_receiver, url) = start_receiver().await;
    let dir = TempDir::new().unwrap();
    let cfg = config(&dir, &manifest_dir().join("rules"), &url);
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let mut d = Daemon::start(&cfg, &sim.base_url(), &state);
    d.wait_for_log("tick done", 1).await;
    d.signal("-TERM");
    let (code, took) = d.wait_exit(Duration::from_secs(15)).await;
    assert_eq!(code, Some(0), "{}", d.log.lock().unwrap().join("\n"));
    assert!(took < Duration::from_secs(12), "took {took:?}");
    assert_eq!(d.count("costwatch stopped"), 1);
}

/// The next datagram on `socket`, as text, within 30 seconds.
fn next_notification(socket: &std::os::unix::net::UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = socket
        .recv(&mut buf)
        .expect("a notification within the timeout");
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

/// The next notification that is not a watchdog ping or a status line.
fn next_state_change(socket: &std::os::unix::net::UnixDatagram) -> String {
    loop {
        let n = next_notification(socket);
        if n != "WATCHDOG=1\n" && !n.starts_with("STATUS=") {
            return n;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systemd_notify_protocol_reaches_the_socket() {
    let sim = start_sim(seed_dataset()).await;
    let (_receiver, url) = start_receiver().await;
    let dir = TempDir::new().unwrap();
    let cfg = config(&dir, &manifest_dir().join("rules"), &url);
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // A 2 s watchdog: petted every second.
    let mut d = Daemon::start_with(
        &cfg,
        &sim.base_url(),
        &state,
        &[
            ("NOTIFY_SOCKET", path.to_str().unwrap()),
            ("WATCHDOG_USEC", "2000000"),
        ],
    );
    assert_eq!(next_state_change(&socket), "READY=1\n");
    let mut pings = 0;
    while pings < 2 {
        if next_notification(&socket) == "WATCHDOG=1\n" {
            pings += 1;
        }
    }

    d.signal("-HUP");
    let reload = next_state_change(&socket);
    let mut lines = reload.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reload}");
    let usec = lines
        .next()
        .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
        .expect("MONOTONIC_USEC, which systemd 253 and later require");
    assert!(usec.parse::<u64>().unwrap() > 0, "{reload}");
    assert_eq!(next_state_change(&socket), "READY=1\n", "reload done");

    d.signal("-TERM");
    assert_eq!(next_state_change(&socket), "STOPPING=1\n");
    let (code, _) = d.wait_exit(Duration::from_secs(15)).await;
    assert_eq!(code, Some(0), "{}", d.log.lock().unwrap().join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_with_broken_rules_keeps_the_old_rules() {
    let sim = start_sim(seed_dataset()).await;
    let (_receiver, url) = start_receiver().await;
    let dir = TempDir::new().unwrap();
    let rules = copy_rules(&dir);
    let cfg = config(&dir, &rules, &url);
    let (mut d, listen) = Daemon::start_listening(&cfg, &sim.base_url(), &dir);
    d.wait_for_log("tick done", 1).await;
    let reload_ok = || async {
        let page = reqwest::get(format!("http://{listen}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metric(&page, "costwatch_config_last_reload_successful")
    };
    assert_eq!(reload_ok().await, Some(1.0));

    let good = std::fs::read_to_string(rules.join("no_cache.yaml")).unwrap();
    std::fs::write(
        rules.join("no_cache.yaml"),
        good.replace("max_cached_share: 0.05", "max_cached_share: 1.5"),
    )
    .unwrap();
    d.signal("-HUP");
    d.wait_for_log("reload refused", 1).await;
    assert!(
        d.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("no_cache[0].max_cached_share")),
        "the log names the problem"
    );
    let ticks = d.count("tick done");
    d.wait_for_log("tick done", ticks + 1).await;
    assert!(d.alive(), "still running on the old rules");
    assert_eq!(d.count("configuration reloaded"), 0);
    assert_eq!(reload_ok().await, Some(0.0), "a refused reload is visible");

    std::fs::write(rules.join("no_cache.yaml"), good).unwrap();
    d.signal("-HUP");
    d.wait_for_log("configuration reloaded", 1).await;
    assert_eq!(reload_ok().await, Some(1.0));
    d.signal("-TERM");
    let (code, _) = d.wait_exit(Duration::from_secs(15)).await;
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rebuilds_mcp_with_a_rotated_token_and_turns_it_off() {
    let sim = start_sim(seed_dataset()).await;
    let (_receiver, url) = start_receiver().await;
    let dir = TempDir::new().unwrap();
    let rules = copy_rules(&dir);
    let cfg = config(&dir, &rules, &url);
    let token_file = dir.path().join("mcp_token");
    let (first, second) = ("first-token-6c0d9e1f2a3b", "second-token-4d5e6f7a8b9c");
    std::fs::write(&token_file, first).unwrap();
    let yaml = std::fs::read_to_string(&cfg).unwrap();
    let with_mcp = |on: bool| {
        yaml.replace(
            "server:\n  listen: null\n",
            &format!(
                "server:\n  listen: null\n  mcp: {on}\n  mcp_token_file: {}\n",
                token_file.display()
            ),
        )
    };
    std::fs::write(&cfg, with_mcp(true)).unwrap();
    let (d, listen) = Daemon::start_listening(&cfg, &sim.base_url(), &dir);
    d.wait_for_log("tick done", 1).await;
    let http = reqwest::Client::new();
    let ping = |token: &'static str| {
        let req = http
            .post(format!("http://{listen}/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(ping(first).await, 200);
    assert_eq!(ping(second).await, 401);

    // The token is rotated in its file: in force after the reload.
    std::fs::write(&token_file, second).unwrap();
    d.signal("-HUP");
    d.wait_for_log("configuration reloaded", 1).await;
    assert_eq!(ping(second).await, 200);
    assert_eq!(ping(first).await, 401, "the old token no longer admits");

    // server.mcp turned off: the endpoint answers 404 after the reload.
    std::fs::write(&cfg, with_mcp(false)).unwrap();
    d.signal("-HUP");
    d.wait_for_log("configuration reloaded", 2).await;
    assert_eq!(ping(second).await, 404);
    // And on again.
    std::fs::write(&cfg, with_mcp(true)).unwrap();
    d.signal("-HUP");
    d.wait_for_log("configuration reloaded", 3).await;
    assert_eq!(ping(second).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_alert_reports_each_channel() {
    let (receiver, url) = start_receiver().await;
    let dir = TempDir::new().unwrap();
    let cfg = config(&dir, &manifest_dir().join("rules"), &url);
    let run = |cfg: PathBuf| async move {
        let mut cmd = costwatch_command(&["test-alert", "--config", cfg.to_str().unwrap()]);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    };
    let out = run(cfg.clone()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("receiver: sent"), "{stdout}");
    let bodies: Vec<String> = receiver
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| b.clone())
        .collect();
    assert_eq!(bodies.len(), 1);
    let alert: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(alert["kind"], "test");
    assert_eq!(alert["version"], "costwatch.alert.v1");

    // A channel nobody listens on is reported as failed, and the exit code says so.
    let dead = config(
        &dir,
        &manifest_dir().join("rules"),
        "http://127.0.0.1:9/hook",
    );
    let out = run(dead).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("receiver: FAILED"), "{stdout}");
}

/// The value of `key=` on the first log line containing `message`.
fn logged(d: &Daemon, message: &str, key: &str) -> Option<String> {
    let log = d.log.lock().unwrap();
    let line = log.iter().find(|l| l.contains(message))?;
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix))
        .map(str::to_owned)
}

async fn watermark(state: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let store = SqlStore::open(state).await.unwrap();
    let w = store.watermark("main").await.unwrap();
    store.close().await;
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_sigkill_takes_its_own_lease_over_at_once() {
    let sim = start_sim(seed_dataset()).await;
    let (_receiver, url) = start_receiver().await;
    let dir = TempDir::new().unwrap();
    // One window per tick, a tick every second, and a job lease that would
    // keep a stranger waiting for an hour.
    let cfg = config(&dir, &manifest_dir().join("rules"), &url);
    let yaml = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("*/2 * * * * *", "* * * * * *")
        .replace("max_catch_up_windows: 5000", "max_catch_up_windows: 1")
        + "state:\n  lease_ttl: 1h\n";
    std::fs::write(&cfg, yaml).unwrap();
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let start = chrono::DateTime::parse_from_rfc3339("2026-10-11T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let held = "replica name held for this instance";
    let own = "another live process holds this instance's replica name";

    let mut first = Daemon::start(&cfg, &sim.base_url(), &state);
    first.wait_for_log("costwatch is running", 1).await;
    let name = logged(&first, held, "replica").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while watermark(&state).await < Some(start + chrono::Duration::days(2)) {
        assert!(
            Instant::now() < deadline,
            "{}",
            first.log.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A second process on the same database while the first lives never
    // shares its name (it would believe it holds the job too).
    let second = Daemon::start(&cfg, &sim.base_url(), &state);
    second.wait_for_log(own, 1).await;
    let other = logged(&second, own, "replica").unwrap();
    assert_ne!(other, name);

    // SIGKILL: the lease stays in the database, held by the dead process.
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(10)).await;
    let at_kill = watermark(&state).await.unwrap();

    // The restarted instance runs under the same name, so the lease is its
    // own: it commits the next window without waiting out the hour.
    let third = Daemon::start(&cfg, &sim.base_url(), &state);
    third.wait_for_log(held, 1).await;
    assert_eq!(logged(&third, held, "replica").unwrap(), name);
    let deadline = Instant::now() + Duration::from_secs(60);
    while watermark(&state).await <= Some(at_kill) {
        assert!(
            Instant::now() < deadline,
            "the restart waited for the lease:\n{}",
            third.log.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(second);
}
