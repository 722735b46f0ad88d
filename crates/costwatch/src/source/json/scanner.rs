//! A direct reader of JSON text in one pass: the pages costwatch reads by
//! the million (the reference gateway's sessions and requests, LiteLLM's
//! spend logs, Langfuse's observations) read without serde's visitors.
//!
//! serde's derived readers go through a visitor for every key and value;
//! they were about a third of the CPU of reading a million-session window
//! (BENCHMARKS.md, "Reading the figures"), and about half of reading
//! LiteLLM's spend logs. A reader built on this walks the same text once:
//! known fields in any order, unknown fields of any JSON value skipped and
//! checked against JSON's grammar, numbers read exactly as serde_json reads
//! them, strings borrowed from the page unless they hold an escape.
//!
//! Every method returns `None` where the text leaves the plain shape it
//! reads (a value of another type, a surrogate escape, nesting deeper than
//! [`MAX_SKIP_DEPTH`], anything malformed). A reader built on it gives up on
//! the whole page then, and the page goes to serde, which gives the same
//! rows or names the failing field. So a reader of this kind never decides
//! a page's fate: for every text it either gives exactly the page serde
//! gives or steps aside, which its tests check against serde on generated
//! and corrupted pages (`wire/scan/tests.rs`, `litellm/scan/tests.rs`,
//! `langfuse/scan/tests.rs`).

use super::{Entries, Field, Kind, Scalar, Skipped, Text};
use chrono::{DateTime, FixedOffset, Utc};
use serde_json::Number;
use std::borrow::Cow;

/// Deepest nesting of an unknown field's value the reader skips; a deeper
/// one is left to serde (whose own limit is 128).
pub(in crate::source) const MAX_SKIP_DEPTH: usize = 32;

/// Sets a field seen for the first time; a second sight is serde's
/// "duplicate field" error, so `None`.
pub(in crate::source) fn first<T>(slot: &mut Option<T>, value: T) -> Option<()> {
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
    /// A scanner at the start of `text`.
    pub(in crate::source) fn new(text: &'a str) -> Self {
        Scanner { text, at: 0 }
    }

    /// Whether nothing but whitespace is left.
    pub(in crate::source) fn at_end(&mut self) -> bool {
        self.ws();
        self.at == self.text.len()
    }

    /// The text's bytes.
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
    pub(in crate::source) fn peek(&mut self) -> Option<u8> {
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
    pub(in crate::source) fn literal(&mut self, word: &str) -> Option<()> {
        self.ws();
        self.text.get(self.at..)?.starts_with(word).then(|| {
            self.at += word.len();
        })
    }

    /// Moves to the next quote, backslash or control character of a
    /// string's text and returns it (not consumed).
    fn next_stop(&mut self) -> Option<u8> {
        let b = self.bytes();
        // Eight bytes at a time to the first stop; byte by byte only in the
        // text's last seven.
        while let Some(word) = b.get(self.at..self.at + 8) {
            let mut eight = [0; 8];
            eight.copy_from_slice(word);
            let stops = stops(u64::from_le_bytes(eight));
            if stops != 0 {
                self.at += (stops.trailing_zeros() / 8) as usize;
                return Some(b[self.at]);
            }
            self.at += 8;
        }
        loop {
            let c = *b.get(self.at)?;
            if matches!(c, b'"' | b'\\' | 0..0x20) {
                return Some(c);
            }
            self.at += 1;
        }
    }

    /// A string without escapes or control characters, as it stands in the
    /// text.
    pub(in crate::source) fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        if self.next_stop()? != b'"' {
            return None;
        }
        // Both ends are ASCII quotes, so both are character boundaries.
        let s = self.text.get(start..self.at)?;
        self.at += 1;
        Some(s)
    }

    /// A string as serde_json reads it: borrowed from the text when it
    /// holds no escape, else decoded. `None` for what serde refuses (a
    /// control character, an unknown escape) and for a `\u` escape of a
    /// surrogate, which is left to serde.
    pub(in crate::source) fn text(&mut self) -> Option<Text<'a>> {
        self.eat(b'"')?;
        let start = self.at;
        let mut stop = self.next_stop()?;
        if stop == b'"' {
            let s = self.text.get(start..self.at)?;
            self.at += 1;
            return Some(Text(Cow::Borrowed(s)));
        }
        let mut out = String::with_capacity(self.at - start + 16);
        let mut from = start;
        loop {
            // Every stop is ASCII, so `from..at` is whole characters.
            out.push_str(self.text.get(from..self.at)?);
            match stop {
                b'"' => {
                    self.at += 1;
                    return Some(Text(Cow::Owned(out)));
                }
                b'\\' => out.push(self.escape()?),
                _ => return None,
            }
            from = self.at;
            stop = self.next_stop()?;
        }
    }

    /// The character of the escape at the scanner's backslash.
    fn escape(&mut self) -> Option<char> {
        let b = self.bytes();
        let c = *b.get(self.at + 1)?;
        self.at += 2;
        Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = b.get(self.at..self.at + 4)?;
                let code = hex
                    .iter()
                    .try_fold(0u32, |n, &h| Some(n * 16 + char::from(h).to_digit(16)?))?;
                self.at += 4;
                // A surrogate (half of a pair, or alone) is left to serde.
                char::from_u32(code)?
            }
            _ => return None,
        })
    }

    /// A string's text checked as [`Self::text`] checks it, not kept.
    fn skip_text(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.next_stop()? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => self.escape().map(drop)?,
                _ => return None,
            }
        }
    }

    /// `null` as `None`, any other value read by `read`.
    pub(in crate::source) fn nullable<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if self.peek()? == b'n' {
            self.literal("null")?;
            return Some(None);
        }
        read(self).map(Some)
    }

    /// A string, or `null` as `None`.
    pub(in crate::source) fn opt_text(&mut self) -> Option<Option<Text<'a>>> {
        self.nullable(Self::text)
    }

    /// A string, or `null` as `None`.
    pub(in crate::source) fn opt_str(&mut self) -> Option<Option<&'a str>> {
        self.nullable(Self::str)
    }

    /// The text of a number, held to JSON's grammar: `-`? (`0` | [1-9][0-9]*)
    /// (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?.
    pub(in crate::source) fn number(&mut self) -> Option<&'a str> {
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
    pub(in crate::source) fn u64(&mut self) -> Option<u64> {
        plain_u64(self.number()?)
    }

    /// A number as serde_json reads it into an `f64`.
    pub(in crate::source) fn f64(&mut self) -> Option<f64> {
        let t = self.number()?;
        exact_decimal(t).or_else(|| serde_json::from_str::<f64>(t).ok())
    }

    /// A number as serde_json reads it into a [`Number`]: an integer that
    /// fits a `u64` directly, any other through serde_json itself.
    pub(in crate::source) fn json_number(&mut self) -> Option<Number> {
        let t = self.number()?;
        let direct = match plain_u64(t) {
            Some(n) => Some(Number::from(n)),
            None if !t.contains(['-', 'e', 'E']) => exact_decimal(t).and_then(Number::from_f64),
            None => None,
        };
        direct.or_else(|| serde_json::from_str(t).ok())
    }

    /// Any JSON value as [`Field`] reads it: an object through `object`
    /// (at its `{`), a string, number or boolean as a [`Scalar`], anything
    /// else as its [`Kind`], skipped.
    pub(in crate::source) fn field<T>(
        &mut self,
        object: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Field<'a, T>> {
        Some(match self.peek()? {
            b'{' => Field::Object(object(self)?),
            b'"' => Field::Scalar(Scalar::Text(self.text()?)),
            b't' => {
                self.literal("true")?;
                Field::Scalar(Scalar::Bool(true))
            }
            b'f' => {
                self.literal("false")?;
                Field::Scalar(Scalar::Bool(false))
            }
            b'n' => {
                self.literal("null")?;
                Field::Other(Kind::Null)
            }
            b'[' => {
                self.skip(MAX_SKIP_DEPTH)?;
                Field::Other(Kind::List)
            }
            _ => Field::Scalar(Scalar::Number(self.json_number()?)),
        })
    }

    /// An object whose keys are all skipped, as [`Skipped`] reads it.
    pub(in crate::source) fn skipped(&mut self) -> Option<Skipped> {
        self.skip(MAX_SKIP_DEPTH).map(|()| Skipped)
    }

    /// An object's string, number and boolean entries, as [`Entries`]
    /// reads them.
    pub(in crate::source) fn entries(&mut self) -> Option<Entries<'a>> {
        let mut e = Entries::default();
        self.object(|s, key| {
            let value = s.field(Self::skipped)?.into_scalar();
            e.0.push((Text::from(key), value));
            Some(())
        })?;
        e.sort();
        Some(e)
    }

    /// A timestamp as `wire::time` reads it.
    pub(in crate::source) fn time(&mut self) -> Option<DateTime<Utc>> {
        let t = self.str()?;
        crate::source::time::fast_utc(t).or_else(|| {
            t.parse::<DateTime<FixedOffset>>()
                .ok()
                .map(|v| v.with_timezone(&Utc))
        })
    }

    /// A timestamp, or `null` as `None`.
    pub(in crate::source) fn opt_time(&mut self) -> Option<Option<DateTime<Utc>>> {
        self.nullable(Self::time)
    }

    /// Walks an object, handing each key to `member`, which reads its value.
    pub(in crate::source) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
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
    pub(in crate::source) fn array(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
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
    pub(in crate::source) fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_text(),
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

/// A number's text of digits alone, as a `u64` when it fits one.
fn plain_u64(t: &str) -> Option<u64> {
    t.bytes().try_fold(0u64, |n, c| {
        if !c.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })
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

#[cfg(test)]
pub(in crate::source) mod testing;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::json::AnyScalar;

    #[test]
    fn a_string_is_read_as_serde_reads_it_or_left_to_serde() {
        let texts = [
            r#""plain""#,
            r#""""#,
            r#""ünï 🙂""#,
            r#""a\"b""#,
            r#""\\ \/ \b \f \n \r \t""#,
            r#""[\"env:prod\", \"feature:long-chat\"]""#,
            r#""\u00e9\u0041x""#,
            r#""end\\""#,
            "\"long enough to take the eight-byte steps \\\" twice over, and then some\"",
            // serde refuses these, or decodes a pair the scanner leaves.
            r#""\ud83d\ude42""#,
            r#""\ud83d""#,
            r#""bad\q""#,
            r#""\u00g0""#,
            "\"raw\u{1}\"",
            r#""cut"#,
            r#""cut\"#,
        ];
        for t in texts {
            let fast = Scanner::new(t).text();
            let serde = serde_json::from_str::<String>(t).ok();
            match &fast {
                Some(v) => assert_eq!(Some(v.to_string()), serde, "{t}"),
                None => assert!(
                    serde.is_none() || t.contains("\\ud8"),
                    "{t}: serde reads it, the scanner does not"
                ),
            }
            let mut s = Scanner::new(t);
            assert_eq!(s.skip(1).is_some(), fast.is_some(), "{t}");
        }
        let plain = Scanner::new(r#""plain""#).text().unwrap();
        assert!(matches!(plain.0, Cow::Borrowed("plain")));
    }

    #[test]
    fn numbers_and_scalars_are_what_serde_makes_of_them() {
        for t in [
            "0",
            "17",
            "18446744073709551615",
            "18446744073709551616",
            "-0",
            "-3",
            "1.5",
            "0.00070358",
            "1e2",
            "-2.5E-3",
            "1e400",
            "01",
            "1.",
            "true",
            "false",
            "null",
            "\"s\"",
            "[1, [2]]",
            "{\"a\": 1}",
            "nul",
        ] {
            // A value read standalone must also be the whole text ("01").
            let mut s = Scanner::new(t);
            let fast = s.field(Scanner::skipped).filter(|_| s.at_end());
            let serde = serde_json::from_str::<AnyScalar<'_>>(t).ok();
            assert_eq!(fast, serde, "{t}");
            if let Some(Field::Scalar(Scalar::Number(n))) = &fast {
                assert_eq!(
                    n.to_string(),
                    serde_json::from_str::<Number>(t).unwrap().to_string()
                );
            }
        }
    }
}
