//! OpenAI's published tokenizers and the way OpenAI's guide counts a chat
//! request with them.
//!
//! The counting follows the openai-cookbook notebook "How to count tokens
//! with tiktoken" (`examples/How_to_count_tokens_with_tiktoken.ipynb`):
//! `num_tokens_from_messages` for the messages (3 tokens per message, its
//! role and text, 3 priming the reply) and `num_tokens_for_tools` for the
//! function definitions, which the provider renders as text of its own
//! rather than as their JSON: per function [`Rendering::func_init`] tokens,
//! its `name:description` (a final period dropped), then, if it has
//! properties, [`PROP_INIT`] and per property [`PROP_KEY`] and its
//! `name:type:description`, with [`ENUM_INIT`] and [`ENUM_ITEM`] plus the
//! item per enum value; [`FUNC_END`] once after the last function. The
//! guide gives these constants for gpt-4o and gpt-4o-mini (`func_init` 7)
//! and for gpt-4 and gpt-3.5-turbo (`func_init` 10); `o200k_base` takes the
//! first, `cl100k_base` the second.

use crate::investigate::model::{ChatMessage, ChatRequest, FunctionTool};
use serde_json::Value;

/// Which tokenizer counts prompts (`investigation.tokenizer`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerChoice {
    /// By the model's name: OpenAI families get theirs, others the bound.
    Auto,
    /// OpenAI's `o200k_base`.
    O200kBase,
    /// OpenAI's `cl100k_base`.
    Cl100kBase,
    /// No tokenizer: the bound learned from reported usage.
    None,
    /// The model server's tokenizer, asked through its tokenize endpoint
    /// (`investigation.tokenize_url`), with the bound's learning of what
    /// the chat template adds.
    Server,
}

/// Tokens of framing per message (role and separators).
pub const TOKENS_PER_MESSAGE: u64 = 3;
/// Tokens that open the reply.
pub const REPLY_PRIMING_TOKENS: u64 = 3;
/// Tokens that open the properties of a function.
pub const PROP_INIT: u64 = 3;
/// Tokens per property.
pub const PROP_KEY: u64 = 3;
/// Tokens added when a property has an enum (the guide's -3).
pub const ENUM_INIT: i64 = -3;
/// Tokens per enum value, besides the value.
pub const ENUM_ITEM: u64 = 3;
/// Tokens that close the function definitions, once.
pub const FUNC_END: u64 = 12;

/// A tokenizer a model family publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    /// `o200k_base`.
    O200k,
    /// `cl100k_base`.
    Cl100k,
}

/// The constants of the guide's function rendering for a tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rendering {
    /// Tokens that open each function.
    pub func_init: u64,
}

impl Tokenizer {
    /// The tokenizer of `model` for `choice`; `None` means the bound.
    pub fn for_model(choice: TokenizerChoice, model: &str) -> Option<Tokenizer> {
        match choice {
            TokenizerChoice::O200kBase => Some(Tokenizer::O200k),
            TokenizerChoice::Cl100kBase => Some(Tokenizer::Cl100k),
            TokenizerChoice::None | TokenizerChoice::Server => None,
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

    /// The guide's constants for this tokenizer's models.
    pub fn rendering(self) -> Rendering {
        match self {
            Tokenizer::O200k => Rendering { func_init: 7 },
            Tokenizer::Cl100k => Rendering { func_init: 10 },
        }
    }

    /// The prompt tokens of `request` as the guide counts them: the
    /// messages, the reply priming and the function definitions.
    pub fn count_request(self, request: &ChatRequest) -> u64 {
        REPLY_PRIMING_TOKENS
            + request
                .messages
                .iter()
                .map(|m| self.message_tokens(m))
                .sum::<u64>()
            + self.tools_tokens(&request.tools)
    }

    /// Tokens of one message: framing, role, text, and tool calls (their
    /// id, name and arguments, and framing like a message's).
    pub fn message_tokens(self, m: &ChatMessage) -> u64 {
        let role = serde_json::to_value(m.role)
            .ok()
            .and_then(|v| v.as_str().map(|s| self.count(s)))
            .unwrap_or(1);
        let content = m.content.as_deref().map_or(0, |c| self.count(c));
        let calls: u64 = m
            .tool_calls
            .iter()
            .map(|c| {
                self.count(&c.id)
                    + self.count(&c.function.name)
                    + self.count(&c.function.arguments)
                    + TOKENS_PER_MESSAGE
            })
            .sum();
        let id = m.tool_call_id.as_deref().map_or(0, |i| self.count(i));
        TOKENS_PER_MESSAGE + role + content + calls + id
    }

    /// Tokens of the function definitions, as `num_tokens_for_tools`
    /// counts them (0 without tools). A property without a `type` (a
    /// union written with `anyOf`, say) is counted with its schema's JSON
    /// as the type, which is longer than any rendering of it.
    pub fn tools_tokens(self, tools: &[FunctionTool]) -> u64 {
        if tools.is_empty() {
            return 0;
        }
        let r = self.rendering();
        let mut n: i64 = 0;
        for t in tools {
            let f = &t.function;
            n += r.func_init as i64;
            let desc = f.description.strip_suffix('.').unwrap_or(&f.description);
            n += self.count(&format!("{}:{desc}", f.name)) as i64;
            let props = f.parameters.get("properties").and_then(Value::as_object);
            let Some(props) = props.filter(|p| !p.is_empty()) else {
                continue;
            };
            n += PROP_INIT as i64;
            for (key, p) in props {
                n += PROP_KEY as i64;
                let ty = match p.get("type") {
                    Some(Value::String(s)) => s.clone(),
                    _ => p.to_string(),
                };
                if let Some(items) = p.get("enum").and_then(Value::as_array) {
                    n += ENUM_INIT;
                    for item in items {
                        let text = item
                            .as_str()
                            .map_or_else(|| item.to_string(), str::to_owned);
                        n += (ENUM_ITEM + self.count(&text)) as i64;
                    }
                }
                let pd = p.get("description").and_then(Value::as_str).unwrap_or("");
                let pd = pd.strip_suffix('.').unwrap_or(pd);
                n += self.count(&format!("{key}:{ty}:{pd}")) as i64;
            }
        }
        n += FUNC_END as i64;
        n.max(0) as u64
    }
}
