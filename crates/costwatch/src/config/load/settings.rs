//! What every section and rule states of itself, checked the same way:
//! the ranges of its JSON Schema, then its [`Settings::problems`].

use super::document::{Doc, value_at};
use crate::config::locate::{Seg, child, path_string};
use crate::settings::{Issue, Settings, resolve};
use serde_json::Value;

/// Checks the mapping at `segs`, read into `settings`: every written
/// number against the range its schema states (nested sections too), then
/// the problems `S` finds. A problem found from a key already reported is
/// left out.
pub(super) fn check<S: Settings>(doc: &mut Doc, segs: &[Seg], settings: &S) {
    let schema = schemars::schema_for!(S).to_value();
    check_ranges(doc, segs, &schema, &schema);
    report(doc, &path_string(segs), settings.problems());
}

/// Reports `issues` of the mapping at `path`.
pub(super) fn report(doc: &mut Doc, path: &str, issues: Vec<Issue>) {
    for issue in issues {
        if issue.reads.iter().any(|r| doc.is_tainted(&child(path, r))) {
            continue;
        }
        doc.check(false, &child(path, issue.key), || issue.message);
    }
}

/// Checks every key written in the mapping at `segs` against the range
/// `schema` states for it (`minimum`, `maximum`, `exclusiveMinimum`), and
/// the mappings below it against theirs. Keys left out take their
/// defaults, which are in range.
fn check_ranges(doc: &mut Doc, segs: &[Seg], root: &Value, schema: &Value) {
    let schema = resolve(root, schema);
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Some(Value::Object(entry)) = value_at(&doc.value, segs).cloned() else {
        return;
    };
    for (key, property) in properties {
        let Some(written) = entry.get(key) else {
            continue;
        };
        let mut at = segs.to_vec();
        at.push(Seg::Key(key.clone()));
        if written.is_object() {
            check_ranges(doc, &at, root, property);
            continue;
        }
        let Some(v) = written.as_f64() else {
            continue;
        };
        let property = resolve(root, property);
        let bound = |name: &str| property.get(name).and_then(Value::as_f64);
        let path = path_string(&at);
        match (
            bound("minimum"),
            bound("maximum"),
            bound("exclusiveMinimum"),
        ) {
            (_, _, Some(lo)) => doc.check(v > lo, &path, || {
                format!("must be greater than {lo}, got {v}")
            }),
            (Some(lo), Some(hi), None) => doc.check((lo..=hi).contains(&v), &path, || {
                format!("must be between {lo} and {hi}, got {v}")
            }),
            (Some(lo), None, None) => {
                doc.check(v >= lo, &path, || format!("must be at least {lo}, got {v}"))
            }
            (None, Some(hi), None) => {
                doc.check(v <= hi, &path, || format!("must be at most {hi}, got {v}"))
            }
            (None, None, None) => true,
        };
    }
}
