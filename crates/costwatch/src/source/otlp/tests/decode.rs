use super::*;
use crate::source::otlp::{
    DecodeError, Encoding, decode_json_line, decode_request, encode_response,
};
use flate2::Compression;
use flate2::write::GzEncoder;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use std::io::Write;

const MB: usize = 1 << 20;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// What the OpenTelemetry Collector and the SDKs send as OTLP/JSON:
/// upper-case hex is allowed too; int64 as strings, or as numbers from
/// other writers.
const JSON: &str = r#"{"resourceSpans":[{"resource":{"attributes":[
  {"key":"service.name","value":{"stringValue":"chat-api"}}]},
 "scopeSpans":[{"scope":{"name":"opentelemetry.instrumentation.openai_v2","version":"2.1b0"},
  "spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b174",
   "parentSpanId":"","name":"chat gpt-4o","kind":3,
   "startTimeUnixNano":"1714564800000000000","endTimeUnixNano":1714564801000000000,
   "attributes":[
     {"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
     {"key":"gen_ai.usage.input_tokens","value":{"intValue":"120"}},
     {"key":"gen_ai.usage.output_tokens","value":{"intValue":30}},
     {"key":"gen_ai.request.temperature","value":{"doubleValue":0.5}}],
   "status":{"code":2,"message":"boom"}}]}]}]}"#;

#[test]
fn protobuf_round_trips() {
    let req = request(
        vec![text("service.name", "chat-api")],
        vec![
            chat(1, 1, 0, "gpt-4o", 100, 20),
            chat(1, 2, 5, "gpt-4o", 200, 30),
        ],
    );
    let body = req.encode_to_vec();
    let back = decode_request(&body, Encoding::Protobuf, None, MB).unwrap();
    assert_eq!(back, req);
    let back = decode_request(&body, Encoding::Protobuf, Some("identity"), MB).unwrap();
    assert_eq!(back, req);
}

#[test]
fn json_reads_hex_ids_and_int64_as_strings_and_numbers() {
    let req = decode_request(JSON.as_bytes(), Encoding::Json, None, MB).unwrap();
    let span = &req.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(
        hex::encode(&span.trace_id),
        "5b8efff798038103d269b633813fc60c"
    );
    assert_eq!(hex::encode(&span.span_id), "eee19b7ec3c1b174");
    assert!(span.parent_span_id.is_empty());
    assert_eq!(span.start_time_unix_nano, T0);
    assert_eq!(span.end_time_unix_nano, T0 + SEC);
    assert_eq!(span.kind, 3);
    assert_eq!(span.status.as_ref().unwrap().code, 2);
    let value = |i: usize| span.attributes[i].value.as_ref().unwrap().value.clone();
    assert_eq!(value(1), Some(Value::IntValue(120)));
    assert_eq!(value(2), Some(Value::IntValue(30)));
    assert_eq!(value(3), Some(Value::DoubleValue(0.5)));
    // A line of the file exporter is the same object.
    assert_eq!(decode_json_line(JSON).unwrap(), req);
}

#[test]
fn json_ignores_unknown_fields() {
    let json = r#"{"resourceSpans":[{"resource":{"attributes":[],"entityRefs":[{"type":"service"}]},
      "futureField":{"a":[1,2]},
      "scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",
        "spanId":"eee19b7ec3c1b174","startTimeUnixNano":"1714564800000000000",
        "newSpanField":true,
        "attributes":[{"key":"gen_ai.request.model",
          "value":{"stringValue":"gpt-4o","futureValue":{"x":1}}}]}]}]}],
      "topLevelExtra":"ignored"}"#;
    let req = decode_request(json.as_bytes(), Encoding::Json, None, MB).unwrap();
    let span = &req.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(
        span.attributes[0].value.as_ref().unwrap().value,
        Some(Value::StringValue("gpt-4o".into()))
    );
    // Every field may be left out: an empty object is an empty export.
    let empty = decode_request(b"{}", Encoding::Json, None, MB).unwrap();
    assert!(empty.resource_spans.is_empty());
}

#[test]
fn json_accepts_what_proto3_json_may_leave_out() {
    // The empty list attributes the Collector writes, a key-value without
    // a key, nulls, enum names and non-finite doubles as text.
    let json = r#"{"resourceSpans":[{"resource":{"attributes":[
        {"key":"service.name","value":{"stringValue":"chat-api"}},
        {"key":"process.command_args","value":{"arrayValue":{}}}]},
      "scopeSpans":[{"scope":null,"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",
        "spanId":"eee19b7ec3c1b174","startTimeUnixNano":"1714564800000000000",
        "kind":"SPAN_KIND_CLIENT","events":null,"links":[],
        "attributes":[
          {"key":"gen_ai.response.finish_reasons","value":{"arrayValue":{}}},
          {"key":"extra","value":{"kvlistValue":{"values":[{"value":{"intValue":"1"}}]}}},
          {"key":"empty","value":{"kvlistValue":{}}},
          {"key":"gen_ai.request.temperature","value":{"doubleValue":"NaN"}},
          {"key":"gen_ai.request.top_p","value":{"doubleValue":"0.5"}},
          {"key":"gen_ai.usage.input_tokens","value":{"intValue":"7"}}],
        "status":{"code":"STATUS_CODE_ERROR","message":"boom"}}]}]}]}"#;
    let req = decode_request(json.as_bytes(), Encoding::Json, None, MB).unwrap();
    let resource = req.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(resource.attributes.len(), 2);
    let span = &req.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(hex::encode(&span.span_id), "eee19b7ec3c1b174");
    assert_eq!(span.kind, 3);
    assert_eq!(span.status.as_ref().unwrap().code, 2);
    assert!(span.events.is_empty());
    let value = |i: usize| span.attributes[i].value.as_ref().unwrap().value.clone();
    assert!(matches!(value(0), Some(Value::ArrayValue(a)) if a.values.is_empty()));
    assert!(matches!(value(1), Some(Value::KvlistValue(l)) if l.values[0].key.is_empty()));
    assert!(matches!(value(2), Some(Value::KvlistValue(l)) if l.values.is_empty()));
    assert_eq!(value(3), None);
    assert_eq!(value(4), Some(Value::DoubleValue(0.5)));
    assert_eq!(value(5), Some(Value::IntValue(7)));
    // A body that is wrong whatever is filled in names where.
    let bad = json.replace(r#""intValue":"7""#, r#""intValue":"seven""#);
    let err = decode_request(bad.as_bytes(), Encoding::Json, None, MB).unwrap_err();
    assert!(
        err.to_string()
            .contains("resourceSpans[0].scopeSpans[0].spans[0].attributes[5]"),
        "{err}"
    );
}

#[test]
fn gzip_bodies_are_decompressed() {
    let json = gzip(JSON.as_bytes());
    let req = decode_request(&json, Encoding::Json, Some("gzip"), MB).unwrap();
    assert_eq!(req.resource_spans[0].scope_spans[0].spans.len(), 1);
    let req = request(vec![], vec![chat(1, 1, 0, "gpt-4o", 100, 20)]);
    let body = gzip(&req.encode_to_vec());
    let back = decode_request(&body, Encoding::Protobuf, Some(" GZIP "), MB).unwrap();
    assert_eq!(back, req);
}

#[test]
fn a_gzip_bomb_over_the_limit_is_too_large() {
    // 64 MiB of zeros squeeze into about 64 KiB.
    let bomb = gzip(&vec![0u8; 64 * MB]);
    assert!(bomb.len() < MB);
    let err = decode_request(&bomb, Encoding::Protobuf, Some("gzip"), MB).unwrap_err();
    assert!(
        matches!(err, DecodeError::TooLarge { limit } if limit == MB),
        "{err:?}"
    );
    // Exactly at the limit is fine; one byte more is not.
    let at = gzip(&[b' '; 100]);
    assert!(decode_request(&gzip(b"{}"), Encoding::Json, Some("gzip"), 2).is_ok());
    let err = decode_request(&at, Encoding::Json, Some("gzip"), 99).unwrap_err();
    assert!(
        matches!(err, DecodeError::TooLarge { limit: 99 }),
        "{err:?}"
    );
    // A plain body over the limit too.
    let err = decode_request(&[b' '; 100], Encoding::Json, None, 99).unwrap_err();
    assert!(
        matches!(err, DecodeError::TooLarge { limit: 99 }),
        "{err:?}"
    );
}

#[test]
fn damaged_gzip_is_a_gzip_error() {
    let mut body = gzip(JSON.as_bytes());
    body.truncate(body.len() / 2);
    let err = decode_request(&body, Encoding::Json, Some("gzip"), MB).unwrap_err();
    assert!(matches!(err, DecodeError::Gzip(_)), "{err:?}");
    let err = decode_request(b"not gzip", Encoding::Json, Some("gzip"), MB).unwrap_err();
    assert!(matches!(err, DecodeError::Gzip(_)), "{err:?}");
}

#[test]
fn malformed_protobuf_is_a_protobuf_error() {
    let err = decode_request(&[0x0a, 0xff, 0xff, 0xff], Encoding::Protobuf, None, MB).unwrap_err();
    assert!(matches!(err, DecodeError::Protobuf(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("not an OTLP protobuf trace export: ")
    );
}

#[test]
fn malformed_json_is_a_json_error() {
    for body in [
        &br#"{"resourceSpans":["#[..],
        br#"{"resourceSpans":"many"}"#,
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"xyz"}]}]}]}"#,
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}"#,
        b"",
    ] {
        let err = decode_request(body, Encoding::Json, None, MB).unwrap_err();
        assert!(matches!(err, DecodeError::Json(_)), "{err:?}");
    }
    assert!(matches!(
        decode_json_line("{\"resourceSpans\":"),
        Err(DecodeError::Json(_))
    ));
}

#[test]
fn unknown_content_encodings_are_refused() {
    let err = decode_request(b"{}", Encoding::Json, Some("br"), MB).unwrap_err();
    assert!(
        matches!(&err, DecodeError::UnknownContentEncoding(e) if e == "br"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "content encoding `br` is not supported: use gzip or identity"
    );
}

#[test]
fn content_types_name_the_encoding() {
    let cases = [
        ("application/x-protobuf", Some(Encoding::Protobuf)),
        ("application/protobuf", Some(Encoding::Protobuf)),
        ("Application/X-Protobuf; proto=x", Some(Encoding::Protobuf)),
        ("application/json", Some(Encoding::Json)),
        ("application/json; charset=utf-8", Some(Encoding::Json)),
        (" APPLICATION/JSON ;charset=UTF-8", Some(Encoding::Json)),
        ("text/plain", None),
        ("application/jsonl", None),
        ("", None),
    ];
    for (ct, want) in cases {
        assert_eq!(Encoding::from_content_type(ct), want, "{ct}");
    }
    for e in [Encoding::Protobuf, Encoding::Json] {
        assert_eq!(Encoding::from_content_type(e.content_type()), Some(e));
    }
}

#[test]
fn a_success_response_is_an_empty_message() {
    let body = encode_response(0, "", Encoding::Protobuf);
    assert!(body.is_empty());
    let resp = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();
    assert_eq!(resp, ExportTraceServiceResponse::default());
    let body = encode_response(0, "", Encoding::Json);
    assert_eq!(body, b"{}");
    let resp: ExportTraceServiceResponse = serde_json::from_slice(&body).unwrap();
    assert_eq!(resp.partial_success, None);
}

#[test]
fn a_partial_success_parses_back_in_both_encodings() {
    let msg = "span 4b4b4b4b4b4b4b01: no gen_ai.request.model or gen_ai.response.model";
    let body = encode_response(3, msg, Encoding::Protobuf);
    let resp = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();
    let partial = resp.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 3);
    assert_eq!(partial.error_message, msg);

    let body = encode_response(3, msg, Encoding::Json);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    // int64 is a decimal string in OTLP/JSON.
    assert_eq!(v["partialSuccess"]["rejectedSpans"], "3");
    assert_eq!(v["partialSuccess"]["errorMessage"], msg);

    // A warning: nothing rejected, a message.
    let body = encode_response(0, "2 calls carry no token counts", Encoding::Json);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"partialSuccess": {"errorMessage": "2 calls carry no token counts"}})
    );
    let resp: ExportTraceServiceResponse = serde_json::from_slice(&body).unwrap();
    assert_eq!(resp.partial_success.unwrap().rejected_spans, 0);
}
