//! Reading span and resource attributes: by key, as text, as a count.

use crate::limits::MAX_COUNT;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// A list of attributes (a span's or a resource's).
#[derive(Debug, Clone, Copy)]
pub(super) struct Attrs<'a>(pub &'a [KeyValue]);

impl<'a> Attrs<'a> {
    /// The value of `key`; the first one when a sender repeats a key.
    pub(super) fn get(self, key: &str) -> Option<&'a Value> {
        self.0
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    /// The value of `key` as text (see [`text`]); `None` when absent,
    /// empty or not a scalar.
    pub(super) fn text(self, key: &str) -> Option<String> {
        self.get(key).and_then(text).filter(|s| !s.is_empty())
    }

    /// The value of `key` when it is a string.
    pub(super) fn str(self, key: &str) -> Option<&'a str> {
        match self.get(key)? {
            Value::StringValue(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` as a token count: `None` when absent, an error
    /// naming the key when it is not a whole number from 0 to the limit.
    pub(super) fn count(self, key: &str) -> Result<Option<u64>, String> {
        self.get(key).map(|v| count(key, v)).transpose()
    }

    /// The value of `key` as an integer, when it is one (an int, a whole
    /// double, or decimal text); anything else is `None`.
    pub(super) fn int(self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Value::IntValue(n) => Some(*n),
            Value::DoubleValue(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(*f as i64),
            Value::StringValue(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// A scalar value as text: strings as they are, integers, doubles and
/// booleans printed; arrays, maps and bytes have none.
pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        // PostgreSQL's TEXT cannot hold U+0000: one in a span would make
        // every retry of its export fail.
        Value::StringValue(s) => Some(s.replace('\0', "")),
        Value::IntValue(n) => Some(n.to_string()),
        Value::DoubleValue(f) if f.is_finite() => Some(f.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A token count: an int, a double without fraction or decimal text, from
/// 0 to [`MAX_COUNT`].
fn count(key: &str, v: &Value) -> Result<u64, String> {
    let n = match v {
        Value::IntValue(n) => u64::try_from(*n).map_err(|_| format!("{key}: {n} is negative"))?,
        Value::DoubleValue(f) => whole(key, *f)?,
        Value::StringValue(s) => {
            let s = s.trim();
            match s.parse::<u64>() {
                Ok(n) => n,
                Err(_) => match s.parse::<f64>() {
                    Ok(f) => whole(key, f)?,
                    Err(_) => return Err(format!("{key}: `{}` is not a number", shorten(s))),
                },
            }
        }
        Value::BoolValue(_) => return Err(format!("{key}: a boolean is not a token count")),
        _ => return Err(format!("{key}: expected a token count")),
    };
    if n > MAX_COUNT {
        return Err(format!("{key}: {n} is above the limit of {MAX_COUNT}"));
    }
    Ok(n)
}

/// A double that is a whole number from 0 to [`MAX_COUNT`].
fn whole(key: &str, f: f64) -> Result<u64, String> {
    if !f.is_finite() || f.fract() != 0.0 {
        return Err(format!("{key}: {f} is not a whole number"));
    }
    if f < 0.0 {
        return Err(format!("{key}: {f} is negative"));
    }
    if f > MAX_COUNT as f64 {
        return Err(format!("{key}: {f:e} is above the limit of {MAX_COUNT}"));
    }
    Ok(f as u64)
}

/// The first `max` characters of `text`.
pub(super) fn bounded(text: &str, max: usize) -> String {
    let cut = match text.char_indices().nth(max) {
        Some((at, _)) => text.get(..at).unwrap_or(text),
        None => text,
    };
    // Without U+0000, which PostgreSQL's TEXT cannot hold.
    cut.replace('\0', "")
}

/// Untrusted text for a message: at most 64 characters, printable.
pub(super) fn shorten(text: &str) -> String {
    let cut = bounded(text, 64);
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", crate::printable::printable(&cut))
}
