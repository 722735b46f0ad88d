//! One call as a Langfuse observation, with the fields of the groups asked
//! for, written as the server writes them (see the module documentation of
//! [`super`] for the sources), and `usageDetails` in the spelling of the
//! integration that traced it.

use super::Shape;
use super::paging::Entry;
use super::query::Groups;
use crate::cursor::fnv1a;
use crate::dataset::{Dataset, SimRequest, format_ts, round_usd};
use chrono::Duration;
use serde_json::{Map, Value, json};

/// The name of every generation.
pub(super) const NAME: &str = "chat";

/// How an integration writes a call's tokens into `usageDetails`. Every
/// spelling keeps `input` for the uncached prompt tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageSpelling {
    /// By model family: [`OpenAi`](UsageSpelling::OpenAi) for `gpt-*`,
    /// [`LangChain`](UsageSpelling::LangChain) for `claude-*`,
    /// [`Otel`](UsageSpelling::Otel) for the rest.
    #[default]
    ByFamily,
    /// The Python SDK's OpenAI integration, normalised by the server
    /// (`OpenAICompletionUsageSchema`: each `prompt_tokens_details` count
    /// becomes `input_<key>` and is taken out of `input`): `input`,
    /// `input_cached_tokens`, `input_audio_tokens`, then, for a call that
    /// wrote to the cache of a model that bills cache writes (GPT-5.6 on,
    /// whose usage reports `cache_write_tokens`, caching.md),
    /// `input_cache_write_tokens`; `output`, `output_reasoning_tokens`,
    /// ..., `total`. Older models
    /// write to the cache for free and report no writes: written tokens
    /// stay in `input`.
    OpenAi,
    /// The LangChain callback handler: `input`, `input_cache_read`,
    /// `input_cache_creation`, `output`, `total`.
    LangChain,
    /// OpenTelemetry GenAI spans: `input`, `input_cached_tokens`,
    /// `input_cache_creation`, `output`, `total`.
    Otel,
    /// Anthropic's own usage passed through: `input`,
    /// `cache_read_input_tokens`, `cache_creation_input_tokens`, `output`.
    AnthropicRaw,
}

impl UsageSpelling {
    /// The spelling a call to `model` gets.
    pub fn resolve(self, model: &str) -> UsageSpelling {
        match self {
            UsageSpelling::ByFamily if model.starts_with("gpt") => UsageSpelling::OpenAi,
            UsageSpelling::ByFamily if model.starts_with("claude") => UsageSpelling::LangChain,
            UsageSpelling::ByFamily => UsageSpelling::Otel,
            other => other,
        }
    }

    /// Whether cache writes are told apart from the uncached prompt, on a
    /// model that bills them (`bills_writes`: a cache-write price above
    /// its input price) or not.
    pub fn reports_cache_writes(self, bills_writes: bool) -> bool {
        self != UsageSpelling::OpenAi || bills_writes
    }

    /// `usageDetails` for a call with `input` prompt tokens (`cached` read
    /// from and `write` written to the cache) and `output` completion
    /// tokens, on a model that bills cache writes or not.
    fn details(
        self,
        input: u64,
        (cached, write): (u64, u64),
        output: u64,
        bills_writes: bool,
    ) -> Map<String, Value> {
        let rest = input.saturating_sub(cached).saturating_sub(write);
        let pairs: Vec<(&str, u64)> = match self {
            UsageSpelling::OpenAi => {
                // Writes are named apart only for a model that bills them
                // and a call that wrote; otherwise they stay in `input`.
                let named = bills_writes && write > 0;
                let uncached = if named {
                    rest
                } else {
                    input.saturating_sub(cached)
                };
                let mut pairs = vec![
                    ("input", uncached),
                    ("input_cached_tokens", cached),
                    ("input_audio_tokens", 0),
                ];
                if named {
                    pairs.push(("input_cache_write_tokens", write));
                }
                pairs.extend([
                    ("output", output),
                    ("output_reasoning_tokens", 0),
                    ("output_audio_tokens", 0),
                    ("output_accepted_prediction_tokens", 0),
                    ("output_rejected_prediction_tokens", 0),
                    ("total", input + output),
                ]);
                pairs
            }
            UsageSpelling::LangChain => vec![
                ("input", rest),
                ("input_cache_read", cached),
                ("input_cache_creation", write),
                ("output", output),
                ("total", input + output),
            ],
            UsageSpelling::Otel | UsageSpelling::ByFamily => vec![
                ("input", rest),
                ("input_cached_tokens", cached),
                ("input_cache_creation", write),
                ("output", output),
                ("total", input + output),
            ],
            UsageSpelling::AnthropicRaw => vec![
                ("input", rest),
                ("cache_read_input_tokens", cached),
                ("cache_creation_input_tokens", write),
                ("output", output),
            ],
        };
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect()
    }
}

/// Whether `model` bills cache writes: a cache-write price above its
/// input price (OpenAI's from GPT-5.6, Anthropic's); such a model's usage
/// reports the tokens written.
pub fn bills_cache_writes(model: &crate::dataset::SimModel) -> bool {
    model
        .cache_write_usd_per_mtok
        .is_some_and(|w| w > model.input_usd_per_mtok)
}

/// The trace of a session: 32 hex digits, as OpenTelemetry trace ids are.
pub fn trace_id_of(session_id: &str) -> String {
    format!(
        "{:016x}{:016x}",
        fnv1a(&["trace", session_id]),
        fnv1a(&["trace-low", session_id])
    )
}

/// The user of a session: one of sixteen (`user-00` to `user-15`).
pub fn user_id_of(session_id: &str) -> String {
    format!("user-{:02}", fnv1a(&["user", session_id]) % 16)
}

/// The call's environment: its `env` label, else Langfuse's `default`.
pub(super) fn environment(r: &SimRequest) -> &str {
    r.labels.get("env").map_or("default", String::as_str)
}

/// The observation of `entry` with the groups in `fields`.
pub(super) fn to_json(
    entry: &Entry<'_>,
    fields: &Groups,
    shape: &Shape,
    dataset: &Dataset,
) -> Value {
    let r = entry.request;
    let end = r.created_at + Duration::milliseconds(i64::try_from(r.latency_ms).unwrap_or(0));
    let mut o = Map::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_owned(), v);
    };
    // core
    put("id", json!(r.request_id));
    put("traceId", json!(entry.trace_id));
    put("startTime", json!(format_ts(&r.created_at)));
    put("endTime", json!(format_ts(&end)));
    put("projectId", json!(super::PROJECT_ID));
    put("parentObservationId", Value::Null);
    put("type", json!("GENERATION"));
    // on every row
    put("latency", json!(r.latency_ms as f64 / 1000.0));
    put("timeToFirstToken", Value::Null);
    let model = dataset.models.iter().find(|m| m.id == r.model);
    let internal_id = model.map(|m| format!("cm{:016x}", fnv1a(&["model", &m.id])));
    let price = |per_mtok: f64| json!(format!("{}", per_mtok / 1e6));
    match (fields.model, model) {
        (true, Some(m)) => {
            put("modelId", json!(internal_id));
            put("inputPrice", price(m.input_usd_per_mtok));
            put("outputPrice", price(m.output_usd_per_mtok));
        }
        _ => {
            put("modelId", Value::Null);
            put("inputPrice", Value::Null);
            put("outputPrice", Value::Null);
        }
    }
    put("totalPrice", Value::Null);
    if fields.basic {
        let session = if shape.without_session.contains(&r.session_id) {
            ""
        } else {
            r.session_id.as_str()
        };
        put("isRootObservation", json!(true));
        put("name", json!(NAME));
        put(
            "level",
            json!(if r.is_error() { "ERROR" } else { "DEFAULT" }),
        );
        put("statusMessage", json!(status_message(r)));
        put("version", json!(""));
        put("environment", json!(environment(r)));
        put("bookmarked", json!(false));
        put("public", json!(false));
        put("userId", json!(user_id_of(&r.session_id)));
        put("sessionId", json!(session));
    }
    if fields.time {
        put("completionStartTime", Value::Null);
        put("createdAt", json!(format_ts(&r.created_at)));
        put("updatedAt", json!(format_ts(&end)));
    }
    if fields.io {
        put("input", Value::Null);
        put("output", Value::Null);
    }
    if fields.metadata {
        let metadata: Map<String, Value> = r
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), parse_prioritised(v)))
            .collect();
        put("metadata", Value::Object(metadata));
    }
    if fields.model {
        put("model", json!(r.model));
        put("internalModelId", json!(internal_id.unwrap_or_default()));
        put("modelParameters", Value::Null);
    }
    if fields.usage {
        let spelling = shape.spelling.resolve(&r.model);
        let usage = spelling.details(
            r.input_tokens,
            (r.cached_tokens, r.cache_write_tokens),
            r.output_tokens,
            model.is_some_and(bills_cache_writes),
        );
        let sum = |part: &str| -> u64 {
            usage
                .iter()
                .filter(|(k, _)| k.contains(part))
                .filter_map(|(_, v)| v.as_u64())
                .sum()
        };
        put("inputUsage", json!(sum("input")));
        put("outputUsage", json!(sum("output")));
        put(
            "totalUsage",
            json!(usage.get("total").and_then(Value::as_u64).unwrap_or(0)),
        );
        put("usageDetails", Value::Object(usage.clone()));
        let costs = if shape.without_cost.contains(&r.session_id) {
            Map::new()
        } else {
            cost_details(r, model.map(|m| m.output_usd_per_mtok))
        };
        let part = |k: &str| costs.get(k).cloned().unwrap_or(Value::Null);
        put("inputCost", part("input"));
        put("outputCost", part("output"));
        put(
            "totalCost",
            json!(costs.get("total").and_then(Value::as_f64).unwrap_or(0.0)),
        );
        put("costDetails", Value::Object(costs));
        put("usagePricingTierId", Value::Null);
        put("usagePricingTierName", Value::Null);
    }
    if fields.prompt {
        put("promptId", Value::Null);
        put("promptName", Value::Null);
        put("promptVersion", Value::Null);
    }
    if fields.trace_context {
        let tags: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        put("traceName", json!(r.labels.get("feature")));
        put("tags", json!(tags));
        put("release", Value::Null);
    }
    Value::Object(o)
}

/// What OpenAI's Python SDK says when the call failed (`str(e)`, which the
/// Langfuse integration stores); `""` for a call that did not fail.
pub(crate) fn status_message(r: &SimRequest) -> String {
    if !r.is_error() {
        return String::new();
    }
    match r.error_type.as_deref() {
        Some("Timeout") => "Request timed out.".to_owned(),
        Some(kind) => format!(
            "Error code: {} - {{'error': {{'message': 'simulated {kind}', 'type': '{kind}'}}}}",
            r.http_status
        ),
        None => format!("Error code: {}", r.http_status),
    }
}

/// `costDetails`: the output at the model's price, the rest as input, and
/// the call's cost as `total`.
fn cost_details(r: &SimRequest, output_per_mtok: Option<f64>) -> Map<String, Value> {
    let output = output_per_mtok
        .map_or(0.0, |p| round_usd(r.output_tokens as f64 * p / 1e6))
        .min(r.cost_usd);
    let input = round_usd(r.cost_usd - output).max(0.0);
    [("input", input), ("output", output), ("total", r.cost_usd)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect()
}

/// A metadata value as the server returns it: parsed when it reads as
/// JSON (`"42"` is the number 42), the text itself otherwise
/// (`parseJsonPrioritised`).
fn parse_prioritised(value: &str) -> Value {
    serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()))
}
