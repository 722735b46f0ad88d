//! The JSON of `GET /api/public/v2/observations`, as Langfuse sends it.
//!
//! Every field is optional here, so that a page of another shape is named
//! by what it lacks (`data[0].usageDetails: missing ...`) rather than by a
//! parser message, and so that a field Langfuse leaves out of a field group
//! it does not know (an older server without `trace_context`) is simply
//! absent. What is required is decided when a row is mapped
//! ([`super::row`]). Unknown fields are ignored: the server adds fields to
//! every row (`latency`, `modelId`, `inputUsage`, ...) that costwatch does
//! not read.

use chrono::{DateTime, Utc};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};
use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

/// One page: `{"data": [...], "meta": {"cursor": "..."}}`.
#[derive(Debug, Deserialize)]
pub(super) struct Page {
    /// The observations of the page.
    #[serde(default)]
    pub data: Option<Vec<Observation>>,
    /// Paging: `cursor` is absent on the last page.
    #[serde(default)]
    pub meta: Option<Meta>,
}

/// The `meta` object of a page.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Meta {
    /// The cursor of the next page; absent (or `null`) on the last one.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One observation, with the fields of the groups costwatch asks for
/// (`core`, `basic`, `metadata`, `model`, `usage`, `trace_context`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Observation {
    // core
    pub id: Option<String>,
    pub trace_id: Option<String>,
    pub start_time: Option<DateTime<Utc>>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    // basic
    pub name: Option<String>,
    pub level: Option<String>,
    pub status_message: Option<String>,
    pub version: Option<String>,
    pub environment: Option<String>,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    // metadata
    pub metadata: Option<Value>,
    // model: the server writes the provided model name as `model`; the
    // published definition calls it `providedModelName`. Whether the key
    // is there at all matters (the group was honoured), so `null` and a
    // missing key are told apart.
    #[serde(default, deserialize_with = "present")]
    pub model: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub provided_model_name: Option<Option<String>>,
    // usage
    pub usage_details: Option<BTreeMap<UsageKey, Number>>,
    pub cost_details: Option<BTreeMap<UsageKey, f64>>,
    pub total_cost: Option<f64>,
    // trace_context
    pub trace_name: Option<String>,
    pub tags: Option<Vec<String>>,
    pub release: Option<String>,
}

/// A key of `usageDetails` or `costDetails`. The usage types the
/// integrations write (see [`super::usage`]) are not copied for every
/// row; any other is kept as its own text. Keys compare as their text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct UsageKey(Cow<'static, str>);

impl UsageKey {
    /// The usage types Langfuse's integrations write.
    const KNOWN: [&'static str; 16] = [
        "input",
        "output",
        "total",
        "input_cached_tokens",
        "input_audio_tokens",
        "input_cache_read",
        "input_cache_creation",
        "input_cache_write",
        "output_reasoning_tokens",
        "output_audio_tokens",
        "output_accepted_prediction_tokens",
        "output_rejected_prediction_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "prompt_tokens",
        "completion_tokens",
    ];

    fn of(text: &str) -> UsageKey {
        match Self::KNOWN.iter().find(|k| **k == text) {
            Some(known) => UsageKey(Cow::Borrowed(known)),
            None => UsageKey(Cow::Owned(text.to_owned())),
        }
    }
}

impl Deref for UsageKey {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for UsageKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for UsageKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = UsageKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a usage type")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<UsageKey, E> {
                Ok(UsageKey::of(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// A field whose presence matters: missing is `None`, `null` is
/// `Some(None)`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A string field that Langfuse sends as `""` when it is not set (its
/// table stores empty strings, not nulls): `None` for both.
pub(super) fn text(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|s| !s.is_empty())
}
