//! OTLP/JSON as the specification allows it, where `opentelemetry-proto`'s
//! serde derives are stricter.
//!
//! OTLP/JSON is the proto3 JSON mapping, in which a field at its default
//! value may be left out and `null` means the default. The derives of
//! `opentelemetry-proto` 0.33 require some fields anyway: `values` of an
//! empty `arrayValue` or `kvlistValue` (what the Collector writes for an
//! empty list attribute), `key` of a key-value, every field of an
//! `entityRefs` entry; and they refuse `null` where a list or a number is
//! expected. Receivers may also meet enum names (`"SPAN_KIND_CLIENT"`,
//! `"STATUS_CODE_ERROR"`), which the proto3 JSON mapping accepts, and
//! `"NaN"` or `"Infinity"` as a `doubleValue`.
//!
//! A body is read with the derives first. Only when they refuse it is the
//! JSON read as a tree, filled in as above, and read again; a value whose
//! `doubleValue` is not finite becomes an empty value (it is no token
//! count anyway).

use super::decode::DecodeError;
use crate::printable::printable;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::{Map, Value};

/// Reads an export request from OTLP/JSON text.
pub(super) fn parse(bytes: &[u8]) -> Result<ExportTraceServiceRequest, DecodeError> {
    let first = match serde_json::from_slice(bytes) {
        Ok(req) => return Ok(req),
        Err(e) => e,
    };
    // Not JSON at all: nothing to fill in.
    if !first.is_data() {
        return Err(json_error(&first.to_string()));
    }
    let mut tree: Value = serde_json::from_slice(bytes).map_err(|e| json_error(&e.to_string()))?;
    if !fill(&mut tree) {
        return Err(json_error(&first.to_string()));
    }
    serde_path_to_error::deserialize(&tree)
        .map_err(|e| json_error(&format!("{}: {}", e.path(), e.inner())))
}

/// A JSON error as text, whatever of the body it quotes made printable.
pub(super) fn json_error(text: &str) -> DecodeError {
    DecodeError::Json(printable(text).to_string())
}

/// Fills in what the derives require and the mapping may leave out;
/// whether anything changed. Every key of OTLP/JSON is a field name
/// (attribute names are values of `key`), so fields are found by name
/// wherever they are.
fn fill(v: &mut Value) -> bool {
    match v {
        Value::Array(items) => {
            let mut changed = false;
            for i in items {
                changed |= fill(i);
            }
            changed
        }
        Value::Object(map) => fill_object(map),
        _ => false,
    }
}

fn fill_object(map: &mut Map<String, Value>) -> bool {
    let before = map.len();
    // A null is the default; a double that is not finite cannot be read.
    map.retain(|key, v| !v.is_null() && (key != "doubleValue" || is_finite_double(v)));
    let mut changed = map.len() != before;
    for (key, v) in map.iter_mut() {
        changed |= match (key.as_str(), &mut *v) {
            ("arrayValue", Value::Object(list)) => ensure(list, "values", Value::Array(Vec::new())),
            ("kvlistValue", Value::Object(list)) => {
                let added = ensure(list, "values", Value::Array(Vec::new()));
                keyed(list.get_mut("values")) || added
            }
            ("attributes", list) => keyed(Some(list)),
            ("entityRefs", Value::Array(refs)) => refs.iter_mut().fold(false, |changed, r| {
                let Value::Object(r) = r else {
                    return changed;
                };
                let mut added = ensure(r, "schemaUrl", Value::String(String::new()));
                added |= ensure(r, "type", Value::String(String::new()));
                added |= ensure(r, "idKeys", Value::Array(Vec::new()));
                added |= ensure(r, "descriptionKeys", Value::Array(Vec::new()));
                added || changed
            }),
            ("kind", Value::String(name)) => {
                let n = SpanKind::from_str_name(name).map(|k| k as i32);
                replace(v, n)
            }
            ("code", Value::String(name)) => {
                let n = StatusCode::from_str_name(name).map(|c| c as i32);
                replace(v, n)
            }
            ("doubleValue", Value::String(text)) => {
                let n = text.trim().parse::<f64>().ok();
                match n.and_then(serde_json::Number::from_f64) {
                    Some(n) => {
                        *v = Value::Number(n);
                        true
                    }
                    None => false,
                }
            }
            _ => false,
        };
        changed |= fill(v);
    }
    changed
}

/// Whether a `doubleValue` is a finite number or text of one (`"NaN"` and
/// the infinities are not).
fn is_finite_double(v: &Value) -> bool {
    match v {
        Value::String(s) => s.trim().parse::<f64>().is_ok_and(f64::is_finite),
        _ => true,
    }
}

/// Gives every key-value of a list a `key`.
fn keyed(list: Option<&mut Value>) -> bool {
    let Some(Value::Array(items)) = list else {
        return false;
    };
    items.iter_mut().fold(false, |changed, kv| match kv {
        Value::Object(kv) => ensure(kv, "key", Value::String(String::new())) || changed,
        _ => changed,
    })
}

/// Inserts `key` with `default` when it is missing; whether it was.
fn ensure(map: &mut Map<String, Value>, key: &str, default: Value) -> bool {
    if map.contains_key(key) {
        return false;
    }
    map.insert(key.to_owned(), default);
    true
}

/// An enum's name made its number, when it is a name of the enum.
fn replace(v: &mut Value, number: Option<i32>) -> bool {
    match number {
        Some(n) => {
            *v = Value::from(n);
            true
        }
        None => false,
    }
}
