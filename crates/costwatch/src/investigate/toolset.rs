//! Which tools an investigation is offered, and how their schemas are sent.
//!
//! Tool schemas are billed as prompt tokens on every call, whether the
//! model uses them or not, and most of their cost is in the parameter
//! schemas. So a run is offered only the tools its incident needs, and
//! each schema is sent in a compact, canonical form:
//!
//! - **Per kind of waste, one tool.** Every waste incident is about named
//!   sessions whose figures the digest already carries; what the model
//!   lacks is their request rows (statuses, tokens, cost per call), which
//!   `search_requests` returns. [`needed_tools`] says so per kind; the
//!   offered list is the configured allowlist filtered by it, in the
//!   allowlist's order, and the whole allowlist when the filter leaves
//!   nothing (a configuration without `search_requests`).
//! - **Compact schemas** ([`compact_schema`]): `title`s (the server's
//!   labels for people), `$schema`, `default: null` and the `anyOf [X,
//!   null]` wrappers SDKs write for optional parameters are dropped, so
//!   `{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,
//!   "title":"Session Id"}` becomes `{"type":"string"}`; an empty
//!   `required` list goes too. An optional
//!   parameter stays optional (it is not in `required`); nothing the model
//!   may send changes.
//! - **Byte-identical across runs.** The list and the schemas are pure
//!   functions of the server's listing, the allowlist and the kind, and
//!   JSON objects serialize with sorted keys, so the tools, then the fixed
//!   system instruction, open every request alike: a provider's prompt
//!   cache can serve that prefix to every run.

use super::ToolSpec;
use crate::domain::Kind;
use serde_json::{Map, Value};

/// The tools an incident of `kind` needs, or `None` when it needs every
/// configured tool (alerts that are not about waste).
pub fn needed_tools(kind: Option<Kind>) -> Option<&'static [&'static str]> {
    match kind {
        // The digest names the sessions and their totals; their request
        // rows show the cause: failed calls in a row (retry loop), cached
        // tokens per call (no cache), the model and size of each call
        // (oversized model).
        Some(Kind::NoCache | Kind::OversizedModel | Kind::RetryLoop) => Some(&["search_requests"]),
        None => None,
    }
}

/// The tools offered for an incident of `kind`: the `allowlist` entries the
/// server `listed`, in allowlist order, kept to what the kind needs (all of
/// them if that leaves none), each with a compact schema. The second list
/// holds the allowlisted tools the server does not list.
pub fn offered_tools(
    listed: &[ToolSpec],
    allowlist: &[String],
    kind: Option<Kind>,
) -> (Vec<ToolSpec>, Vec<String>) {
    let mut available = Vec::new();
    let mut missing = Vec::new();
    for name in allowlist {
        if available.iter().any(|t: &ToolSpec| &t.name == name) {
            continue;
        }
        match listed.iter().find(|t| &t.name == name) {
            Some(spec) => available.push(spec.clone()),
            None if !missing.contains(name) => missing.push(name.clone()),
            None => {}
        }
    }
    if let Some(needed) = needed_tools(kind) {
        let kept: Vec<ToolSpec> = available
            .iter()
            .filter(|t| needed.contains(&t.name.as_str()))
            .cloned()
            .collect();
        if !kept.is_empty() {
            available = kept;
        }
    }
    let offered = available
        .into_iter()
        .map(|t| ToolSpec {
            input_schema: compact_schema(&t.input_schema),
            ..t
        })
        .collect();
    (offered, missing)
}

/// `schema` without what does not change what the model may send: titles,
/// `$schema`, `default: null`, and `anyOf` wrappers whose only other branch
/// is `{"type": "null"}` (the wrapped schema takes their place).
pub fn compact_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            // `{"anyOf": [X, {"type": "null"}], ...}` -> X with the rest.
            if let Some(Value::Array(branches)) = map.get("anyOf") {
                let non_null: Vec<&Value> = branches.iter().filter(|b| !is_null_type(b)).collect();
                if non_null.len() == 1 && branches.len() == 2 {
                    if let Value::Object(inner) = compact_schema(non_null[0]) {
                        out.extend(inner);
                    }
                    for (k, v) in map {
                        if k != "anyOf" && !dropped(k, v) && !out.contains_key(k) {
                            out.insert(k.clone(), compact_schema(v));
                        }
                    }
                    return Value::Object(out);
                }
            }
            for (k, v) in map {
                if dropped(k, v) {
                    continue;
                }
                // Property names are data, not schema keywords: keep them all.
                if k == "properties"
                    && let Value::Object(props) = v
                {
                    let props = props
                        .iter()
                        .map(|(name, s)| (name.clone(), compact_schema(s)))
                        .collect();
                    out.insert(k.clone(), Value::Object(props));
                    continue;
                }
                out.insert(k.clone(), compact_schema(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(compact_schema).collect()),
        other => other.clone(),
    }
}

/// Keywords that change nothing the model may send.
fn dropped(key: &str, value: &Value) -> bool {
    matches!(key, "title" | "$schema")
        || (key == "default" && value.is_null())
        || (key == "required" && value.as_array().is_some_and(Vec::is_empty))
}

fn is_null_type(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
        && v.as_object().is_some_and(|o| o.len() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `search_requests` as the official Python SDK lists it.
    fn sdk_search_requests() -> ToolSpec {
        ToolSpec {
            name: "search_requests".into(),
            description: "Request rows of one session.".into(),
            input_schema: json!({
                "properties": {
                    "session_id": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Session Id"},
                    "labels": {"anyOf": [{"additionalProperties": {"type": "string"}, "type": "object"}, {"type": "null"}], "default": null, "title": "Labels"},
                    "limit": {"default": 50, "title": "Limit", "type": "integer"},
                    "title": {"type": "string", "title": "Title"}
                },
                "required": ["title"],
                "type": "object",
                "title": "search_requestsArguments"
            }),
        }
    }

    #[test]
    fn sdk_schemas_lose_their_wrappers_and_titles_but_no_parameter() {
        let compact = compact_schema(&sdk_search_requests().input_schema);
        assert_eq!(
            compact,
            json!({
                "properties": {
                    "session_id": {"type": "string"},
                    "labels": {"additionalProperties": {"type": "string"}, "type": "object"},
                    "limit": {"default": 50, "type": "integer"},
                    "title": {"type": "string"}
                },
                "required": ["title"],
                "type": "object"
            })
        );
        let before = sdk_search_requests().input_schema.to_string().len();
        assert!(compact.to_string().len() * 3 < before * 2, "{compact}");
        // A union of two real types is kept as it is.
        let union = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        assert_eq!(compact_schema(&union), union);
    }

    #[test]
    fn a_waste_incident_is_offered_only_search_requests_in_a_stable_form() {
        let listed = vec![
            ToolSpec {
                name: "list_sessions".into(),
                description: "Sessions.".into(),
                input_schema: json!({"type": "object"}),
            },
            sdk_search_requests(),
        ];
        let allow: Vec<String> = ["search_requests", "get_request", "list_sessions"]
            .iter()
            .map(|t| (*t).to_owned())
            .collect();
        let (offered, missing) = offered_tools(&listed, &allow, Some(Kind::RetryLoop));
        assert_eq!(
            offered.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["search_requests"]
        );
        assert_eq!(missing, ["get_request"]);
        // Every kind gets the same bytes.
        let (again, _) = offered_tools(&listed, &allow, Some(Kind::NoCache));
        assert_eq!(
            serde_json::to_string(&offered).unwrap(),
            serde_json::to_string(&again).unwrap()
        );
        // Not about waste: every configured tool the server lists.
        let (all, _) = offered_tools(&listed, &allow, None);
        assert_eq!(all.len(), 2);
        // Without search_requests configured: the allowlist as it is.
        let only = vec!["list_sessions".to_owned()];
        let (fallback, _) = offered_tools(&listed, &only, Some(Kind::NoCache));
        assert_eq!(fallback[0].name, "list_sessions");
    }
}
