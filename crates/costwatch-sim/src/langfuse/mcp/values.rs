//! `getObservationFilterValues`, `getObservationFieldSchema` and
//! `getObservationFilterSchema`
//! (`features/observations/tools/getObservationFilterValues.ts`,
//! `getObservationFieldSchema.ts`, `getObservationFilterSchema.ts`).

use super::filters::COLUMNS;
use super::input::{Args, Failure};
use super::json::Node;
use super::observations::{Ctx, FIELDS, SCOPE_REQUIREMENT, row_of, scope};
use super::tools::TYPES;
use crate::langfuse::paging::Listing;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::Duration;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::PoisonError;

/// The columns `getObservationFilterValues` answers for.
pub(super) const VALUE_COLUMNS: [&str; 19] = [
    "name",
    "type",
    "environment",
    "version",
    "userId",
    "sessionId",
    "traceName",
    "level",
    "promptName",
    "promptVersion",
    "modelId",
    "providedModelName",
    "totalCost",
    "totalTokens",
    "latency",
    "timeToFirstToken",
    "tags",
    "isRootObservation",
    "hasParentObservation",
];

/// The numeric columns among them: a range, not values.
const NUMERIC: [&str; 5] = [
    "promptVersion",
    "totalCost",
    "totalTokens",
    "latency",
    "timeToFirstToken",
];

/// How far back the values are looked for without `fromStartTime`.
const LOOKBACK_DAYS: i64 = 30;

/// The row key a value column is read from.
fn row_key(column: &str) -> &str {
    match column {
        "providedModelName" => "model",
        "totalTokens" => "totalUsage",
        other => other,
    }
}

/// The offset in a values cursor: base64 of `{"offset": n}`.
fn decode_offset(cursor: Option<&str>) -> Result<usize, Failure> {
    let Some(cursor) = cursor else {
        return Ok(0);
    };
    STANDARD
        .decode(cursor)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("offset").and_then(Value::as_u64))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Failure::Request("Invalid cursor format".to_owned()))
}

/// `getObservationFilterValues`.
pub(super) fn filter_values(ctx: &Ctx<'_>, arguments: Option<&Value>) -> Result<Node, Failure> {
    let mut a = Args::new(arguments);
    let column = a.enumerated("column", &VALUE_COLUMNS, true);
    let from = a.opt_time("fromStartTime");
    let to = a.opt_time("toStartTime");
    let kind = a.enumerated("observationType", &TYPES, false);
    let is_root = a.opt_bool("isRootObservation");
    let has_parent = a.opt_bool("hasParentObservation");
    let limit = a.limit("limit");
    let cursor = a.opt_string("cursor");
    a.finish()?;
    let column = column.unwrap_or_default();

    let from = from.or_else(|| ctx.now.map(|now| now - Duration::days(LOOKBACK_DAYS)));
    let shape = ctx.sim.shape.read().unwrap_or_else(PoisonError::into_inner);
    let dataset = &ctx.sim.dataset;
    let listing = Listing::new(
        dataset,
        &scope(from, to, kind, is_root),
        ctx.now,
        &shape.without_session,
    );
    // Every simulated observation is a root without a parent.
    let rows: Vec<Map<String, Value>> = if has_parent == Some(true) {
        Vec::new()
    } else {
        listing
            .entries()
            .iter()
            .map(|e| row_of(e, &shape, dataset))
            .collect()
    };

    if NUMERIC.contains(&column.as_str()) {
        let numbers: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.get(row_key(&column)).and_then(Value::as_f64))
            .collect();
        let range = if numbers.is_empty() {
            Node::Value(Value::Null)
        } else {
            let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
            let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let avg = numbers.iter().sum::<f64>() / numbers.len() as f64;
            Node::object([
                ("min", Node::Value(json!(min))),
                ("max", Node::Value(json!(max))),
                ("avg", Node::Value(json!(avg))),
                ("count", Node::Value(json!(numbers.len()))),
            ])
        };
        return Ok(Node::object([
            ("type", Node::Value(json!("RANGE"))),
            ("column", Node::Value(json!(column))),
            ("range", range),
            ("meta", Node::Object(Vec::new())),
        ]));
    }

    let offset = decode_offset(cursor.as_deref())?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows {
        let found: Vec<String> = match column.as_str() {
            "tags" => row
                .get("tags")
                .and_then(Value::as_array)
                .map(|t| {
                    t.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            "isRootObservation" => vec![true.to_string()],
            "hasParentObservation" => vec![false.to_string()],
            other => row
                .get(row_key(other))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .into_iter()
                .collect(),
        };
        for v in found.into_iter().filter(|v| !v.is_empty()) {
            *counts.entry(v).or_default() += 1;
        }
    }
    let mut sorted: Vec<(String, u64)> = counts.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let page: Vec<Node> = sorted
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(value, count)| {
            let value = match (column.as_str(), value.as_str()) {
                ("isRootObservation" | "hasParentObservation", "true") => json!(true),
                ("isRootObservation" | "hasParentObservation", "false") => json!(false),
                _ => json!(value),
            };
            if column == "tags" {
                Node::object([("value", Node::Value(value))])
            } else {
                Node::object([
                    ("value", Node::Value(value)),
                    ("count", Node::Value(json!(count))),
                ])
            }
        })
        .collect();
    let meta = if sorted.len() > offset + limit {
        let next = STANDARD.encode(json!({ "offset": offset + limit }).to_string());
        Node::object([("cursor", Node::Value(json!(next)))])
    } else {
        Node::Object(Vec::new())
    };
    Ok(Node::object([
        ("type", Node::Value(json!("VALUES"))),
        ("column", Node::Value(json!(column))),
        ("values", Node::Array(page)),
        ("meta", meta),
    ]))
}

/// `getObservationFieldSchema`.
pub(super) fn field_schema() -> Node {
    let defaults: Vec<Node> = FIELDS
        .iter()
        .filter(|d| d.default)
        .map(|d| Node::Value(json!(d.name)))
        .collect();
    let fields: Vec<(String, Node)> = FIELDS
        .iter()
        .map(|d| {
            let mut pairs = vec![
                ("type", Node::Value(json!(d.ty))),
                ("nullable", Node::Value(json!(d.nullable))),
                ("default", Node::Value(json!(d.default))),
                ("expensive", Node::Value(json!(d.expensive))),
                ("sensitive", Node::Value(json!(d.sensitive))),
            ];
            if d.scoped {
                pairs.push(("requiresScope", Node::Value(json!(true))));
                pairs.push(("scopeRequirement", Node::Value(json!(SCOPE_REQUIREMENT))));
            }
            if let Some(text) = d.description {
                pairs.push(("description", Node::Value(json!(text))));
            }
            (d.name.to_owned(), Node::object(pairs))
        })
        .collect();
    Node::object([
        ("resource", Node::Value(json!("observation"))),
        ("defaultFields", Node::Array(defaults)),
        ("fields", Node::Object(fields)),
    ])
}

/// `getObservationFilterSchema`.
pub(super) fn filter_schema() -> Node {
    let columns: Vec<(String, Node)> = COLUMNS
        .iter()
        .map(|&(name, kind, nullable)| {
            let node = Node::object([
                ("type", Node::Value(json!(kind.name()))),
                ("operators", Node::Value(json!(kind.operators()))),
                ("nullable", Node::Value(json!(nullable))),
                (
                    "requiresKey",
                    Node::Value(json!(kind == super::filters::Kind::StringObject)),
                ),
            ]);
            (name.to_owned(), node)
        })
        .collect();
    Node::object([
        ("resource", Node::Value(json!("observation"))),
        ("columns", Node::Object(columns)),
    ])
}
