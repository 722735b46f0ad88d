//! The mapping of rows shaped as LiteLLM 1.110.2 writes them
//! (`spend_tracking_utils.py: get_logging_payload`, read back by the raw
//! query of `ui_view_spend_logs`).

use super::map::{Mapped, UNKNOWN_MODEL, map};
use super::wire::{Envelope, parse};
use crate::source::RequestStatus;
use crate::source::rows::{CallRow, LabelField, RowSettings, SessionKey};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

fn settings(session_key: SessionKey) -> RowSettings {
    RowSettings {
        session_key,
        labels: BTreeMap::new(),
        filter: BTreeMap::new(),
        page_limit: 1000,
        max_pages: 100,
        session_lookback: Duration::from_secs(3600),
        max_open_sessions: 1000,
        max_kept_rows: 1000,
    }
}

/// A successful Anthropic call with a prompt-cache read and write, as
/// LiteLLM writes it.
fn anthropic_row() -> Value {
    json!({
        "request_id": "chatcmpl-8c1c7e5e-0f7a-4a8e-9b0e-3f1d2c4b5a69",
        "call_type": "acompletion",
        "api_key": "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
        "spend": 0.0071895,
        "total_tokens": 2157,
        "prompt_tokens": 2045,
        "completion_tokens": 112,
        "startTime": "2026-10-11T11:24:03.120+00:00",
        "endTime": "2026-10-11T11:24:05.931+00:00",
        "completionStartTime": "2026-10-11T11:24:05.931+00:00",
        "model": "claude-sonnet-4-5-20250929",
        "model_id": "5f3a1e0c9b",
        "model_group": "claude-sonnet",
        "custom_llm_provider": "anthropic",
        "api_base": "https://api.anthropic.com/v1/messages",
        "user": "default_user_id",
        "metadata": {
            "user_api_key": "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
            "user_api_key_alias": "support-bot",
            "user_api_key_team_id": "team-support",
            "user_api_key_team_alias": "Support",
            "user_api_key_user_id": "default_user_id",
            "spend_logs_metadata": {"feature": "support-agent", "run": 42, "nested": {"a": 1}},
            "requester_ip_address": "",
            "status": "success",
            "error_information": {"error_code": "", "error_class": "", "llm_provider": "",
                                  "traceback": "", "error_message": ""},
            "additional_usage_values": {
                "completion_tokens_details": {"reasoning_tokens": 0, "text_tokens": 112},
                "prompt_tokens_details": {"cached_tokens": 1800, "cache_creation_tokens": 200,
                                          "text_tokens": 45, "audio_tokens": null,
                                          "image_tokens": null},
                "cache_creation_input_tokens": 200,
                "cache_read_input_tokens": 1800
            },
            "usage_object": {"prompt_tokens": 2045, "completion_tokens": 112, "total_tokens": 2157,
                             "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1800},
            "attempted_retries": 0,
            "max_retries": 2,
            "litellm_call_id": "0b9e3d64-8f4c-4a51-9a57-1c2d3e4f5a6b"
        },
        "cache_hit": "False",
        "cache_key": "Cache OFF",
        "request_tags": "[\"feature:support-agent\", \"env:prod\", \"User-Agent: OpenAI\", \"User-Agent: OpenAI/Python 1.99.0\"]",
        "team_id": "team-support",
        "organization_id": "",
        "end_user": "customer-17",
        "requester_ip_address": "",
        "session_id": "conv-7d1f",
        "status": "success",
        "mcp_namespaced_tool_name": null,
        "agent_id": null,
        "litellm_call_id": "0b9e3d64-8f4c-4a51-9a57-1c2d3e4f5a6b",
        "request_duration_ms": 2811
    })
}

/// A failed OpenAI call (rate limited by the provider).
fn failure_row() -> Value {
    json!({
        "request_id": "6a0f3a8e-2b9d-4c1e-8f7a-5d4c3b2a1f0e",
        "call_type": "acompletion",
        "spend": 0.0,
        "total_tokens": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "startTime": "2026-10-11T11:25:00+00:00",
        "endTime": "2026-10-11T11:25:01.5+00:00",
        "model": "gpt-4o",
        "model_group": "gpt-4o",
        "metadata": {
            "status": "failure",
            "error_information": {"error_code": "429", "error_class": "RateLimitError",
                                  "llm_provider": "openai",
                                  "error_message": "litellm.RateLimitError: ..."},
            "additional_usage_values": {}
        },
        "cache_hit": "None",
        "request_tags": [],
        "session_id": "9c8b7a6f-5e4d-4c3b-a2a1-0f9e8d7c6b5a",
        "status": "failure",
        "litellm_call_id": "6a0f3a8e-2b9d-4c1e-8f7a-5d4c3b2a1f0e"
    })
}

fn mapped(row: Value, s: &RowSettings) -> Result<Mapped, String> {
    let page: Envelope = parse(json!({"data": [row]}))?;
    let row = page.data.into_iter().next().ok_or("no row")?;
    map(row, s)
}

fn call(row: Value, s: &RowSettings) -> CallRow {
    match mapped(row, s) {
        Ok(Mapped::Call(c)) => c,
        other => panic!("not a call: {other:?}"),
    }
}

fn err(row: Value) -> String {
    mapped(row, &settings(SessionKey::Session))
        .err()
        .unwrap_or_default()
}

#[test]
fn an_anthropic_row_maps_tokens_cost_model_session_and_labels() {
    let c = call(anthropic_row(), &settings(SessionKey::Session));
    assert_eq!(
        c.request_id,
        "chatcmpl-8c1c7e5e-0f7a-4a8e-9b0e-3f1d2c4b5a69"
    );
    assert_eq!(c.session_id.as_deref(), Some("conv-7d1f"));
    assert_eq!(c.created_at.to_rfc3339(), "2026-10-11T11:24:03.120+00:00");
    assert_eq!(c.model, "claude-sonnet");
    assert_eq!(c.status, RequestStatus::Success);
    assert_eq!((c.http_status, c.error_type.as_deref()), (None, None));
    assert_eq!(
        (
            c.input_tokens,
            c.cached_tokens,
            c.cache_write_tokens,
            c.output_tokens
        ),
        (2045, 1800, 200, 112)
    );
    assert_eq!(c.cost_usd, Some(0.0071895));
    // The deployment: a prompt cache lives with one.
    assert_eq!(c.provider.as_deref(), Some("5f3a1e0c9b"));
    let labels: Vec<(&str, &str)> = c
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // spend_logs_metadata's scalars and the key:value tags; not the
    // object, not LiteLLM's `User-Agent: ...` tags.
    assert_eq!(
        labels,
        [("env", "prod"), ("feature", "support-agent"), ("run", "42")]
    );
}

#[test]
fn a_failure_maps_its_error_class_and_status_code() {
    let c = call(failure_row(), &settings(SessionKey::Session));
    assert_eq!(c.status, RequestStatus::Error);
    assert_eq!(c.error_type.as_deref(), Some("RateLimitError"));
    assert_eq!(c.http_status, Some(429));
    assert_eq!((c.input_tokens, c.cached_tokens), (0, 0));
    assert_eq!(c.cost_usd, Some(0.0));
    assert!(c.labels.is_empty());
    // A code that is not an HTTP status is left out; the class stays.
    let mut row = failure_row();
    row["metadata"]["error_information"]["error_code"] = json!("rate_limit_exceeded");
    let c = call(row, &settings(SessionKey::Session));
    assert_eq!(
        (c.http_status, c.error_type.as_deref()),
        (None, Some("RateLimitError"))
    );
    let mut row = failure_row();
    row["metadata"]["error_information"]["error_code"] = json!(503);
    assert_eq!(
        call(row, &settings(SessionKey::Session)).http_status,
        Some(503)
    );
}

#[test]
fn an_openai_row_reads_cached_tokens_from_the_details_when_not_normalised() {
    let mut row = anthropic_row();
    row["metadata"]["additional_usage_values"] = json!({
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0}
    });
    row["metadata"]["usage_object"] = Value::Null;
    let c = call(row, &settings(SessionKey::Session));
    assert_eq!((c.cached_tokens, c.cache_write_tokens), (1024, 0));
}

#[test]
fn the_response_cache_is_not_the_prompt_cache() {
    let mut row = anthropic_row();
    row["cache_hit"] = json!("True");
    row["metadata"]["additional_usage_values"] = json!({});
    row["metadata"]["usage_object"] = json!({});
    row["spend"] = json!(0.0);
    let c = call(row, &settings(SessionKey::Session));
    assert_eq!((c.cached_tokens, c.cost_usd), (0, Some(0.0)));
}

#[test]
fn a_missing_session_id_and_a_fallback_naming_the_call_are_none() {
    let s = settings(SessionKey::Session);
    for session in [Value::Null, json!("")] {
        let mut row = anthropic_row();
        row["session_id"] = session;
        assert_eq!(call(row, &s).session_id, None);
    }
    let mut row = anthropic_row();
    row.as_object_mut().map(|r| r.remove("session_id"));
    assert_eq!(call(row, &s).session_id, None);
    let mut row = anthropic_row();
    row["session_id"] = row["request_id"].clone();
    assert_eq!(call(row, &s).session_id, None);
    let mut row = anthropic_row();
    row["session_id"] = row["litellm_call_id"].clone();
    assert_eq!(call(row, &s).session_id, None);
    // `trace` reads the column as it is.
    let mut row = anthropic_row();
    row["session_id"] = row["request_id"].clone();
    let c = call(row, &settings(SessionKey::Trace));
    assert_eq!(c.session_id.as_deref(), Some(c.request_id.as_str()));
}

#[test]
fn each_session_key_reads_its_field() {
    let key = |k: SessionKey| call(anthropic_row(), &settings(k)).session_id;
    assert_eq!(key(SessionKey::User).as_deref(), Some("customer-17"));
    assert_eq!(key(SessionKey::Trace).as_deref(), Some("conv-7d1f"));
    assert_eq!(
        key(SessionKey::Metadata("feature".into())).as_deref(),
        Some("support-agent")
    );
    // Not the caller's: a field LiteLLM writes into metadata.
    assert_eq!(
        key(SessionKey::Metadata("user_api_key_alias".into())).as_deref(),
        Some("support-bot")
    );
    assert_eq!(key(SessionKey::Metadata("absent".into())), None);
    assert_eq!(key(SessionKey::Tag("env".into())).as_deref(), Some("prod"));
    assert_eq!(
        key(SessionKey::Tag("User-Agent".into())).as_deref(),
        Some("OpenAI")
    );
    assert_eq!(key(SessionKey::Tag("none".into())), None);
    let mut row = anthropic_row();
    row["end_user"] = json!("");
    assert_eq!(call(row, &settings(SessionKey::User)).session_id, None);
}

#[test]
fn named_labels_come_first_and_win() {
    let mut s = settings(SessionKey::Session);
    s.labels = BTreeMap::from([
        ("team".to_owned(), LabelField::Field("team_alias".into())),
        ("who".to_owned(), LabelField::Field("user".into())),
        ("env".to_owned(), LabelField::Field("model_id".into())),
        ("agent".to_owned(), LabelField::Tag("User-Agent".into())),
        (
            "key".to_owned(),
            LabelField::Metadata("user_api_key_alias".into()),
        ),
        (
            "missing".to_owned(),
            LabelField::Field("organization_id".into()),
        ),
    ]);
    let c = call(anthropic_row(), &s);
    let get = |k: &str| c.labels.get(k).map(String::as_str);
    assert_eq!(get("team"), Some("Support"));
    assert_eq!(get("who"), Some("customer-17"));
    assert_eq!(get("env"), Some("5f3a1e0c9b"));
    assert_eq!(get("agent"), Some("OpenAI"));
    assert_eq!(get("key"), Some("support-bot"));
    assert_eq!(get("missing"), None);
    assert_eq!(get("feature"), Some("support-agent"));
    // Every name in FIELDS is read.
    for f in super::FIELDS {
        let mut s = settings(SessionKey::Session);
        s.labels = BTreeMap::from([("x".to_owned(), LabelField::Field((*f).to_owned()))]);
        let mut row = anthropic_row();
        row["organization_id"] = json!("org-1");
        assert!(call(row, &s).labels.contains_key("x"), "{f}");
    }
}

#[test]
fn tags_as_a_list_or_as_text_give_the_same_labels() {
    let mut row = anthropic_row();
    row["request_tags"] = json!([
        "feature:support-agent",
        "env:prod",
        7,
        "no-colon",
        ":x",
        "k:"
    ]);
    let a = call(row, &settings(SessionKey::Session)).labels;
    let b = call(anthropic_row(), &settings(SessionKey::Session)).labels;
    assert_eq!(a, b);
    let mut row = anthropic_row();
    row["request_tags"] = json!("not a list");
    assert!(err(row).starts_with("request_tags: `not a list` is not a JSON list"));
}

#[test]
fn labels_over_the_limits_fail_when_named_and_are_left_out_by_default() {
    let long = "x".repeat(2000);
    let mut row = anthropic_row();
    row["metadata"]["spend_logs_metadata"]["big"] = json!(long);
    let c = call(row.clone(), &settings(SessionKey::Session));
    assert!(!c.labels.contains_key("big"));
    let mut s = settings(SessionKey::Session);
    s.labels = BTreeMap::from([("big".to_owned(), LabelField::Metadata("big".into()))]);
    let e = mapped(row, &s).err().unwrap_or_default();
    assert_eq!(
        e,
        "metadata.spend_logs_metadata.big: 2000 bytes, above the limit of 1024"
    );
    let mut row = anthropic_row();
    let many: serde_json::Map<String, Value> =
        (0..100).map(|i| (format!("k{i:03}"), json!("v"))).collect();
    row["metadata"]["spend_logs_metadata"] = Value::Object(many);
    assert_eq!(call(row, &settings(SessionKey::Session)).labels.len(), 64);
    let mut row = anthropic_row();
    row["session_id"] = json!("s".repeat(300));
    assert_eq!(err(row), "session_id: 300 bytes, above the limit of 256");
}

#[test]
fn the_model_is_the_group_asked_for_then_the_model_then_a_placeholder() {
    let mut row = anthropic_row();
    row["model_group"] = json!("");
    assert_eq!(
        call(row.clone(), &settings(SessionKey::Session)).model,
        "claude-sonnet-4-5-20250929"
    );
    row["model"] = json!("");
    row["model_group"] = Value::Null;
    assert_eq!(
        call(row, &settings(SessionKey::Session)).model,
        UNKNOWN_MODEL
    );
}

#[test]
fn rows_that_are_not_model_calls_are_paged_past() {
    let mut row = anthropic_row();
    row["call_type"] = json!("call_mcp_tool");
    row["prompt_tokens"] = json!(-1);
    assert!(matches!(
        mapped(row, &settings(SessionKey::Session)),
        Ok(Mapped::Other { .. })
    ));
}

#[test]
fn impossible_values_name_their_field() {
    let mut row = anthropic_row();
    row["prompt_tokens"] = json!(-5);
    assert_eq!(err(row), "prompt_tokens: -5 is negative");
    let mut row = anthropic_row();
    row["completion_tokens"] = json!(5_000_000_000_i64);
    assert_eq!(
        err(row),
        "completion_tokens: 5000000000 is above the limit of 4294967295"
    );
    let mut row = anthropic_row();
    row["metadata"]["additional_usage_values"]["cache_read_input_tokens"] = json!(3000);
    assert_eq!(
        err(row),
        "metadata.additional_usage_values.cache_read_input_tokens: 3000 is above prompt_tokens 2045"
    );
    let mut row = anthropic_row();
    row["metadata"]["additional_usage_values"]["cache_creation_input_tokens"] = json!(400);
    assert!(err(row).contains("add up to more than prompt_tokens 2045"));
    let mut row = anthropic_row();
    row["spend"] = json!(-0.5);
    assert_eq!(err(row), "spend: -0.5 is not between 0 and 1000000");
    let mut row = anthropic_row();
    row["spend"] = json!(1.7e308);
    assert_eq!(err(row), "spend: 1.7e308 is not between 0 and 1000000");
    let mut row = anthropic_row();
    row["status"] = json!("partial");
    assert!(err(row).starts_with("status: \"partial\" is neither success nor failure"));
    let mut row = anthropic_row();
    row["request_id"] = json!("");
    assert_eq!(err(row), "request_id: empty");
    let mut row = anthropic_row();
    row["metadata"] = json!([1, 2]);
    assert!(err(row).starts_with("metadata: expected an object, got a list"));
}

#[test]
fn a_row_missing_a_required_field_names_it() {
    for field in [
        "request_id",
        "startTime",
        "spend",
        "prompt_tokens",
        "completion_tokens",
        "model",
    ] {
        let mut row = anthropic_row();
        row.as_object_mut().map(|r| r.remove(field));
        let e = err(row);
        assert!(
            e.starts_with(&format!("data[0]: missing field `{field}`")),
            "{field}: {e}"
        );
        assert!(e.contains("format changed"), "{e}");
    }
}

#[test]
fn metadata_as_text_is_read_and_unreadable_text_is_empty() {
    let mut row = anthropic_row();
    let text = row["metadata"].to_string();
    row["metadata"] = json!(text);
    let c = call(row, &settings(SessionKey::Session));
    assert_eq!(c.cached_tokens, 1800);
    let mut row = anthropic_row();
    row["metadata"] = json!("{not json");
    let c = call(row, &settings(SessionKey::Session));
    assert_eq!((c.cached_tokens, c.labels.len()), (0, 2));
}

#[test]
fn status_null_on_older_rows_is_success() {
    let mut row = anthropic_row();
    row["status"] = Value::Null;
    assert_eq!(
        call(row, &settings(SessionKey::Session)).status,
        RequestStatus::Success
    );
}
