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

use crate::source::json::{Entries, Field, Text};
use crate::source::time::fast_utc;
use chrono::{DateTime, FixedOffset, Utc};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Number;
use std::fmt;
use std::marker::PhantomData;

/// One page: `{"data": [...], "meta": {"cursor": "..."}}`, its strings
/// borrowed from the page's text ([`Text`]).
#[derive(Debug, Deserialize)]
pub(super) struct Page<'a> {
    /// The observations of the page.
    #[serde(default, borrow)]
    pub data: Option<Vec<Observation<'a>>>,
    /// Paging: `cursor` is absent on the last page.
    #[serde(default, borrow)]
    pub meta: Option<Meta<'a>>,
}

/// The `meta` object of a page.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Meta<'a> {
    /// The cursor of the next page; absent (or `null`) on the last one.
    #[serde(default, borrow)]
    pub cursor: Option<Text<'a>>,
}

/// One observation, with the fields of the groups costwatch asks for
/// (`core`, `basic`, `metadata`, `model`, `usage`, `trace_context`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Observation<'a> {
    // core
    #[serde(default, borrow)]
    pub id: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub trace_id: Option<Text<'a>>,
    #[serde(default, deserialize_with = "start_time")]
    pub start_time: Option<DateTime<Utc>>,
    #[serde(default, borrow, rename = "type")]
    pub kind: Option<Text<'a>>,
    // basic
    #[serde(default, borrow)]
    pub name: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub level: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub status_message: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub version: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub environment: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub user_id: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub session_id: Option<Text<'a>>,
    // metadata
    #[serde(default, borrow)]
    pub metadata: Option<Metadata<'a>>,
    // model: the server writes the provided model name as `model`; the
    // published definition calls it `providedModelName`. Whether the key
    // is there at all matters (the group was honoured), so `null` and a
    // missing key are told apart.
    #[serde(default, borrow, deserialize_with = "present")]
    pub model: Option<Option<Text<'a>>>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub provided_model_name: Option<Option<Text<'a>>>,
    // usage
    #[serde(default, borrow)]
    pub usage_details: Option<Details<'a, Number>>,
    #[serde(default, borrow)]
    pub cost_details: Option<Details<'a, f64>>,
    pub total_cost: Option<f64>,
    // trace_context
    #[serde(default, borrow)]
    pub trace_name: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub tags: Option<Vec<Text<'a>>>,
    #[serde(default, borrow)]
    pub release: Option<Text<'a>>,
}

/// `metadata`: any JSON value, of which only an object's string, number
/// and boolean entries are kept (in key order, the last of a key given
/// twice, as a `serde_json::Map` holds them); `None` for any other value.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Metadata<'a>(pub Option<Entries<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Metadata<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Metadata(
            Field::<'de, Entries<'de>>::deserialize(d)?.object(),
        ))
    }
}

/// `usageDetails` or `costDetails`: usage type to value, held as a map
/// holds them (in key order, the last of a key given twice) in a list,
/// without a tree built per row.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Details<'a, V>(Vec<(Text<'a>, V)>);

impl<'a, V> Details<'a, V> {
    /// The pairs of an object in the order given, held as a map holds
    /// them: in key order, the last of a key given twice.
    pub(super) fn from_pairs(mut pairs: Vec<(Text<'a>, V)>) -> Self {
        if !pairs.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: among equal keys the latest given comes first, and
            // is the one kept.
            pairs.reverse();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            pairs.dedup_by(|later, earlier| later.0 == earlier.0);
        }
        Details(pairs)
    }

    /// The value under `key`.
    pub(super) fn get(&self, key: &str) -> Option<&V> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// Whether there is no entry.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries, in key order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    /// The values, in key order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<'de: 'a, 'a, V: Deserialize<'de>> Deserialize<'de> for Details<'a, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Pairs<'a, V>(PhantomData<(&'a (), V)>);
        impl<'de: 'a, 'a, V: Deserialize<'de>> Visitor<'de> for Pairs<'a, V> {
            type Value = Details<'a, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(Text<'a>, V)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(16).min(16));
                while let Some(key) = map.next_key::<Text<'a>>()? {
                    let value = map.next_value::<V>()?;
                    out.push((key, value));
                }
                Ok(Details::from_pairs(out))
            }
        }
        d.deserialize_map(Pairs(PhantomData))
    }
}

/// `startTime`: Langfuse's own form (`2026-10-11T11:24:03.120Z`) read
/// directly, anything else as chrono's `Deserialize` reads it (with its
/// words when it fails); `null` is `None`.
fn start_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    struct Rfc3339;
    impl Visitor<'_> for Rfc3339 {
        type Value = DateTime<Utc>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an RFC 3339 formatted date and time string")
        }
        fn visit_str<E: de::Error>(self, t: &str) -> Result<DateTime<Utc>, E> {
            match fast_utc(t) {
                Some(v) => Ok(v),
                None => t
                    .parse::<DateTime<FixedOffset>>()
                    .map(|v| v.with_timezone(&Utc))
                    .map_err(E::custom),
            }
        }
    }
    struct Started(DateTime<Utc>);
    impl<'de> Deserialize<'de> for Started {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_str(Rfc3339).map(Started)
        }
    }
    Option::<Started>::deserialize(d).map(|t| t.map(|t| t.0))
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
pub(super) fn text<'v>(value: &'v Option<Text<'_>>) -> Option<&'v str> {
    value.as_deref().filter(|s| !s.is_empty())
}
