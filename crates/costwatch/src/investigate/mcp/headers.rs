//! The request metadata headers of a 2026-07-28 POST (Streamable HTTP,
//! "Request Metadata"), which mirror the body for intermediaries that route
//! without parsing it:
//! - `MCP-Protocol-Version`: the revision `_meta` names;
//! - `Mcp-Method`: the JSON-RPC method;
//! - `Mcp-Name`: the tool's name, on `tools/call`;
//! - `Mcp-Param-{Name}`: each `tools/call` argument whose property in the
//!   tool's `inputSchema` carries an `x-mcp-header: Name` annotation, when
//!   the argument has a value.
//!
//! A value that is not plain visible ASCII (non-ASCII, control characters,
//! leading or trailing white space, or text that looks like the encoding
//! itself) is sent as `=?base64?<UTF-8 as base64>?=`.
//!
//! An annotation is valid only on a string, integer or boolean property
//! reached from the schema's root through `properties` alone, with a name
//! that is an HTTP token, unique regardless of case. A tool with an invalid
//! annotation must be left out of the tool list ([`check_annotations`]).

use super::PROTOCOL_VERSION;
use base64::Engine;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// The annotation naming a property's header.
const X_MCP_HEADER: &str = "x-mcp-header";

/// The keywords whose value is one subschema that is not reached through
/// `properties` (JSON Schema 2020-12 applicators).
const SINGLE_SUBSCHEMA: [&str; 11] = [
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// The keywords whose value is a list of subschemas.
const LIST_SUBSCHEMAS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// The keywords whose value maps names to subschemas (other than
/// `properties`).
const MAP_SUBSCHEMAS: [&str; 4] = [
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// The headers of a 2026-07-28 request for `method` with `params`;
/// `schema` is the called tool's `inputSchema` when known (its annotations
/// give the `Mcp-Param-*` headers).
pub(super) fn modern_headers(method: &str, params: &Value, schema: Option<&Value>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "mcp-protocol-version",
        HeaderValue::from_static(PROTOCOL_VERSION),
    );
    insert(&mut headers, "mcp-method", method);
    if method != "tools/call" {
        return headers;
    }
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        insert(&mut headers, "mcp-name", name);
    }
    let (Some(schema), Some(arguments)) = (schema, params.get("arguments")) else {
        return headers;
    };
    // A schema with invalid annotations was left out of the tool list;
    // nothing of it is mirrored.
    let Ok(annotated) = annotations(schema) else {
        return headers;
    };
    for (path, token) in annotated {
        let Some(value) = value_at(arguments, &path).and_then(render) else {
            continue;
        };
        insert(&mut headers, &format!("mcp-param-{token}"), &value);
    }
    headers
}

/// Inserts `name: value`, encoding the value when it must be.
fn insert(headers: &mut HeaderMap, name: &str, value: &str) {
    // The name is a fixed name or `mcp-param-` and a checked token; the
    // value is visible ASCII once encoded.
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(&encode(value)),
    ) {
        headers.insert(name, value);
    }
}

/// `value` as a header value: as it is when it is visible ASCII and spaces
/// without leading or trailing white space, otherwise
/// `=?base64?…?=`.
pub(super) fn encode(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

/// A scalar argument as its header text: strings as they are, numbers in
/// decimal, booleans as `true` or `false`; `None` for null, arrays and
/// objects (no header is sent).
fn render(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// The value at `path` (property names from the root) in `arguments`.
fn value_at<'v>(arguments: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter()
        .try_fold(arguments, |node, key| node.as_object()?.get(key))
}

/// Why `schema`'s `x-mcp-header` annotations are invalid, if they are.
pub(super) fn check_annotations(schema: &Value) -> Result<(), String> {
    annotations(schema).map(|_| ())
}

/// The annotated properties of `schema`: each one's path from the root and
/// its header name; `Err` with the reason when an annotation breaks the
/// rules.
fn annotations(schema: &Value) -> Result<Vec<(Vec<String>, String)>, String> {
    let mut found: Vec<(Vec<String>, String)> = Vec::new();
    // Each schema position with its path through `properties` from the
    // root, or `None` once another keyword was crossed. An explicit stack:
    // a deep schema from the server cannot overflow ours.
    let mut stack: Vec<(Option<Vec<String>>, &Value)> = vec![(Some(Vec::new()), schema)];
    while let Some((path, node)) = stack.pop() {
        let Some(object) = node.as_object() else {
            continue;
        };
        if let Some(token) = object.get(X_MCP_HEADER) {
            let where_ = match &path {
                Some(p) if !p.is_empty() => p.join("."),
                _ => {
                    return Err(format!(
                        "{X_MCP_HEADER} on a schema not reached through `properties` alone"
                    ));
                }
            };
            let token = token
                .as_str()
                .ok_or_else(|| format!("property `{where_}`: {X_MCP_HEADER} is not a string"))?;
            if token.is_empty() || !token.bytes().all(is_tchar) {
                return Err(format!(
                    "property `{where_}`: {X_MCP_HEADER} `{}` is not an HTTP token",
                    crate::printable::printable(token)
                ));
            }
            match object.get("type").and_then(Value::as_str) {
                Some("string" | "integer" | "boolean") => {}
                _ => {
                    return Err(format!(
                        "property `{where_}`: {X_MCP_HEADER} is allowed on string, integer and boolean properties only"
                    ));
                }
            }
            if found.iter().any(|(_, t)| t.eq_ignore_ascii_case(token)) {
                return Err(format!(
                    "property `{where_}`: {X_MCP_HEADER} `{token}` is used twice"
                ));
            }
            found.push((path.clone().unwrap_or_default(), token.to_owned()));
        }
        for (keyword, value) in object {
            match keyword.as_str() {
                "properties" => {
                    if let Some(properties) = value.as_object() {
                        for (name, sub) in properties {
                            let sub_path = path.as_ref().map(|p| {
                                let mut p = p.clone();
                                p.push(name.clone());
                                p
                            });
                            stack.push((sub_path, sub));
                        }
                    }
                }
                k if SINGLE_SUBSCHEMA.contains(&k) => stack.push((None, value)),
                k if LIST_SUBSCHEMAS.contains(&k) => {
                    if let Some(items) = value.as_array() {
                        stack.extend(items.iter().map(|sub| (None, sub)));
                    }
                }
                k if MAP_SUBSCHEMAS.contains(&k) => {
                    if let Some(map) = value.as_object() {
                        stack.extend(map.values().map(|sub| (None, sub)));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(found)
}

/// Whether `b` may appear in an HTTP token (RFC 9110 section 5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
        headers.get(name).map(|v| v.to_str().unwrap())
    }

    #[test]
    fn values_that_are_not_plain_ascii_are_sent_as_base64() {
        // The examples of the specification's "Value Encoding" table.
        assert_eq!(encode("us-west1"), "us-west1");
        assert_eq!(encode("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(encode(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(encode("a b"), "a b");
        assert_eq!(encode("tab\there"), "=?base64?dGFiCWhlcmU=?=");
    }

    #[test]
    fn every_request_names_its_method_and_a_call_its_tool() {
        let h = modern_headers("tools/list", &json!({}), None);
        assert_eq!(header(&h, "mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(header(&h, "mcp-method"), Some("tools/list"));
        assert_eq!(header(&h, "mcp-name"), None);
        let h = modern_headers(
            "tools/call",
            &json!({"name": "list_models", "arguments": {}}),
            None,
        );
        assert_eq!(header(&h, "mcp-method"), Some("tools/call"));
        assert_eq!(header(&h, "mcp-name"), Some("list_models"));
        let h = modern_headers("tools/call", &json!({"name": "für"}), None);
        assert_eq!(header(&h, "mcp-name"), Some("=?base64?ZsO8cg==?="));
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn annotated_arguments_are_mirrored_when_they_have_a_value() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "limit": {"type": "integer", "x-mcp-header": "Limit"},
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                "note": {"type": "string", "x-mcp-header": "Note"},
                "absent": {"type": "string", "x-mcp-header": "Absent"},
                "scope": {
                    "type": "object",
                    "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
                },
                "query": {"type": "string"},
            },
        });
        let params = json!({"name": "q", "arguments": {
            "region": "us-west1", "limit": 42, "dry": false, "note": "naïve",
            "scope": {"tenant": "acme"}, "query": "SELECT 1",
        }});
        let h = modern_headers("tools/call", &params, Some(&schema));
        assert_eq!(header(&h, "mcp-param-region"), Some("us-west1"));
        assert_eq!(header(&h, "mcp-param-limit"), Some("42"));
        assert_eq!(header(&h, "mcp-param-dry-run"), Some("false"));
        assert_eq!(header(&h, "mcp-param-note"), Some("=?base64?bmHDr3Zl?="));
        assert_eq!(header(&h, "mcp-param-tenant"), Some("acme"));
        assert_eq!(header(&h, "mcp-param-absent"), None);
        // Null is no value either.
        let params = json!({"name": "q", "arguments": {"region": null}});
        let h = modern_headers("tools/call", &params, Some(&schema));
        assert_eq!(header(&h, "mcp-param-region"), None);
    }

    #[test]
    fn annotations_off_the_rules_make_the_tool_invalid() {
        let ok = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "A"},
            "b": {"type": "object", "properties": {"c": {"type": "integer", "x-mcp-header": "C"}}},
        }});
        assert_eq!(check_annotations(&ok), Ok(()));
        assert_eq!(check_annotations(&json!({"type": "object"})), Ok(()));
        let bad = [
            // On a number.
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            // Not a token.
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": 7}}}),
            // Twice, whatever the case.
            json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "Key"},
                "b": {"type": "string", "x-mcp-header": "key"},
            }}),
            // Through `items` or a composition, or on the root.
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"type": "string", "x-mcp-header": "Root"}),
        ];
        for schema in bad {
            assert!(check_annotations(&schema).is_err(), "{schema}");
        }
        // An invalid schema mirrors nothing.
        let params = json!({"name": "t", "arguments": {"a": "x"}});
        let h = modern_headers(
            "tools/call",
            &params,
            Some(&json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}})),
        );
        assert_eq!(header(&h, "mcp-param-a"), None);
    }
}
