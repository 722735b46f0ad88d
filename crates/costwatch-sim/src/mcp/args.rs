//! A tool's arguments (gateway-api.md section 2: `start`, `end`,
//! `labels` (up to 5 pairs), `limit` (up to 50), `cursor`, ...), checked with
//! messages that tell the model what to fix.

use super::{MAX_LABELS, MAX_LIMIT};
use crate::cursor;
use crate::dataset::{Bounds, bounds};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// A tool's arguments with checks whose messages tell the model what to fix.
pub(super) struct Args<'a>(pub(super) &'a Map<String, Value>);

impl Args<'_> {
    /// Fails on any argument not in `allowed`.
    pub(super) fn only(&self, allowed: &[&str]) -> Result<(), String> {
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
    pub(super) fn optional_str(&self, name: &str) -> Result<Option<&str>, String> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("{name}: expected a string, got {other}")),
        }
    }

    /// A non-empty string argument.
    pub(super) fn required_str(&self, name: &str) -> Result<&str, String> {
        self.optional_str(name)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{name} is required"))
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

    /// `[start, end)` when both are given, `None` when neither is.
    pub(super) fn window(&self) -> Result<Option<Bounds>, String> {
        bounds(self.time("start")?, self.time("end")?).map_err(str::to_owned)
    }

    /// `limit`: 1 to 50, 50 when not given.
    pub(super) fn limit(&self) -> Result<usize, String> {
        match self.0.get("limit") {
            None | Some(Value::Null) => Ok(MAX_LIMIT),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    format!("limit: expected an integer from 1 to {MAX_LIMIT}, got {v}")
                }),
        }
    }

    /// `labels`: an object of up to 5 string pairs.
    pub(super) fn labels(&self) -> Result<Vec<(String, String)>, String> {
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
    pub(super) fn fingerprint(&self, tool: &str) -> u64 {
        let mut parts = vec![tool.to_owned()];
        for (k, v) in self.0 {
            if k != "cursor" && k != "limit" {
                parts.push(format!("{k}={v}"));
            }
        }
        parts.sort();
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        cursor::fnv1a(&refs)
    }

    /// Where the page starts: 0, or the position in `cursor`.
    pub(super) fn position(&self, fingerprint: u64) -> Result<usize, String> {
        match self.optional_str("cursor")? {
            None => Ok(0),
            Some(c) => cursor::decode(c, fingerprint).ok_or_else(|| {
                "cursor: not a next_cursor of this query (same arguments, only the cursor changes)"
                    .to_owned()
            }),
        }
    }
}
