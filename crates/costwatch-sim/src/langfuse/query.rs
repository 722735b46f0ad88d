//! The query string of `GET /api/public/v2/observations`, checked as the
//! server's zod schema checks it (`GetObservationsV2Query` in
//! `web/src/features/public-api/types/observations.ts`): every problem is
//! an issue in the 400's `error` list, parameters it does not know are
//! ignored, unknown field groups are dropped, and a cursor that does not
//! decode is a 400 of its own (`Invalid cursor format`).
//!
//! One choice of the simulator: a `limit` that is not a whole number is
//! refused (the server passes it on to its database).

use super::paging::{Cursor, decode_cursor};
use super::{ApiError, MAX_LIMIT};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Observation types the API knows.
const TYPES: [&str; 10] = [
    "GENERATION",
    "SPAN",
    "EVENT",
    "AGENT",
    "TOOL",
    "CHAIN",
    "RETRIEVER",
    "EVALUATOR",
    "EMBEDDING",
    "GUARDRAIL",
];

/// Observation levels.
const LEVELS: [&str; 4] = ["DEBUG", "DEFAULT", "WARNING", "ERROR"];

/// The field groups a row can carry beside `core`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Groups {
    pub basic: bool,
    pub time: bool,
    pub io: bool,
    pub metadata: bool,
    pub model: bool,
    pub usage: bool,
    pub prompt: bool,
    pub metrics: bool,
    pub trace_context: bool,
}

impl Groups {
    /// `core` and `basic`: what a query without `fields` gets.
    fn default_groups() -> Groups {
        Groups {
            basic: true,
            ..Groups::default()
        }
    }

    /// A comma-separated list; names it does not know are dropped.
    fn parse(list: &str) -> Groups {
        let mut g = Groups::default();
        for name in list.split(',').map(str::trim) {
            match name {
                "basic" => g.basic = true,
                "time" => g.time = true,
                "io" => g.io = true,
                "metadata" => g.metadata = true,
                "model" => g.model = true,
                "usage" => g.usage = true,
                "prompt" => g.prompt = true,
                "metrics" => g.metrics = true,
                "trace_context" => g.trace_context = true,
                _ => {}
            }
        }
        g
    }
}

/// A checked query.
#[derive(Debug, Clone)]
pub(super) struct ObservationsQuery {
    pub fields: Groups,
    pub limit: usize,
    pub cursor: Option<Cursor>,
    /// The raw cursor, to tell pages apart.
    pub cursor_text: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub kind: Option<String>,
    pub level: Option<String>,
    pub name: Option<String>,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    pub trace_id: Option<String>,
    pub version: Option<String>,
    pub parent_observation_id: Option<String>,
    pub is_root: Option<bool>,
    pub environments: Vec<String>,
}

/// Parameters that take one value; a second one is an array to zod.
const SINGLE: [&str; 16] = [
    "fields",
    "expandMetadata",
    "limit",
    "cursor",
    "parseIoAsJson",
    "type",
    "name",
    "userId",
    "sessionId",
    "level",
    "traceId",
    "version",
    "parentObservationId",
    "isRootObservation",
    "fromStartTime",
    "toStartTime",
];

impl ObservationsQuery {
    /// Parses and checks `raw`.
    pub(super) fn parse(raw: Option<&str>) -> Result<ObservationsQuery, ApiError> {
        let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            params
                .entry(k.into_owned())
                .or_default()
                .push(v.into_owned());
        }
        let mut issues = Vec::new();
        let mut one = |name: &str| -> Option<String> {
            let values = params.get(name)?;
            if values.len() > 1 {
                issues.push(json!({
                    "expected": "string", "code": "invalid_type", "path": [name],
                    "message": "Invalid input: expected string, received array"
                }));
                return None;
            }
            values.first().cloned()
        };
        let mut single: BTreeMap<&str, Option<String>> = BTreeMap::new();
        for name in SINGLE {
            single.insert(name, one(name));
        }
        let get = |name: &str| single.get(name).cloned().flatten();
        // The cursor is decoded inside the schema, and a failure there is
        // thrown rather than collected.
        let cursor_text = get("cursor");
        let cursor = match &cursor_text {
            Some(text) => Some(decode_cursor(text).map_err(|shape| match shape {
                None => ApiError::named(
                    StatusCode::BAD_REQUEST,
                    "Invalid cursor format",
                    "InvalidRequestError",
                ),
                Some(issue) => ApiError::invalid(vec![issue]),
            })?),
            None => None,
        };
        let limit = get("limit").map_or(Some(50), |v| limit(&v, &mut issues));
        let from = get("fromStartTime").and_then(|v| time("fromStartTime", &v, &mut issues));
        let to = get("toStartTime").and_then(|v| time("toStartTime", &v, &mut issues));
        let kind = get("type").filter(|v| one_of("type", v, &TYPES, &mut issues));
        let level = get("level").filter(|v| one_of("level", v, &LEVELS, &mut issues));
        let is_root = get("isRootObservation").and_then(|v| match v.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                one_of("isRootObservation", &v, &["true", "false"], &mut issues);
                None
            }
        });
        match get("parseIoAsJson").as_deref() {
            None | Some("false") => {}
            Some("true") => issues.push(json!({
                "code": "custom", "path": ["parseIoAsJson"],
                "message": "parseIoAsJson=true is no longer supported on the v2 observations endpoint. Input/output fields are always returned as raw strings. Remove the parseIoAsJson parameter or set it to false."
            })),
            Some(other) => {
                one_of("parseIoAsJson", other, &["true", "false"], &mut issues);
            }
        }
        if params.contains_key("filter") {
            issues.push(json!({
                "code": "custom", "path": ["filter"],
                "message": "the simulator does not implement the filter parameter"
            }));
        }
        if !issues.is_empty() {
            return Err(ApiError::invalid(issues));
        }
        Ok(ObservationsQuery {
            fields: get("fields").map_or_else(Groups::default_groups, |v| Groups::parse(&v)),
            limit: limit.unwrap_or(50),
            cursor,
            cursor_text,
            from,
            to,
            kind,
            level,
            name: get("name"),
            user_id: get("userId"),
            session_id: get("sessionId"),
            trace_id: get("traceId"),
            version: get("version"),
            parent_observation_id: get("parentObservationId"),
            is_root,
            environments: params.get("environment").cloned().unwrap_or_default(),
        })
    }
}

/// `z.coerce.number().nonnegative().lte(1000)`.
fn limit(value: &str, issues: &mut Vec<Value>) -> Option<usize> {
    let trimmed = value.trim();
    // `Number("")` is 0.
    let n: f64 = if trimmed.is_empty() {
        0.0
    } else {
        trimmed.parse().unwrap_or(f64::NAN)
    };
    let issue = if n.is_nan() {
        json!({"expected": "number", "code": "invalid_type", "received": "NaN", "path": ["limit"],
               "message": "Invalid input: expected number, received NaN"})
    } else if n < 0.0 {
        json!({"origin": "number", "code": "too_small", "minimum": 0, "inclusive": true,
               "path": ["limit"], "message": "Too small: expected number to be >=0"})
    } else if n > MAX_LIMIT as f64 {
        json!({"origin": "number", "code": "too_big", "maximum": MAX_LIMIT, "inclusive": true,
               "path": ["limit"], "message": format!("Too big: expected number to be <={MAX_LIMIT}")})
    } else if n.fract() != 0.0 {
        json!({"code": "custom", "path": ["limit"],
               "message": "the simulator takes whole numbers only"})
    } else {
        return Some(n as usize);
    };
    issues.push(issue);
    None
}

/// An ISO 8601 time with a zone (`z.iso.datetime({offset: true})`).
fn time(name: &str, value: &str, issues: &mut Vec<Value>) -> Option<DateTime<Utc>> {
    match DateTime::parse_from_rfc3339(value) {
        Ok(t) => Some(t.with_timezone(&Utc)),
        Err(_) => {
            issues.push(json!({
                "origin": "string", "code": "invalid_format", "format": "datetime",
                "path": [name], "message": "Invalid ISO datetime"
            }));
            None
        }
    }
}

/// Whether `value` is one of `allowed`; records the issue if not.
fn one_of(name: &str, value: &str, allowed: &[&str], issues: &mut Vec<Value>) -> bool {
    if allowed.contains(&value) {
        return true;
    }
    let options: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    issues.push(json!({
        "code": "invalid_value", "values": allowed, "path": [name],
        "message": format!("Invalid option: expected one of {}", options.join("|"))
    }));
    false
}
