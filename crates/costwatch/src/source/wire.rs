//! The reference gateway's JSON, exactly as it is sent, and its mapping into
//! the gateway-agnostic records.
//!
//! Required fields (`session_id`, `requests`, `input_tokens`, `cost_usd`) are
//! not optional here, so a row without them fails the page. Unknown fields are
//! ignored. Every value is held to the limits in [`check`] before it is
//! mapped, so the mapping itself cannot fail.

pub(in crate::source) mod check;
pub(in crate::source) mod scan;

pub(super) use self::check::{Pages, Row, drill_down};
pub(super) use self::scan::Scan;

use super::{Labels, ModelPrice, ModelUsage, RequestRecord, RequestStatus, SessionRecord};
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// One page of a listing.
#[derive(Debug, Deserialize)]
pub(super) struct Page<T> {
    #[serde(deserialize_with = "rows", bound(deserialize = "T: Deserialize<'de>"))]
    pub data: Vec<T>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// The `/models` answer (not paginated).
#[derive(Debug, Deserialize)]
pub(super) struct ModelList {
    data: Vec<WireModel>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireModel {
    id: String,
    input_usd_per_mtok: f64,
    #[serde(default)]
    cached_input_usd_per_mtok: Option<f64>,
    #[serde(default)]
    cache_write_usd_per_mtok: Option<f64>,
    output_usd_per_mtok: f64,
    #[serde(default)]
    supports_prompt_cache: Option<bool>,
    #[serde(default)]
    min_cacheable_prompt_tokens: Option<u64>,
    #[serde(default)]
    cache_lifetime_seconds: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireSession {
    session_id: String,
    #[serde(default, deserialize_with = "opt_time")]
    first_request_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "opt_time")]
    last_request_at: Option<DateTime<Utc>>,
    requests: u64,
    #[serde(default)]
    errors: u64,
    input_tokens: u64,
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    cache_write_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    cost_usd: f64,
    #[serde(default)]
    models: ModelNames,
    #[serde(default, deserialize_with = "by_model_list")]
    by_model: Vec<ModelUsage>,
    #[serde(default)]
    labels: Labels,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireModelUsage {
    #[serde(default)]
    requests: u64,
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cost_usd: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireRequest {
    request_id: String,
    session_id: String,
    #[serde(deserialize_with = "time")]
    created_at: DateTime<Utc>,
    model: String,
    status: RequestStatus,
    #[serde(default)]
    http_status: Option<u16>,
    #[serde(default)]
    error_type: Option<String>,
    input_tokens: u64,
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    cache_write_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    cost_usd: f64,
}

/// Parses and checks the `/models` answer.
pub(super) fn models(list: ModelList) -> Result<Vec<ModelPrice>, String> {
    check::catalogue(&list.data)?;
    Ok(list.data.into_iter().map(WireModel::into_record).collect())
}

impl WireModel {
    fn into_record(self) -> ModelPrice {
        let supports = self
            .supports_prompt_cache
            .unwrap_or(self.cached_input_usd_per_mtok.is_some());
        ModelPrice {
            id: self.id,
            input_usd_per_mtok: self.input_usd_per_mtok,
            cached_input_usd_per_mtok: self.cached_input_usd_per_mtok,
            cache_write_usd_per_mtok: self.cache_write_usd_per_mtok,
            output_usd_per_mtok: self.output_usd_per_mtok,
            supports_prompt_cache: supports,
            min_cacheable_prompt_tokens: self.min_cacheable_prompt_tokens.filter(|t| *t > 0),
            cache_lifetime_seconds: self.cache_lifetime_seconds.filter(|t| *t > 0),
        }
    }
}

impl WireSession {
    /// Maps a checked row; `fallback_time` stands in for missing timestamps.
    pub(super) fn into_record(self, fallback_time: DateTime<Utc>) -> SessionRecord {
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
    pub(super) fn into_record(self) -> RequestRecord {
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

/// Parses a page, naming the failing field (`data[3]: missing field \`cost_usd\``).
/// The message can quote the page (a map key, an unknown variant), so it is
/// made [`printable`](crate::printable).
///
/// Tracking the path costs an allocation per key, so a page is parsed
/// without it first (from text validated as UTF-8 once, rather than string
/// by string); only a page that fails is parsed again to name the field.
/// Parsing is deterministic, so the second pass fails the same way.
pub(super) fn parse<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, String> {
    if let Ok(text) = std::str::from_utf8(body)
        && let Ok(page) = serde_json::from_str(text)
    {
        return Ok(page);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let message = if path == "." || path.is_empty() {
            inner
        } else {
            format!("{path}: {inner}")
        };
        crate::printable::printable(&message).to_string()
    })
}

/// Parses a listing's page: by the direct reader ([`scan`]) when the page
/// is in the plain shape, else by [`parse`], which gives the same page or
/// names the failing field.
pub(super) fn parse_page<T>(body: &[u8]) -> Result<Page<T>, String>
where
    T: Scan + serde::de::DeserializeOwned,
{
    if let Ok(text) = std::str::from_utf8(body)
        && let Some(page) = scan::page(text)
    {
        return Ok(page);
    }
    parse(body)
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
/// building the map; more than [`check::MAX_MODELS_PER_SESSION`] models fail
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
                        check::MAX_MODELS_PER_SESSION
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
    fn of(self, model: String) -> ModelUsage {
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
/// pass [`check::MAX_MODELS_PER_SESSION`].
fn add_usage(out: &mut Vec<ModelUsage>, usage: ModelUsage) -> bool {
    let full = out.len() == check::MAX_MODELS_PER_SESSION;
    match out.iter_mut().find(|m| m.model == usage.model) {
        Some(slot) => *slot = usage,
        None if full => return false,
        None => out.push(usage),
    }
    true
}

/// Of `models`, only what the mapping needs: how many, and the first.
#[derive(Debug, Default)]
pub(super) struct ModelNames {
    count: usize,
    first: Option<String>,
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

/// An RFC 3339 timestamp; the gateway's own form
/// (`2026-11-02T00:01:49.677Z`) is read directly, anything else by chrono.
fn time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    d.deserialize_str(Time)
}

/// An optional [`time`].
fn opt_time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<DateTime<Utc>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an RFC 3339 timestamp")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            time(d).map(Some)
        }
    }
    d.deserialize_option(V)
}

/// The visitor of [`time`].
struct Time;

impl serde::de::Visitor<'_> for Time {
    type Value = DateTime<Utc>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an RFC 3339 timestamp")
    }
    fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Self::Value, E> {
        match fast_utc(t) {
            Some(v) => Ok(v),
            // What chrono's own `Deserialize` accepts.
            None => t
                .parse::<DateTime<chrono::FixedOffset>>()
                .map(|v| v.with_timezone(&Utc))
                .map_err(E::custom),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]` (up to nine fractional digits) followed by
/// `Z` or `+00:00`; `None` for any other shape, which the caller hands to
/// chrono.
pub(super) fn fast_utc(t: &str) -> Option<DateTime<Utc>> {
    let b = t.as_bytes();
    let b = match b.strip_suffix(b"Z") {
        Some(head) => head,
        None => b.strip_suffix(b"+00:00")?,
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b.get(r)?.iter().try_fold(0u32, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let date = chrono::NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    let frac = &b[19..];
    let nanos = match frac {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            num(20..20 + digits.len())? * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let time =
        chrono::NaiveTime::from_hms_nano_opt(num(11..13)?, num(14..16)?, num(17..19)?, nanos)?;
    Some(date.and_time(time).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn timestamps_read_fast_agree_with_chrono() {
        for t in [
            "2026-11-02T00:01:49.677Z",
            "2026-11-02T00:01:49Z",
            "2026-11-02T23:59:59.123456789Z",
            "2024-02-29T12:00:00.5Z",
        ] {
            let chrono: DateTime<Utc> = serde_json::from_str(&format!("\"{t}\"")).unwrap();
            assert_eq!(fast_utc(t), Some(chrono), "{t}");
        }
        for t in [
            "2026-11-02T00:01:49+02:00",
            "2026-11-02 00:01:49Z",
            "2026-02-30T00:00:00Z",
            "2026-11-02T00:01:49.Z",
            "2026-11-02T00:01:49.1234567890Z",
        ] {
            assert_eq!(fast_utc(t), None, "{t}");
        }
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
            fast_utc("2026-11-02T00:01:49Z").unwrap()
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
                fast_utc("2026-11-02T00:01:49.677Z").unwrap(),
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
    fn a_listing_page_reads_the_same_whichever_reader_takes_it() {
        let plain = br#"{"data":[{"session_id":"a","requests":2,"input_tokens":5,"cost_usd":0.25,
            "labels":{"feature":"faq"}}],"next_cursor":"c2"}"#;
        // The escape sends the page to serde; it reads the same row.
        let escaped =
            br#"{"data":[{"session_id":"\u0061","requests":2,"input_tokens":5,"cost_usd":0.25,
            "labels":{"feature":"faq"}}],"next_cursor":"c2"}"#;
        assert!(scan::page::<WireSession>(std::str::from_utf8(plain).unwrap()).is_some());
        assert!(scan::page::<WireSession>(std::str::from_utf8(escaped).unwrap()).is_none());
        for body in [&plain[..], &escaped[..]] {
            let page = parse_page::<WireSession>(body).unwrap();
            assert_eq!(
                format!("{page:?}"),
                format!("{:?}", parse::<Page<WireSession>>(plain).unwrap())
            );
        }
        // A failing page is named by serde, whichever reader saw it first.
        let bad = br#"{"data":[{"session_id":"a","requests":2,"input_tokens":5}]}"#;
        assert_eq!(
            parse_page::<WireSession>(bad).err(),
            parse::<Page<WireSession>>(bad).err()
        );
        let err = parse_page::<WireSession>(bad).err().unwrap_or_default();
        assert!(
            err.starts_with("data[0]") && err.contains("cost_usd"),
            "{err}"
        );
    }

    #[test]
    fn a_truncated_page_is_an_error() {
        let body = br#"{"data":[{"session_id":"a","requests":2,"input_tok"#;
        assert!(parse::<Page<WireSession>>(body).is_err());
    }
}
