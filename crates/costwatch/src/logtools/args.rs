//! A tool's arguments, checked with messages that name the argument and
//! say what to send instead (a bad argument is the caller's to fix, so it
//! becomes an `isError` result, never a protocol error).
//!
//! The arguments are the reference gateway's (`start`, `end`, `labels` up
//! to five pairs, `limit` up to 50, `cursor`); a cursor is base64 (URL-safe,
//! unpadded) of `offset:<position>:<fingerprint>`, where the fingerprint
//! hashes the tool and every other argument, so a cursor replayed against
//! another query is refused.

use crate::domain::Window;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value};

/// The largest page a list tool returns.
pub const MAX_LIMIT: usize = 50;
/// The most label pairs a filter may name.
pub const MAX_LABELS: usize = 5;

/// A tool's arguments.
pub struct Args<'a>(pub &'a Map<String, Value>);

impl Args<'_> {
    /// Fails on any argument not in `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self.0.keys().find(|k| !allowed.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) if allowed.is_empty() => Err(format!("unknown argument `{k}`; none expected")),
            Some(k) => Err(format!(
                "unknown argument `{k}`; expected: {}",
                allowed.join(", ")
            )),
        }
    }

    /// A string argument, if given.
    pub fn optional_str(&self, name: &str) -> Result<Option<&str>, String> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("{name}: expected a string, got {other}")),
        }
    }

    /// A non-empty string argument.
    pub fn required_str(&self, name: &str) -> Result<&str, String> {
        self.optional_str(name)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{name} is required"))
    }

    /// One of `choices`, if given.
    pub fn choice(&self, name: &str, choices: &[&str]) -> Result<Option<&str>, String> {
        match self.optional_str(name)? {
            Some(v) if !choices.contains(&v) => Err(format!(
                "{name}: expected one of {}, got `{v}`",
                choices.join(", ")
            )),
            v => Ok(v),
        }
    }

    /// A time argument, RFC 3339.
    fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>, String> {
        self.optional_str(name)?
            .map(|s| {
                DateTime::parse_from_rfc3339(s)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| {
                        format!(
                            "{name}: expected an RFC 3339 time such as 2026-10-11T11:24:00Z, got `{s}`"
                        )
                    })
            })
            .transpose()
    }

    /// `[start, end)` when both are given, `None` when neither is; at most
    /// `longest` long.
    pub fn range(&self, longest: TimeDelta) -> Result<Option<Window>, String> {
        let window = match (self.time("start")?, self.time("end")?) {
            (None, None) => return Ok(None),
            (Some(start), Some(end)) => Window { start, end },
            _ => return Err("start and end go together: give both or neither".to_owned()),
        };
        if window.end <= window.start {
            return Err("end: must be after start".to_owned());
        }
        if window.end - window.start > longest {
            return Err(format!(
                "end: the range is at most {} long; ask for a shorter one",
                hours(longest)
            ));
        }
        Ok(Some(window))
    }

    /// `limit`: 1 to [`MAX_LIMIT`], the most when not given.
    pub fn limit(&self) -> Result<usize, String> {
        self.count("limit", MAX_LIMIT)
    }

    /// A count from 1 to `max`, `max` when not given.
    pub fn count(&self, name: &str, max: usize) -> Result<usize, String> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(max),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("{name}: expected an integer from 1 to {max}, got {v}")),
        }
    }

    /// `labels`: an object of up to [`MAX_LABELS`] string pairs.
    pub fn labels(&self) -> Result<Vec<(String, String)>, String> {
        let map = match self.0.get("labels") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(m)) => m,
            Some(other) => return Err(format!("labels: expected an object, got {other}")),
        };
        if map.len() > MAX_LABELS {
            return Err(format!("labels: at most {MAX_LABELS} pairs"));
        }
        map.iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!("labels.{k}: expected a string, got {other}")),
            })
            .collect()
    }

    /// What a cursor is bound to: the tool and every argument but the
    /// cursor and the limit.
    pub fn fingerprint(&self, tool: &str) -> u64 {
        let mut parts = vec![tool.to_owned()];
        parts.extend(
            self.0
                .iter()
                .filter(|(k, _)| *k != "cursor" && *k != "limit")
                .map(|(k, v)| format!("{k}={v}")),
        );
        parts.sort();
        fnv1a(&parts)
    }

    /// Where the page starts: 0, or the position in `cursor`.
    pub fn position(&self, fingerprint: u64) -> Result<usize, String> {
        match self.optional_str("cursor")? {
            None => Ok(0),
            Some(c) => decode(c, fingerprint).ok_or_else(|| {
                "cursor: not a next_cursor of this query (same arguments, only the cursor changes)"
                    .to_owned()
            }),
        }
    }
}

/// A duration in whole hours, for messages.
fn hours(d: TimeDelta) -> String {
    match d.num_hours() {
        1 => "1 hour".to_owned(),
        h if h > 24 && h % 24 == 0 => format!("{} days", h / 24),
        h => format!("{h} hours"),
    }
}

/// 64-bit FNV-1a over the parts, each followed by a separator byte.
fn fnv1a(parts: &[String]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The cursor resuming at `position` of the query with this fingerprint.
pub fn encode(position: usize, fingerprint: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("offset:{position}:{fingerprint:016x}"))
}

/// The position in `cursor`, if it is a cursor of the query with this
/// fingerprint.
fn decode(cursor: &str, fingerprint: u64) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let rest = text.strip_prefix("offset:")?;
    let (position, bound) = rest.split_once(':')?;
    (u64::from_str_radix(bound, 16).ok()? == fingerprint)
        .then(|| position.parse().ok())
        .flatten()
}

/// One page of `rows` from `from`, as `{"data": [...], "next_cursor": ...}`.
pub fn page(rows: Vec<Value>, from: usize, limit: usize, fingerprint: u64) -> Value {
    let total = rows.len();
    let data: Vec<Value> = rows.into_iter().skip(from).take(limit).collect();
    let next = (from + limit < total).then(|| encode(from + limit, fingerprint));
    serde_json::json!({"data": data, "next_cursor": next})
}
