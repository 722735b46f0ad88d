//! Tool results as the model gets them: compact, within the size cap, and
//! still valid JSON.
//!
//! A result that is JSON is re-encoded before anything is cut:
//!
//! - **Tables.** An array of two or more objects (the gateway's rows)
//!   becomes `{"same": {...}, "columns": [...], "rows": [[...], ...]}`:
//!   the keys are written once instead of once a row, and a field with the
//!   same value in every row (the session id searched for, its labels, a
//!   cache-write count of 0) is written once under `same`. Nothing is lost
//!   but the difference between a missing field and `null`.
//! - **Cut whole items.** A result still above the cap loses whole items
//!   from the end of its largest array (rows of a table, or items of any
//!   other array) until it fits; a result without arrays loses the end of
//!   its longest string. The result gains a `truncated` field saying what
//!   was dropped, e.g. `"showing 12 of 40 rows of data; 28 dropped to fit
//!   4000 bytes"`, so the model knows the list is partial.
//!
//! Text that is not JSON (tool errors, prose) is cut at a character
//! boundary with a `[truncated: N bytes, showing first K]` marker, as is a
//! JSON result whose skeleton alone exceeds the cap.

use serde_json::{Map, Value};

/// Bytes kept free for the `truncated` note while items are dropped.
const NOTE_RESERVE: usize = 160;

/// A tool result as the model gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaped {
    /// The text passed to the model, at most the cap.
    pub text: String,
    /// Whether anything was dropped (rows, items, characters).
    pub truncated: bool,
}

/// `text` made compact (tables for rows) and cut to at most `max` bytes,
/// as valid JSON when it is JSON.
pub fn shape_result(text: &str, max: usize) -> Shaped {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        let (text, truncated) = truncate_text(text, max);
        return Shaped { text, truncated };
    };
    let mut value = tabulate(value);
    let compact = value.to_string();
    if compact.len() <= max {
        return Shaped {
            text: compact,
            truncated: false,
        };
    }
    match fit(&mut value, max) {
        Some(text) => Shaped {
            text,
            truncated: true,
        },
        None => {
            let (text, truncated) = truncate_text(&compact, max);
            Shaped { text, truncated }
        }
    }
}

/// `value` with every array of two or more objects written as a table.
pub fn tabulate(value: Value) -> Value {
    match value {
        Value::Array(items) if items.len() >= 2 && items.iter().all(Value::is_object) => {
            table(items)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(tabulate).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, tabulate(v))).collect())
        }
        other => other,
    }
}

/// Rows (all objects) as `{"same", "columns", "rows"}`.
fn table(items: Vec<Value>) -> Value {
    let rows: Vec<Map<String, Value>> = items
        .into_iter()
        .filter_map(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .collect();
    let mut keys: Vec<String> = Vec::new();
    for row in &rows {
        for k in row.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let mut same = Map::new();
    let mut columns = Vec::new();
    for k in keys {
        let first = rows[0].get(&k);
        let constant = first.is_some() && rows.iter().all(|r| r.get(&k) == first);
        match first {
            Some(v) if constant => {
                same.insert(k, tabulate(v.clone()));
            }
            _ => columns.push(k),
        }
    }
    let table_rows = rows
        .into_iter()
        .map(|mut r| {
            Value::Array(
                columns
                    .iter()
                    .map(|c| r.remove(c).map_or(Value::Null, tabulate))
                    .collect(),
            )
        })
        .collect();
    let mut out = Map::new();
    if !same.is_empty() {
        out.insert("same".into(), Value::Object(same));
    }
    out.insert(
        "columns".into(),
        Value::Array(columns.into_iter().map(Value::String).collect()),
    );
    out.insert("rows".into(), Value::Array(table_rows));
    Value::Object(out)
}

/// Drops whole items (then the end of the longest string) until `value`
/// with its note fits in `max`; `None` when it cannot.
fn fit(value: &mut Value, max: usize) -> Option<String> {
    let budget = max.checked_sub(NOTE_RESERVE)?;
    let mut notes: Vec<String> = Vec::new();
    for _ in 0..16 {
        let len = value.to_string().len();
        if len <= budget {
            break;
        }
        let over = len - budget;
        if let Some((path, array)) = largest_array(value, String::new()) {
            let total = array.len();
            let mut freed = 0;
            while freed < over && !array.is_empty() {
                let item = array.pop().unwrap_or(Value::Null);
                freed += item.to_string().len() + 1;
            }
            let kept = array.len();
            let noun = if path.ends_with("rows") {
                "rows"
            } else {
                "items"
            };
            let name = path
                .strip_suffix(".rows")
                .or_else(|| path.strip_suffix("rows"))
                .unwrap_or(&path);
            let name = if name.is_empty() { "the result" } else { name };
            notes.push(format!(
                "showing {kept} of {total} {noun} of {name}; {} dropped",
                total - kept
            ));
        } else if let Some((path, s)) = longest_string(value, String::new()) {
            let total = s.len();
            let mut end = total.saturating_sub(over + 3);
            while end > 0 && !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s.push('…');
            let name = if path.is_empty() { "the result" } else { &path };
            notes.push(format!("{name} cut to {end} of {total} bytes"));
        } else {
            return None;
        }
    }
    let note = format!("{} to fit {max} bytes", notes.join("; "));
    let out = match value {
        Value::Object(map) => {
            let key = if map.contains_key("truncated") {
                "_truncated"
            } else {
                "truncated"
            };
            map.insert(key.into(), Value::String(note));
            value.to_string()
        }
        other => {
            let mut wrapped = Map::new();
            wrapped.insert("result".into(), other.take());
            wrapped.insert("truncated".into(), Value::String(note));
            Value::Object(wrapped).to_string()
        }
    };
    (out.len() <= max).then_some(out)
}

/// The non-empty array whose items take the most bytes, with its path.
fn largest_array(value: &mut Value, path: String) -> Option<(String, &mut Vec<Value>)> {
    let mut best: Option<(usize, String)> = None;
    find_largest(value, &path, &mut best);
    let (_, path) = best?;
    let target = walk(value, &path)?;
    match target {
        Value::Array(a) => Some((path, a)),
        _ => None,
    }
}

fn find_largest(value: &Value, path: &str, best: &mut Option<(usize, String)>) {
    match value {
        Value::Array(items) => {
            if !items.is_empty() {
                let size = value.to_string().len();
                if best.as_ref().is_none_or(|(s, _)| size > *s) {
                    *best = Some((size, path.to_owned()));
                }
            }
            for (i, item) in items.iter().enumerate() {
                find_largest(item, &join(path, &i.to_string()), best);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                find_largest(v, &join(path, k), best);
            }
        }
        _ => {}
    }
}

/// The longest string, with its path.
fn longest_string(value: &mut Value, path: String) -> Option<(String, &mut String)> {
    let mut best: Option<(usize, String)> = None;
    find_longest(value, &path, &mut best);
    let (_, path) = best?;
    match walk(value, &path)? {
        Value::String(s) => Some((path, s)),
        _ => None,
    }
}

fn find_longest(value: &Value, path: &str, best: &mut Option<(usize, String)>) {
    match value {
        Value::String(s) if s.len() > 8 && best.as_ref().is_none_or(|(n, _)| s.len() > *n) => {
            *best = Some((s.len(), path.to_owned()));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_longest(item, &join(path, &i.to_string()), best);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                find_longest(v, &join(path, k), best);
            }
        }
        _ => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The value at a dotted `path` (array indexes as numbers).
fn walk<'a>(mut value: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    if path.is_empty() {
        return Some(value);
    }
    for part in path.split('.') {
        value = match value {
            Value::Object(map) => map.get_mut(part)?,
            Value::Array(items) => items.get_mut(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// Cuts `text` to at most `max` bytes, marker included, on a character
/// boundary; a cut text ends with `[truncated: N bytes, showing first K]`.
pub fn truncate_text(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let marker = |kept: usize| format!("\n[truncated: {} bytes, showing first {kept}]", text.len());
    // The marker for `max` has at least as many digits as any shorter one.
    let mut end = max.saturating_sub(marker(max).len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = format!("{}{}", &text[..end], marker(end));
    // A cap smaller than the marker keeps as much of the marker as fits.
    if out.len() > max {
        out = marker(0).trim_start().chars().take(max).collect();
    }
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(n: usize) -> Value {
        let data: Vec<Value> = (0..n)
            .map(|i| {
                json!({"request_id": format!("req_{i:016x}"), "session_id": "s-1",
                       "status": if i % 3 == 0 { "error" } else { "success" },
                       "input_tokens": 380 + i, "cached_tokens": 0, "cost_usd": 0.000041,
                       "labels": {"feature": "checkout"}})
            })
            .collect();
        json!({"data": data, "next_cursor": null})
    }

    #[test]
    fn rows_become_a_table_with_constant_fields_once() {
        let text = rows(10).to_string();
        let shaped = shape_result(&text, 100_000);
        assert!(!shaped.truncated);
        let v: Value = serde_json::from_str(&shaped.text).unwrap();
        assert_eq!(v["data"]["same"]["session_id"], "s-1");
        assert_eq!(v["data"]["same"]["labels"]["feature"], "checkout");
        assert_eq!(
            v["data"]["columns"],
            json!(["input_tokens", "request_id", "status"])
        );
        assert_eq!(
            v["data"]["rows"][1],
            json!([381, "req_0000000000000001", "success"])
        );
        assert!(v["next_cursor"].is_null());
        assert!(shaped.text.len() * 2 < text.len(), "{}", shaped.text);
    }

    #[test]
    fn a_long_result_loses_whole_rows_stays_json_and_says_so() {
        let text = rows(200).to_string();
        for max in [4_000, 1_000, 400] {
            let shaped = shape_result(&text, max);
            assert!(shaped.truncated);
            assert!(shaped.text.len() <= max, "{max}: {}", shaped.text.len());
            let v: Value = serde_json::from_str(&shaped.text).unwrap();
            let kept = v["data"]["rows"].as_array().unwrap();
            assert!(!kept.is_empty());
            // Whole rows: each has every column.
            assert!(kept.iter().all(|r| r.as_array().unwrap().len() == 3));
            let note = v["truncated"].as_str().unwrap();
            assert!(
                note.starts_with(&format!(
                    "showing {} of 200 rows of data; {} dropped",
                    kept.len(),
                    200 - kept.len()
                )),
                "{note}"
            );
            assert!(note.ends_with(&format!("to fit {max} bytes")), "{note}");
        }
    }

    #[test]
    fn arrays_of_values_and_long_strings_are_cut_whole_or_marked() {
        let ids: Vec<String> = (0..500).map(|i| format!("req_{i:08}")).collect();
        let shaped = shape_result(&json!(ids).to_string(), 600);
        let v: Value = serde_json::from_str(&shaped.text).unwrap();
        assert!(v["result"].as_array().unwrap().len() < 500);
        assert!(
            v["truncated"]
                .as_str()
                .unwrap()
                .contains("items of the result")
        );
        let long = json!({"note": "x".repeat(5_000)}).to_string();
        let shaped = shape_result(&long, 1_000);
        assert!(shaped.text.len() <= 1_000);
        let v: Value = serde_json::from_str(&shaped.text).unwrap();
        assert!(v["note"].as_str().unwrap().ends_with('…'));
        assert!(v["truncated"].as_str().unwrap().starts_with("note cut to"));
    }

    #[test]
    fn text_that_is_not_json_is_cut_with_a_marker() {
        let (t, cut) = truncate_text("short", 10);
        assert_eq!((t.as_str(), cut), ("short", false));
        let text = "é".repeat(3_000);
        let shaped = shape_result(&text, 500);
        assert!(shaped.truncated && shaped.text.len() <= 500);
        assert!(
            shaped
                .text
                .ends_with("[truncated: 6000 bytes, showing first 456]"),
            "{}",
            shaped.text
        );
        assert!(shape_result(&text, 10).text.len() <= 10);
    }
}
