//! How settings are written, for every component that owns some: the
//! serde forms of durations, URLs, addresses and time zones ([`units`]),
//! and [`Settings`], what a section or a rule kind states beside its
//! fields. Each setting's doc, default and range are written once, on its
//! field; the JSON Schemas and the configuration reference are generated
//! from them, and `config::load` checks every range the schema states.

pub mod reference;
pub mod units;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// A section of the configuration file, or the settings of one rule kind:
/// read by serde (a key left out takes its default), its ranges stated in
/// its JSON Schema, and what a range cannot say in [`Settings::problems`].
pub trait Settings: DeserializeOwned + JsonSchema {
    /// The problems of keys that depend on each other (a maximum below its
    /// minimum) or on more than a range: each at its key, relative to the
    /// section.
    fn problems(&self) -> Vec<Issue> {
        Vec::new()
    }
}

/// Reads and writes a setting spelled as text through its `parse` (whose
/// error is the message) and its `Display`, for
/// `#[serde(try_from = "String", into = "String")]`.
macro_rules! spelled_as_text {
    ($t:ty) => {
        impl TryFrom<String> for $t {
            type Error = String;

            fn try_from(s: String) -> Result<Self, String> {
                <$t>::parse(&s)
            }
        }

        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.to_string()
            }
        }
    };
}
pub(crate) use spelled_as_text;

/// The problem of a map whose keys are label names, when one is empty.
pub fn empty_label_name<V>(key: &'static str, labels: &BTreeMap<String, V>) -> Option<Issue> {
    Issue::when(labels.keys().any(String::is_empty), key, || {
        "label names must not be empty".to_owned()
    })
}

/// The keys serde reads for `T`, in the order its fields are declared, as
/// serde names them when it meets a key it does not know.
pub fn declared_keys<T: DeserializeOwned>() -> Vec<String> {
    let probe = serde_json::json!({ "\u{1}": null });
    let Err(e) = serde_json::from_value::<T>(probe) else {
        return Vec::new();
    };
    let message = e.to_string();
    let Some((_, expected)) = message.split_once("expected ") else {
        return Vec::new();
    };
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// A schema transform (`#[schemars(transform = in_declared_order::<T>)]`)
/// that writes `T`'s keys in declared order as `x-order`: JSON Schema
/// properties carry no order, the references and the example read in it.
pub fn in_declared_order<T: DeserializeOwned>(schema: &mut schemars::Schema) {
    schema.insert("x-order".to_owned(), declared_keys::<T>().into());
}

/// The schema `schema` stands for, in the document `root`: itself, the
/// definition its `$ref` names, or the first of its alternatives that is a
/// mapping (an `Option` of a struct).
pub fn resolve<'s>(root: &'s Value, schema: &'s Value) -> &'s Value {
    if let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        return root
            .get("$defs")
            .and_then(|d| d.get(name))
            .map_or(schema, |d| resolve(root, d));
    }
    let alternatives = schema.get("anyOf").or_else(|| schema.get("oneOf"));
    match alternatives.and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .map(|s| resolve(root, s))
            .find(|s| s.get("properties").is_some())
            .unwrap_or(schema),
        None => schema,
    }
}

/// The properties of an object schema, in its `x-order`, then any others
/// in name order.
pub fn ordered_properties(schema: &Value) -> Vec<(&String, &Value)> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let order: Vec<&str> = schema
        .get("x-order")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out: Vec<(&String, &Value)> = properties.iter().collect();
    out.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap_or(usize::MAX));
    out
}

/// One problem [`Settings::problems`] finds.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    /// The key it is reported at, relative to the section (`retry_max`,
    /// `caps.max_rounds`).
    pub key: &'static str,
    /// What is wrong, a lower-case fragment.
    pub message: String,
    /// The other keys it was found from: when one of them was already
    /// reported (and so read as its default), this one is not.
    pub reads: &'static [&'static str],
}

impl Issue {
    /// A problem of `key` alone.
    pub fn new(key: &'static str, message: impl Into<String>) -> Issue {
        Issue {
            key,
            message: message.into(),
            reads: &[],
        }
    }

    /// A problem of `key` found from `other` keys too.
    pub fn reading(key: &'static str, other: &'static [&'static str], message: String) -> Issue {
        Issue {
            key,
            message,
            reads: other,
        }
    }

    /// The problem of a backoff whose `retry_max` is below its
    /// `retry_base`.
    pub fn retry_max_below_base(base: Duration, max: Duration) -> Option<Issue> {
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        (max < base).then(|| {
            Issue::reading(
                "retry_max",
                &["retry_base"],
                format!(
                    "must be at least retry_base ({}), got {}",
                    fmt(base),
                    fmt(max)
                ),
            )
        })
    }

    /// A problem when `bad`; the message is made only then.
    pub fn when(bad: bool, key: &'static str, message: impl FnOnce() -> String) -> Option<Issue> {
        bad.then(|| Issue::new(key, message()))
    }
}
