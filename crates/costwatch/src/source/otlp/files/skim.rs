//! What a file's index needs of a line, read without decoding its spans:
//! each span's id, start time and trace, and whether it names a
//! conversation. Everything else of the line is skipped unread, and the
//! ids are borrowed from the line, so the first scan of a folder costs a
//! fraction of decoding it.
//!
//! What it reads is a superset of what the mapping makes calls of (every
//! span counts, model call or not): a block's time range and traces may
//! be wider than its calls', which only makes a read parse a block it did
//! not need.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;
use std::hash::BuildHasher;

/// A span as the index sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SpanKey {
    /// The span id as a number (the 16 hex digits the mapping makes the
    /// call's id of); `None` when it is no 8-byte id.
    pub span: Option<u64>,
    /// Nanoseconds since the epoch; `None` when missing or zero.
    pub start: Option<u64>,
    /// The trace, hashed ([`trace_hash`]), when the span carries a
    /// `gen_ai.conversation.id` attribute and a 16-byte trace id.
    pub conversation_trace: Option<u64>,
}

/// The spans of one line of OTLP/JSON traces, in line order; `None` when
/// the line is not such JSON as far as this reading goes (the full
/// decoding then says why, or reads what the specification allows and
/// this does not).
pub(super) fn skim(line: &str) -> Option<Vec<SpanKey>> {
    let data: Data<'_> = serde_json::from_str(line).ok()?;
    let mut out = Vec::new();
    for rs in data.resource_spans.unwrap_or_default() {
        for ss in rs.scope_spans.unwrap_or_default() {
            for s in ss.spans.unwrap_or_default() {
                let span = borrowed_hex(s.span_id)?;
                let trace = borrowed_hex(s.trace_id)?;
                let conversation = s.attributes.is_some_and(|a| a.0);
                out.push(SpanKey {
                    span: span
                        .filter(|h| h.len() == 16)
                        .and_then(|h| u64::from_str_radix(h, 16).ok()),
                    start: s.start_time_unix_nano.and_then(|n| n.0),
                    conversation_trace: trace
                        .filter(|h| conversation && h.len() == 32)
                        .map(|h| trace_hash(&h.to_ascii_lowercase())),
                });
            }
        }
    }
    Some(out)
}

/// The same of a decoded line's spans.
pub(super) fn keys(request: &ExportTraceServiceRequest) -> Vec<SpanKey> {
    let spans = request
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans);
    spans
        .map(|s| {
            let conversation = s
                .attributes
                .iter()
                .any(|kv| kv.key == "gen_ai.conversation.id");
            SpanKey {
                span: <[u8; 8]>::try_from(s.span_id.as_slice())
                    .ok()
                    .map(u64::from_be_bytes),
                start: (s.start_time_unix_nano > 0).then_some(s.start_time_unix_nano),
                conversation_trace: (conversation && s.trace_id.len() == 16)
                    .then(|| trace_hash(&hex::encode(&s.trace_id))),
            }
        })
        .collect()
}

/// An id that is hex; `None` for anything else, which the full decoding
/// judges.
fn borrowed_hex(id: Option<&str>) -> Option<Option<&str>> {
    match id {
        Some(s) if !s.bytes().all(|b| b.is_ascii_hexdigit()) => None,
        id => Some(id),
    }
}

/// A trace id's hash, the same for the life of the process (a block's
/// list of traces is compared with the traces of calls read later).
pub(super) fn trace_hash(trace: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(trace)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data<'a> {
    #[serde(borrow)]
    resource_spans: Option<Vec<ResourceSpans<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    #[serde(borrow)]
    scope_spans: Option<Vec<ScopeSpans<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScopeSpans<'a> {
    #[serde(borrow)]
    spans: Option<Vec<Span<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Span<'a> {
    /// Borrowed: an id written with escapes is left to the full decoding.
    trace_id: Option<&'a str>,
    span_id: Option<&'a str>,
    start_time_unix_nano: Option<Nanos>,
    attributes: Option<NamesConversation>,
}

/// A key-value of the attributes: only its key is read.
#[derive(Deserialize)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(rename = "value")]
    _value: Option<IgnoredAny>,
}

/// Whether a list of attributes holds `gen_ai.conversation.id`, read
/// without keeping the list.
struct NamesConversation(bool);

impl<'de> Deserialize<'de> for NamesConversation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = NamesConversation;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of key-values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut found = false;
                while let Some(kv) = seq.next_element::<KeyValue<'de>>()? {
                    found |= kv.key.as_deref() == Some("gen_ai.conversation.id");
                }
                Ok(NamesConversation(found))
            }
        }
        d.deserialize_seq(Keys)
    }
}

/// A 64-bit count of nanoseconds: a decimal string or a number (OTLP/JSON
/// writes the string); `None` for zero.
struct Nanos(Option<u64>);

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Number;
        impl Visitor<'_> for Number {
            type Value = Nanos;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a count of nanoseconds")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Nanos, E> {
                Ok(Nanos((v > 0).then_some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Nanos, E> {
                u64::try_from(v)
                    .map(|v| Nanos((v > 0).then_some(v)))
                    .map_err(|_| E::custom("a negative time"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
                v.parse::<u64>()
                    .map(|v| Nanos((v > 0).then_some(v)))
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(Number)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_line_gives_each_span_s_id_start_and_conversation_trace() {
        let line = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]},"scopeSpans":[{"scope":{"name":"s"},"spans":[
            {"traceId":"000102030405060708090A0B0C0D0E0F","spanId":"00000000000000Ff","name":"chat m","startTimeUnixNano":"1700000000000000000","attributes":[{"key":"gen_ai.conversation.id","value":{"stringValue":"c"}}]},
            {"traceId":"000102030405060708090a0b0c0d0e0f","spanId":"02","startTimeUnixNano":5,"attributes":[{"key":"x","value":{"intValue":"3"}}],"status":{}}
        ]}]},{"scopeSpans":null}]}"#;
        let skimmed = skim(line).unwrap();
        assert_eq!(
            skimmed,
            [
                SpanKey {
                    span: Some(255),
                    start: Some(1_700_000_000_000_000_000),
                    conversation_trace: Some(trace_hash("000102030405060708090a0b0c0d0e0f")),
                },
                SpanKey {
                    span: None,
                    start: Some(5),
                    conversation_trace: None,
                },
            ]
        );
        // The full decoding sees the same.
        let decoded = super::super::super::decode::decode_json_line(line).unwrap();
        assert_eq!(keys(&decoded), skimmed);
    }

    #[test]
    fn what_is_not_such_json_is_left_to_the_full_decoding() {
        assert_eq!(skim("{}"), Some(Vec::new()));
        assert_eq!(skim("not json"), None);
        assert_eq!(
            skim(r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"zz"}]}]}]}"#),
            None
        );
        assert_eq!(
            skim(r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"x"}]}]}]}"#),
            None
        );
    }
}
