//! Prompt-token estimates: how many tokens a request will be billed for,
//! before it is sent, so the caps can be planned (see `budget.rs`).
//!
//! Two ways to count, chosen by `investigation.tokenizer`:
//!
//! - **A real tokenizer** for model families that publish theirs: OpenAI's
//!   `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series) and `cl100k_base`
//!   (GPT-4, GPT-3.5), from the `tiktoken-rs` crate, which ships the
//!   encodings (nothing is fetched at run time). The raw count is the
//!   tokens of what the model reads: each message's role and text, each
//!   tool call's name and arguments, and the tool definitions as JSON, plus
//!   [`TOKENS_PER_MESSAGE`] per message and [`REPLY_PRIMING_TOKENS`] (the
//!   chat format's framing, as OpenAI documents it).
//! - **A calibrated bound** for every other model: the raw count is the
//!   request body's bytes.
//!
//! Either raw count is turned into an estimate by what the model reports
//! (the "calibration"): the last [`CALIBRATION_WINDOW`] calls of the
//! process are remembered as (raw, reported) pairs.
//!
//! - With a tokenizer the error is a constant: how the provider renders
//!   the tool definitions (shorter than their JSON) and frames messages. So
//!   the estimate is the raw count plus the largest difference reported -
//!   raw seen (0 before any report: the JSON of the tools is longer than
//!   the rendering), plus [`TOKENIZER_MARGIN`].
//! - With the bound, tokens grow with bytes at a rate, on top of whatever a
//!   chat template adds. Within a run, whose prompt grows by appending, a
//!   call's count is at most an earlier call's count plus the bytes added
//!   since at the rate; the estimate is the least of these bounds, plus
//!   [`CALIBRATION_MARGIN`], and the rate alone for a run's first call. The rate is the largest ratio reported /
//!   raw seen (never below the marginal rate, whatever the template adds).
//!   Before any report, a token per [`PRIOR_BYTES_PER_TOKEN`] (2) bytes.
//!   Large-vocabulary tokenizers average 3.5 to 4.5 bytes a token on JSON
//!   and English, but a small one with a chat template that adds its own
//!   text counts more: SmolLM2-135M behind llama-cpp-python's
//!   function-calling template billed 1,099 tokens for a 2,479-byte request
//!   (2.3 bytes a token), and 1,103 for a smaller one of 2,394 bytes.
//!
//! So the first estimate of a process with the bound is generous (about
//! twice the count of a GPT-like model), and once one call was reported,
//! estimates stay within a few percent above the model's count as long as
//! prompts are made of the same kinds of text.
//!
//! An estimate below the count is still caught: a call whose reported
//! usage passes a cap stops the run, saying by how much (see `run/`), so a
//! wrong estimate can overshoot a cap by at most that one call; usage above
//! the estimate that fits every cap only teaches the estimator.

use super::model::{ChatMessage, ChatRequest};
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

/// Tokens of framing per message (role and separators), as OpenAI's
/// guide to counting tokens gives them for its chat models.
pub const TOKENS_PER_MESSAGE: u64 = 3;
/// Tokens that open the reply.
pub const REPLY_PRIMING_TOKENS: u64 = 3;
/// The prior of the bound: one token per this many bytes of body.
pub const PRIOR_BYTES_PER_TOKEN: f64 = 2.0;
/// How far above the largest ratio seen an estimate of the bound is put.
pub const CALIBRATION_MARGIN: f64 = 0.03;
/// How far above the tokenizer's count (with the learned difference) an
/// estimate is put.
pub const TOKENIZER_MARGIN: f64 = 0.02;
/// How many reported calls the calibration remembers.
pub const CALIBRATION_WINDOW: usize = 32;

pub use crate::config::TokenizerChoice;

/// A tokenizer a model family publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    /// `o200k_base`.
    O200k,
    /// `cl100k_base`.
    Cl100k,
}

impl Tokenizer {
    /// The tokenizer of `model` for `choice`; `None` means the bound.
    pub fn for_model(choice: TokenizerChoice, model: &str) -> Option<Tokenizer> {
        match choice {
            TokenizerChoice::O200kBase => Some(Tokenizer::O200k),
            TokenizerChoice::Cl100kBase => Some(Tokenizer::Cl100k),
            TokenizerChoice::None => None,
            TokenizerChoice::Auto => {
                let m = model.to_ascii_lowercase();
                let m = m.rsplit('/').next().unwrap_or(&m);
                let o200k = [
                    "gpt-4o",
                    "gpt-4.1",
                    "gpt-4.5",
                    "gpt-5",
                    "chatgpt-4o",
                    "gpt-oss",
                ]
                .iter()
                .any(|p| m.starts_with(p))
                    || ["o1", "o3", "o4"]
                        .iter()
                        .any(|p| m == *p || m.starts_with(&format!("{p}-")));
                if o200k {
                    Some(Tokenizer::O200k)
                } else if m.starts_with("gpt-4") || m.starts_with("gpt-3.5") {
                    Some(Tokenizer::Cl100k)
                } else {
                    None
                }
            }
        }
    }

    /// Tokens of `text`.
    pub fn count(self, text: &str) -> u64 {
        let bpe = match self {
            Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
            Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        };
        bpe.encode_ordinary(text).len() as u64
    }

    /// The name of the encoding.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
        }
    }
}

/// Calls are compared with calls of their kind only: a server may render
/// the tools for a call that may use them and leave them out of one that
/// may not (llama-cpp-python's function-calling template does).
pub type CallKind = super::model::ToolChoice;

/// One call the estimator learned from.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    /// The conversation (run) it belonged to.
    conversation: String,
    kind: CallKind,
    raw: u64,
    reported: u64,
}

/// Estimates the prompt tokens of requests to one model and learns from
/// what it reports. Shared by every run of the process.
#[derive(Debug)]
pub struct PromptEstimator {
    tokenizer: Option<Tokenizer>,
    /// The latest calls.
    seen: Mutex<VecDeque<Seen>>,
}

impl PromptEstimator {
    /// An estimator counting with `tokenizer` (the bound when `None`).
    pub fn new(tokenizer: Option<Tokenizer>) -> PromptEstimator {
        PromptEstimator {
            tokenizer,
            seen: Mutex::new(VecDeque::new()),
        }
    }

    /// The tokenizer, if any.
    pub fn tokenizer(&self) -> Option<Tokenizer> {
        self.tokenizer
    }

    /// The raw count of `request`, whose body is `body_bytes` long: its
    /// tokens by the tokenizer, or its bytes.
    pub fn raw(&self, request: &ChatRequest, body_bytes: usize) -> u64 {
        let Some(t) = self.tokenizer else {
            return body_bytes as u64;
        };
        let tools = if request.tools.is_empty() {
            0
        } else {
            serde_json::to_string(&request.tools).map_or(body_bytes as u64, |s| t.count(&s))
        };
        tools
            + REPLY_PRIMING_TOKENS
            + request
                .messages
                .iter()
                .map(|m| message_tokens(t, m))
                .sum::<u64>()
    }

    /// The rate of the bound: the largest ratio seen, or the prior.
    fn rate(&self) -> f64 {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter()
            .map(|c| c.reported as f64 / c.raw as f64)
            .reduce(f64::max)
            .map_or(1.0 / PRIOR_BYTES_PER_TOKEN, |q| {
                q * (1.0 + CALIBRATION_MARGIN)
            })
    }

    /// The bound's estimate: the least of the bounds the earlier calls of
    /// the same conversation give (their count, plus the bytes added since
    /// at the rate), plus the margin; the rate alone before any. Calls of
    /// the same kind bound it when there are any, else calls of the other
    /// kind (a call that may not use tools never renders more than one that
    /// may). Only a conversation's own calls bound it: its prompt grows by
    /// appending, while another conversation's text may tokenize more
    /// densely.
    fn bound(&self, kind: CallKind, raw: u64, conversation: &str) -> u64 {
        let rate = self.rate();
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let least = |same_kind: bool| {
            seen.iter()
                .filter(|c| c.conversation == conversation && (!same_kind || c.kind == kind))
                .map(|c| c.reported as f64 + rate * raw.saturating_sub(c.raw) as f64)
                .reduce(f64::min)
        };
        match least(true).or_else(|| least(false)) {
            Some(b) => (b * (1.0 + CALIBRATION_MARGIN)).ceil() as u64,
            None => (raw as f64 * rate).ceil() as u64,
        }
    }

    /// The tokenizer's learned difference (reported - raw), 0 before any.
    /// Calls of every kind count: a server that leaves the tools out of a
    /// call counts it lower, never higher.
    fn offset(&self) -> i64 {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter()
            .map(|c| c.reported as i64 - c.raw as i64)
            .max()
            .unwrap_or(0)
    }

    /// The estimate for a call of `kind` in `conversation` (the run)
    /// whose raw count is `raw`.
    pub fn estimate(&self, kind: CallKind, raw: u64, conversation: &str) -> u64 {
        if self.tokenizer.is_some() {
            let counted = (raw as i64 + self.offset()).max(0) as f64;
            (counted * (1.0 + TOKENIZER_MARGIN)).ceil() as u64
        } else {
            self.bound(kind, raw, conversation)
        }
    }

    /// A generous count for `bytes` of text not yet seen (a tool result
    /// to come): a token per [`PRIOR_BYTES_PER_TOKEN`] bytes, or the
    /// learned rate if that is higher.
    pub fn bytes_bound(&self, bytes: usize) -> u64 {
        let per_byte = if self.tokenizer.is_some() {
            1.0 / PRIOR_BYTES_PER_TOKEN
        } else {
            self.rate().max(1.0 / PRIOR_BYTES_PER_TOKEN)
        };
        (bytes as f64 * per_byte).ceil() as u64
    }

    /// Learns from a call of `kind` in `conversation` whose raw count was
    /// `raw` and whose prompt the model reported as `reported` tokens.
    pub fn observe(&self, kind: CallKind, raw: u64, reported: u64, conversation: &str) {
        if raw == 0 || reported == 0 {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() == CALIBRATION_WINDOW {
            seen.pop_front();
        }
        seen.push_back(Seen {
            conversation: conversation.to_owned(),
            kind,
            raw,
            reported,
        });
    }
}

/// Tokens of one message: framing, role, text, and tool calls.
fn message_tokens(t: Tokenizer, m: &ChatMessage) -> u64 {
    let role = serde_json::to_value(m.role)
        .ok()
        .and_then(|v| v.as_str().map(|s| t.count(s)))
        .unwrap_or(1);
    let content = m.content.as_deref().map_or(0, |c| t.count(c));
    let calls: u64 = m
        .tool_calls
        .iter()
        .map(|c| {
            t.count(&c.id)
                + t.count(&c.function.name)
                + t.count(&c.function.arguments)
                + TOKENS_PER_MESSAGE
        })
        .sum();
    let id = m.tool_call_id.as_deref().map_or(0, |i| t.count(i));
    TOKENS_PER_MESSAGE + role + content + calls + id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::investigate::model::{ChatMessage, ToolChoice};

    const A: CallKind = ToolChoice::Auto;
    const N: CallKind = ToolChoice::None;

    fn request(text: &str) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            tools: Vec::new(),
            messages: vec![ChatMessage::system("You answer."), ChatMessage::user(text)],
            tool_choice: None,
            max_tokens: 10,
            temperature: None,
        }
    }

    #[test]
    fn openai_families_get_their_tokenizer_and_others_the_bound() {
        use TokenizerChoice::*;
        assert_eq!(
            Tokenizer::for_model(Auto, "gpt-4o-mini"),
            Some(Tokenizer::O200k)
        );
        assert_eq!(
            Tokenizer::for_model(Auto, "openai/gpt-5"),
            Some(Tokenizer::O200k)
        );
        assert_eq!(
            Tokenizer::for_model(Auto, "o3-mini"),
            Some(Tokenizer::O200k)
        );
        assert_eq!(
            Tokenizer::for_model(Auto, "gpt-4-turbo"),
            Some(Tokenizer::Cl100k)
        );
        assert_eq!(Tokenizer::for_model(Auto, "claude-sonnet-4"), Option::None);
        assert_eq!(Tokenizer::for_model(Auto, "gpt-6-luna"), Option::None);
        assert_eq!(Tokenizer::for_model(Auto, "omni-7b"), Option::None);
        assert_eq!(Tokenizer::for_model(O200kBase, "x"), Some(Tokenizer::O200k));
        assert_eq!(Tokenizer::for_model(None, "gpt-4o"), Option::None);
    }

    #[test]
    fn the_tokenizer_counts_what_the_model_reads() {
        let t = Tokenizer::O200k;
        assert_eq!(t.count("hello world"), 2);
        let e = PromptEstimator::new(Some(t));
        let raw = e.raw(&request("hello world"), 0);
        // Two messages of framing and roles, the texts, the reply priming.
        let expected = 2 * TOKENS_PER_MESSAGE
            + t.count("system")
            + t.count("user")
            + t.count("You answer.")
            + 2
            + REPLY_PRIMING_TOKENS;
        assert_eq!(raw, expected);
        let margin = |n: u64| (n as f64 * (1.0 + TOKENIZER_MARGIN)).ceil() as u64;
        assert_eq!(
            e.estimate(A, raw, "r"),
            margin(raw),
            "no difference learned yet"
        );
        // The provider counted 40 fewer (its tool rendering is shorter):
        // the difference is learned, whatever the prompt's size.
        e.observe(A, 1_000, 960, "r");
        assert_eq!(e.estimate(A, 2_000, "r"), margin(1_960));
    }

    #[test]
    fn the_bound_starts_at_a_token_per_two_bytes_and_learns() {
        let e = PromptEstimator::new(None);
        assert_eq!(e.estimate(A, 3_000, "r"), 1_500);
        e.observe(A, 3_000, 750, "r");
        e.observe(A, 4_000, 980, "r");
        // The run goes on: the latest call's count plus the bytes added at
        // the largest ratio seen (0.25, with the margin).
        let rate = 0.25 * 1.03;
        let up = ((980.0 + rate * 1_000.0) * 1.03_f64).ceil() as u64;
        assert_eq!(e.estimate(A, 5_000, "r"), up);
        assert!((1_230..=1_300).contains(&up), "{up}");
        // Another run starts from the rate alone.
        assert_eq!(
            e.estimate(A, 4_000, "other"),
            (4_000.0 * rate).ceil() as u64
        );
        // A template that adds a constant: a smaller request than one seen
        // still gets at least that request's count.
        let t = PromptEstimator::new(None);
        t.observe(A, 2_479, 1_099, "r");
        assert!(t.estimate(A, 2_977, "r") >= 1_179);
        // A call that leaves the tools out is counted apart: its smaller
        // count bounds nothing for calls that carry them.
        t.observe(N, 3_406, 897, "r");
        assert!(t.estimate(A, 3_500, "r") >= 1_099);
        assert!(t.estimate(N, 3_500, "r") >= 897);
        // A tool result to come is never counted below a token per 2 bytes.
        assert_eq!(e.bytes_bound(300), 150);
    }
}
