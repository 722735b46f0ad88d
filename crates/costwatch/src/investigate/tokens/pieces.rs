//! The bound's raw count: pieces of text, a count that grows with tokens
//! more evenly than bytes do, whatever the text is made of.
//!
//! Byte-level BPE tokenizers first split text into pre-tokens, with a rule
//! like GPT-2's (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
//! ?[^\s\p{L}\p{N}]+|\s+`), and a token never spans two of them. So a
//! digest of ids and figures, or JSON punctuation, has many more tokens per
//! byte than English prose; a count of bytes turns that into error. The
//! split here is that rule, with the choices that count at least as many
//! pieces as the tokenizers we know split into:
//!
//! - each digit is a piece (SmolLM, Qwen, Llama 2, Mistral and Gemma split
//!   numbers into digits; `o200k_base` and Llama 3 into groups of three);
//! - a run of letters (with the space before it) is a piece per
//!   [`LETTERS_PER_PIECE`] bytes, as long words become several tokens;
//! - a run of punctuation is a piece per [`PUNCT_PER_PIECE`] bytes (`":"`,
//!   `},{"` are one or two tokens);
//! - a run of spaces or line breaks is one piece;
//! - a character outside ASCII is a piece per character (CJK text and
//!   emoji are one or more tokens each).
//!
//! A piece is short for a long run of letters no tokenizer has a word for
//! (`xxxx...`, base64): each text is counted as its pieces or a unit per
//! [`BYTES_PER_UNIT`] bytes, whichever is more ([`units`]). So prose counts
//! about a unit a token, and so do figures and ids.
//!
//! The calibration (`calibration.rs`) learns how many tokens a unit is
//! for the model at hand.

use crate::investigate::model::{ChatRequest, Role};

/// Bytes of a run of letters counted as one piece.
pub const LETTERS_PER_PIECE: usize = 6;
/// Bytes of a run of punctuation counted as one piece.
pub const PUNCT_PER_PIECE: usize = 2;
/// Bytes of any text counted as at least one unit.
pub const BYTES_PER_UNIT: usize = 4;
/// Units of framing per message (its role and separators).
pub const PIECES_PER_MESSAGE: u64 = 4;

/// What a run of characters is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    Space,
    Punct,
    Wide,
}

fn class(c: char) -> Class {
    if !c.is_ascii() {
        if c.is_whitespace() {
            Class::Space
        } else {
            Class::Wide
        }
    } else if c.is_ascii_alphabetic() {
        Class::Letter
    } else if c.is_ascii_digit() {
        Class::Digit
    } else if c.is_ascii_whitespace() {
        Class::Space
    } else {
        Class::Punct
    }
}

/// Pieces of `text`.
pub fn pieces(text: &str) -> u64 {
    let mut n = 0u64;
    let mut run: Option<(Class, usize)> = None;
    let close = |run: Option<(Class, usize)>| -> u64 {
        match run {
            None => 0,
            Some((Class::Letter, len)) => len.div_ceil(LETTERS_PER_PIECE) as u64,
            Some((Class::Punct, len)) => len.div_ceil(PUNCT_PER_PIECE) as u64,
            Some((Class::Space, _)) => 1,
            // Counted one by one as they come.
            Some((Class::Digit | Class::Wide, _)) => 0,
        }
    };
    for c in text.chars() {
        let k = class(c);
        match k {
            Class::Digit | Class::Wide => {
                n += close(run.take());
                n += 1;
            }
            _ => match &mut run {
                Some((open, len)) if *open == k => *len += c.len_utf8(),
                // A single space opens the word or punctuation after it,
                // as in GPT-2's ` ?\p{L}+`.
                Some((Class::Space, 1)) if k != Class::Space => run = Some((k, 1 + c.len_utf8())),
                _ => {
                    n += close(run.take());
                    run = Some((k, c.len_utf8()));
                }
            },
        }
    }
    n + close(run)
}

/// Units of `text`: its pieces, or a unit per [`BYTES_PER_UNIT`] bytes,
/// whichever is more.
pub fn units(text: &str) -> u64 {
    pieces(text).max(text.len().div_ceil(BYTES_PER_UNIT) as u64)
}

/// The raw counts of a request: the tokenizer's count in `total`, or the
/// bound's units and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawCount {
    /// Everything: the tools' JSON, each message's role, text, tool calls
    /// and framing.
    pub total: u64,
    /// The part of `total` that is tool results (the text of tool
    /// messages): some chat templates leave them out of the prompt.
    pub results: u64,
    /// The same text in bytes (the bound only).
    pub bytes: u64,
    /// The bytes of tool results (the bound only).
    pub result_bytes: u64,
    /// The part of `total` that is the tool definitions (the bound only):
    /// a server may render them otherwise, or leave them out of a call.
    pub tools: u64,
    /// The bytes of the tool definitions (the bound only).
    pub tool_bytes: u64,
    /// Counted in pieces because the server's count failed: estimated at
    /// the prior and not learned from.
    pub fallback: bool,
}

/// The bound's raw count of `request`: units of its texts, and bytes of
/// its JSON (the tools and the messages, as sent, escapes included).
pub fn count_request(request: &ChatRequest) -> RawCount {
    let json_len = |v: &dyn erased::Json| v.json_len();
    let mut raw = RawCount::default();
    let mut add = |text: &str, result: bool| {
        let u = units(text);
        raw.total += u;
        if result {
            raw.results += u;
            raw.result_bytes += json_len(&text);
        }
    };
    if !request.tools.is_empty() {
        if let Ok(tools) = serde_json::to_string(&request.tools) {
            raw.tools = units(&tools);
            add(&tools, false);
        }
        raw.tool_bytes = json_len(&request.tools);
        raw.bytes += raw.tool_bytes;
    }
    raw.bytes += json_len(&request.messages);
    for m in &request.messages {
        add(role_name(m.role), false);
        if let Some(c) = m.content.as_deref() {
            add(c, m.role == Role::Tool);
        }
        for c in &m.tool_calls {
            add(&c.id, false);
            add(&c.function.name, false);
            add(&c.function.arguments, false);
        }
        if let Some(id) = m.tool_call_id.as_deref() {
            add(id, false);
        }
    }
    raw.total += PIECES_PER_MESSAGE * request.messages.len() as u64;
    raw
}

/// The length of a value's JSON.
mod erased {
    /// A value whose JSON length can be taken.
    pub trait Json {
        /// Bytes of its compact JSON (0 if it cannot be encoded).
        fn json_len(&self) -> u64;
    }

    impl<T: serde::Serialize + ?Sized> Json for T {
        fn json_len(&self) -> u64 {
            serde_json::to_string(self).map_or(0, |s| s.len() as u64)
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_count_one_by_one_and_words_by_their_length() {
        assert_eq!(pieces(""), 0);
        assert_eq!(pieces("hello world"), 2);
        // A long word is more than one piece.
        assert_eq!(pieces("internationalization"), 4);
        assert_eq!(pieces("4092"), 4);
        assert_eq!(pieces("req_4164d8399f767c45"), 18);
        assert_eq!(pieces("{\"a\":1}"), 5);
        assert_eq!(pieces("  \n  x"), 2);
        assert_eq!(pieces("日本"), 2);
        // Pieces follow tokens more evenly than bytes: figures have many
        // more pieces per byte than prose.
        let prose = "the session retried the same request until the cap stopped it";
        let figures = "4092 4101 0.00063839 0.00064 215 198";
        let rate = |s: &str| pieces(s) as f64 / s.len() as f64;
        assert!(rate(figures) > 2.0 * rate(prose));
        // A run of letters no tokenizer has a word for counts by its bytes.
        let x = "x".repeat(4_000);
        assert_eq!(pieces(&x), 667);
        assert_eq!(units(&x), 1_000);
        assert_eq!(units(figures), pieces(figures));
    }
}
