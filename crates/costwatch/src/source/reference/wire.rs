//! The reference gateway's JSON, exactly as it is sent, and its mapping into
//! the gateway-agnostic records.
//!
//! Required fields (`session_id`, `requests`, `input_tokens`, `cost_usd`) are
//! not optional here, so a row without them fails the page. Unknown fields are
//! ignored. Every value is held to the limits in [`check`] before it is
//! mapped, so the mapping itself cannot fail.

use crate::limits::MAX_MODELS_PER_SESSION;
use crate::source::time::{opt_time, time};
use crate::source::{Labels, ModelUsage, RequestRecord, RequestStatus, SessionRecord};
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// One page of a listing.
#[derive(Debug, Deserialize)]
pub(in crate::source) struct Page<T> {
    #[serde(deserialize_with = "rows", bound(deserialize = "T: Deserialize<'de>"))]
    pub data: Vec<T>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(in crate::source) struct WireSession {
    pub(super) session_id: String,
    #[serde(default, deserialize_with = "opt_time")]
    pub(super) first_request_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "opt_time")]
    pub(super) last_request_at: Option<DateTime<Utc>>,
    pub(super) requests: u64,
    #[serde(default)]
    pub(super) errors: u64,
    pub(super) input_tokens: u64,
    #[serde(default)]
    pub(super) cached_tokens: u64,
    #[serde(default)]
    pub(super) cache_write_tokens: u64,
    #[serde(default)]
    pub(super) output_tokens: u64,
    pub(super) cost_usd: f64,
    #[serde(default)]
    pub(super) models: ModelNames,
    #[serde(default, deserialize_with = "by_model_list")]
    pub(super) by_model: Vec<ModelUsage>,
    #[serde(default)]
    pub(super) labels: Labels,
}

#[derive(Debug, Deserialize)]
pub(in crate::source) struct WireModelUsage {
    #[serde(default)]
    pub(super) requests: u64,
    #[serde(default)]
    pub(super) input_tokens: u64,
    #[serde(default)]
    pub(super) cached_tokens: u64,
    #[serde(default)]
    pub(super) output_tokens: u64,
    #[serde(default)]
    pub(super) cost_usd: f64,
}

#[derive(Debug, Deserialize)]
pub(in crate::source) struct WireRequest {
    pub(super) request_id: String,
    pub(super) session_id: String,
    #[serde(deserialize_with = "time")]
    pub(super) created_at: DateTime<Utc>,
    pub(super) model: String,
    pub(super) status: RequestStatus,
    #[serde(default)]
    pub(super) http_status: Option<u16>,
    #[serde(default)]
    pub(super) error_type: Option<String>,
    pub(super) input_tokens: u64,
    #[serde(default)]
    pub(super) cached_tokens: u64,
    #[serde(default)]
    pub(super) cache_write_tokens: u64,
    #[serde(default)]
    pub(super) output_tokens: u64,
    pub(super) cost_usd: f64,
}

impl WireSession {
    /// Maps a checked row; `fallback_time` stands in for missing timestamps.
    pub(in crate::source) fn into_record(self, fallback_time: DateTime<Utc>) -> SessionRecord {
        let mut by_model = self.by_model;
        // A gateway that lists models without a breakdown still tells which
        // models were used; with a single model the breakdown is the session.
        if by_model.is_empty() && self.models.count == 1 {
            by_model.extend(self.models.first.into_iter().map(|model| ModelUsage {
                model,
                requests: self.requests,
                input_tokens: self.input_tokens,
                cached_tokens: self.cached_tokens,
                output_tokens: self.output_tokens,
                cost_usd: self.cost_usd,
            }));
        }
        let first = self.first_request_at.unwrap_or(fallback_time);
        SessionRecord {
            session_id: self.session_id,
            first_request_at: first,
            last_request_at: self.last_request_at.unwrap_or(first),
            requests: self.requests,
            errors: self.errors,
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
            by_model,
            labels: self.labels,
            cost_computed: false,
            cache_unreported: false,
        }
    }
}

impl WireRequest {
    /// Maps a checked row.
    pub(in crate::source) fn into_record(self) -> RequestRecord {
        RequestRecord {
            request_id: self.request_id,
            session_id: self.session_id,
            created_at: self.created_at,
            model: self.model,
            status: self.status,
            http_status: self.http_status,
            error_type: self.error_type,
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
            provider: None,
        }
    }
}

/// A page's rows, with room for a full page from the start (the list is not
/// grown row by row).
fn rows<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct V<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of rows")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).max(50));
            while let Some(row) = seq.next_element()? {
                out.push(row);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(V(std::marker::PhantomData))
}

/// `by_model` read straight into the record's list, sorted by model name
/// (as a map would hold it; a repeated model keeps its last entry), without
/// building the map; more than [`MAX_MODELS_PER_SESSION`] models fail
/// the row.
fn by_model_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ModelUsage>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<ModelUsage>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of model ids to usage")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out: Vec<ModelUsage> = Vec::with_capacity(map.size_hint().unwrap_or(1));
            while let Some((model, u)) = map.next_entry::<String, WireModelUsage>()? {
                if !add_usage(&mut out, u.of(model)) {
                    return Err(serde::de::Error::custom(format_args!(
                        "more than {} models, the limit",
                        MAX_MODELS_PER_SESSION
                    )));
                }
            }
            out.sort_by(|a, b| a.model.cmp(&b.model));
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

impl WireModelUsage {
    /// The usage as the record holds it, under its model's name.
    pub(super) fn of(self, model: String) -> ModelUsage {
        ModelUsage {
            model,
            requests: self.requests,
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
        }
    }
}

/// Adds one model's usage to a session's `by_model` list, both readers'
/// way: a repeated model replaces its entry. `false` when a new model would
/// pass [`MAX_MODELS_PER_SESSION`].
pub(super) fn add_usage(out: &mut Vec<ModelUsage>, usage: ModelUsage) -> bool {
    let full = out.len() == MAX_MODELS_PER_SESSION;
    match out.iter_mut().find(|m| m.model == usage.model) {
        Some(slot) => *slot = usage,
        None if full => return false,
        None => out.push(usage),
    }
    true
}

/// Of `models`, only what the mapping needs: how many, and the first.
#[derive(Debug, Default)]
pub(in crate::source) struct ModelNames {
    pub(super) count: usize,
    pub(super) first: Option<String>,
}

/// A string that is checked to be one and then dropped.
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for ModelNames {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ModelNames;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of model ids")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ModelNames, A::Error> {
                let mut names = ModelNames::default();
                if let Some(first) = seq.next_element::<String>()? {
                    names = ModelNames {
                        count: 1,
                        first: Some(first),
                    };
                    while seq.next_element::<AnyStr>()?.is_some() {
                        names.count += 1;
                    }
                }
                Ok(names)
            }
        }
        d.deserialize_seq(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::json as parse;

    #[test]
    fn a_row_without_cost_is_rejected_with_its_path() {
        let body = br#"{"data":[{"session_id":"a","requests":1,"input_tokens":5,"cost_usd":0.1},
                                 {"session_id":"b","requests":1,"input_tokens":5}],"next_cursor":null}"#;
        let err = parse::<Page<WireSession>>(body).err().unwrap_or_default();
        assert!(err.starts_with("data[1]"), "{err}");
        assert!(err.contains("cost_usd"), "{err}");
    }

    #[test]
    fn unknown_fields_are_ignored_and_defaults_fill_optional_ones() {
        let body = br#"{"data":[{"session_id":"a","requests":2,"input_tokens":5,"cost_usd":0.1,
            "surprise":{"x":1},"models":["m"]}],"next_cursor":"c2"}"#;
        let page = parse::<Page<WireSession>>(body).unwrap();
        assert_eq!(page.next_cursor.as_deref(), Some("c2"));
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let rec = page.data.into_iter().next().unwrap().into_record(at);
        assert_eq!(rec.errors, 0);
        assert_eq!(rec.by_model.len(), 1);
        assert_eq!(rec.by_model[0].requests, 2);
        assert_eq!(rec.first_request_at, at);
    }

    #[test]
    fn by_model_is_sorted_and_models_only_counted() {
        let body = br#"{"data":[{"session_id":"a","requests":3,"input_tokens":5,"cost_usd":0.1,
            "models":["z","a"],
            "by_model":{"z":{"requests":1},"a":{"requests":1},"z":{"requests":2}}},
            {"session_id":"b","requests":2,"input_tokens":5,"cost_usd":0.1,"models":["m"]},
            {"session_id":"c","requests":2,"input_tokens":5,"cost_usd":0.1,"models":["m","n"]}]}"#;
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let recs: Vec<SessionRecord> = parse::<Page<WireSession>>(body)
            .unwrap()
            .data
            .into_iter()
            .map(|s| s.into_record(at))
            .collect();
        let models: Vec<(&str, u64)> = recs[0]
            .by_model
            .iter()
            .map(|m| (m.model.as_str(), m.requests))
            .collect();
        assert_eq!(models, [("a", 1), ("z", 2)]);
        assert_eq!(recs[1].by_model.len(), 1);
        assert_eq!(recs[1].by_model[0].model, "m");
        assert!(recs[2].by_model.is_empty());
        let bad = br#"{"data":[{"session_id":"a","requests":1,"input_tokens":5,"cost_usd":0.1,"models":["m",3]}]}"#;
        let err = parse::<Page<WireSession>>(bad).err().unwrap_or_default();
        assert!(err.starts_with("data[0].models"), "{err}");
    }

    #[test]
    fn an_escaped_id_reads_as_its_text() {
        let escaped =
            br#"{"data":[{"session_id":"\u0061","requests":2,"input_tokens":5,"cost_usd":0.25,
            "labels":{"feature":"faq"}}],"next_cursor":"c2"}"#;
        let page = parse::<Page<WireSession>>(escaped).unwrap();
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let rec = page.data.into_iter().next().unwrap().into_record(at);
        assert_eq!(rec.session_id, "a");
        assert_eq!(rec.labels.get("feature").map(String::as_str), Some("faq"));
    }

    #[test]
    fn a_truncated_page_is_an_error() {
        let body = br#"{"data":[{"session_id":"a","requests":2,"input_tok"#;
        assert!(parse::<Page<WireSession>>(body).is_err());
    }

    #[test]
    fn other_timestamp_shapes_parse_through_chrono() {
        // Other shapes still parse through chrono, as before.
        let body = br#"{"data":[{"session_id":"a","requests":1,"input_tokens":5,"cost_usd":0.1,
            "first_request_at":"2026-11-02T02:01:49+02:00","last_request_at":null}]}"#;
        let page = parse::<Page<WireSession>>(body).unwrap();
        let rec = page
            .data
            .into_iter()
            .next()
            .unwrap()
            .into_record(DateTime::<Utc>::UNIX_EPOCH);
        assert_eq!(
            rec.first_request_at,
            crate::source::time::fast_utc("2026-11-02T00:01:49Z").unwrap()
        );
        assert_eq!(rec.last_request_at, rec.first_request_at);
        let row = |t: &str| {
            format!(
                r#"{{"data":[{{"request_id":"r","session_id":"a","created_at":"{t}","model":"m",
                "status":"success","input_tokens":5,"cost_usd":0.1}}]}}"#
            )
        };
        for t in ["2026-11-02T00:01:49.677Z", "2026-11-02T02:01:49.677+02:00"] {
            let body = row(t);
            let page = parse::<Page<WireRequest>>(body.as_bytes()).unwrap();
            assert_eq!(
                page.data[0].created_at,
                crate::source::time::fast_utc("2026-11-02T00:01:49.677Z").unwrap(),
                "{t}"
            );
        }
        let err = parse::<Page<WireRequest>>(row("noon").as_bytes())
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("data[0].created_at"), "{err}");
        let bad = br#"{"data":[{"session_id":"a","requests":1,"input_tokens":5,"cost_usd":0.1,
            "first_request_at":"yesterday"}]}"#;
        let err = parse::<Page<WireSession>>(bad).err().unwrap_or_default();
        assert!(err.starts_with("data[0].first_request_at"), "{err}");
    }
}
