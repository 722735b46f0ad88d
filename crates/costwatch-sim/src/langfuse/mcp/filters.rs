//! `listObservations`' advanced filters (`filter: [{column, operator,
//! value, type?, key?}]`): the columns MCP allows and their types
//! (`packages/shared/src/eventsTable.ts`, in its order), the operators of
//! each type (`packages/shared/src/interfaces/filters.ts`), the checks of
//! `ObservationMcpFilterSchema` (an exact `id` filter becomes `any of`;
//! `type` may be left out, and when given must be the column's), and how
//! each filter selects an observation (a `null` field matches nothing).

use super::input::{Args, coerce_date, expected, one_of};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// A filter column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    StringOptions,
    ArrayOptions,
    Number,
    Datetime,
    StringObject,
    Boolean,
}

impl Kind {
    /// Its name in filters.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::StringOptions => "stringOptions",
            Kind::ArrayOptions => "arrayOptions",
            Kind::Number => "number",
            Kind::Datetime => "datetime",
            Kind::StringObject => "stringObject",
            Kind::Boolean => "boolean",
        }
    }

    /// Its operators (`filterOperators`).
    pub(super) fn operators(self) -> &'static [&'static str] {
        match self {
            Kind::String | Kind::StringObject => &[
                "=",
                "contains",
                "does not contain",
                "starts with",
                "ends with",
            ],
            Kind::StringOptions => &["any of", "none of"],
            Kind::ArrayOptions => &["any of", "none of", "all of"],
            Kind::Number => &["=", ">", "<", ">=", "<="],
            Kind::Datetime => &[">", "<", ">=", "<="],
            Kind::Boolean => &["=", "<>"],
        }
    }
}

/// The columns MCP filters on, in `eventsTableCols` order: name, type,
/// nullable. `tags` is the events table's `traceTags`.
pub(super) const COLUMNS: [(&str, Kind, bool); 31] = [
    ("id", Kind::StringOptions, false),
    ("traceId", Kind::String, false),
    ("startTime", Kind::Datetime, false),
    ("endTime", Kind::Datetime, true),
    ("name", Kind::StringOptions, true),
    ("type", Kind::StringOptions, false),
    ("environment", Kind::StringOptions, true),
    ("version", Kind::String, true),
    ("userId", Kind::String, true),
    ("sessionId", Kind::String, true),
    ("traceName", Kind::StringOptions, true),
    ("level", Kind::StringOptions, false),
    ("statusMessage", Kind::String, true),
    ("promptName", Kind::StringOptions, true),
    ("promptVersion", Kind::Number, true),
    ("modelId", Kind::StringOptions, true),
    ("providedModelName", Kind::StringOptions, true),
    ("totalCost", Kind::Number, true),
    ("inputTokens", Kind::Number, true),
    ("outputTokens", Kind::Number, true),
    ("totalTokens", Kind::Number, true),
    ("inputCost", Kind::Number, true),
    ("outputCost", Kind::Number, true),
    ("latency", Kind::Number, true),
    ("timeToFirstToken", Kind::Number, true),
    ("input", Kind::String, true),
    ("output", Kind::String, true),
    ("metadata", Kind::StringObject, false),
    ("tags", Kind::ArrayOptions, false),
    ("hasParentObservation", Kind::Boolean, false),
    ("isRootObservation", Kind::Boolean, false),
];

/// One checked filter.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Filter {
    pub column: String,
    pub kind: Kind,
    pub operator: String,
    pub value: Value,
    pub key: Option<String>,
}

/// JavaScript truthiness, for `Boolean(filter.type)`.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// `normalizeExactObservationIdFilter`: `id = x` becomes `id any of [x]`.
fn normalize(item: &Value) -> Value {
    let Some(o) = item.as_object() else {
        return item.clone();
    };
    let type_ok = o.get("type").is_none_or(|t| t == "string");
    if o.get("column") == Some(&json!("id"))
        && o.get("operator") == Some(&json!("="))
        && o.get("value").is_some_and(Value::is_string)
        && type_ok
    {
        let mut out = o.clone();
        out.insert("type".into(), json!("stringOptions"));
        out.insert("operator".into(), json!("any of"));
        out.insert("value".into(), json!([o["value"]]));
        return Value::Object(out);
    }
    item.clone()
}

/// Checks `value` for `kind`; the issue's path below the filter and its
/// message.
fn check_value(kind: Kind, value: Option<&Value>) -> Option<(String, String)> {
    let strings = |v: Option<&Value>, non_empty: bool| match v {
        Some(Value::Array(items)) => {
            if let Some((j, bad)) = items.iter().enumerate().find(|(_, i)| !i.is_string()) {
                return Some((format!("value.{j}"), expected("string", Some(bad))));
            }
            (non_empty && items.is_empty())
                .then(|| ("value".to_owned(), "Invalid input".to_owned()))
        }
        other => Some(("value".to_owned(), expected("array", other))),
    };
    match kind {
        Kind::String | Kind::StringObject => (!value.is_some_and(Value::is_string))
            .then(|| ("value".to_owned(), expected("string", value))),
        Kind::Number => (!value.is_some_and(Value::is_number))
            .then(|| ("value".to_owned(), expected("number", value))),
        Kind::Boolean => (!value.is_some_and(Value::is_boolean))
            .then(|| ("value".to_owned(), expected("boolean", value))),
        Kind::Datetime => value.and_then(coerce_date).is_none().then(|| {
            (
                "value".to_owned(),
                "Invalid input: expected date, received Date".to_owned(),
            )
        }),
        Kind::StringOptions => strings(value, true),
        Kind::ArrayOptions => strings(value, false),
    }
}

/// The `filter` argument, checked; issues go to `args`.
pub(super) fn parse(args: &mut Args<'_>) -> Vec<Filter> {
    let items = match args.get("filter") {
        None => return Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        other => {
            args.issue("filter", expected("array", other));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = |p: &str| format!("filter.{i}.{p}");
        let item = normalize(item);
        let Some(o) = item.as_object() else {
            args.issue(&format!("filter.{i}"), expected("object", Some(&item)));
            continue;
        };
        let column = match o.get("column") {
            Some(Value::String(c)) => c.clone(),
            other => {
                args.issue(&at("column"), expected("string", other));
                continue;
            }
        };
        let Some(&(_, kind, _)) = COLUMNS.iter().find(|(name, _, _)| *name == column) else {
            args.issue(
                &at("column"),
                format!(
                    "Invalid observation filter column \"{column}\". Call getObservationFilterSchema for accepted columns."
                ),
            );
            continue;
        };
        let before = args.count();
        if kind == Kind::StringObject && !o.get("key").is_some_and(Value::is_string) {
            args.issue(&at("key"), expected("string", o.get("key")));
        }
        let operator = o
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !kind.operators().contains(&operator) {
            args.issue(&at("operator"), one_of(kind.operators()));
        }
        if let Some((path, message)) = check_value(kind, o.get("value")) {
            args.issue(&at(&path), message);
        }
        if truthy(o.get("type")) && o.get("type") != Some(&json!(kind.name())) {
            args.issue(
                &at("type"),
                format!("Invalid input: expected \"{}\"", kind.name()),
            );
        }
        if args.count() > before {
            continue;
        }
        out.push(Filter {
            column,
            kind,
            operator: operator.to_owned(),
            value: o.get("value").cloned().unwrap_or(Value::Null),
            key: o.get("key").and_then(Value::as_str).map(str::to_owned),
        });
    }
    out
}

/// The observation's value for a filter column, read from its row of the
/// v2 API with every field group.
fn field<'r>(row: &'r Map<String, Value>, column: &str) -> Option<&'r Value> {
    let key = match column {
        "providedModelName" => "model",
        "inputTokens" => "inputUsage",
        "outputTokens" => "outputUsage",
        "totalTokens" => "totalUsage",
        other => other,
    };
    row.get(key).filter(|v| !v.is_null())
}

fn compare_str(operator: &str, have: &str, want: &str) -> bool {
    match operator {
        "=" => have == want,
        "contains" => have.contains(want),
        "does not contain" => !have.contains(want),
        "starts with" => have.starts_with(want),
        "ends with" => have.ends_with(want),
        _ => false,
    }
}

fn compare<T: PartialOrd>(operator: &str, have: T, want: T) -> bool {
    match operator {
        "=" => have == want,
        ">" => have > want,
        "<" => have < want,
        ">=" => have >= want,
        "<=" => have <= want,
        _ => false,
    }
}

impl Filter {
    /// Whether the observation whose v2 row is `row` passes.
    pub(super) fn keeps(&self, row: &Map<String, Value>) -> bool {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        if self.column == "hasParentObservation" {
            let has = row.get("parentObservationId").is_some_and(|p| !p.is_null());
            return self.bool_matches(has);
        }
        let Some(have) = field(row, &self.column) else {
            return false;
        };
        match self.kind {
            Kind::String => have
                .as_str()
                .zip(self.value.as_str())
                .is_some_and(|(h, w)| compare_str(&self.operator, h, w)),
            Kind::StringObject => {
                let key = self.key.as_deref().unwrap_or_default();
                let text = match have.get(key) {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                self.value
                    .as_str()
                    .is_some_and(|w| compare_str(&self.operator, &text, w))
            }
            Kind::StringOptions => {
                let Some(h) = have.as_str() else {
                    return false;
                };
                let listed = strings(&self.value).iter().any(|w| w == h);
                (self.operator == "any of") == listed
            }
            Kind::ArrayOptions => {
                let (have, want) = (strings(have), strings(&self.value));
                match self.operator.as_str() {
                    "any of" => want.iter().any(|w| have.contains(w)),
                    "none of" => !want.iter().any(|w| have.contains(w)),
                    _ => want.iter().all(|w| have.contains(w)),
                }
            }
            Kind::Number => have
                .as_f64()
                .zip(self.value.as_f64())
                .is_some_and(|(h, w)| compare(&self.operator, h, w)),
            Kind::Datetime => {
                let have: Option<DateTime<Utc>> = have.as_str().and_then(super::input::parse_time);
                have.zip(coerce_date(&self.value))
                    .is_some_and(|(h, w)| compare(&self.operator, h, w))
            }
            Kind::Boolean => have.as_bool().is_some_and(|h| self.bool_matches(h)),
        }
    }

    fn bool_matches(&self, have: bool) -> bool {
        let want = self.value.as_bool().unwrap_or_default();
        (self.operator == "=") == (have == want)
    }

    /// Whether this is an exact filter on ids (a selective scope).
    pub(super) fn is_id_filter(&self) -> bool {
        self.column == "id"
            && self.kind == Kind::StringOptions
            && self.operator == "any of"
            && self.value.as_array().is_some_and(|v| !v.is_empty())
    }
}
