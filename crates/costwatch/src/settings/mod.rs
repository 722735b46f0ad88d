//! How settings are written, for every component that owns some: the
//! serde forms of durations, URLs, addresses and time zones ([`units`]),
//! and [`Settings`], what a section or a rule kind states beside its
//! fields. Each setting's doc, default and range are written once, on its
//! field; the JSON Schemas and the configuration reference are generated
//! from them, and `config::load` checks every range the schema states.

pub mod units;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

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

    /// A problem when `bad`; the message is made only then.
    pub fn when(bad: bool, key: &'static str, message: impl FnOnce() -> String) -> Option<Issue> {
        bad.then(|| Issue::new(key, message()))
    }
}
