//! A direct reader of the two listings costwatch reads by the million:
//! session pages and request pages, in the plain shape the reference
//! gateway sends them.
//!
//! serde's derived readers go through a visitor for every key and value;
//! they were about a third of the CPU of reading a million-session window
//! (BENCHMARKS.md, "Reading the figures"). This reads the same rows in one
//! pass over the text: known fields in any order, unknown fields of any
//! JSON value skipped and checked against JSON's grammar, numbers read
//! exactly as serde_json reads them.
//!
//! It reads the plain shape only. A string with an escape, a duplicate or
//! missing field, a value of another type, nesting deeper than
//! [`MAX_SKIP_DEPTH`], anything malformed: the reader returns `None` and the
//! page goes to serde, which gives the same rows or names the failing field.
//! So this reader never decides a page's fate. For every text it either
//! gives exactly the page serde gives or steps aside (checked against serde
//! on generated and corrupted pages in `scan/tests.rs`).

use super::{ModelNames, ModelUsage, Page, WireModelUsage, WireRequest, WireSession, add_usage};
use crate::domain::Labels;
use crate::source::RequestStatus;
use chrono::{DateTime, FixedOffset, Utc};

/// Deepest nesting of an unknown field's value the reader skips; a deeper
/// one is left to serde (whose own limit is 128).
pub(in crate::source) const MAX_SKIP_DEPTH: usize = 32;

/// A row the reader can read.
pub(in crate::source) trait Scan: Sized {
    /// Reads one row at the scanner's position; `None` when the row is not
    /// in the plain shape.
    fn scan(s: &mut Scanner<'_>) -> Option<Self>;
}

/// Reads a whole page, or `None` when any of it is not in the plain shape.
pub(in crate::source) fn page<T: Scan>(text: &str) -> Option<Page<T>> {
    let mut s = Scanner { text, at: 0 };
    let mut data: Option<Vec<T>> = None;
    let mut cursor: Option<Option<String>> = None;
    s.object(|s, key| match key {
        "data" => {
            let mut rows = Vec::with_capacity(50);
            s.array(|s| {
                rows.push(T::scan(s)?);
                Some(())
            })?;
            first(&mut data, rows)
        }
        "next_cursor" => {
            let c = s.opt_str()?.map(str::to_owned);
            first(&mut cursor, c)
        }
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    s.ws();
    if s.at != text.len() {
        return None;
    }
    Some(Page {
        data: data?,
        next_cursor: cursor.flatten(),
    })
}

/// Sets a field seen for the first time; a second sight is serde's
/// "duplicate field" error, so `None`.
fn first<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// A position in a page's text.
pub(in crate::source) struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes().get(self.at).copied()
    }

    /// Consumes `c` if it comes next.
    fn eat_if(&mut self, c: u8) -> bool {
        let next = self.peek() == Some(c);
        if next {
            self.at += 1;
        }
        next
    }

    /// Consumes `c`, or `None` when something else comes next.
    fn eat(&mut self, c: u8) -> Option<()> {
        self.eat_if(c).then_some(())
    }

    /// Consumes `word` (`null`, `true`, `false`).
    fn literal(&mut self, word: &str) -> Option<()> {
        self.ws();
        self.text.get(self.at..)?.starts_with(word).then(|| {
            self.at += word.len();
        })
    }

    /// A string without escapes or control characters, as it stands in the
    /// text.
    fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let b = self.bytes();
        // Eight bytes at a time to the first quote, backslash or control
        // character; byte by byte only in the text's last seven.
        loop {
            match b.get(self.at..self.at + 8) {
                Some(word) => {
                    let mut eight = [0; 8];
                    eight.copy_from_slice(word);
                    let stops = stops(u64::from_le_bytes(eight));
                    if stops == 0 {
                        self.at += 8;
                        continue;
                    }
                    self.at += (stops.trailing_zeros() / 8) as usize;
                }
                None => {
                    while !matches!(b.get(self.at)?, b'"' | b'\\' | 0..0x20) {
                        self.at += 1;
                    }
                }
            }
            break;
        }
        if *b.get(self.at)? != b'"' {
            return None;
        }
        // Both ends are ASCII quotes, so both are character boundaries.
        let s = self.text.get(start..self.at)?;
        self.at += 1;
        Some(s)
    }

    /// A string, or `null` as `None`.
    fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.peek()? == b'n' {
            self.literal("null")?;
            return Some(None);
        }
        self.str().map(Some)
    }

    /// The text of a number, held to JSON's grammar: `-`? (`0` | [1-9][0-9]*)
    /// (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?.
    fn number(&mut self) -> Option<&'a str> {
        self.ws();
        let b = self.bytes();
        let start = self.at;
        let mut i = start;
        let digits = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => i = digits(i + 1),
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            let end = digits(i + 1);
            if end == i + 1 {
                return None;
            }
            i = end;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return None;
            }
            i = end;
        }
        self.at = i;
        self.text.get(start..i)
    }

    /// A non-negative integer that fits a `u64`; serde refuses anything
    /// else for a count.
    fn u64(&mut self) -> Option<u64> {
        self.number()?.bytes().try_fold(0u64, |n, c| {
            if !c.is_ascii_digit() {
                return None;
            }
            n.checked_mul(10)?.checked_add(u64::from(c - b'0'))
        })
    }

    /// A number as serde_json reads it into an `f64`.
    fn f64(&mut self) -> Option<f64> {
        let t = self.number()?;
        exact_decimal(t).or_else(|| serde_json::from_str::<f64>(t).ok())
    }

    /// A timestamp as [`super::time`] reads it.
    fn time(&mut self) -> Option<DateTime<Utc>> {
        let t = self.str()?;
        super::fast_utc(t).or_else(|| {
            t.parse::<DateTime<FixedOffset>>()
                .ok()
                .map(|v| v.with_timezone(&Utc))
        })
    }

    /// A timestamp, or `null` as `None`.
    fn opt_time(&mut self) -> Option<Option<DateTime<Utc>>> {
        if self.peek()? == b'n' {
            self.literal("null")?;
            return Some(None);
        }
        self.time().map(Some)
    }

    /// Walks an object, handing each key to `member`, which reads its value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat_if(b'}') {
            return Some(());
        }
        loop {
            let key = self.str()?;
            self.eat(b':')?;
            member(self, key)?;
            if !self.eat_if(b',') {
                return self.eat(b'}');
            }
        }
    }

    /// Walks an array, with `element` reading each element.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat_if(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            if !self.eat_if(b',') {
                return self.eat(b']');
            }
        }
    }

    /// Skips any JSON value, checking its grammar, at most `depth` levels
    /// deep.
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.str().map(drop),
            b'{' if depth > 0 => self.object(|s, _| s.skip(depth - 1)),
            b'[' if depth > 0 => self.array(|s| s.skip(depth - 1)),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => None,
        }
    }
}

/// The quotes, backslashes and control characters (below 0x20) among
/// eight bytes, as the high bit of their byte (little-endian): the classic
/// test for a zero byte, `(v - 0x01..) & !v & 0x80..`, applied to the word
/// XOR each byte sought, and to the word itself against 0x20. A borrow can
/// flag a byte above a true one, never one below, so the lowest flag is
/// always a true stop.
fn stops(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    quote | backslash | control
}

/// Exact powers of ten: every one up to 1e22 is a double.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A number of the form `digits` or `digits.digits`, read without a
/// parser where serde_json's value is certain: an integer is converted as
/// serde's `u64` visitor converts it, and a decimal with a significand of at
/// most 2^53 and at most 22 fractional digits is one exact double divided by
/// another, a single correctly rounded operation. serde_json computes that
/// same division, and with its `float_roundtrip` feature rounds exactly, so
/// the two agree either way. `None` for any other number, which
/// [`Scanner::f64`] hands to serde_json itself.
fn exact_decimal(t: &str) -> Option<f64> {
    let mut significand: u64 = 0;
    let mut fraction: Option<usize> = None;
    for c in t.bytes() {
        match c {
            b'0'..=b'9' => {
                significand = significand
                    .checked_mul(10)?
                    .checked_add(u64::from(c - b'0'))?;
                if let Some(n) = fraction.as_mut() {
                    *n += 1;
                }
            }
            b'.' => fraction = Some(0),
            _ => return None,
        }
    }
    match fraction {
        None => Some(significand as f64),
        Some(k) if significand <= 1 << 53 => Some(significand as f64 / *POW10.get(k)?),
        Some(_) => None,
    }
}

impl Scan for WireSession {
    fn scan(s: &mut Scanner<'_>) -> Option<Self> {
        let mut session_id = None;
        let mut first_request_at = None;
        let mut last_request_at = None;
        let mut requests = None;
        let mut errors = None;
        let mut input_tokens = None;
        let mut cached_tokens = None;
        let mut cache_write_tokens = None;
        let mut output_tokens = None;
        let mut cost_usd = None;
        let mut models = None;
        let mut by_model = None;
        let mut labels = None;
        s.object(|s, key| match key {
            "session_id" => first(&mut session_id, s.str()?.to_owned()),
            "first_request_at" => first(&mut first_request_at, s.opt_time()?),
            "last_request_at" => first(&mut last_request_at, s.opt_time()?),
            "requests" => first(&mut requests, s.u64()?),
            "errors" => first(&mut errors, s.u64()?),
            "input_tokens" => first(&mut input_tokens, s.u64()?),
            "cached_tokens" => first(&mut cached_tokens, s.u64()?),
            "cache_write_tokens" => first(&mut cache_write_tokens, s.u64()?),
            "output_tokens" => first(&mut output_tokens, s.u64()?),
            "cost_usd" => first(&mut cost_usd, s.f64()?),
            "models" => first(&mut models, model_names(s)?),
            "by_model" => first(&mut by_model, by_model_list(s)?),
            "labels" => first(&mut labels, label_map(s)?),
            _ => s.skip(MAX_SKIP_DEPTH),
        })?;
        Some(WireSession {
            session_id: session_id?,
            first_request_at: first_request_at.flatten(),
            last_request_at: last_request_at.flatten(),
            requests: requests?,
            errors: errors.unwrap_or_default(),
            input_tokens: input_tokens?,
            cached_tokens: cached_tokens.unwrap_or_default(),
            cache_write_tokens: cache_write_tokens.unwrap_or_default(),
            output_tokens: output_tokens.unwrap_or_default(),
            cost_usd: cost_usd?,
            models: models.unwrap_or_default(),
            by_model: by_model.unwrap_or_default(),
            labels: labels.unwrap_or_default(),
        })
    }
}

/// `models` as [`ModelNames`]' reader keeps it: how many, and the first.
fn model_names(s: &mut Scanner<'_>) -> Option<ModelNames> {
    let mut names = ModelNames::default();
    s.array(|s| {
        let name = s.str()?;
        if names.count == 0 {
            names.first = Some(name.to_owned());
        }
        names.count += 1;
        Some(())
    })?;
    Some(names)
}

/// `by_model` as [`super::by_model_list`] reads it: a repeated model keeps
/// its last entry ([`add_usage`]), sorted by model name.
fn by_model_list(s: &mut Scanner<'_>) -> Option<Vec<ModelUsage>> {
    let mut out: Vec<ModelUsage> = Vec::with_capacity(1);
    s.object(|s, model| {
        let usage = WireModelUsage::scan(s)?.of(model.to_owned());
        add_usage(&mut out, usage).then_some(())
    })?;
    out.sort_by(|a, b| a.model.cmp(&b.model));
    Some(out)
}

/// `labels`: string values, a repeated key keeping its last value.
fn label_map(s: &mut Scanner<'_>) -> Option<Labels> {
    let mut labels = Labels::new();
    s.object(|s, key| {
        let value = s.str()?;
        labels.insert(key.to_owned(), value.to_owned());
        Some(())
    })?;
    Some(labels)
}

impl Scan for WireModelUsage {
    fn scan(s: &mut Scanner<'_>) -> Option<Self> {
        let mut requests = None;
        let mut input_tokens = None;
        let mut cached_tokens = None;
        let mut output_tokens = None;
        let mut cost_usd = None;
        s.object(|s, key| match key {
            "requests" => first(&mut requests, s.u64()?),
            "input_tokens" => first(&mut input_tokens, s.u64()?),
            "cached_tokens" => first(&mut cached_tokens, s.u64()?),
            "output_tokens" => first(&mut output_tokens, s.u64()?),
            "cost_usd" => first(&mut cost_usd, s.f64()?),
            _ => s.skip(MAX_SKIP_DEPTH),
        })?;
        Some(WireModelUsage {
            requests: requests.unwrap_or_default(),
            input_tokens: input_tokens.unwrap_or_default(),
            cached_tokens: cached_tokens.unwrap_or_default(),
            output_tokens: output_tokens.unwrap_or_default(),
            cost_usd: cost_usd.unwrap_or_default(),
        })
    }
}

impl Scan for WireRequest {
    fn scan(s: &mut Scanner<'_>) -> Option<Self> {
        let mut request_id = None;
        let mut session_id = None;
        let mut created_at = None;
        let mut model = None;
        let mut status = None;
        let mut http_status = None;
        let mut error_type = None;
        let mut input_tokens = None;
        let mut cached_tokens = None;
        let mut cache_write_tokens = None;
        let mut output_tokens = None;
        let mut cost_usd = None;
        s.object(|s, key| match key {
            "request_id" => first(&mut request_id, s.str()?.to_owned()),
            "session_id" => first(&mut session_id, s.str()?.to_owned()),
            "created_at" => first(&mut created_at, s.time()?),
            "model" => first(&mut model, s.str()?.to_owned()),
            "status" => {
                let v = match s.str()? {
                    "success" => RequestStatus::Success,
                    "error" => RequestStatus::Error,
                    _ => return None,
                };
                first(&mut status, v)
            }
            "http_status" => {
                let v = if s.peek()? == b'n' {
                    s.literal("null")?;
                    None
                } else {
                    Some(u16::try_from(s.u64()?).ok()?)
                };
                first(&mut http_status, v)
            }
            "error_type" => first(&mut error_type, s.opt_str()?.map(str::to_owned)),
            "input_tokens" => first(&mut input_tokens, s.u64()?),
            "cached_tokens" => first(&mut cached_tokens, s.u64()?),
            "cache_write_tokens" => first(&mut cache_write_tokens, s.u64()?),
            "output_tokens" => first(&mut output_tokens, s.u64()?),
            "cost_usd" => first(&mut cost_usd, s.f64()?),
            _ => s.skip(MAX_SKIP_DEPTH),
        })?;
        Some(WireRequest {
            request_id: request_id?,
            session_id: session_id?,
            created_at: created_at?,
            model: model?,
            status: status?,
            http_status: http_status.flatten(),
            error_type: error_type.flatten(),
            input_tokens: input_tokens?,
            cached_tokens: cached_tokens.unwrap_or_default(),
            cache_write_tokens: cache_write_tokens.unwrap_or_default(),
            output_tokens: output_tokens.unwrap_or_default(),
            cost_usd: cost_usd?,
        })
    }
}

#[cfg(test)]
mod tests;
