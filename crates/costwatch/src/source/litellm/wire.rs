//! The JSON of `GET /spend/logs/v2` and `GET /model/info`, as LiteLLM
//! 1.110.2 sends it, and how a page is parsed.
//!
//! A page is read once, straight from its text into these structs, which
//! borrow its strings ([`Text`]) and name only the columns costwatch reads;
//! the others (`api_key`, `cache_key`, `messages`, ...) are skipped unread,
//! and so is most of `metadata` (`metadata.rs`). No `serde_json::Value` is
//! built on this path.
//!
//! A page that is whole JSON of another shape (no `data`, a row without
//! `startTime`, a count that is a string) fails with the field's path and
//! the question whether LiteLLM changed its format, never as zero rows.
//! Such a page is parsed a second time for that message, as a
//! `serde_json::Value` first ([`parse`]), so the path and the wording are
//! those of a `Value` (no line and column, fields in key order). A body
//! that is not JSON at all is retried by the page fetcher ([`whole_json`]).

use super::metadata::{MetadataColumn, TagsColumn};
use crate::source::json::Text;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

/// What a parse failure of whole JSON most likely means.
pub(super) const SCHEMA_HINT: &str =
    "has LiteLLM's format changed? costwatch follows LiteLLM 1.110.2";

/// One page of `/spend/logs/v2`: `{data, total, page, page_size,
/// total_pages, total_is_capped}`. Only `data` is required; `page` and
/// `page_size` are checked against what was asked for when present.
#[derive(Debug, Deserialize)]
pub(super) struct Envelope<'a> {
    /// The rows, sorted as asked.
    #[serde(borrow)]
    pub data: Vec<WireRow<'a>>,
    /// The page answered (1-based).
    #[serde(default)]
    pub page: Option<u64>,
    /// The page size answered.
    #[serde(default)]
    pub page_size: Option<u64>,
}

/// One `LiteLLM_SpendLogs` row (`proxy/schema.prisma`). The columns the
/// schema declares non-null are required here.
#[derive(Debug, Deserialize)]
pub(super) struct WireRow<'a> {
    /// The primary key: the provider's response id, else LiteLLM's call id.
    #[serde(borrow)]
    pub request_id: Text<'a>,
    /// When the call started: `timestamp(3)` in UTC, written by the raw
    /// query as `2026-10-11T11:24:03.120+00:00`.
    #[serde(rename = "startTime", deserialize_with = "time")]
    pub start_time: DateTime<Utc>,
    /// Dollars.
    pub spend: f64,
    /// The whole prompt, cache reads and writes included.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// The model the provider was called with (`""` when none was).
    #[serde(borrow)]
    pub model: Text<'a>,
    /// The public model name the caller asked for.
    #[serde(default, borrow)]
    pub model_group: Option<Text<'a>>,
    /// The deployment's id.
    #[serde(default, borrow)]
    pub model_id: Option<Text<'a>>,
    /// `acompletion`, `aembedding`, `call_mcp_tool`, ...
    #[serde(default, borrow)]
    pub call_type: Option<Text<'a>>,
    /// The caller's session id, else the call's trace id, else null.
    #[serde(default, borrow)]
    pub session_id: Option<Text<'a>>,
    /// `success`, `failure`, or null on rows written before the column.
    #[serde(default, borrow)]
    pub status: Option<Text<'a>>,
    /// The end user (`user` of the request body).
    #[serde(default, borrow)]
    pub end_user: Option<Text<'a>>,
    /// The key's team.
    #[serde(default, borrow)]
    pub team_id: Option<Text<'a>>,
    /// The key's internal user.
    #[serde(default, borrow)]
    pub user: Option<Text<'a>>,
    /// The key's organization.
    #[serde(default, borrow)]
    pub organization_id: Option<Text<'a>>,
    /// The provider LiteLLM called (`openai`, `anthropic`, ...).
    #[serde(default, borrow)]
    pub custom_llm_provider: Option<Text<'a>>,
    /// LiteLLM's own id for the call.
    #[serde(default, borrow)]
    pub litellm_call_id: Option<Text<'a>>,
    /// A list of tags, or the JSON text of one.
    #[serde(default, borrow)]
    pub request_tags: Option<TagsColumn<'a>>,
    /// An object, or the JSON text of one.
    #[serde(default, borrow)]
    pub metadata: Option<MetadataColumn<'a>>,
}

/// The `/model/info` answer: `{"data": [...]}`, one entry per deployment.
#[derive(Debug, Deserialize)]
pub(super) struct ModelInfoList {
    /// The deployments.
    pub data: Vec<ModelEntry>,
}

/// One deployment of `/model/info`.
#[derive(Debug, Deserialize)]
pub(super) struct ModelEntry {
    /// The public model name (what callers ask for, `model_group` in the
    /// spend logs).
    pub model_name: String,
    /// The deployment's configuration merged with LiteLLM's cost map.
    #[serde(default)]
    pub model_info: Option<WireModelInfo>,
}

/// The prices of `model_info` (dollars per token), from LiteLLM's cost
/// map or the deployment's configuration.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireModelInfo {
    /// Uncached prompt tokens; null for a model without a price.
    #[serde(default)]
    pub input_cost_per_token: Option<f64>,
    /// Completion tokens; null for a model without a price.
    #[serde(default)]
    pub output_cost_per_token: Option<f64>,
    /// Prompt tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_token_cost: Option<f64>,
    /// Prompt tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_token_cost: Option<f64>,
    /// Whether the provider caches prompts for this model.
    #[serde(default)]
    pub supports_prompt_caching: Option<bool>,
}

/// A page's body as text; a body that is not (not UTF-8) gets what a
/// `serde_json::Value` parse says of it, as any body that is not JSON.
pub(super) fn page_text(body: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(body).map_err(|_| {
        crate::decode::json::<Value>(body)
            .err()
            .unwrap_or_else(|| "not JSON".to_owned())
    })
}

/// Parses a page's text by serde, borrowing from it. A page that does not
/// parse is parsed again as a `Value` to name the failing field as
/// [`parse`] does; should that parse succeed (a column given twice, which
/// a `Value` keeps the last of), its page is the answer.
pub(super) fn parse_page(text: &str) -> Result<Envelope<'_>, String> {
    if let Ok(page) = serde_json::from_str(text) {
        return Ok(page);
    }
    let value = crate::decode::json::<Value>(text.as_bytes())?;
    parse(value)
}

/// Parses a page already read as JSON into `T`, naming the failing field
/// (`data[3].startTime: ...`) and asking whether the format changed. The
/// message can quote the page, so it is made printable.
pub(super) fn parse<'de, T: Deserialize<'de>>(page: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(page)
        .map_err(|e| format!("{} ({SCHEMA_HINT})", crate::decode::failing_field(&e)))
}

/// A timestamp as LiteLLM writes one: RFC 3339 with an offset (the raw
/// query's `2026-10-11T11:24:03.120+00:00`, or `Z`), or an ISO 8601 time
/// without one, which LiteLLM's columns hold in UTC.
pub(super) fn parse_time(t: &str) -> Option<DateTime<Utc>> {
    if let Ok(v) = DateTime::parse_from_rfc3339(t) {
        return Some(v.with_timezone(&Utc));
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .map(|v| v.and_utc())
}

fn time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let text = Text::deserialize(d)?;
    parse_time(&text).ok_or_else(|| {
        serde::de::Error::custom(format_args!(
            "`{}` is not a timestamp",
            crate::printable::printable(&text)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_timestamp_shapes_litellm_writes_all_parse_as_utc() {
        let want = DateTime::parse_from_rfc3339("2026-10-11T11:24:03.120Z")
            .map(|t| t.with_timezone(&Utc))
            .ok();
        for t in [
            "2026-10-11T11:24:03.120+00:00",
            "2026-10-11T11:24:03.12+00:00",
            "2026-10-11T11:24:03.120Z",
            "2026-10-11T13:24:03.120+02:00",
            "2026-10-11T11:24:03.120000",
            "2026-10-11 11:24:03.120",
        ] {
            assert_eq!(parse_time(t), want, "{t}");
        }
        assert!(parse_time("2026-10-11T11:24:03+00:00").is_some());
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2026-02-30T00:00:00Z"), None);
    }

    #[test]
    fn an_envelope_without_data_asks_whether_the_format_changed() {
        let err = parse::<Envelope>(json!({"rows": [], "total": 0}))
            .err()
            .unwrap_or_default();
        assert!(err.contains("missing field `data`"), "{err}");
        assert!(err.contains("format changed"), "{err}");
        let err = parse::<Envelope>(json!([{"request_id": "a"}]))
            .err()
            .unwrap_or_default();
        assert!(err.contains("format changed"), "{err}");
    }

    #[test]
    fn a_row_of_another_shape_names_its_field() {
        let page = json!({"data": [
            {"request_id": "a", "startTime": "2026-10-11T11:24:03+00:00", "spend": 0.1,
             "prompt_tokens": 5, "completion_tokens": 1, "model": "m"},
            {"request_id": "b", "startTime": "2026-10-11T11:24:03+00:00", "spend": 0.1,
             "prompt_tokens": "5", "completion_tokens": 1, "model": "m"}
        ]});
        let err = parse::<Envelope>(page).err().unwrap_or_default();
        assert!(
            err.starts_with("data[1].prompt_tokens: invalid type"),
            "{err}"
        );
        let page = json!({"data": [{"request_id": "a", "spend": 0.1, "prompt_tokens": 5,
            "completion_tokens": 1, "model": "m"}]});
        let err = parse::<Envelope>(page).err().unwrap_or_default();
        assert!(
            err.starts_with("data[0]: missing field `startTime`"),
            "{err}"
        );
        let page = json!({"data": [{"request_id": "a", "startTime": "soon", "spend": 0.1,
            "prompt_tokens": 5, "completion_tokens": 1, "model": "m"}]});
        let err = parse::<Envelope>(page).err().unwrap_or_default();
        assert!(
            err.starts_with("data[0].startTime: `soon` is not a timestamp"),
            "{err}"
        );
    }
}
