//! The query strings of the REST list routes (gateway-api.md section 1):
//! `start`, `end` (RFC 3339), `limit` (1..50), `cursor`, `session_id` and
//! repeatable `metadata.<key>=<value>` filters; unknown or repeated
//! parameters are a 400.
//!
//! A cursor is bound to the query it came from ([`ListQuery::fingerprint`]),
//! so a cursor replayed against another query is a 400.

use super::routes::ApiError;
use crate::cursor::{self, MAX_LIMIT};
use crate::dataset::{Bounds, bounds, format_ts};
use chrono::{DateTime, Utc};

/// A list query: window, paging, session and label filters.
#[derive(Debug, Default)]
pub(super) struct ListQuery {
    pub(super) start: Option<DateTime<Utc>>,
    pub(super) end: Option<DateTime<Utc>>,
    pub(super) limit: usize,
    pub(super) cursor: Option<String>,
    pub(super) session_id: Option<String>,
    pub(super) labels: Vec<(String, String)>,
}

impl ListQuery {
    /// Parses the raw query string; unknown or repeated parameters are a 400.
    pub(super) fn parse(raw: Option<&str>, allow_session: bool) -> Result<ListQuery, ApiError> {
        let mut q = ListQuery {
            limit: MAX_LIMIT,
            ..ListQuery::default()
        };
        let mut seen = Vec::new();
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            if let Some(label) = key.strip_prefix("metadata.") {
                if label.is_empty() {
                    return Err(ApiError::bad_request("metadata.: empty label name"));
                }
                q.labels.push((label.to_string(), value.into_owned()));
                continue;
            }
            if seen.contains(&key) {
                return Err(ApiError::bad_request(format!(
                    "{key}: given more than once"
                )));
            }
            match key.as_ref() {
                "start" => q.start = Some(parse_time("start", &value)?),
                "end" => q.end = Some(parse_time("end", &value)?),
                "limit" => q.limit = parse_limit(&value)?,
                "cursor" => q.cursor = Some(value.to_string()),
                "session_id" if allow_session => q.session_id = Some(value.to_string()),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "{other}: unknown query parameter"
                    )));
                }
            }
            seen.push(key);
        }
        Ok(q)
    }

    /// `[start, end)` when both are given, `None` when neither is.
    pub(super) fn window(&self) -> Result<Option<Bounds>, ApiError> {
        bounds(self.start, self.end).map_err(ApiError::bad_request)
    }

    /// What a cursor is bound to: route, window, session and label filters.
    pub(super) fn fingerprint(&self, route: &str) -> u64 {
        let mut labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        labels.sort();
        let start = self.start.map(|t| format_ts(&t)).unwrap_or_default();
        let end = self.end.map(|t| format_ts(&t)).unwrap_or_default();
        let mut parts = vec![
            route,
            &start,
            &end,
            self.session_id.as_deref().unwrap_or(""),
        ];
        parts.extend(labels.iter().map(String::as_str));
        cursor::fnv1a(&parts)
    }

    /// Where the page starts: 0, or the position in the cursor.
    pub(super) fn position(&self, fingerprint: u64) -> Result<usize, ApiError> {
        self.cursor.as_deref().map_or(Ok(0), |c| {
            cursor::decode(c, fingerprint)
                .ok_or_else(|| ApiError::bad_request("cursor: not a cursor of this query"))
        })
    }
}

pub(super) fn parse_time(name: &str, value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            ApiError::bad_request(format!(
                "{name}: expected an RFC 3339 timestamp, got `{value}`"
            ))
        })
}

fn parse_limit(value: &str) -> Result<usize, ApiError> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "limit: expected an integer from 1 to {MAX_LIMIT}, got `{value}`"
            ))
        })
}
