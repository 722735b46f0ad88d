//! The query string of `/spend/logs/v2`, checked as LiteLLM 1.110.2 checks
//! it (`ui_view_spend_logs`): FastAPI's validation of `page` (from 1) and
//! `page_size` (1 to 1000) first, a 422 listing every failure; then
//! `sort_by`, `sort_order` and `span_type`, each a 400; then the dates,
//! required and parsed as `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD` in UTC
//! after trimming, both ends included. Parameters LiteLLM does not know
//! are ignored, as FastAPI does; of the filters it knows, `session_id`
//! (a substring match), `status_filter` and `span_type` are served, the
//! others ignored.

use super::errors::LiteLlmError;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde_json::json;

/// LiteLLM's largest `page_size`.
pub const MAX_PAGE_SIZE: u64 = 1000;

/// What `sort_by` may name, in the order LiteLLM lists them in its error
/// (Python's `sorted`).
const SORT_FIELDS: [&str; 7] = [
    "endTime",
    "model",
    "request_duration_ms",
    "spend",
    "startTime",
    "total_tokens",
    "ttft_ms",
];

/// A checked `/spend/logs/v2` query.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SpendQuery {
    /// `start_date`, included.
    pub start: DateTime<Utc>,
    /// `end_date`, included.
    pub end: DateTime<Utc>,
    /// From 1.
    pub page: u64,
    /// 1 to [`MAX_PAGE_SIZE`].
    pub page_size: u64,
    /// One of [`SORT_FIELDS`].
    pub sort_by: String,
    /// `sort_order=desc` (the default).
    pub descending: bool,
    /// Rows whose `session_id` contains this.
    pub session_id: Option<String>,
    /// `status_filter`.
    pub status: Option<String>,
    /// Whether model calls are asked for (`span_type` absent or `llm`).
    pub model_calls: bool,
}

/// Parses and checks the raw query string.
pub(super) fn parse(raw: Option<&str>) -> Result<SpendQuery, LiteLlmError> {
    let mut params: Vec<(String, String)> = Vec::new();
    for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        params.retain(|(key, _)| key.as_str() != k.as_ref());
        params.push((k.into_owned(), v.into_owned()));
    }
    let get = |k: &str| {
        params
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let mut invalid = Vec::new();
    let page = int(get("page"), "page", 1, None, &mut invalid).unwrap_or(1);
    let page_size = int(
        get("page_size"),
        "page_size",
        1,
        Some(MAX_PAGE_SIZE),
        &mut invalid,
    )
    .unwrap_or(50);
    if !invalid.is_empty() {
        return Err(LiteLlmError::Validation(invalid));
    }
    let sort_by = get("sort_by").unwrap_or("startTime");
    if !SORT_FIELDS.contains(&sort_by) {
        return Err(LiteLlmError::bad_request(
            format!(
                "Invalid sort_by: {sort_by}. Must be one of: {}",
                SORT_FIELDS.join(", ")
            ),
            Some("sort_by"),
        ));
    }
    let sort_order = get("sort_order").unwrap_or("desc");
    if !["asc", "desc"].contains(&sort_order.to_lowercase().as_str()) {
        return Err(LiteLlmError::bad_request(
            format!("Invalid sort_order: {sort_order}. Must be one of: asc, desc"),
            Some("sort_order"),
        ));
    }
    let span_type = get("span_type");
    if let Some(span) = span_type
        && !["llm", "agent", "mcp", "batch"].contains(&span)
    {
        return Err(LiteLlmError::bad_request(
            format!("Invalid span_type: {span}. Must be one of: llm, agent, mcp, batch"),
            Some("span_type"),
        ));
    }
    let (Some(start), Some(end)) = (get("start_date"), get("end_date")) else {
        return Err(LiteLlmError::bad_request(
            "Start date and end date are required",
            None,
        ));
    };
    Ok(SpendQuery {
        start: date(start)?,
        end: date(end)?,
        page,
        page_size,
        sort_by: sort_by.to_owned(),
        descending: sort_order.eq_ignore_ascii_case("desc"),
        session_id: get("session_id").map(str::to_owned),
        status: get("status_filter").map(str::to_owned),
        model_calls: span_type.is_none_or(|s| s == "llm"),
    })
}

/// An integer query parameter with FastAPI's checks; a failure is added
/// to `invalid` as FastAPI describes it.
fn int(
    value: Option<&str>,
    name: &str,
    min: u64,
    max: Option<u64>,
    invalid: &mut Vec<serde_json::Value>,
) -> Option<u64> {
    let value = value?;
    let loc = json!(["query", name]);
    let Ok(n) = value.trim().parse::<i64>() else {
        invalid.push(json!({"type": "int_parsing", "loc": loc,
            "msg": "Input should be a valid integer, unable to parse string as an integer"}));
        return None;
    };
    if n < 0 || (n as u64) < min {
        invalid.push(json!({"type": "greater_than_equal", "loc": loc,
            "msg": format!("Input should be greater than or equal to {min}")}));
        return None;
    }
    if let Some(max) = max
        && n as u64 > max
    {
        invalid.push(json!({"type": "less_than_equal", "loc": loc,
            "msg": format!("Input should be less than or equal to {max}")}));
        return None;
    }
    Some(n as u64)
}

/// A date as `/spend/logs/v2` parses one, in UTC.
fn date(text: &str) -> Result<DateTime<Utc>, LiteLlmError> {
    let t = text.trim();
    NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S")
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(t, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .map(|d| d.and_utc())
        .ok_or_else(|| {
            LiteLlmError::bad_request(
                format!(
                    "Invalid date format: {t}. Expected: 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS'"
                ),
                None,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(raw: &str) -> Result<SpendQuery, LiteLlmError> {
        parse(Some(raw))
    }

    #[test]
    fn a_full_query_is_read_with_litellms_defaults() {
        let got = q("start_date=2026-10-11%2011:00:00&end_date=2026-10-11+12:00:00&unknown=1");
        let Ok(got) = got else { panic!("{got:?}") };
        assert_eq!(got.start.to_rfc3339(), "2026-10-11T11:00:00+00:00");
        assert_eq!(got.end.to_rfc3339(), "2026-10-11T12:00:00+00:00");
        assert_eq!((got.page, got.page_size), (1, 50));
        assert_eq!((got.sort_by.as_str(), got.descending), ("startTime", true));
        assert!(got.model_calls);
        let day = q("start_date=2026-10-11&end_date=%202026-10-12%20&sort_order=ASC");
        let Ok(day) = day else { panic!("{day:?}") };
        assert_eq!(day.end.to_rfc3339(), "2026-10-12T00:00:00+00:00");
        assert!(!day.descending);
    }

    #[test]
    fn bad_queries_get_litellms_errors() {
        let dates = "start_date=2026-10-11&end_date=2026-10-12";
        let err = |raw: &str| q(raw).err().map(|e| e.body().to_string());
        let e = err(&format!("{dates}&page_size=1001&page=0")).unwrap_or_default();
        assert!(e.contains("less than or equal to 1000"), "{e}");
        assert!(e.contains("greater than or equal to 1"), "{e}");
        let e = err(&format!("{dates}&page=two")).unwrap_or_default();
        assert!(e.contains("int_parsing"), "{e}");
        let e = err(&format!("{dates}&sort_by=cost")).unwrap_or_default();
        assert!(
            e.contains("Invalid sort_by: cost. Must be one of: endTime, model, request_duration_ms, spend, startTime, total_tokens, ttft_ms"),
            "{e}"
        );
        let e = err(&format!("{dates}&sort_order=up")).unwrap_or_default();
        assert!(e.contains("Invalid sort_order: up"), "{e}");
        let e = err(&format!("{dates}&span_type=tool")).unwrap_or_default();
        assert!(e.contains("Invalid span_type: tool"), "{e}");
        let e = err("start_date=2026-10-11").unwrap_or_default();
        assert!(e.contains("Start date and end date are required"), "{e}");
        let e = err("start_date=2026-10-11T11:00:00Z&end_date=2026-10-12").unwrap_or_default();
        assert!(
            e.contains("Invalid date format: 2026-10-11T11:00:00Z. Expected"),
            "{e}"
        );
        assert_eq!(
            q(&format!("{dates}&page_size=1001"))
                .err()
                .map(|e| e.status()),
            Some(422)
        );
        assert_eq!(
            q(&format!("{dates}&sort_by=x")).err().map(|e| e.status()),
            Some(400)
        );
    }
}
