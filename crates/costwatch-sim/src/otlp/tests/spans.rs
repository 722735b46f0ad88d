//! A dataset's calls as spans and export requests.

use super::*;

#[test]
fn every_call_of_the_range_is_one_span_with_its_figures() {
    let d = fixture();
    let (from, to) = (ts("2026-10-11T11:25:00Z"), ts("2026-10-11T11:30:00Z"));
    let expected = d.requests_in(from, to, &[], None);
    let total = d.request_count();
    assert!(
        expected.len() > 10 && expected.len() < total,
        "the range cuts the fixture"
    );
    let requests = export_requests(&d, from, to, 7);
    assert_eq!(requests.len(), expected.len().div_ceil(7));
    assert!(
        requests
            .iter()
            .all(|r| span_count(std::slice::from_ref(r)) <= 7)
    );

    let mut spans: HashMap<Vec<u8>, (BTreeMap<String, String>, Span)> = HashMap::new();
    for (res, span) in flatten(&requests) {
        assert!(
            spans.insert(span.span_id.clone(), (res, span)).is_none(),
            "a span id twice"
        );
    }
    assert_eq!(spans.len(), expected.len());
    for r in &expected {
        let (res, span) = spans.get(span_id(&r.request_id).as_slice()).unwrap();
        let s = d.session(&r.session_id).unwrap();
        assert_eq!(span.name, format!("chat {}", r.model));
        assert_eq!(span.kind, SpanKind::Client as i32);
        assert_eq!(span.trace_id, trace_id(&r.session_id).to_vec());
        assert_eq!(
            hexs(&span.trace_id),
            crate::langfuse::trace_id_of(&r.session_id)
        );
        assert!(span.parent_span_id.is_empty());
        assert_eq!(span.start_time_unix_nano, nanos(r.created_at));
        assert_eq!(
            span.end_time_unix_nano - span.start_time_unix_nano,
            r.latency_ms * 1_000_000
        );
        assert_eq!(str_attr(span, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(str_attr(span, "gen_ai.system"), Some("openai"));
        assert_eq!(str_attr(span, "gen_ai.provider.name"), Some("openai"));
        assert_eq!(
            str_attr(span, "gen_ai.request.model"),
            Some(r.model.as_str())
        );
        assert_eq!(
            str_attr(span, "gen_ai.conversation.id"),
            Some(r.session_id.as_str())
        );
        assert_eq!(str_attr(span, "server.address"), Some(SERVER_ADDRESS));
        assert_eq!(int_attr(span, "server.port"), Some(SERVER_PORT));
        let status = span.status.as_ref().unwrap();
        if r.is_error() {
            assert_eq!(status.code, SpanStatus::Error as i32);
            assert!(
                status.message.starts_with("Error code: 429"),
                "{}",
                status.message
            );
            assert_eq!(str_attr(span, "error.type"), Some("RateLimitError"));
            assert_eq!(int_attr(span, "gen_ai.usage.input_tokens"), None);
        } else {
            assert_eq!(status.code, SpanStatus::Unset as i32);
            assert_eq!(
                str_attr(span, "gen_ai.response.id"),
                Some(r.request_id.as_str())
            );
            assert_eq!(
                str_attr(span, "gen_ai.response.model"),
                Some(r.model.as_str())
            );
            assert_eq!(
                int_attr(span, "gen_ai.usage.input_tokens"),
                Some(r.input_tokens as i64)
            );
            assert_eq!(
                int_attr(span, "gen_ai.usage.output_tokens"),
                Some(r.output_tokens as i64)
            );
            let cached = int_attr(span, "gen_ai.usage.cache_read.input_tokens");
            assert_eq!(cached.unwrap_or(0), r.cached_tokens as i64);
        }
        // The labels come back as string resource attributes.
        for (k, v) in &s.labels {
            assert_eq!(res.get(k), Some(v), "label {k}");
        }
        let feature = s.labels.get("feature").map_or("agent", String::as_str);
        assert_eq!(res.get("service.name").map(String::as_str), Some(feature));
        assert_eq!(
            res.get("telemetry.sdk.language").map(String::as_str),
            Some("python")
        );
        assert_eq!(res.len(), s.labels.len() + 3, "{res:?}");
    }
}

#[test]
fn spans_go_out_shortly_after_they_end_not_in_start_order() {
    let d = fixture();
    let requests = export_requests(
        &d,
        ts("2026-10-11T11:00:00Z"),
        ts("2026-10-11T12:00:00Z"),
        10,
    );
    let spans = flatten(&requests);
    let starts: Vec<u64> = spans.iter().map(|(_, s)| s.start_time_unix_nano).collect();
    assert_eq!(starts.len(), d.request_count());
    assert!(starts.windows(2).any(|w| w[0] > w[1]), "time-sorted");
    // Stretch by stretch of 5 seconds of their ends, as a batch span
    // processor exports them, sessions taking turns within a stretch.
    // A request groups its spans by resource: compare requests.
    let stretches: Vec<(u64, u64)> = requests
        .iter()
        .map(|r| {
            let ends = flatten(std::slice::from_ref(r))
                .into_iter()
                .map(|(_, s)| s.end_time_unix_nano / 5_000_000_000);
            (ends.clone().min().unwrap(), ends.max().unwrap())
        })
        .collect();
    assert!(
        stretches.windows(2).all(|w| w[0].1 <= w[1].0),
        "a request holds a span that ended a stretch before one sent earlier"
    );
    let ends: Vec<u64> = spans.iter().map(|(_, s)| s.end_time_unix_nano).collect();
    assert!(
        ends.windows(2).any(|w| w[0] > w[1]),
        "sessions never take turns"
    );
    // The same data gives the same requests.
    assert_eq!(
        requests,
        export_requests(
            &d,
            ts("2026-10-11T11:00:00Z"),
            ts("2026-10-11T12:00:00Z"),
            10
        )
    );
}

#[test]
fn cache_reads_are_written_zero_included_and_writes_only_when_made() {
    let (_, uncached) = small_span("req_00000000000000a1");
    assert_eq!(int_attr(&uncached, "gen_ai.usage.input_tokens"), Some(1200));
    assert_eq!(
        int_attr(&uncached, "gen_ai.usage.cache_read.input_tokens"),
        Some(0),
        "a measured zero, not a missing figure"
    );
    assert_eq!(
        int_attr(&uncached, "gen_ai.usage.cache_creation.input_tokens"),
        None
    );

    let (_, cached) = small_span("req_00000000000000a2");
    assert_eq!(int_attr(&cached, "gen_ai.usage.input_tokens"), Some(1300));
    assert_eq!(
        int_attr(&cached, "gen_ai.usage.cache_read.input_tokens"),
        Some(1024)
    );
    assert_eq!(int_attr(&cached, "gen_ai.usage.output_tokens"), Some(90));

    let (_, written) = small_span("req_00000000000000b1");
    assert_eq!(
        int_attr(&written, "gen_ai.usage.cache_creation.input_tokens"),
        Some(512)
    );
    assert_eq!(
        int_attr(&written, "gen_ai.usage.cache_read.input_tokens"),
        Some(0)
    );
}

#[test]
fn failed_calls_carry_an_error_and_no_usage() {
    let (_, limited) = small_span("req_00000000000000a3");
    let (_, broken) = small_span("req_00000000000000c1");
    for span in [&limited, &broken] {
        assert_eq!(span.status.as_ref().unwrap().code, SpanStatus::Error as i32);
        for kv in &span.attributes {
            assert!(!kv.key.starts_with("gen_ai.usage."), "{}", kv.key);
            assert!(!kv.key.starts_with("gen_ai.response."), "{}", kv.key);
        }
        assert_eq!(str_attr(span, "gen_ai.operation.name"), Some("chat"));
    }
    assert_eq!(str_attr(&limited, "error.type"), Some("RateLimitError"));
    assert_eq!(int_attr(&limited, "http.response.status_code"), Some(429));
    assert!(
        limited
            .status
            .as_ref()
            .unwrap()
            .message
            .contains("RateLimitError"),
        "{:?}",
        limited.status
    );
    assert_eq!(str_attr(&broken, "error.type"), Some("500"));
    assert_eq!(int_attr(&broken, "http.response.status_code"), Some(500));
    assert_eq!(broken.status.as_ref().unwrap().message, "Error code: 500");
}

#[test]
fn spans_are_grouped_by_resource() {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        100,
    );
    let rs: &Vec<ResourceSpans> = &requests[0].resource_spans;
    assert_eq!(rs.len(), 2, "s-a and s-b share their process");
    let by_service: HashMap<String, usize> = rs
        .iter()
        .map(|r| {
            let attrs = strings(&r.resource.as_ref().unwrap().attributes);
            (attrs["service.name"].clone(), r.scope_spans[0].spans.len())
        })
        .collect();
    assert_eq!(by_service.get("support"), Some(&4));
    assert_eq!(by_service.get(DEFAULT_SERVICE), Some(&1));
    // One trace per session, several sessions per resource.
    let traces: BTreeSet<Vec<u8>> = flatten(&requests)
        .into_iter()
        .map(|(_, s)| s.trace_id)
        .collect();
    assert_eq!(traces.len(), 3);
    // A cut of one span per request still sends every span once.
    let one_each = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        0,
    );
    assert_eq!(one_each.len(), 5);
    assert_eq!(span_count(&one_each), 5);
}

#[test]
fn span_ids_are_the_request_ids_or_a_hash_of_them() {
    assert_eq!(
        span_id("req_4164d8399f767c45"),
        [0x41, 0x64, 0xd8, 0x39, 0x9f, 0x76, 0x7c, 0x45]
    );
    assert_ne!(span_id("chatcmpl-1"), span_id("chatcmpl-2"));
    assert_ne!(span_id("req_0000000000000000"), [0; 8]);
    assert_ne!(trace_id("a"), trace_id("b"));
}

#[test]
fn json_lines_round_trip_with_hex_ids_and_string_int64s() {
    let d = fixture();
    let requests = export_requests(
        &d,
        ts("2026-10-11T11:00:00Z"),
        ts("2026-10-11T12:00:00Z"),
        20,
    );
    let dir = tempfile::tempdir().unwrap();
    let paths = write_json_lines(dir.path(), &requests, 1000).unwrap();
    assert_eq!(paths, vec![dir.path().join(CURRENT_FILE)]);
    let text = std::fs::read_to_string(&paths[0]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), requests.len());
    assert!(text.ends_with('\n'));
    for (line, request) in lines.iter().zip(&requests) {
        let raw: serde_json::Value = serde_json::from_str(line).unwrap();
        let obj = raw.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), vec!["resourceSpans"]);
        let span = &raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        let trace = span["traceId"].as_str().unwrap();
        assert_eq!(trace.len(), 32);
        assert!(
            trace
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
        let start = span["startTimeUnixNano"].as_str().unwrap();
        assert!(start.parse::<u64>().unwrap() > 1_700_000_000_000_000_000);
        let port = span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|kv| kv["key"] == "server.port")
            .unwrap();
        assert_eq!(
            port["value"]["intValue"],
            serde_json::json!(SERVER_PORT.to_string())
        );
        assert_eq!(span["kind"], 3);
        let back: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
        assert_eq!(&back, request);
    }
}
