//! The tool list and `tools/call`: the observation tools with the names,
//! descriptions, input schemas and annotations of
//! `features/observations/tools/*.ts` (the schemas as zod's
//! `toJSONSchema` writes them: draft-7, output mode), two of the server's
//! writes as placeholders, and each call's result as one text block of
//! pretty JSON, or a JSON-RPC error.

use super::input::Failure;
use super::rpc::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST};
use super::{json::Node, observations, values};
use crate::langfuse::{LangfuseSim, RouteState};
use axum::http::HeaderMap;
use serde_json::{Value, json};

/// The schemas' dialect.
const DRAFT_7: &str = "http://json-schema.org/draft-07/schema#";

/// Observation types (`ObservationTypeDomain`).
pub(super) const TYPES: [&str; 10] = [
    "SPAN",
    "EVENT",
    "GENERATION",
    "AGENT",
    "TOOL",
    "CHAIN",
    "RETRIEVER",
    "EVALUATOR",
    "EMBEDDING",
    "GUARDRAIL",
];

/// Observation levels (`ObservationLevelDomain`).
pub(super) const LEVELS: [&str; 4] = ["DEBUG", "DEFAULT", "WARNING", "ERROR"];

const FIELDS_DESCRIPTION: &str = "Observation fields to include in the response. Omit for compact defaults, use [\"*\"] for all available fields, or pass specific field names to keep responses small. Call getObservationFieldSchema to list accepted fields.";
const EXPAND_DESCRIPTION: &str = "Metadata keys that may need full values. Metadata values are truncated to 200 UTF-8 characters per key by default when metadata is projected without this option.";
const LIMIT_DESCRIPTION: &str = "Number of observations to return (1-100, default: 50)";
const FILTER_DESCRIPTION: &str = "Advanced filters. Each item must be an object with column, operator, value, optional type, and optional key. Type is inferred from getObservationFilterSchema columns when omitted. Use key for metadata filters.";

fn list_observations() -> Value {
    let description = [
        "Find and review observations in the current Langfuse project, such as generations, spans, events, agent steps, and tool calls.",
        "Traces consist of observations. Use this tool when the user asks to inspect traces: pass traceId to page through the observations for a specific trace; those observation records are the trace data returned by the API.",
        "Use filters to narrow results by trace, name, type, level, environment, time range, or advanced filter conditions. Results are paginated with an opaque cursor.",
        "For metadata filters, first inspect metadata on selectively scoped observations by passing traceId, an exact id filter, or both fromStartTime and toStartTime with fields: [\"id\", \"metadata\"]. Then use a discovered key in a stringObject filter.",
        "",
        "By default this returns compact summary fields. Use fields: [\"*\"] for the full observation, or pass specific field names to limit the response size.",
        "Important: if you request metadata explicitly, for example fields: [\"id\", \"metadata\"], metadata values are truncated to 200 UTF-8 characters per key unless you also pass expandMetadataKeys with the keys that may need full values.",
        "Requests that project or filter input, output, or metadata must include traceId, an id filter, or both fromStartTime and toStartTime.",
    ]
    .join("\n");
    let datetime = json!({"type": "string", "format": "date-time"});
    json!({
        "name": "listObservations",
        "description": description,
        "inputSchema": {
            "$schema": DRAFT_7,
            "type": "object",
            "properties": {
                "fields": {"description": FIELDS_DESCRIPTION, "type": "array", "items": {"type": "string"}},
                "expandMetadataKeys": {"description": EXPAND_DESCRIPTION, "type": "array", "items": {"type": "string"}},
                "limit": limit_schema(),
                "cursor": {"description": "Cursor returned by a previous listObservations call", "type": "string"},
                "type": {"type": "string", "enum": TYPES},
                "name": {"type": "string"},
                "userId": {"type": "string"},
                "level": {"type": "string", "enum": LEVELS},
                "traceId": {"type": "string"},
                "version": {"type": "string"},
                "parentObservationId": {"description": "Physical parent observation ID to match exactly.", "type": "string"},
                "isRootObservation": {"description": "Filter by logical root status. App-root observations can match true while retaining a non-null parentObservationId.", "type": "boolean"},
                "environment": {"description": "Environment to filter by. Multiple environments are temporarily unsupported until the public observations API applies allow-multiple environment filters correctly.", "type": "string"},
                "fromStartTime": datetime,
                "toStartTime": datetime,
                "filter": {
                    "description": FILTER_DESCRIPTION,
                    "type": "array",
                    "items": {
                        "description": "Advanced observation filter object. Example: {\"column\":\"totalCost\",\"operator\":\">\",\"value\":0.0029}. The explicit form {\"type\":\"number\",\"column\":\"totalCost\",\"operator\":\">\",\"value\":0.0029} is also accepted.",
                        "type": "object",
                        "properties": {
                            "column": {"type": "string"},
                            "operator": {"type": "string"},
                            "value": {},
                            "type": {"type": "string"},
                            "key": {"description": "Metadata/object key to filter on. Required when column is metadata.", "type": "string"},
                        },
                        "required": ["column", "operator"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["limit"],
            "additionalProperties": false,
        },
        "annotations": {"readOnlyHint": true},
    })
}

fn limit_schema() -> Value {
    json!({"default": 50, "description": LIMIT_DESCRIPTION, "type": "integer", "minimum": 1, "maximum": 100})
}

fn get_observation() -> Value {
    let description = [
        "Get the details for a single observation in the current Langfuse project by observation ID.",
        "Use this when you already know the observation ID and want to inspect its timing, model, status, payload, metadata, usage, cost, or prompt fields.",
        "",
        "By default this returns compact summary fields. Use fields: [\"*\"] for the full observation, or pass specific field names to limit the response size.",
        "Important: if you request metadata explicitly, for example fields: [\"id\", \"metadata\"], metadata values are truncated to 200 UTF-8 characters per key unless you also pass expandMetadataKeys with the keys that may need full values.",
    ]
    .join("\n");
    json!({
        "name": "getObservation",
        "description": description,
        "inputSchema": {
            "$schema": DRAFT_7,
            "type": "object",
            "properties": {
                "observationId": {"type": "string", "minLength": 1},
                "fields": {"description": FIELDS_DESCRIPTION, "type": "array", "items": {"type": "string"}},
                "expandMetadataKeys": {"description": EXPAND_DESCRIPTION, "type": "array", "items": {"type": "string"}},
            },
            "required": ["observationId"],
            "additionalProperties": false,
        },
        "annotations": {"readOnlyHint": true},
    })
}

fn empty_input(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"$schema": DRAFT_7, "type": "object", "properties": {}, "additionalProperties": false},
        "annotations": {"readOnlyHint": true},
    })
}

fn get_observation_filter_values() -> Value {
    let datetime = json!({"type": "string", "format": "date-time"});
    json!({
        "name": "getObservationFilterValues",
        "description": "List example values for a string or boolean observation filter field, such as names, types, levels, environments, model names, tags, users, or sessions. For numeric metric fields, returns a range with min, max, avg, and count. Use the returned cursor to page through long value lists.",
        "inputSchema": {
            "$schema": DRAFT_7,
            "type": "object",
            "properties": {
                "column": {"type": "string", "enum": values::VALUE_COLUMNS},
                "fromStartTime": datetime,
                "toStartTime": datetime,
                "observationType": {"type": "string", "enum": TYPES},
                "isRootObservation": {"type": "boolean"},
                "hasParentObservation": {"type": "boolean"},
                "limit": limit_schema(),
                "cursor": {"type": "string"},
            },
            "required": ["column", "limit"],
            "additionalProperties": false,
        },
        "annotations": {"readOnlyHint": true},
    })
}

/// A write the real server lists beside its reads; the simulator lists it
/// (name, description, annotations) with an open schema and serves no call.
fn placeholder_write(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"$schema": DRAFT_7, "type": "object"},
        "annotations": {"destructiveHint": true},
    })
}

/// The writes listed as placeholders, in the server's order.
fn placeholder_writes() -> [Value; 2] {
    [
        placeholder_write(
            "deleteDatasetItem",
            "Delete a dataset item, one example in a dataset, and all its run items.",
        ),
        placeholder_write(
            "createScore",
            "Create one score in the current Langfuse project.\nScore reads are eventually consistent: after creation, getScore and listScores may not return the new score immediately. Wait briefly and retry reads when confirming creation.",
        ),
    ]
}

/// The observation tools, in the feature's order.
fn observation_tools() -> [Value; 5] {
    [
        list_observations(),
        get_observation(),
        empty_input(
            "getObservationFieldSchema",
            "Show which observation fields can be requested from listObservations and getObservation. The response marks default fields and fields that may be large or contain sensitive application data.",
        ),
        empty_input(
            "getObservationFilterSchema",
            "Show which observation fields can be used in listObservations filters, including the supported operators for each field.",
        ),
        get_observation_filter_values(),
    ]
}

/// `tools/list`: every tool in one page (the server does not page).
pub(super) fn list(sim: &LangfuseSim) -> Value {
    let mut tools: Vec<Value> = Vec::new();
    if sim.v4() {
        tools.extend(observation_tools());
    }
    tools.extend(placeholder_writes());
    json!({ "tools": tools })
}

/// `tools/call`: the result with the tool's JSON as text, or the JSON-RPC
/// error's code and message.
pub(super) fn call(
    st: &RouteState,
    headers: &HeaderMap,
    params: &Value,
) -> Result<Value, (i64, String)> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((
            INTERNAL_ERROR,
            "tools/call: params.name must be a string".to_owned(),
        ));
    };
    let arguments = params.get("arguments").cloned();
    let base = format!(
        "http://{}/",
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
    );
    let ctx = observations::Ctx {
        sim: &st.sim,
        now: (st.now)(),
        base: &base,
    };
    let v4 = st.sim.v4();
    let out: Result<Node, Failure> = match name {
        "listObservations" if v4 => observations::list(&ctx, arguments.as_ref()),
        "getObservation" if v4 => observations::get(&ctx, arguments.as_ref()),
        "getObservationFieldSchema" if v4 => Ok(values::field_schema()),
        "getObservationFilterSchema" if v4 => Ok(values::filter_schema()),
        "getObservationFilterValues" if v4 => values::filter_values(&ctx, arguments.as_ref()),
        "deleteDatasetItem" | "createScore" => {
            return Err((
                INTERNAL_ERROR,
                format!("{name}: listed by the simulator, not served"),
            ));
        }
        other => return Err((INTERNAL_ERROR, format!("Unknown tool: {other}"))),
    };
    match out {
        Ok(node) => Ok(json!({"content": [{"type": "text", "text": node.pretty()}]})),
        Err(Failure::Validation(issues)) => Err((
            INVALID_PARAMS,
            format!("MCP error -32602: Validation failed: {}", issues.join(", ")),
        )),
        Err(Failure::Request(message)) => {
            Err((INVALID_REQUEST, format!("MCP error -32600: {message}")))
        }
    }
}
