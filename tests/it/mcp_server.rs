//! costwatch as an MCP server, against real MCP clients: `costwatch run`
//! with `server.mcp` over the LiteLLM proxy's spend logs (the simulator's),
//! the seed window moved to the last quarter hour so the state database
//! holds its findings and incidents, then
//! - the official Python SDK's client (`mcp` 2.3.0, `mcp.Client`,
//!   `tests/peers/mcp_client.py`) over Streamable HTTP and over stdio
//!   (`costwatch mcp --config FILE`), each in the handshake era
//!   (`mode="legacy"`), in 2026-07-28 (the revision pinned) and with
//!   `mode="auto"` (`server/discover` first): every tool listed and called,
//!   its result checked by the SDK against the tool's output schema;
//! - the bearer token and the `Origin` check, with plain HTTP, the SDK and
//!   costwatch's own investigation client (`McpClient`), which closes the
//!   loop: the client of the investigation reads costwatch's own tools;
//! - the official MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`,
//!   installed by `.ci/mcp-inspector.sh`).

use crate::mcp::peers_python;
use crate::support::{Running, manifest_dir, seed_models_file, start_sim};
use chrono::TimeDelta;
use costwatch::clock::RecordingSleeper;
use costwatch::investigate::ToolProvider;
use costwatch::investigate::mcp::{McpClient, McpLimits};
use costwatch::secret::Secret;
use costwatch::store::SqlStore;
use costwatch::store::inspect::{IncidentQuery, Inspect};
use costwatch_sim::Dataset;
use costwatch_sim::server::SimServer;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use url::Url;

/// Every tool, in the order costwatch lists them.
const TOOLS: [&str; 8] = [
    "list_sessions",
    "search_requests",
    "get_request",
    "list_traces",
    "list_findings",
    "list_incidents",
    "get_incident",
    "get_baseline",
];
/// The seed window's waste: one session per kind.
const FLAGGED: [(&str, &str); 3] = [
    ("no_cache", "replay-mismatch-a14896679e70"),
    ("oversized_model", "subagent-sol-9b31c0e4d2aa"),
    ("retry_loop", "retry-loop-7f2e81c09ab5"),
];
const RETRY_LOOP: &str = "retry-loop-7f2e81c09ab5";
const TOKEN: &str = "mcp-test-token-6f1d2c";

/// `costwatch run` serving `/mcp`, over the simulator's LiteLLM spend logs,
/// once the seed window's three incidents are in its state database.
struct Daemon {
    seed: Dataset,
    sim: SimServer,
    dir: TempDir,
    config: PathBuf,
    plan: PathBuf,
    running: Running,
    addr: String,
}

impl Daemon {
    /// Starts it, with `COSTWATCH_MCP_TOKEN` when `token` is given.
    async fn start(token: Option<&str>) -> Daemon {
        let (seed, start) = crate::support::recent_seed();
        let sim = start_sim(seed.clone()).await;
        let dir = TempDir::new().unwrap();
        std::fs::write(
            dir.path().join("models.json"),
            seed_models_file().to_string(),
        )
        .unwrap();
        let config = dir.path().join("costwatch.yaml");
        let yaml = format!(
            "source:\n  kind: litellm\n  api_url: {}\n  models_file: models.json\n\
             windows: {{size: 15m, settle_lag: 0s, start: '{}'}}\n\
             schedule: {{cron: '*/2 * * * * *', max_catch_up_windows: 5000}}\n\
             state: {{url: 'sqlite://state.db'}}\n\
             server: {{listen: '127.0.0.1:0', mcp: true}}\n\
             alerts: {{summary_after_windows: 10000, group_wait: 0s}}\n\
             rules: [{}]\n",
            sim.litellm_url(),
            start.to_rfc3339(),
            manifest_dir().join("rules").display()
        );
        std::fs::write(&config, yaml).unwrap();
        // What the SDK client asks for: a range of the seed window and a
        // session of it.
        let plan = dir.path().join("plan.json");
        let end = start + TimeDelta::hours(1);
        std::fs::write(
            &plan,
            json!({"start": start.to_rfc3339(), "end": end.to_rfc3339(), "session_id": RETRY_LOOP})
                .to_string(),
        )
        .unwrap();

        let mut env = vec![("COSTWATCH_ADMIN_KEY", sim.admin_key().to_owned())];
        if let Some(token) = token {
            env.push(("COSTWATCH_MCP_TOKEN", token.to_owned()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let running = Running::start(&config, &env);
        running.wait_for_log("costwatch is running", 1).await;
        let addr = running.ops_addr().await;
        assert!(
            running.log().contains("serving MCP at /mcp"),
            "{}",
            running.log()
        );
        let state = format!("sqlite://{}", dir.path().join("state.db").display());
        let store = SqlStore::open(&state).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let kinds: BTreeSet<String> = store
                .list_incidents(&IncidentQuery::default())
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.incident.kind)
                .collect();
            if kinds.len() >= 3 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "incidents of {kinds:?} only; the log:\n{}",
                running.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        store.close().await;
        Daemon {
            seed,
            sim,
            dir,
            config,
            plan,
            running,
            addr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// Runs `cmd` to its end, off the runtime's threads (the simulator answers
/// on them), for at most 90 seconds; its output, and how long it took.
async fn run(mut cmd: Command, what: &str) -> (Output, Duration) {
    let what = what.to_owned();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
        let reader = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                buf
            })
        };
        let stdout = reader(Box::new(child.stdout.take().unwrap()));
        let stderr = reader(Box::new(child.stderr.take().unwrap()));
        let deadline = started + Duration::from_secs(90);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let err = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
                panic!("{what} did not finish in 90 seconds; its stderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        };
        (output, started.elapsed())
    })
    .await
    .unwrap()
}

/// A command with no `COSTWATCH_*` variable of whoever runs the tests.
fn clean_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("COSTWATCH_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// `tests/peers/mcp_client.py` with `args`: its report, or its exit and
/// stderr when it failed.
async fn sdk_client(args: &[&str], env: &[(&str, &str)]) -> Result<Value, (Output, String)> {
    let mut cmd = clean_command(peers_python());
    cmd.arg(manifest_dir().join("tests/peers/mcp_client.py"))
        .args(args)
        .envs(env.iter().copied());
    let (out, took) = run(cmd, "the python sdk client").await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err((out, stderr));
    }
    eprintln!("mcp_client.py {args:?}: {took:?}");
    Ok(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the report is not JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    }))
}

/// The report of a run that must succeed.
async fn sdk_report(args: &[&str], env: &[(&str, &str)]) -> Value {
    sdk_client(args, env).await.unwrap_or_else(|(out, stderr)| {
        panic!("mcp_client.py {args:?} failed ({}):\n{stderr}", out.status)
    })
}

/// The call of the report labelled `label`.
fn call<'a>(report: &'a Value, label: &str) -> &'a Value {
    report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == label)
        .unwrap_or_else(|| panic!("no call {label} in {report}"))
}

/// The rows a call returned, after checking it succeeded with the same
/// JSON as text and as `structuredContent`.
fn rows<'a>(report: &'a Value, label: &str) -> &'a Vec<Value> {
    let c = done(report, label);
    c["structured_content"]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{label}: no data: {c}"))
}

fn done<'a>(report: &'a Value, label: &str) -> &'a Value {
    let c = call(report, label);
    assert!(c.get("exception").is_none(), "{label}: {c}");
    assert_eq!(c["is_error"], false, "{label}: {c}");
    assert_eq!(c["content_items"], 1, "{label}: {c}");
    assert_eq!(c["text_is_structured_content"], true, "{label}: {c}");
    c
}

/// How an SDK client connected (its `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `legacy`: `initialize`, answered with 2025-11-25.
    Legacy,
    /// `2026-07-28`: that revision adopted without asking the server.
    Pinned,
    /// `auto`: `server/discover`, answered with 2026-07-28.
    Auto,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::Legacy => "legacy",
            Mode::Pinned => "2026-07-28",
            Mode::Auto => "auto",
        }
    }
}

/// What every SDK client must see, in any era and over any transport.
fn check_sdk_report(report: &Value, d: &Daemon, mode: Mode) {
    let what = format!("{mode:?} report");
    let version = match mode {
        Mode::Legacy => "2025-11-25",
        Mode::Pinned | Mode::Auto => "2026-07-28",
    };
    assert_eq!(report["protocol_version"], version, "{what}");
    // The server's identity and instructions come with `initialize` or
    // `server/discover`; a client that pins the revision asks for neither.
    if mode == Mode::Pinned {
        assert!(report["server_info"].is_null(), "{what}");
    } else {
        assert_eq!(report["server_info"]["name"], "costwatch", "{what}");
        assert_eq!(
            report["server_info"]["version"],
            env!("CARGO_PKG_VERSION"),
            "{what}"
        );
        assert!(
            report["instructions"]
                .as_str()
                .is_some_and(|i| i.contains("list_findings")),
            "{what}: {}",
            report["instructions"]
        );
    }

    // The tools: all read-only, closed-world, with an output schema.
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS, "{what}");
    assert!(report["next_cursor"].is_null(), "{what}");
    for t in tools {
        let name = &t["name"];
        assert_eq!(t["read_only_hint"], true, "{what} {name}");
        assert_eq!(t["destructive_hint"], false, "{what} {name}");
        assert_eq!(t["idempotent_hint"], true, "{what} {name}");
        assert_eq!(t["open_world_hint"], false, "{what} {name}");
        assert!(
            t["title"].as_str().is_some_and(|s| !s.is_empty()),
            "{what} {name}"
        );
        assert_eq!(t["input_schema"]["type"], "object", "{what} {name}");
        assert_eq!(t["output_schema"]["type"], "object", "{what} {name}: {t}");
        assert!(
            t["output_schema"]["properties"].is_object(),
            "{what} {name}"
        );
    }

    // The log tools over the source: the seed's sessions and calls. The
    // SDK checked each result against the tool's output schema.
    let sessions = rows(report, "list_sessions");
    let in_seed: BTreeSet<&str> = d
        .seed
        .sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    let listed: BTreeSet<&str> = sessions
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, in_seed, "{what}");
    let calls = rows(report, "search_requests");
    assert_eq!(
        calls.len(),
        d.seed.requests_of(RETRY_LOOP).unwrap().len(),
        "{what}"
    );
    assert!(
        calls.iter().all(|c| c["session_id"] == RETRY_LOOP),
        "{what}"
    );
    assert_eq!(calls[0]["error_type"], "RateLimitError", "{what}");
    let page = done(report, "search_requests_range");
    assert_eq!(
        page["structured_content"]["data"].as_array().unwrap().len(),
        5,
        "{what}"
    );
    assert!(
        page["structured_content"]["next_cursor"].is_string(),
        "{what}"
    );
    let one = done(report, "get_request");
    assert_eq!(one["structured_content"], calls[0], "{what}");
    let traces = done(report, "list_traces");
    assert_eq!(traces["structured_content"]["data"], json!([]), "{what}");

    // costwatch's own tools over the state database.
    let findings = rows(report, "list_findings");
    let found: BTreeSet<(&str, &str)> = findings
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap(),
                f["session_id"].as_str().unwrap(),
            )
        })
        .collect();
    for flagged in FLAGGED {
        assert!(found.contains(&flagged), "{what}: {flagged:?} in {found:?}");
    }
    let incidents = rows(report, "list_incidents");
    let kinds: BTreeSet<&str> = incidents
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    let want: BTreeSet<&str> = FLAGGED.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, want, "{what}");
    assert!(incidents.iter().all(|i| i["status"] == "open"), "{what}");
    let incident = done(report, "get_incident");
    assert_eq!(
        incident["structured_content"]["incident"], incidents[0],
        "{what}"
    );
    assert!(
        !incident["structured_content"]["findings"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{what}"
    );
    let baseline = done(report, "get_baseline");
    assert_eq!(
        baseline["structured_content"]["group"], findings[0]["group"],
        "{what}"
    );
    assert!(
        baseline["structured_content"]["sessions"].as_u64().unwrap() >= 1,
        "{what}: {baseline}"
    );

    // A bad argument is a result naming it; an unknown tool is a JSON-RPC
    // error naming it.
    for label in ["bad_start", "bad_range"] {
        let c = call(report, label);
        assert!(c.get("exception").is_none(), "{what} {label}: {c}");
        assert_eq!(c["is_error"], true, "{what} {label}: {c}");
        assert!(c["structured_content"].is_null(), "{what} {label}: {c}");
        let text = c["text"].as_str().unwrap();
        assert!(
            text.contains("start:") && text.contains("RFC 3339") && text.contains("`x`"),
            "{what} {label}: {text}"
        );
    }
    let unknown = call(report, "unknown_tool");
    assert_eq!(unknown["code"], -32602, "{what}: {unknown}");
    assert!(
        unknown["exception"]
            .as_str()
            .unwrap()
            .contains("delete_everything"),
        "{what}: {unknown}"
    );
}

fn plan_args(d: &Daemon, mode: Mode) -> Vec<&str> {
    vec!["--mode", mode.arg(), "--plan", d.plan.to_str().unwrap()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_over_streamable_http_in_both_eras() {
    let d = Daemon::start(None).await;
    let url = d.url();
    for mode in [Mode::Legacy, Mode::Pinned, Mode::Auto] {
        let mut args = plan_args(&d, mode);
        args.extend(["http", url.as_str()]);
        let report = sdk_report(&args, &[]).await;
        check_sdk_report(&report, &d, mode);
    }
    // Nothing went wrong on costwatch's side.
    assert_eq!(d.running.count(" ERROR "), 0, "{}", d.running.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_over_stdio() {
    let d = Daemon::start(None).await;
    let binary = env!("CARGO_BIN_EXE_costwatch");
    let config = d.config.to_str().unwrap();
    let env = [("COSTWATCH_ADMIN_KEY", d.sim.admin_key())];
    for mode in [Mode::Legacy, Mode::Pinned, Mode::Auto] {
        let mut args = plan_args(&d, mode);
        args.extend(["stdio", binary, config]);
        let report = sdk_report(&args, &env).await;
        check_sdk_report(&report, &d, mode);
    }

    // Without the source's key `costwatch mcp` does not start, and says
    // why: the client sees the connection end.
    let mut args = plan_args(&d, Mode::Pinned);
    args.extend(["stdio", binary, config]);
    let (out, stderr) = sdk_client(&args, &[]).await.unwrap_err();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("COSTWATCH_ADMIN_KEY"), "{stderr}");
}

/// A JSON-RPC `initialize` posted to `url` with `headers`.
async fn post_initialize(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
        .to_string(),
    )
    .send()
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_and_origin_with_real_clients() {
    let d = Daemon::start(Some(TOKEN)).await;
    let url = d.url();
    let bearer = format!("Bearer {TOKEN}");
    let port = d.port();

    // Without the token, or with another: 401 and how to authenticate.
    for headers in [vec![], vec![("authorization", "Bearer not-the-token")]] {
        let r = post_initialize(&url, &headers).await;
        assert_eq!(r.status(), 401, "{headers:?}");
        assert_eq!(
            r.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer"),
            "{headers:?}"
        );
    }
    // With it: answered.
    let r = post_initialize(&url, &[("authorization", &bearer)]).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25", "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "costwatch", "{body}");

    // A browser page of another origin may not call, token or not
    // (DNS rebinding); pages of loopback origins may.
    for headers in [
        vec![("origin", "http://evil.example")],
        vec![
            ("origin", "http://evil.example"),
            ("authorization", &bearer),
        ],
    ] {
        let r = post_initialize(&url, &headers).await;
        assert_eq!(r.status(), 403, "{headers:?}");
    }
    for origin in [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
    ] {
        let r = post_initialize(&url, &[("origin", &origin), ("authorization", &bearer)]).await;
        assert_eq!(r.status(), 200, "{origin}");
        let r = post_initialize(&url, &[("origin", &origin)]).await;
        assert_eq!(r.status(), 401, "{origin}: the origin is no token");
    }

    // The SDK with the token in its own HTTP client: everything works.
    let token_args = |mode| {
        let mut args = plan_args(&d, mode);
        args.extend([
            "http",
            url.as_str(),
            "--token-env",
            "COSTWATCH_TEST_MCP_TOKEN",
        ]);
        args
    };
    for mode in [Mode::Auto, Mode::Legacy] {
        let report = sdk_report(&token_args(mode), &[("COSTWATCH_TEST_MCP_TOKEN", TOKEN)]).await;
        check_sdk_report(&report, &d, mode);
        // Every request was let in: 200 (202 for a notification, 405 for
        // the event stream the SDK tries to open after `initialize`), and
        // in 2026-07-28 the unknown tool's error is a 400.
        let statuses: Vec<u64> = report["http_statuses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_u64().unwrap())
            .collect();
        assert!(statuses.len() > 10, "{mode:?}: {statuses:?}");
        assert!(
            statuses.iter().all(|s| [200, 202, 400, 405].contains(s)),
            "{mode:?}: {statuses:?}"
        );
        let refused = statuses.iter().filter(|s| **s == 400).count();
        assert_eq!(refused, usize::from(mode != Mode::Legacy), "{statuses:?}");
    }
    // With another token the SDK cannot connect: `server/discover` gets
    // 401, and so does the `initialize` it falls back to.
    let wrong = [("COSTWATCH_TEST_MCP_TOKEN", "not-the-token")];
    let (out, stderr) = sdk_client(&token_args(Mode::Auto), &wrong)
        .await
        .unwrap_err();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("HTTP statuses: [401, 401]"), "{stderr}");

    // costwatch's own investigation client against its own `/mcp`: it
    // speaks 2026-07-28 with the token and reads the seed's calls.
    let client = |key: &str| {
        McpClient::new(
            Url::parse(&url).unwrap(),
            &Secret::new(key),
            vec!["search_requests".to_owned(), "list_findings".to_owned()],
            Duration::from_secs(20),
        )
        .unwrap()
        .with_limits(McpLimits {
            retry_base: Duration::from_millis(10),
            ..McpLimits::default()
        })
        .with_sleeper(Arc::new(RecordingSleeper::default()))
    };
    let own = client(TOKEN);
    let listed: Vec<String> = own
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(listed, ["search_requests", "list_findings"]);
    let all: Vec<String> = own
        .server_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(all, TOOLS);
    assert_eq!(own.protocol_version().await.as_deref(), Some("2026-07-28"));
    let out = own
        .call_tool("search_requests", json!({"session_id": RETRY_LOOP}))
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.text);
    let result: Value = serde_json::from_str(&out.text).unwrap();
    let rows = result["data"].as_array().unwrap();
    assert_eq!(rows.len(), d.seed.requests_of(RETRY_LOOP).unwrap().len());
    assert!(rows.iter().all(|r| r["session_id"] == RETRY_LOOP));
    let out = own
        .call_tool("list_findings", json!({"kind": "retry_loop"}))
        .await
        .unwrap();
    let result: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(result["data"][0]["session_id"], RETRY_LOOP, "{result}");
    let bad = own
        .call_tool("list_findings", json!({"start": "x"}))
        .await
        .unwrap();
    assert!(bad.is_error && bad.text.contains("start:"), "{}", bad.text);
    // With another token it is refused, and says so.
    let err = client("not-the-token").list_tools().await.unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");
    assert_eq!(d.running.count(" ERROR "), 0, "{}", d.running.log());
}

/// The Inspector's executable, from `COSTWATCH_MCP_INSPECTOR`
/// (`.ci/mcp-inspector.sh` installs it and prints the path); fails the test
/// without it.
fn inspector() -> PathBuf {
    let path = std::env::var_os("COSTWATCH_MCP_INSPECTOR").map(PathBuf::from);
    let path = path.unwrap_or_else(|| {
        panic!(
            "COSTWATCH_MCP_INSPECTOR is not set: run .ci/mcp-inspector.sh and export what it \
             prints (export COSTWATCH_MCP_INSPECTOR=\"$(bash .ci/mcp-inspector.sh)\")"
        )
    });
    assert!(
        path.exists(),
        "COSTWATCH_MCP_INSPECTOR={} does not exist: run .ci/mcp-inspector.sh",
        path.display()
    );
    path
}

/// The Inspector's CLI with `args`: what it printed, as JSON.
async fn inspect(inspector: &Path, dir: &Path, args: &[&str]) -> Value {
    let mut cmd = clean_command(inspector);
    cmd.arg("--cli").args(args).current_dir(dir);
    let (out, took) = run(cmd, "the MCP Inspector").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcp-inspector --cli {args:?}: {}\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!("mcp-inspector --cli {args:?}: {took:?}");
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("mcp-inspector printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_inspector_cli_lists_and_calls_the_tools() {
    let inspector = inspector();
    let d = Daemon::start(None).await;
    let url = d.url();
    let dir = d.dir.path();

    let check_listing = |listing: &Value, how: &str| {
        let tools = listing["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{how}: {listing}"));
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, TOOLS, "{how}");
        for t in tools {
            let a = &t["annotations"];
            assert_eq!(a["readOnlyHint"], true, "{how}: {t}");
            assert_eq!(a["destructiveHint"], false, "{how}: {t}");
            assert_eq!(a["openWorldHint"], false, "{how}: {t}");
            assert_eq!(t["outputSchema"]["type"], "object", "{how}: {t}");
        }
    };

    // Streamable HTTP.
    let listing = inspect(
        &inspector,
        dir,
        &[&url, "--transport", "http", "--method", "tools/list"],
    )
    .await;
    check_listing(&listing, "http");
    let session = format!("session_id={RETRY_LOOP}");
    let called = inspect(
        &inspector,
        dir,
        &[
            &url,
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
            "search_requests",
            "--tool-arg",
            &session,
        ],
    )
    .await;
    assert_eq!(called["isError"], false, "{called}");
    let rows = called["structuredContent"]["data"].as_array().unwrap();
    assert_eq!(rows.len(), d.seed.requests_of(RETRY_LOOP).unwrap().len());
    let text: Value = serde_json::from_str(called["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, called["structuredContent"]);

    // Stdio: `costwatch mcp`, started by the Inspector from a servers file
    // as MCP clients configure it.
    let servers = dir.join("mcp.json");
    std::fs::write(
        &servers,
        json!({"mcpServers": {"costwatch": {
            "command": env!("CARGO_BIN_EXE_costwatch"),
            "args": ["mcp", "--config", d.config],
            "env": {"COSTWATCH_ADMIN_KEY": d.sim.admin_key()},
        }}})
        .to_string(),
    )
    .unwrap();
    let listing = inspect(
        &inspector,
        dir,
        &[
            "--config",
            servers.to_str().unwrap(),
            "--server",
            "costwatch",
            "--method",
            "tools/list",
        ],
    )
    .await;
    check_listing(&listing, "stdio");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_flagged_session_asked_for_alone_is_read_where_its_findings_are() {
    // The seed day, two months before the clock: no "last hours" holds it.
    let seed = crate::support::seed_dataset();
    let sim = start_sim(seed.clone()).await;
    let dir = TempDir::new().unwrap();
    let config = crate::operator::config(dir.path());
    let env = [
        ("COSTWATCH_SOURCE__API_URL", sim.base_url()),
        ("COSTWATCH_ADMIN_KEY", sim.admin_key().to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut once = crate::operator::command(&config, &["once", "--at", "2026-10-11T13:00:00Z"]);
    once.envs(env.iter().copied());
    let out = crate::operator::run(once).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = dir.path().join("plan.json");
    let asked = json!({
        "start": "2026-10-11T11:00:00Z",
        "end": "2026-10-11T12:00:00Z",
        "session_id": RETRY_LOOP,
    });
    std::fs::write(&plan, asked.to_string()).unwrap();
    let binary = env!("CARGO_BIN_EXE_costwatch");
    let args = [
        "--mode",
        "auto",
        "--plan",
        plan.to_str().unwrap(),
        "stdio",
        binary,
        config.to_str().unwrap(),
    ];
    let report = sdk_report(&args, &env).await;
    let calls = rows(&report, "search_requests");
    let want = seed
        .sessions
        .iter()
        .find(|s| s.session_id == RETRY_LOOP)
        .map(|s| s.requests.len())
        .unwrap();
    assert_eq!(calls.len(), want.min(50), "{calls:?}");
    assert!(
        calls.iter().all(|c| c["session_id"] == RETRY_LOOP),
        "{calls:?}"
    );
    // And one of them by its id, as a client does next.
    let one = done(&report, "get_request");
    assert_eq!(one["structured_content"], calls[0]);
}
