//! Prompt-token estimates: how many tokens a request will be billed for,
//! before it is sent, so the caps can be planned (see `budget.rs`).
//!
//! Three ways to count, chosen by `investigation.tokenizer`:
//!
//! - **A real tokenizer** for model families that publish theirs: OpenAI's
//!   `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series) and `cl100k_base`
//!   (GPT-4, GPT-3.5), from the `tiktoken-rs` crate, which ships the
//!   encodings (nothing is fetched at run time). The request is counted
//!   as OpenAI's guide "How to count tokens with tiktoken" (openai-cookbook)
//!   counts it: the messages by `num_tokens_from_messages`, and the tool
//!   definitions by `num_tokens_for_tools`, as the provider renders them
//!   rather than as their JSON (see `tokenizer.rs`). So the first call of
//!   a deployment needs nothing learned: the estimate is that count plus
//!   the largest difference reported - counted seen (0 before any), plus
//!   [`TOKENIZER_MARGIN`].
//! - **A calibrated bound** for every other model. A request is measured
//!   in units (pieces of text as a byte-level BPE tokenizer splits them:
//!   digits one by one, words, punctuation runs; see `pieces.rs`) and in
//!   bytes of its JSON, its tool definitions and results apart. The bound
//!   learns from reported usage (see `calibration.rs`): tokens per unit
//!   (or byte) from above, the tokens per unit a run adds from one call to
//!   the next (the template's fixed text is not in that step), what tool
//!   definitions count, what an answer without tools adds or removes (a
//!   server may render the tools only for a call that may use them), and a margin
//!   from the spread of its earlier predictions. Within a run a call is
//!   bounded from the run's earlier calls, a run's first call from the
//!   first calls of other runs; of the two measures, the one whose
//!   predictions were nearest the counts is used. Before any report, a
//!   request is taken at [`PRIOR_TOKENS_PER_PIECE`] tokens a unit, about
//!   three times what a GPT-like model counts.
//! - **The model server's own tokenizer** (`server`), for a model served
//!   by a server that counts text on request (llama-cpp-python's
//!   `/extras/tokenize/count`; see `server.rs`): each text of the request
//!   is counted exactly, as the chat template renders it (HTML-escaped
//!   where the template escapes). What the template adds is learned from
//!   reported usage as a difference per kind of call (its own text; the
//!   tools, where it leaves them out of an answer) and the share of tool
//!   results it keeps, so every call after the first of its kind is the
//!   count plus [`TOKENIZER_MARGIN`]. Before any report, a request is
//!   taken at [`PRIOR_TOKENS_PER_TOKEN`]; a count the server could not
//!   give, at the pieces' prior.
//!
//! What was learned (the latest [`CALIBRATION_WINDOW`] calls, per model
//! and counting method) is kept in the state database and loaded before
//! each investigation (`escalate.rs`), so only the first call a deployment
//! ever makes with the bound is uncalibrated; a restart or another replica
//! starts from what the others learned.
//!
//! An estimate below the count is still caught: a call whose reported
//! usage passes a cap stops the run, saying by how much (see `run/`), so a
//! wrong estimate can overshoot a cap by at most that one call; usage above
//! the estimate that fits every cap only teaches the estimator.

mod calibration;
mod pieces;
mod server;
mod tokenizer;

pub use calibration::{
    CALIBRATION_MARGIN, CALIBRATION_WINDOW, Calibration, MAX_CALIBRATION_MARGIN, Measure,
    PRIOR_TOKENS_PER_PIECE, Sample,
};
pub use pieces::{RawCount, count_request as count_pieces, pieces};
pub use server::{DEFAULT_TOKENIZE_PATH, ServerCounter, default_url as default_tokenize_url};
pub use tokenizer::{REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, Tokenizer, TokenizerChoice};

use super::model::ChatRequest;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A tool result still to come is counted at a token per this many bytes.
pub const PRIOR_BYTES_PER_TOKEN: f64 = 2.0;
/// How far above the tokenizer's count (with the learned difference) an
/// estimate is put.
pub const TOKENIZER_MARGIN: f64 = 0.02;
/// The bound's counting method, as stored with its calibration: a new
/// way of counting pieces gets a new name, so nothing learned with the
/// old one is applied to it.
pub const BOUND_METHOD: &str = "pieces-v1";
/// The method of counts by the model server's tokenize endpoint (see
/// `server.rs`), learned from as the bound's pieces are.
pub const SERVER_METHOD: &str = "server-v1";
/// The server-counted bound's prior: tokens billed per token of text
/// before any call was reported (the template's own text on top).
pub const PRIOR_TOKENS_PER_TOKEN: f64 = 1.5;

/// Calls are compared with calls of their kind only: a server may render
/// the tools for a call that may use them and leave them out of one that
/// may not (llama-cpp-python's function-calling template does).
pub type CallKind = super::model::ToolChoice;

/// Estimates the prompt tokens of requests to one model and learns from
/// what it reports. Shared by every run of the process, and kept in the
/// state database between processes (see [`PromptEstimator::samples`]).
#[derive(Debug)]
pub struct PromptEstimator {
    tokenizer: Option<Tokenizer>,
    /// Whether raw counts are the server's tokens rather than pieces.
    server: bool,
    calibration: Mutex<Calibration>,
}

impl PromptEstimator {
    /// An estimator counting with `tokenizer` (the bound when `None`).
    pub fn new(tokenizer: Option<Tokenizer>) -> PromptEstimator {
        PromptEstimator {
            tokenizer,
            server: false,
            calibration: Mutex::new(Calibration::default()),
        }
    }

    /// An estimator of counts by the model server's tokenizer (see
    /// `server.rs`): the bound, learned from tokens rather than pieces.
    pub fn server() -> PromptEstimator {
        PromptEstimator {
            server: true,
            ..PromptEstimator::new(None)
        }
    }

    fn calibration(&self) -> MutexGuard<'_, Calibration> {
        self.calibration
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The tokenizer, if any.
    pub fn tokenizer(&self) -> Option<Tokenizer> {
        self.tokenizer
    }

    /// The counting method, the key of its stored calibration with the
    /// model's name: the encoding's name, [`SERVER_METHOD`] or
    /// [`BOUND_METHOD`].
    pub fn method(&self) -> &'static str {
        match self.tokenizer {
            Some(t) => t.name(),
            None if self.server => SERVER_METHOD,
            None => BOUND_METHOD,
        }
    }

    /// The raw count of `request`: its tokens as OpenAI's guide counts
    /// them, or its pieces.
    pub fn raw(&self, request: &ChatRequest) -> RawCount {
        match self.tokenizer {
            Some(t) => RawCount {
                total: t.count_request(request),
                ..RawCount::default()
            },
            None => pieces::count_request(request),
        }
    }

    /// The estimate for a call of `kind` in `conversation` (the run)
    /// whose raw count is `raw`.
    pub fn estimate(&self, kind: CallKind, raw: RawCount, conversation: &str) -> u64 {
        if raw.fallback {
            return (raw.total as f64 * PRIOR_TOKENS_PER_PIECE).ceil() as u64;
        }
        let c = self.calibration();
        if self.server {
            c.offset_bound(kind, raw, PRIOR_TOKENS_PER_TOKEN)
        } else if self.tokenizer.is_some() {
            let counted = (raw.total as i64 + c.offset()).max(0) as f64;
            (counted * (1.0 + TOKENIZER_MARGIN)).ceil() as u64
        } else {
            c.bound(kind, raw, conversation)
        }
    }

    /// A generous count for `bytes` of text not yet seen (a tool result
    /// to come): a token per [`PRIOR_BYTES_PER_TOKEN`] bytes.
    pub fn bytes_bound(&self, bytes: usize) -> u64 {
        (bytes as f64 / PRIOR_BYTES_PER_TOKEN).ceil() as u64
    }

    /// Learns from a call of `kind` in `conversation` whose raw count was
    /// `raw` and whose prompt the model reported as `reported` tokens at
    /// `at_ms` (epoch milliseconds).
    pub fn observe(
        &self,
        kind: CallKind,
        raw: RawCount,
        reported: u64,
        conversation: &str,
        at_ms: i64,
    ) {
        if raw.total == 0 || reported == 0 || raw.fallback {
            return;
        }
        let sample = Sample {
            run: conversation.to_owned(),
            kind,
            raw: raw.total,
            results: raw.results,
            bytes: raw.bytes,
            result_bytes: raw.result_bytes,
            tools: raw.tools,
            tool_bytes: raw.tool_bytes,
            reported,
            predicted: 0,
            predicted_by_bytes: 0,
            at_ms,
        };
        self.calibration()
            .push(sample, self.tokenizer.is_none() && !self.server);
    }

    /// What was learned, oldest first: what is stored.
    pub fn samples(&self) -> Vec<Sample> {
        self.calibration().samples()
    }

    /// Whether something was learned since it was last stored.
    pub fn unsaved(&self) -> bool {
        self.calibration().dirty()
    }

    /// Notes that what was learned is stored.
    pub fn saved(&self) {
        self.calibration().mark_stored();
    }

    /// Adds what was stored (by an earlier process or another replica)
    /// that this estimator does not hold yet.
    pub fn merge(&self, stored: Vec<Sample>) {
        self.calibration().merge(stored);
    }
}

#[cfg(test)]
mod tests;
