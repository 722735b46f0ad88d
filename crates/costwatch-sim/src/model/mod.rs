//! A scripted OpenAI-compatible model: `POST /v1/chat/completions` on
//! loopback, for `demo` and the investigation tests.
//!
//! It plays a [`Script`] (answer after some tool calls, never stop, ask for a
//! tool that is not offered, send malformed arguments, obey an injection, or
//! the realistic [`Script::Investigator`] for the seed scenario) and decides
//! each turn from the request alone (how many assistant turns the history
//! holds), so concurrent runs do not disturb each other.
//!
//! # Token counting
//!
//! Usage is counted honestly from what arrived, like a tokenizer would, at a
//! fixed [`BYTES_PER_TOKEN`] (4) bytes a token, rounded up (or by a
//! [`PromptCounter`] a test supplies, [`ScriptedModel::set_prompt_counter`]):
//! - `prompt_tokens`: the `tools` array and the `messages` array, each
//!   serialized as compact JSON;
//! - `cached_tokens`: the longest prefix of that prompt text (tools first,
//!   then messages, as providers cache) shared with an earlier request, in
//!   tokens, counted only from 1,024 tokens on and in steps of 128, as
//!   OpenAI's prompt cache does;
//! - `completion_tokens`: the answer's text plus each tool call's name and
//!   arguments, at least 1; never more than `max_tokens` (the output is cut
//!   and `finish_reason` is `length`).
//!
//! It requires `Authorization: Bearer <inference key>` and records every
//! request ([`ScriptedModel::requests`]) so tests can check what was sent:
//! tools offered, `tool_choice` on the last round, and that no secret is in
//! a body. [`ModelFault`]s make it fail on purpose.
//!
//! Layout: this file holds the model's state, test handles and server;
//! `completions` the endpoint and its faults, `script` the scripts and how
//! a turn is decided, `usage` the token counting.

mod completions;
mod script;
#[cfg(test)]
mod tests;
mod usage;

pub use self::completions::{ModelFault, RecordedRequest};
pub use self::script::{Script, ScriptedCall};
pub use self::usage::{count_prompt_tokens, prompt_text};

use crate::faults::FaultQueue;
use crate::http::Listening;
use axum::Router;
use axum::routing::post;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The inference key the scripted model accepts by default.
pub const DEFAULT_INFERENCE_KEY: &str = "sim-inference-key";
/// Bytes counted as one token.
pub const BYTES_PER_TOKEN: usize = 4;
/// Prompts shorter than this are never served from the cache.
pub const CACHE_MIN_TOKENS: u64 = 1024;
/// Cached prompt tokens come in steps of this many.
pub const CACHE_STEP_TOKENS: u64 = 128;
/// How long a [`ModelFault::Hang`] holds a call at most, unless released.
pub const HANG_FOR: Duration = Duration::from_secs(600);
/// The placeholder in scripted arguments replaced by the digest's first
/// session id.
pub const TOP_SESSION: &str = "{top_session}";

/// Counts a request's prompt tokens in place of the byte count: a test
/// that needs a model counting with a real tokenizer supplies one.
pub type PromptCounter = Arc<dyn Fn(&serde_json::Value) -> u64 + Send + Sync>;

/// State shared by the handler.
struct Shared {
    key: String,
    counter: Mutex<Option<PromptCounter>>,
    script: Mutex<Script>,
    faults: FaultQueue<ModelFault>,
    requests: Mutex<Vec<RecordedRequest>>,
    prompts: Mutex<Vec<String>>,
    next_id: AtomicU64,
}

/// Locks `m`, even if a panicking holder poisoned it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The scripted model and its test handles. Cheap to clone; clones share
/// state.
#[derive(Clone)]
pub struct ScriptedModel {
    shared: Arc<Shared>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("script", &*lock(&self.shared.script))
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model playing `script` for holders of `inference_key`.
    pub fn new(script: Script, inference_key: impl Into<String>) -> ScriptedModel {
        ScriptedModel {
            shared: Arc::new(Shared {
                key: inference_key.into(),
                counter: Mutex::new(None),
                script: Mutex::new(script),
                faults: FaultQueue::default(),
                requests: Mutex::new(Vec::new()),
                prompts: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// The router, serving `POST /chat/completions` (nest it under `/v1`).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/chat/completions", post(completions::completions))
            .with_state(self.shared.clone())
    }

    /// Replaces the script.
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }

    /// Counts prompt tokens with `counter` instead of [`BYTES_PER_TOKEN`]
    /// bytes a token (cached tokens are then capped at the prompt).
    pub fn set_prompt_counter(&self, counter: PromptCounter) {
        *lock(&self.shared.counter) = Some(counter);
    }

    /// Queues a failure for the next request.
    pub fn push_fault(&self, fault: ModelFault) {
        self.shared.faults.push(fault);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Releases hanging calls.
    pub fn release(&self) {
        self.shared.faults.release();
    }
}

/// A scripted model listening on loopback. Stops on
/// [`ScriptedModelServer::shutdown`] or when dropped.
pub struct ScriptedModelServer {
    addr: SocketAddr,
    model: ScriptedModel,
    listening: Option<Listening>,
}

impl fmt::Debug for ScriptedModelServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModelServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedModelServer {
    /// Serves `script` on 127.0.0.1 (a free port) with the default key.
    pub async fn start(script: Script) -> std::io::Result<ScriptedModelServer> {
        Self::start_on(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            ScriptedModel::new(script, DEFAULT_INFERENCE_KEY),
        )
        .await
    }

    /// Serves `model` on `bind`.
    pub async fn start_on(
        bind: SocketAddr,
        model: ScriptedModel,
    ) -> std::io::Result<ScriptedModelServer> {
        let app = Router::new().nest("/v1", model.router());
        let listening = Listening::start(bind, app).await?;
        let addr = listening.addr();
        tracing::debug!(%addr, "scripted model listening");
        Ok(ScriptedModelServer {
            addr,
            model,
            listening: Some(listening),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `llm_url`, e.g. `http://127.0.0.1:40123/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The key it accepts.
    pub fn inference_key(&self) -> &str {
        &self.model.shared.key
    }

    /// The model's handles.
    pub fn model(&self) -> &ScriptedModel {
        &self.model
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.model.requests()
    }

    /// Stops accepting, releases hanging calls and waits for the server.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        self.model.release();
        match self.listening.take() {
            Some(listening) => listening.shutdown().await,
            None => Ok(()),
        }
    }
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        self.model.release();
    }
}
