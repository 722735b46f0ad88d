use super::*;
use crate::source::RequestStatus;
use crate::source::otlp::{AttrRef, InputTokens, Mapped, SessionFallback, SpanMapping, map_spans};
use chrono::{DateTime, TimeZone, Utc};
use std::collections::BTreeMap;

fn map_with(mapping: &SpanMapping, spans: Vec<Span>) -> Mapped {
    map_spans(
        &request(vec![text("service.name", "chat-api")], spans),
        mapping,
        DateTime::<Utc>::MIN_UTC,
        DateTime::<Utc>::MAX_UTC,
    )
}

fn map(spans: Vec<Span>) -> Mapped {
    map_with(&SpanMapping::default(), spans)
}

/// The one call `spans` give.
fn one(spans: Vec<Span>) -> crate::source::rows::CallRow {
    let mut m = map(spans);
    assert_eq!(m.calls.len(), 1, "{m:?}");
    m.calls.remove(0).row
}

fn rejected(spans: Vec<Span>) -> String {
    let m = map(spans);
    assert_eq!((m.calls.len(), m.rejected), (0, 1), "{m:?}");
    m.first_rejection.unwrap()
}

#[test]
fn a_chat_span_becomes_a_call() {
    let m = map(vec![chat(1, 1, 3, "gpt-4o", 120, 30)]);
    assert_eq!((m.rejected, m.without_usage, m.other_spans), (0, 0, 0));
    let call = &m.calls[0];
    assert_eq!(call.trace_id, trace_hex(1));
    let row = &call.row;
    assert_eq!(row.request_id, span_hex(1));
    assert_eq!(row.session_id.as_deref(), Some(trace_hex(1).as_str()));
    assert_eq!(
        row.created_at,
        Utc.with_ymd_and_hms(2024, 5, 1, 12, 0, 3).unwrap()
    );
    assert_eq!(row.model, "gpt-4o");
    assert_eq!(row.status, RequestStatus::Success);
    assert_eq!((row.http_status, row.error_type.as_deref()), (None, None));
    assert_eq!((row.input_tokens, row.output_tokens), (120, 30));
    assert_eq!((row.cached_tokens, row.cache_write_tokens), (0, 0));
    assert_eq!(row.cost_usd, None);
    assert_eq!(row.provider, None);
}

#[test]
fn the_provider_that_served_a_call_is_kept() {
    let named = |attr: &str| {
        one(vec![with(
            chat(1, 1, 3, "gpt-4o", 120, 30),
            vec![text(attr, "azure.ai.openai")],
        )])
        .provider
    };
    assert_eq!(
        named("gen_ai.provider.name").as_deref(),
        Some("azure.ai.openai")
    );
    // The name before semantic conventions 1.37.
    assert_eq!(named("gen_ai.system").as_deref(), Some("azure.ai.openai"));
}

#[test]
fn text_completion_generate_content_and_openllmetry_spans_are_calls() {
    let op = |id, name: &str| {
        span(
            1,
            id,
            0,
            vec![
                text("gen_ai.operation.name", name),
                text("gen_ai.request.model", "m"),
                int("gen_ai.usage.input_tokens", 1),
            ],
        )
    };
    let legacy = |id, kind: &str| {
        span(
            1,
            id,
            0,
            vec![
                text("llm.request.type", kind),
                text("gen_ai.request.model", "m"),
                int("gen_ai.usage.prompt_tokens", 1),
            ],
        )
    };
    let m = map(vec![
        op(1, "text_completion"),
        op(2, "generate_content"),
        legacy(3, "chat"),
        legacy(4, "completion"),
        legacy(5, "embedding"),
        // gen_ai.operation.name wins over llm.request.type.
        with(op(6, "embeddings"), vec![text("llm.request.type", "chat")]),
    ]);
    let ids: Vec<&str> = m.calls.iter().map(|c| c.row.request_id.as_str()).collect();
    assert_eq!(ids, [span_hex(1), span_hex(2), span_hex(3), span_hex(4)]);
    assert_eq!(m.other_spans, 2);
}

#[test]
fn other_spans_are_counted_and_dropped_not_rejected() {
    let op = |id, name: &str| span(1, id, 0, vec![text("gen_ai.operation.name", name)]);
    let m = map(vec![
        op(1, "embeddings"),
        op(2, "execute_tool"),
        op(3, "invoke_agent"),
        op(4, "create_agent"),
        span(1, 5, 0, vec![text("http.request.method", "POST")]),
        // Not a model call even without a model.
        span(1, 6, 0, vec![]),
        chat(1, 7, 0, "gpt-4o", 10, 1),
    ]);
    assert_eq!((m.calls.len(), m.other_spans, m.rejected), (1, 6, 0));
}

#[test]
fn the_conversation_id_then_session_id_make_the_session() {
    let base = || chat(1, 1, 0, "gpt-4o", 10, 1);
    let row = one(vec![with(
        base(),
        vec![
            text("session.id", "s-1"),
            text("gen_ai.conversation.id", "conv-9"),
        ],
    )]);
    assert_eq!(row.session_id.as_deref(), Some("conv-9"));
    let row = one(vec![with(base(), vec![text("session.id", "s-1")])]);
    assert_eq!(row.session_id.as_deref(), Some("s-1"));
    // An empty conversation id is none.
    let row = one(vec![with(
        base(),
        vec![
            text("gen_ai.conversation.id", ""),
            text("session.id", "s-1"),
        ],
    )]);
    assert_eq!(row.session_id.as_deref(), Some("s-1"));
}

#[test]
fn without_a_conversation_the_fallback_decides() {
    let spans = || {
        vec![
            chat(1, 1, 0, "gpt-4o", 10, 1),
            with(
                chat(2, 2, 0, "gpt-4o", 10, 1),
                vec![text("app.thread", "t-7")],
            ),
            with(chat(3, 3, 0, "gpt-4o", 10, 1), vec![int("app.thread", 42)]),
        ]
    };
    let sessions = |fallback| {
        let mapping = SpanMapping {
            fallback,
            ..SpanMapping::default()
        };
        map_with(&mapping, spans())
            .calls
            .into_iter()
            .map(|c| c.row.session_id)
            .collect::<Vec<_>>()
    };
    let trace = |t| Some(trace_hex(t));
    assert_eq!(
        sessions(SessionFallback::Trace),
        [trace(1), trace(2), trace(3)]
    );
    let attr = SessionFallback::Attr(AttrRef::Span("app.thread".into()));
    assert_eq!(
        sessions(attr),
        [None, Some("t-7".into()), Some("42".into())]
    );
    let attr = SessionFallback::Attr(AttrRef::Resource("service.name".into()));
    let api = Some("chat-api".to_owned());
    assert_eq!(sessions(attr), [api.clone(), api.clone(), api]);
    assert_eq!(sessions(SessionFallback::None), [None, None, None]);
}

#[test]
fn the_response_model_wins_over_the_request_model() {
    let row = one(vec![with(
        chat(1, 1, 0, "gpt-4o", 10, 1),
        vec![text("gen_ai.response.model", "gpt-4o-2024-08-06")],
    )]);
    assert_eq!(row.model, "gpt-4o-2024-08-06");
    let only_response = span(
        1,
        1,
        0,
        vec![
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.response.model", "claude-sonnet-4-5"),
        ],
    );
    assert_eq!(one(vec![only_response]).model, "claude-sonnet-4-5");
}

#[test]
fn input_tokens_are_made_the_whole_prompt_as_configured() {
    // 100 input with 80 read and 10 written: a total (parts within it).
    let within = || {
        with(
            chat(1, 1, 0, "m", 100, 5),
            vec![
                int("gen_ai.usage.cache_read.input_tokens", 80),
                int("gen_ai.usage.cache_creation.input_tokens", 10),
            ],
        )
    };
    // 20 input with 80 read and 10 written: clearly without them.
    let beyond = || {
        with(
            chat(1, 1, 0, "m", 20, 5),
            vec![
                int("gen_ai.usage.cache_read.input_tokens", 80),
                int("gen_ai.usage.cache_creation.input_tokens", 10),
            ],
        )
    };
    let input = |how, span| {
        let mapping = SpanMapping {
            input_tokens: how,
            ..SpanMapping::default()
        };
        let row = map_with(&mapping, vec![span]).calls.remove(0).row;
        assert_eq!((row.cached_tokens, row.cache_write_tokens), (80, 10));
        row.input_tokens
    };
    assert_eq!(input(InputTokens::Auto, within()), 100);
    assert_eq!(input(InputTokens::Auto, beyond()), 110);
    assert_eq!(input(InputTokens::Total, within()), 100);
    assert_eq!(input(InputTokens::Total, beyond()), 20);
    assert_eq!(input(InputTokens::Uncached, within()), 190);
    assert_eq!(input(InputTokens::Uncached, beyond()), 110);
}

#[test]
fn missing_cache_counts_are_zero() {
    // The official OpenAI instrumentation leaves cache_read out when 0.
    let row = one(vec![with(
        chat(1, 1, 0, "m", 100, 5),
        vec![int("gen_ai.usage.cache_write.input_tokens", 30)],
    )]);
    assert_eq!(
        (row.input_tokens, row.cached_tokens, row.cache_write_tokens),
        (100, 0, 30)
    );
}

#[test]
fn every_cache_spelling_is_read_the_conventions_first() {
    let cache = |attrs: Vec<KeyValue>| {
        let row = one(vec![with(chat(1, 1, 0, "m", 1000, 5), attrs)]);
        (row.cached_tokens, row.cache_write_tokens)
    };
    assert_eq!(
        cache(vec![int("gen_ai.usage.cache_read_input_tokens", 7)]),
        (7, 0)
    );
    assert_eq!(
        cache(vec![int("gen_ai.usage.cache_creation_input_tokens", 8)]),
        (0, 8)
    );
    assert_eq!(
        cache(vec![int("gen_ai.usage.cache_write.input_tokens", 9)]),
        (0, 9)
    );
    assert_eq!(
        cache(vec![int("gen_ai.usage.cache_creation.input_tokens", 6)]),
        (0, 6)
    );
    assert_eq!(
        cache(vec![
            int("gen_ai.usage.cache_creation_input_tokens", 1),
            int("gen_ai.usage.cache_write.input_tokens", 2),
            int("gen_ai.usage.cache_creation.input_tokens", 3),
            int("gen_ai.usage.cache_read_input_tokens", 4),
            int("gen_ai.usage.cache_read.input_tokens", 5),
        ]),
        (5, 3)
    );
    assert_eq!(
        cache(vec![
            int("gen_ai.usage.cache_creation_input_tokens", 1),
            int("gen_ai.usage.cache_write.input_tokens", 2),
        ]),
        (0, 2)
    );
}

#[test]
fn older_prompt_and_completion_names_are_read() {
    let row = one(vec![span(
        1,
        1,
        0,
        vec![
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.request.model", "m"),
            int("gen_ai.usage.prompt_tokens", 50),
            int("gen_ai.usage.completion_tokens", 6),
        ],
    )]);
    assert_eq!((row.input_tokens, row.output_tokens), (50, 6));
}

#[test]
fn counts_may_be_ints_doubles_or_text() {
    let row = one(vec![span(
        1,
        1,
        0,
        vec![
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.request.model", "m"),
            text("gen_ai.usage.input_tokens", "1200"),
            attr("gen_ai.usage.output_tokens", Value::DoubleValue(31.0)),
            text("gen_ai.usage.cache_read.input_tokens", "1000.0"),
        ],
    )]);
    assert_eq!(
        (row.input_tokens, row.output_tokens, row.cached_tokens),
        (1200, 31, 1000)
    );
    for bad in [
        Value::IntValue(-1),
        Value::DoubleValue(1.5),
        Value::DoubleValue(-2.0),
        Value::StringValue("many".into()),
        Value::IntValue(1 << 40),
        Value::BoolValue(true),
    ] {
        let reason = rejected(vec![span(
            1,
            1,
            0,
            vec![
                text("gen_ai.operation.name", "chat"),
                text("gen_ai.request.model", "m"),
                attr("gen_ai.usage.input_tokens", bad.clone()),
            ],
        )]);
        assert!(
            reason.starts_with(&format!(
                "span {}: gen_ai.usage.input_tokens: ",
                span_hex(1)
            )),
            "{bad:?}: {reason}"
        );
    }
}

#[test]
fn a_failed_span_without_usage_is_a_failed_call() {
    let s = span(
        1,
        1,
        0,
        vec![
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.request.model", "gpt-4o"),
            text("error.type", "RateLimitError"),
            int("http.response.status_code", 429),
        ],
    );
    let m = map(vec![failed(s, "Error code: 429")]);
    assert_eq!((m.calls.len(), m.without_usage), (1, 0));
    let row = &m.calls[0].row;
    assert_eq!(row.status, RequestStatus::Error);
    assert_eq!(row.error_type.as_deref(), Some("RateLimitError"));
    assert_eq!(row.http_status, Some(429));
    assert_eq!((row.input_tokens, row.output_tokens), (0, 0));
}

#[test]
fn a_failure_without_error_type_takes_the_status_message() {
    let base = || {
        span(
            1,
            1,
            0,
            vec![
                text("gen_ai.operation.name", "chat"),
                text("gen_ai.request.model", "m"),
            ],
        )
    };
    let long = "x".repeat(500);
    let row = one(vec![failed(base(), &long)]);
    assert_eq!(row.error_type.map(|e| e.chars().count()), Some(200));
    assert_eq!(row.http_status, None);
    // An error.type that is a status code is the HTTP status too.
    let row = one(vec![failed(
        with(base(), vec![text("error.type", "503")]),
        "",
    )]);
    assert_eq!(
        (row.error_type.as_deref(), row.http_status),
        (Some("503"), Some(503))
    );
    let row = one(vec![failed(
        with(base(), vec![text("error.type", "1234")]),
        "",
    )]);
    assert_eq!(row.http_status, None);
    let row = one(vec![failed(base(), "")]);
    assert_eq!((row.status, row.error_type), (RequestStatus::Error, None));
}

#[test]
fn an_ok_span_without_usage_is_kept_and_counted() {
    let s = span(
        1,
        1,
        0,
        vec![
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.request.model", "m"),
            int("http.response.status_code", 200),
        ],
    );
    let m = map(vec![s, chat(1, 2, 0, "m", 5, 5)]);
    assert_eq!((m.calls.len(), m.without_usage, m.rejected), (2, 1, 0));
    let row = &m.calls[0].row;
    assert_eq!(row.status, RequestStatus::Success);
    assert_eq!(row.http_status, Some(200));
    assert_eq!((row.input_tokens, row.output_tokens), (0, 0));
}

#[test]
fn labels_come_from_the_resource_and_the_mapping() {
    let mapping = SpanMapping {
        labels: BTreeMap::from([
            ("team".to_owned(), AttrRef::Span("app.team".into())),
            ("tier".to_owned(), AttrRef::Span("app.tier".into())),
            ("paid".to_owned(), AttrRef::Span("app.paid".into())),
            (
                "temp".to_owned(),
                AttrRef::Span("gen_ai.request.temperature".into()),
            ),
            (
                "env".to_owned(),
                AttrRef::Resource("deployment.environment.name".into()),
            ),
            ("missing".to_owned(), AttrRef::Span("app.none".into())),
            // A mapped label overrides the resource's of the same name.
            (
                "service.name".to_owned(),
                AttrRef::Span("app.service".into()),
            ),
        ]),
        ..SpanMapping::default()
    };
    let req = request(
        vec![
            text("service.name", "chat-api"),
            text("deployment.environment.name", "prod"),
            text("host.name", &"h".repeat(300)),
            text("empty", ""),
            int("process.pid", 4242),
        ],
        vec![with(
            chat(1, 1, 0, "m", 1, 1),
            vec![
                text("app.team", "search"),
                int("app.tier", 2),
                attr("app.paid", Value::BoolValue(true)),
                attr("gen_ai.request.temperature", Value::DoubleValue(0.5)),
                text("app.service", "chat-api-canary"),
            ],
        )],
    );
    let m = map_spans(
        &req,
        &mapping,
        DateTime::<Utc>::MIN_UTC,
        DateTime::<Utc>::MAX_UTC,
    );
    let labels = &m.calls[0].row.labels;
    let want: BTreeMap<String, String> = [
        ("deployment.environment.name", "prod".to_owned()),
        ("env", "prod".to_owned()),
        ("host.name", "h".repeat(256)),
        ("paid", "true".to_owned()),
        ("service.name", "chat-api-canary".to_owned()),
        ("team", "search".to_owned()),
        ("temp", "0.5".to_owned()),
        ("tier", "2".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(labels, &want);

    // Without resource labels only the mapped ones are left.
    let mapping = SpanMapping {
        resource_labels: false,
        ..mapping
    };
    let m = map_spans(
        &req,
        &mapping,
        DateTime::<Utc>::MIN_UTC,
        DateTime::<Utc>::MAX_UTC,
    );
    let names: Vec<&str> = m.calls[0].row.labels.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["env", "paid", "service.name", "team", "temp", "tier"]
    );
}

#[test]
fn a_span_without_a_model_is_rejected() {
    let s = span(
        1,
        1,
        0,
        vec![
            text("gen_ai.operation.name", "chat"),
            int("gen_ai.usage.input_tokens", 5),
        ],
    );
    assert_eq!(
        rejected(vec![s]),
        "span 4b4b4b4b4b4b4b01: no gen_ai.request.model or gen_ai.response.model"
    );
}

#[test]
fn a_span_with_a_bad_id_is_rejected_by_name() {
    let mut short = chat(1, 1, 0, "m", 1, 1);
    short.span_id = vec![1, 2, 3];
    short.name = "chat gpt-4o".into();
    assert_eq!(
        rejected(vec![short]),
        "span \"chat gpt-4o\": span id is 3 bytes, not 8"
    );
    let mut none = chat(1, 1, 0, "m", 1, 1);
    none.span_id.clear();
    none.name.clear();
    assert_eq!(rejected(vec![none]), "a span without an id: no span id");
    let mut zeros = chat(1, 1, 0, "m", 1, 1);
    zeros.span_id = vec![0; 8];
    assert_eq!(
        rejected(vec![zeros]),
        "span 0000000000000000: span id is all zeros"
    );
    let mut trace = chat(1, 1, 0, "m", 1, 1);
    trace.trace_id = vec![7; 8];
    assert_eq!(
        rejected(vec![trace]),
        "span 4b4b4b4b4b4b4b01: trace id is 8 bytes, not 16"
    );
}

#[test]
fn a_span_starting_outside_the_accepted_range_is_rejected() {
    let from = Utc.with_ymd_and_hms(2024, 5, 1, 12, 0, 10).unwrap();
    let until = Utc.with_ymd_and_hms(2024, 5, 1, 12, 0, 20).unwrap();
    let req = request(
        vec![],
        vec![
            chat(1, 1, 9, "m", 1, 1),
            chat(1, 2, 10, "m", 1, 1),
            chat(1, 3, 20, "m", 1, 1),
            chat(1, 4, 21, "m", 1, 1),
        ],
    );
    let m = map_spans(&req, &SpanMapping::default(), from, until);
    let ids: Vec<&str> = m.calls.iter().map(|c| c.row.request_id.as_str()).collect();
    assert_eq!(ids, [span_hex(2), span_hex(3)]);
    assert_eq!(m.rejected, 2);
    assert_eq!(
        m.first_rejection.unwrap(),
        "span 4b4b4b4b4b4b4b01: start time 2024-05-01T12:00:09+00:00 is outside the \
         accepted range 2024-05-01T12:00:10+00:00 to 2024-05-01T12:00:20+00:00"
    );
    let mut unset = chat(1, 1, 0, "m", 1, 1);
    unset.start_time_unix_nano = 0;
    assert_eq!(
        rejected(vec![unset]),
        "span 4b4b4b4b4b4b4b01: no start time"
    );
}

#[test]
fn overlong_models_and_sessions_are_rejected() {
    let long = "m".repeat(300);
    assert_eq!(
        rejected(vec![chat(1, 1, 0, &long, 1, 1)]),
        "span 4b4b4b4b4b4b4b01: model is 300 bytes, above the limit of 256"
    );
    let s = with(
        chat(1, 1, 0, "m", 1, 1),
        vec![text("gen_ai.conversation.id", &long)],
    );
    assert_eq!(
        rejected(vec![s]),
        "span 4b4b4b4b4b4b4b01: gen_ai.conversation.id is 300 bytes, above the limit of 256"
    );
}

#[test]
fn settings_parse_and_print_their_config_spelling() {
    for s in ["span.app.thread", "resource.service.name"] {
        assert_eq!(AttrRef::parse(s).unwrap().to_string(), s);
    }
    for s in ["span.", "resource.", "app.thread", ""] {
        let err = AttrRef::parse(s).unwrap_err();
        assert!(err.contains("use span.<key> or resource.<key>"), "{err}");
    }
    for s in ["trace", "none", "span.x", "resource.y"] {
        assert_eq!(SessionFallback::parse(s).unwrap().to_string(), s);
    }
    assert_eq!(
        SessionFallback::parse("trace").unwrap(),
        SessionFallback::Trace
    );
    let err = SessionFallback::parse("user").unwrap_err();
    assert!(
        err.contains("use trace, none, span.<key> or resource.<key>"),
        "{err}"
    );
    for s in ["auto", "total", "uncached"] {
        assert_eq!(InputTokens::parse(s).unwrap().to_string(), s);
    }
    assert!(
        InputTokens::parse("all")
            .unwrap_err()
            .contains("auto, total or uncached")
    );
    let d = SpanMapping::default();
    assert_eq!(
        (
            d.fallback,
            d.labels.len(),
            d.resource_labels,
            d.input_tokens
        ),
        (SessionFallback::Trace, 0, true, InputTokens::Auto)
    );
}

#[test]
fn a_missing_cache_read_count_is_unknown_and_a_zero_is_a_zero() {
    // The official OpenAI instrumentation's chat spans carry no cache count.
    let unknown = one(vec![chat(1, 1, 3, "gpt-4o", 1200, 30)]);
    assert_eq!(unknown.cached_tokens, 0);
    assert!(!unknown.cache_reported);
    let mut measured = chat(1, 2, 3, "gpt-4o", 1200, 30);
    measured
        .attributes
        .push(int("gen_ai.usage.cache_read.input_tokens", 0));
    let zero = one(vec![measured]);
    assert!(zero.cache_reported, "a reported 0 is a measured 0");
}

#[test]
fn an_agent_span_gives_its_conversation_to_the_calls_of_its_trace() {
    let mut agent = chat(7, 9, 1, "gpt-4o", 0, 0);
    agent.attributes = vec![
        text("gen_ai.operation.name", "invoke_agent"),
        text("gen_ai.conversation.id", "conv-1"),
    ];
    let m = map(vec![chat(7, 1, 3, "gpt-4o", 10, 1), agent]);
    assert_eq!(m.other_spans, 1);
    assert_eq!(m.conversations, vec![(trace_hex(7), "conv-1".to_owned())]);
    assert!(
        !m.calls[0].conversation,
        "the call's own session is the fallback"
    );
}

#[test]
fn the_openai_sdk_error_gives_its_class_and_http_status() {
    let mut failed = chat(1, 1, 3, "gpt-4o", 0, 0);
    failed
        .attributes
        .retain(|a| !a.key.starts_with("gen_ai.usage"));
    failed
        .attributes
        .push(text("error.type", "<class 'openai.RateLimitError'>"));
    failed.status = Some(Status {
        code: StatusCode::Error as i32,
        message: "Error code: 429 - {'error': {'message': 'slow down'}}".to_owned(),
    });
    let row = one(vec![failed]);
    assert_eq!(row.error_type.as_deref(), Some("openai.RateLimitError"));
    assert_eq!(row.http_status, Some(429));
}

#[test]
fn every_call_names_its_instrumentation_scope_and_the_endpoints_model() {
    use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
    let scoped = |name: &str, version: &str, spans: Vec<Span>| ScopeSpans {
        scope: Some(InstrumentationScope {
            name: name.to_owned(),
            version: version.to_owned(),
            ..InstrumentationScope::default()
        }),
        spans,
        ..ScopeSpans::default()
    };
    let genai = "opentelemetry.instrumentation.genai.openai";
    let openai = |span: Span, server: &str| {
        with(
            span,
            vec![
                text("gen_ai.provider.name", "openai"),
                text("server.address", server),
            ],
        )
    };
    let mut req = request(
        vec![text("service.name", "support-agent")],
        vec![chat(1, 1, 0, "m", 100, 5)],
    );
    req.resource_spans[0].scope_spans = vec![
        scoped(
            genai,
            "1.3b0",
            vec![
                openai(
                    with(
                        chat(1, 1, 0, "m", 4000, 5),
                        vec![int("gen_ai.usage.cache_read.input_tokens", 3000)],
                    ),
                    "api.openai.com",
                ),
                openai(chat(1, 2, 1, "m", 4000, 5), "api.openai.com"),
                openai(chat(1, 5, 1, "m", 4000, 5), "proxy.internal"),
            ],
        ),
        scoped("", "", vec![chat(1, 3, 2, "m", 100, 5)]),
    ];
    req.resource_spans[0].scope_spans.push(ScopeSpans {
        spans: vec![chat(1, 4, 3, "m", 100, 5)],
        ..ScopeSpans::default()
    });
    // Another service, the same instrumentation and endpoint's model.
    let mut research = request(
        vec![text("service.name", "research")],
        vec![chat(2, 1, 4, "m", 100, 5)],
    );
    research.resource_spans[0].scope_spans = vec![scoped(
        genai,
        "1.3b0",
        vec![openai(chat(2, 6, 4, "m", 4000, 5), "api.openai.com")],
    )];
    req.resource_spans.extend(research.resource_spans);
    let m = map_spans(
        &req,
        &SpanMapping::default(),
        DateTime::<Utc>::MIN_UTC,
        DateTime::<Utc>::MAX_UTC,
    );
    let got: Vec<_> = m
        .calls
        .iter()
        .map(|c| (c.row.cache_reported, c.row.instrumentation.as_deref()))
        .collect();
    let key = |server: &str| format!(r#"["{genai}","1.3b0","openai","{server}","m"]"#);
    let (direct, proxy) = (key("api.openai.com"), key("proxy.internal"));
    assert_eq!(
        got,
        vec![
            (true, Some(direct.as_str())),
            // The count left out: not reported on the span itself; the
            // row source decides from the instrumentation's other spans.
            (false, Some(direct.as_str())),
            // Another endpoint may not return the count at all.
            (false, Some(proxy.as_str())),
            // Without a scope name nothing tells instrumentations apart.
            (false, None),
            (false, None),
            // Whatever the service.
            (false, Some(direct.as_str())),
        ]
    );
}
