//! The reference gateway's JSON, exactly as it is sent, and its mapping into
//! the gateway-agnostic records.
//!
//! Required fields (`session_id`, `requests`, `input_tokens`, `cost_usd`) are
//! not optional here, so a row without them fails the page. Unknown fields are
//! ignored.

use super::{Labels, ModelPrice, ModelUsage, RequestRecord, RequestStatus, SessionRecord};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One page of a listing.
#[derive(Debug, Deserialize)]
pub(super) struct Page<T> {
    pub data: Vec<T>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// The `/models` answer (not paginated).
#[derive(Debug, Deserialize)]
pub(super) struct ModelList {
    pub data: Vec<WireModel>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireModel {
    id: String,
    input_usd_per_mtok: f64,
    #[serde(default)]
    cached_input_usd_per_mtok: Option<f64>,
    #[serde(default)]
    cache_write_usd_per_mtok: Option<f64>,
    output_usd_per_mtok: f64,
    #[serde(default)]
    supports_prompt_cache: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireSession {
    session_id: String,
    #[serde(default)]
    first_request_at: Option<DateTime<Utc>>,
    #[serde(default)]
    last_request_at: Option<DateTime<Utc>>,
    requests: u64,
    #[serde(default)]
    errors: u64,
    input_tokens: u64,
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    cache_write_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    cost_usd: f64,
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    by_model: BTreeMap<String, WireModelUsage>,
    #[serde(default)]
    labels: Labels,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireModelUsage {
    #[serde(default)]
    requests: u64,
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cost_usd: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireRequest {
    request_id: String,
    session_id: String,
    created_at: DateTime<Utc>,
    model: String,
    status: RequestStatus,
    #[serde(default)]
    http_status: Option<u16>,
    #[serde(default)]
    error_type: Option<String>,
    input_tokens: u64,
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    cost_usd: f64,
}

impl WireModel {
    pub(super) fn into_record(self) -> ModelPrice {
        let supports = self
            .supports_prompt_cache
            .unwrap_or(self.cached_input_usd_per_mtok.is_some());
        ModelPrice {
            id: self.id,
            input_usd_per_mtok: self.input_usd_per_mtok,
            cached_input_usd_per_mtok: self.cached_input_usd_per_mtok,
            cache_write_usd_per_mtok: self.cache_write_usd_per_mtok,
            output_usd_per_mtok: self.output_usd_per_mtok,
            supports_prompt_cache: supports,
        }
    }
}

impl WireSession {
    /// Maps the row; `fallback_time` stands in for missing timestamps.
    pub(super) fn into_record(self, fallback_time: DateTime<Utc>) -> Result<SessionRecord, String> {
        if !self.cost_usd.is_finite() || self.cost_usd < 0.0 {
            return Err(format!(
                "session {}: cost_usd must be a non-negative number",
                self.session_id
            ));
        }
        let mut by_model: Vec<ModelUsage> = self
            .by_model
            .into_iter()
            .map(|(model, u)| ModelUsage {
                model,
                requests: u.requests,
                input_tokens: u.input_tokens,
                cached_tokens: u.cached_tokens,
                output_tokens: u.output_tokens,
                cost_usd: if u.cost_usd.is_finite() {
                    u.cost_usd.max(0.0)
                } else {
                    0.0
                },
            })
            .collect();
        // A gateway that lists models without a breakdown still tells which
        // models were used; with a single model the breakdown is the session.
        if by_model.is_empty() && self.models.len() == 1 {
            by_model.extend(self.models.into_iter().map(|model| ModelUsage {
                model,
                requests: self.requests,
                input_tokens: self.input_tokens,
                cached_tokens: self.cached_tokens,
                output_tokens: self.output_tokens,
                cost_usd: self.cost_usd,
            }));
        }
        let first = self.first_request_at.unwrap_or(fallback_time);
        Ok(SessionRecord {
            session_id: self.session_id,
            first_request_at: first,
            last_request_at: self.last_request_at.unwrap_or(first),
            requests: self.requests,
            errors: self.errors,
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
            by_model,
            labels: self.labels,
        })
    }
}

impl WireRequest {
    pub(super) fn into_record(self) -> RequestRecord {
        RequestRecord {
            request_id: self.request_id,
            session_id: self.session_id,
            created_at: self.created_at,
            model: self.model,
            status: self.status,
            http_status: self.http_status,
            error_type: self.error_type,
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            output_tokens: self.output_tokens,
            cost_usd: if self.cost_usd.is_finite() {
                self.cost_usd.max(0.0)
            } else {
                0.0
            },
        }
    }
}

/// Parses a page, naming the failing field (`data[3]: missing field \`cost_usd\``).
pub(super) fn parse<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_without_cost_is_rejected_with_its_path() {
        let body = br#"{"data":[{"session_id":"a","requests":1,"input_tokens":5,"cost_usd":0.1},
                                 {"session_id":"b","requests":1,"input_tokens":5}],"next_cursor":null}"#;
        let err = parse::<Page<WireSession>>(body).err().unwrap_or_default();
        assert!(err.starts_with("data[1]"), "{err}");
        assert!(err.contains("cost_usd"), "{err}");
    }

    #[test]
    fn unknown_fields_are_ignored_and_defaults_fill_optional_ones() {
        let body = br#"{"data":[{"session_id":"a","requests":2,"input_tokens":5,"cost_usd":0.1,
            "surprise":{"x":1},"models":["m"]}],"next_cursor":"c2"}"#;
        let page = parse::<Page<WireSession>>(body).unwrap();
        assert_eq!(page.next_cursor.as_deref(), Some("c2"));
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let rec = page
            .data
            .into_iter()
            .next()
            .unwrap()
            .into_record(at)
            .unwrap();
        assert_eq!(rec.errors, 0);
        assert_eq!(rec.by_model.len(), 1);
        assert_eq!(rec.by_model[0].requests, 2);
        assert_eq!(rec.first_request_at, at);
    }

    #[test]
    fn a_truncated_page_is_an_error() {
        let body = br#"{"data":[{"session_id":"a","requests":2,"input_tok"#;
        assert!(parse::<Page<WireSession>>(body).is_err());
    }
}
