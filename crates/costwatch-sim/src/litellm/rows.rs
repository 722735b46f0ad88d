//! A call of the dataset as the LiteLLM proxy logs it: one
//! `LiteLLM_SpendLogs` row as `/spend/logs/v2` returns it, and a model of
//! the catalogue as one `/model/info` entry.
//!
//! Followed from LiteLLM 1.110.2: the row is `SpendLogsPayload` as
//! `spend_tracking_utils.py: get_logging_payload` fills it, read back by
//! the raw query of `ui_view_spend_logs` (`_SPEND_LOG_LIST_COLUMNS`).
//! Timestamps are chrono's `to_rfc3339` of the `timestamp(3)` column
//! (`2026-10-11T11:24:03.120+00:00`, no fraction on a whole second), as
//! Prisma's engine writes raw results (`ser_raw.rs`); `metadata` is the
//! object `_hydrate_spend_log_metadata` makes of the JSONB column, and
//! `request_tags` is left as the JSON text the raw query gives.

use super::options::{LiteLlmOptions, MissingSessionId, UsageSpelling};
use crate::cursor::fnv1a;
use crate::dataset::{SimModel, SimRequest};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value, json};

/// The release the provider model names carry (`model` is the deployment's
/// model, `model_group` the name asked for).
const RELEASE: &str = "2026-08-01";

/// The hashed API key every simulated call was made with (LiteLLM logs
/// the SHA-256 of the virtual key, never the key).
const KEY_HASH: &str = "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b";

/// The provider LiteLLM would route a model to.
fn provider(model: &str) -> &'static str {
    if model.starts_with("claude") {
        "anthropic"
    } else {
        "openai"
    }
}

/// The model the deployment calls the provider with.
pub(super) fn provider_model(model: &str) -> String {
    format!("{model}-{RELEASE}")
}

/// 32 hex digits derived from `parts`, shaped as a version-4 UUID.
fn uuid(parts: &[&str]) -> String {
    let a = fnv1a(parts);
    let b = fnv1a(&[parts.join("/").as_str(), "low"]);
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The row's `request_id`: the provider's response id, as LiteLLM keeps
/// it (`chatcmpl-...` from OpenAI, `msg_...` from Anthropic).
pub(super) fn request_id(r: &SimRequest) -> String {
    let u = uuid(&[&r.request_id, "response"]);
    match provider(&r.model) {
        "anthropic" => format!("msg_01{}", u.replace('-', "")[..22].to_owned()),
        _ => format!("chatcmpl-{u}"),
    }
}

/// LiteLLM's own id for the call (`litellm_call_id`, a UUID).
fn call_id(r: &SimRequest) -> String {
    uuid(&[&r.request_id, "call"])
}

/// The trace id LiteLLM mints for a call whose caller sent neither a
/// session nor a trace id (`Logging.litellm_trace_id`, a UUID).
pub(super) fn trace_id(r: &SimRequest) -> String {
    uuid(&[&r.request_id, "trace"])
}

/// A timestamp as the raw query writes it.
pub(super) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339()
}

/// The row's `session_id` under `options`.
pub(super) fn session_id(r: &SimRequest, options: &LiteLlmOptions) -> Value {
    if !options.without_session_id.contains(&r.session_id) {
        return json!(r.session_id);
    }
    match options.missing_session_id {
        MissingSessionId::Trace => json!(trace_id(r)),
        MissingSessionId::Omit => Value::Null,
    }
}

/// The spend-log row of one call, as `/spend/logs/v2` returns it.
pub(super) fn spend_log_row(r: &SimRequest, options: &LiteLlmOptions) -> Value {
    let end = r.created_at + TimeDelta::milliseconds(i64::try_from(r.latency_ms).unwrap_or(0));
    let failed = r.is_error();
    let tags: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    let model_id = format!("{:016x}", fnv1a(&[&r.model, "deployment"]));
    json!({
        "request_id": request_id(r),
        "call_type": "acompletion",
        "api_key": KEY_HASH,
        "spend": r.cost_usd,
        "total_tokens": r.input_tokens + r.output_tokens,
        "prompt_tokens": r.input_tokens,
        "completion_tokens": r.output_tokens,
        "startTime": timestamp(r.created_at),
        "endTime": timestamp(end),
        "completionStartTime": timestamp(end),
        "model": provider_model(&r.model),
        "model_id": model_id,
        "model_group": r.model,
        "custom_llm_provider": provider(&r.model),
        "api_base": match provider(&r.model) {
            "anthropic" => "https://api.anthropic.com/v1/messages",
            _ => "https://api.openai.com/v1",
        },
        "user": "default_user_id",
        "metadata": metadata(r, options),
        "cache_hit": if failed { "None" } else { "False" },
        "cache_key": "Cache OFF",
        "request_tags": jsonb_text(&tags),
        "team_id": "",
        "organization_id": "",
        "end_user": "",
        "requester_ip_address": "",
        "session_id": session_id(r, options),
        "status": if failed { "failure" } else { "success" },
        "mcp_namespaced_tool_name": null,
        "agent_id": null,
        "litellm_call_id": call_id(r),
        "request_duration_ms": r.latency_ms,
    })
}

/// A list of strings as Postgres prints a JSONB value (`["a", "b"]`).
fn jsonb_text(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| Value::from(s.as_str()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// `metadata`: `SpendLogsMetadata` as LiteLLM writes it for a proxy call.
fn metadata(r: &SimRequest, options: &LiteLlmOptions) -> Value {
    let failed = r.is_error();
    let labels: Map<String, Value> = r
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let error_information = if failed {
        json!({
            "error_code": r.http_status.to_string(),
            "error_class": r.error_type.clone().unwrap_or_default(),
            "llm_provider": provider(&r.model),
            "traceback": "",
            "error_message": format!(
                "litellm.{}: {}Exception - simulated failure",
                r.error_type.as_deref().unwrap_or("APIError"),
                provider(&r.model)
            ),
        })
    } else {
        json!({"error_code": "", "error_class": "", "llm_provider": "", "traceback": "",
               "error_message": ""})
    };
    let (additional, usage_object) = usage(r, options.usage);
    json!({
        "user_api_key": KEY_HASH,
        "user_api_key_alias": "sim-agents",
        "user_api_key_team_id": null,
        "user_api_key_org_id": null,
        "user_api_key_user_id": "default_user_id",
        "user_api_key_team_alias": null,
        "spend_logs_metadata": if labels.is_empty() { Value::Null } else { Value::Object(labels) },
        "requester_ip_address": "",
        "applied_guardrails": [],
        "batch_models": null,
        "mcp_tool_call_metadata": null,
        "vector_store_request_metadata": null,
        "guardrail_information": null,
        "usage_object": usage_object,
        "model_map_information": {"model_map_key": provider_model(&r.model), "model_map_value": null},
        "cold_storage_object_key": null,
        "litellm_overhead_time_ms": 1.2,
        "attempted_retries": 0,
        "max_retries": 2,
        "cost_breakdown": null,
        "litellm_call_id": call_id(r),
        "status": if failed { "failure" } else { "success" },
        "error_information": error_information,
        "additional_usage_values": additional,
    })
}

/// `additional_usage_values` and `usage_object` of a call, spelled as
/// `spelling` says.
fn usage(r: &SimRequest, spelling: UsageSpelling) -> (Value, Value) {
    let (input, cached, write, output) = (
        r.input_tokens,
        r.cached_tokens,
        r.cache_write_tokens,
        r.output_tokens,
    );
    let anthropic = provider(&r.model) == "anthropic";
    let details = if anthropic {
        json!({"cached_tokens": cached, "cache_creation_tokens": write,
               "text_tokens": input.saturating_sub(cached + write),
               "audio_tokens": null, "image_tokens": null})
    } else {
        let mut d = json!({"cached_tokens": cached, "audio_tokens": 0});
        if write > 0 {
            d["cache_write_tokens"] = json!(write);
        }
        d
    };
    let completion = json!({"reasoning_tokens": 0, "text_tokens": output});
    // What the provider's usage holds apart from the three counts.
    let mut additional = json!({
        "prompt_tokens_details": details,
        "completion_tokens_details": completion,
    });
    if anthropic {
        additional["cache_creation_input_tokens"] = json!(write);
        additional["cache_read_input_tokens"] = json!(cached);
    }
    let mut whole = additional.clone();
    whole["prompt_tokens"] = json!(input);
    whole["completion_tokens"] = json!(output);
    whole["total_tokens"] = json!(input + output);
    // LiteLLM's normalisation (1.110.2): the parts apart, when above zero.
    let mut normalised = additional.clone();
    if cached > 0 {
        normalised["cache_read_input_tokens"] = json!(cached);
    }
    if write > 0 {
        normalised["cache_creation_input_tokens"] = json!(write);
    }
    match spelling {
        UsageSpelling::Normalised => (normalised, whole),
        UsageSpelling::DetailsOnly => {
            let only = json!({"prompt_tokens_details": additional["prompt_tokens_details"],
                              "completion_tokens_details": additional["completion_tokens_details"]});
            (only, Value::Null)
        }
        UsageSpelling::UsageObject => {
            let mut top = json!({"prompt_tokens": input, "completion_tokens": output,
                                 "total_tokens": input + output,
                                 "cache_read_input_tokens": cached,
                                 "cache_creation_input_tokens": write});
            top["completion_tokens_details"] = additional["completion_tokens_details"].clone();
            (json!({}), top)
        }
        UsageSpelling::UsageObjectDetails => {
            let mut d = json!({"cached_tokens": cached});
            d["cache_creation_tokens"] = json!(write);
            (
                json!({}),
                json!({"prompt_tokens": input, "completion_tokens": output,
                       "total_tokens": input + output, "prompt_tokens_details": d}),
            )
        }
    }
}

/// One `/model/info` entry for a model of the catalogue: the deployment
/// (`model_name`, `litellm_params`) and `model_info` as
/// `_enrich_model_info_with_litellm_data` merges it with the cost map
/// (dollars per token).
pub(super) fn model_info(m: &SimModel) -> Value {
    let per_token = |usd_per_mtok: f64| usd_per_mtok / 1e6;
    json!({
        "model_name": m.id,
        "litellm_params": {
            "model": format!("{}/{}", provider(&m.id), provider_model(&m.id)),
            "use_in_pass_through": false,
            "merge_reasoning_content_in_choices": false,
        },
        "model_info": {
            "id": format!("{:016x}", fnv1a(&[&m.id, "deployment"])),
            "db_model": false,
            "key": provider_model(&m.id),
            "max_tokens": 128_000,
            "max_input_tokens": 1_000_000,
            "max_output_tokens": 128_000,
            "input_cost_per_token": per_token(m.input_usd_per_mtok),
            "cache_creation_input_token_cost": m.cache_write_usd_per_mtok.map(per_token),
            "cache_read_input_token_cost": m.cached_input_usd_per_mtok.map(per_token),
            "output_cost_per_token": per_token(m.output_usd_per_mtok),
            "litellm_provider": provider(&m.id),
            "mode": "chat",
            "supports_function_calling": true,
            "supports_prompt_caching": m.supports_prompt_cache,
            "supports_system_messages": true,
            "supports_vision": false,
        },
    })
}
