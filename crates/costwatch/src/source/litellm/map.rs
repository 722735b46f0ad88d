//! One spend-log row into a [`CallRow`]: figures checked against the
//! limits, the session key and labels picked as `source.session_key` and
//! `source.labels` say. Every failure names the row's field
//! (`metadata.additional_usage_values.cache_read_input_tokens: 900 is above
//! prompt_tokens 800`); the caller puts `data[i].` in front.

use super::check::{self, MAX_COST_USD, MAX_ID_BYTES, MAX_LABEL_KEY_BYTES};
use super::check::{MAX_LABEL_VALUE_BYTES, MAX_LABELS};
use super::metadata::{self, Metadata, MetadataColumn, TagsColumn};
use super::usage;
use super::wire::{SCHEMA_HINT, WireRow};
use crate::printable::printable;
use crate::source::RequestStatus;
use crate::source::json::{Scalar, Text};
use crate::source::rows::{CallRow, LabelField, RowSettings, SessionKey};
use chrono::{DateTime, Utc};
use std::borrow::Cow;

/// The model LiteLLM writes when it never learnt which model was meant
/// (`UNKNOWN_MODEL_SPEND_LOG_MODEL`); used when a row names none.
pub(super) const UNKNOWN_MODEL: &str = "unknown-model";

/// Call types whose rows are not model calls: MCP tool calls, agent
/// (A2A) spans whose spend is their model calls' again, and batch rows
/// that sum a whole batch (`session_page.py`: `MCP_CALL_TYPES_SQL`,
/// `AGENT_CALL_TYPE_SQL`; `spend_management_endpoints.py`:
/// `_BATCH_CALL_TYPES_SQL`). They are what `span_type=llm` leaves out.
pub(super) const NOT_MODEL_CALLS: &[&str] = &[
    "call_mcp_tool",
    "list_mcp_tools",
    "asend_message",
    "acreate_batch",
    "create_batch",
    "aretrieve_batch",
    "retrieve_batch",
];

/// A row of a listing: a model call, or another kind of row that is only
/// paged past.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Mapped {
    /// A model call.
    Call(CallRow),
    /// A row that is not a model call (an MCP tool call, an agent span, a
    /// batch).
    Other {
        /// Its `request_id`.
        request_id: String,
        /// Its `startTime`.
        at: DateTime<Utc>,
    },
}

impl Mapped {
    /// The row's `request_id`.
    pub(super) fn request_id(&self) -> &str {
        match self {
            Mapped::Call(c) => &c.request_id,
            Mapped::Other { request_id, .. } => request_id,
        }
    }

    /// The row's `startTime`.
    pub(super) fn at(&self) -> DateTime<Utc> {
        match self {
            Mapped::Call(c) => c.created_at,
            Mapped::Other { at, .. } => *at,
        }
    }
}

/// The parts of a row that keys and labels are read from.
struct Fields<'a> {
    row: &'a WireRow<'a>,
    metadata: &'a Metadata<'a>,
    tags: &'a [Text<'a>],
}

/// Maps and checks one row.
pub(super) fn map(row: WireRow<'_>, settings: &RowSettings) -> Result<Mapped, String> {
    check::id("request_id", &row.request_id)?;
    if let Some(kind) = &row.call_type
        && NOT_MODEL_CALLS.contains(&&**kind)
    {
        return Ok(Mapped::Other {
            request_id: row.request_id.to_string(),
            at: row.start_time,
        });
    }
    let metadata = metadata(row.metadata.as_ref())?;
    let tags = tags(row.request_tags.as_ref())?;
    let input_tokens = check::count("prompt_tokens", row.prompt_tokens)?;
    let output_tokens = check::count("completion_tokens", row.completion_tokens)?;
    let cost = check::usd("spend", row.spend, MAX_COST_USD)?;
    let (read, write) = usage::cache_tokens(&metadata)?;
    if read.tokens > input_tokens {
        return Err(format!(
            "{}: {} is above prompt_tokens {input_tokens}",
            read.field, read.tokens
        ));
    }
    // Both are parts of the prompt, and a token is either read from the
    // cache or written to it.
    if read.tokens + write.tokens > input_tokens {
        return Err(format!(
            "{}: {} and {} {} add up to more than prompt_tokens {input_tokens}",
            write.field, write.tokens, read.field, read.tokens
        ));
    }
    let status = match row.status.as_deref() {
        None | Some("success") => RequestStatus::Success,
        Some("failure") => RequestStatus::Error,
        Some(other) => {
            return Err(format!(
                "status: \"{}\" is neither success nor failure ({SCHEMA_HINT})",
                printable(other)
            ));
        }
    };
    let (error_type, http_status) = match status {
        RequestStatus::Error => error_information(&metadata)?,
        RequestStatus::Success => (None, None),
    };
    let model = model(&row)?;
    let fields = Fields {
        row: &row,
        metadata: &metadata,
        tags: &tags,
    };
    let session_id = session(&settings.session_key, &fields)?;
    let labels = labels(settings, &fields)?;
    let provider = deployment(&row);
    Ok(Mapped::Call(CallRow {
        request_id: row.request_id.to_string(),
        session_id,
        created_at: row.start_time,
        model,
        status,
        http_status,
        error_type,
        input_tokens,
        cached_tokens: read.tokens,
        cache_reported: true,
        instrumentation: None,
        cache_write_tokens: write.tokens,
        output_tokens,
        cost_usd: Some(cost),
        labels,
        provider,
    }))
}

/// `metadata` as an object: LiteLLM re-reads the JSONB column into one,
/// and takes text it cannot read as `{}` (`_hydrate_spend_log_metadata`);
/// so does this.
fn metadata<'r>(column: Option<&'r MetadataColumn<'_>>) -> Result<Cow<'r, Metadata<'r>>, String> {
    match column {
        None => Ok(Cow::Owned(Metadata::default())),
        Some(MetadataColumn::Object(m)) => Ok(Cow::Borrowed(m)),
        Some(MetadataColumn::Text(text)) => Ok(Cow::Owned(
            metadata::metadata_text(text).unwrap_or_default(),
        )),
        Some(MetadataColumn::Other(kind)) => Err(format!(
            "metadata: expected an object, got {} ({SCHEMA_HINT})",
            kind.name()
        )),
    }
}

/// `request_tags` as strings: a list, or the JSON text of one (the raw
/// query hands the JSONB column out as text). Entries that are not
/// strings are skipped, as LiteLLM's own readers do.
fn tags<'r>(column: Option<&'r TagsColumn<'_>>) -> Result<Cow<'r, [Text<'r>]>, String> {
    match column {
        None => Ok(Cow::Borrowed(&[])),
        Some(TagsColumn::List(list)) => Ok(Cow::Borrowed(list)),
        Some(TagsColumn::Text(text)) => match metadata::tags_text(text) {
            Some(list) => Ok(Cow::Owned(list)),
            None => Err(format!(
                "request_tags: `{}` is not a JSON list ({SCHEMA_HINT})",
                printable(&shorten(text))
            )),
        },
        Some(TagsColumn::Other(kind)) => Err(format!(
            "request_tags: expected a list, got {} ({SCHEMA_HINT})",
            kind.name()
        )),
    }
}

/// The first 64 characters of `text`.
fn shorten(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(64).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// `error_type` from `metadata.error_information.error_class`, and the
/// HTTP status from its `error_code` when that is one (LiteLLM writes the
/// exception's status code as text; other codes are not statuses).
fn error_information(metadata: &Metadata<'_>) -> Result<(Option<String>, Option<u16>), String> {
    let Some(info) = &metadata.error_information else {
        return Ok((None, None));
    };
    let class = match &info.error_class {
        Some(Scalar::Text(s)) if !s.is_empty() => {
            check::at_most("metadata.error_information.error_class", s, MAX_ID_BYTES)?;
            Some(s.to_string())
        }
        _ => None,
    };
    let code = match &info.error_code {
        Some(Scalar::Text(s)) => s.trim().parse::<u16>().ok(),
        Some(Scalar::Number(n)) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        _ => None,
    }
    .filter(|c| (100..=599).contains(c));
    Ok((class, code))
}

/// The model: the public name the caller asked for (`model_group`, what
/// `/model/info` lists and prices), else the model the provider was
/// called with, else LiteLLM's own placeholder.
fn model(row: &WireRow<'_>) -> Result<String, String> {
    let (field, name) = match (row.model_group.as_deref(), &*row.model) {
        (Some(group), _) if !group.is_empty() => ("model_group", group),
        (_, model) if !model.is_empty() => ("model", model),
        _ => return Ok(UNKNOWN_MODEL.to_owned()),
    };
    check::id(field, name)?;
    Ok(name.to_owned())
}

/// The deployment that served the call: LiteLLM's `model_id` (one entry
/// of its model list: a provider, a region, a key), else the provider it
/// called. A prompt cache lives with one deployment.
fn deployment(row: &WireRow<'_>) -> Option<String> {
    [row.model_id.as_deref(), row.custom_llm_provider.as_deref()]
        .into_iter()
        .flatten()
        .find(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The session key as `source.session_key` says; `None` when the row has
/// none. See the module documentation for LiteLLM's fallback.
fn session(key: &SessionKey, f: &Fields<'_>) -> Result<Option<String>, String> {
    let (field, value) = match key {
        SessionKey::Session => ("session_id".to_owned(), session_column(f.row)),
        SessionKey::Trace => (
            "session_id".to_owned(),
            nonempty(f.row.session_id.as_deref()),
        ),
        SessionKey::User => ("end_user".to_owned(), nonempty(f.row.end_user.as_deref())),
        SessionKey::Metadata(k) => match metadata_value(f.metadata, k) {
            Some((field, value)) => (field, Some(value)),
            None => (String::new(), None),
        },
        SessionKey::Tag(p) => ("request_tags".to_owned(), tag_value(f.tags, p)),
    };
    match value {
        Some(v) => {
            check::at_most(&field, &v, MAX_ID_BYTES)?;
            Ok(Some(v))
        }
        None => Ok(None),
    }
}

/// The `session_id` column, unless it is a fallback that names the call
/// itself (null or empty under `missing_session_id: omit`; the request or
/// call id, as LiteLLM's own session grouping falls back to
/// `request_id`).
fn session_column(row: &WireRow<'_>) -> Option<String> {
    let id = nonempty(row.session_id.as_deref())?;
    let names_the_call =
        *id == *row.request_id || row.litellm_call_id.as_deref() == Some(id.as_str());
    (!names_the_call).then_some(id)
}

fn nonempty(v: Option<&str>) -> Option<String> {
    v.filter(|s| !s.is_empty()).map(str::to_owned)
}

/// `metadata.<k>` for a key and a label: the caller's
/// `spend_logs_metadata[k]` first, then a field LiteLLM writes into
/// `metadata` itself (`user_api_key_alias`, ...). Strings are taken as
/// they are, numbers and booleans as their JSON text; the field it came
/// from is returned with it.
fn metadata_value(metadata: &Metadata<'_>, k: &str) -> Option<(String, String)> {
    let caller = metadata
        .spend_logs_metadata
        .as_ref()
        .and_then(|m| m.get(k))
        .and_then(Scalar::text)
        .map(|v| (format!("metadata.spend_logs_metadata.{}", printable(k)), v));
    caller.or_else(|| {
        metadata
            .get(k)
            .and_then(Scalar::text)
            .map(|v| (format!("metadata.{}", printable(k)), v))
    })
}

/// The value of the first `<prefix>:<value>` tag, without the spaces
/// LiteLLM puts after the colon of its own header tags
/// (`User-Agent: curl/8.5`).
fn tag_value(tags: &[Text<'_>], prefix: &str) -> Option<String> {
    tags.iter().find_map(|t| {
        let value = t.strip_prefix(prefix)?.strip_prefix(':')?.trim_start();
        (!value.is_empty()).then(|| value.to_owned())
    })
}

/// A row field named in `source.labels` (`LabelField::Field`); see
/// [`super::FIELDS`].
fn field_value(f: &Fields<'_>, name: &str) -> Option<(String, String)> {
    let row = f.row;
    let column = |v: &Option<Text<'_>>| nonempty(v.as_deref());
    let (field, value) = match name {
        "team_id" => ("team_id", column(&row.team_id)),
        "user" => ("end_user", column(&row.end_user)),
        "user_id" => ("user", column(&row.user)),
        "organization_id" => ("organization_id", column(&row.organization_id)),
        "model" => ("model", nonempty(Some(&row.model))),
        "model_group" => ("model_group", column(&row.model_group)),
        "model_id" => ("model_id", column(&row.model_id)),
        "provider" => ("custom_llm_provider", column(&row.custom_llm_provider)),
        "call_type" => ("call_type", column(&row.call_type)),
        "key_alias" => ("metadata.user_api_key_alias", meta(f, "user_api_key_alias")),
        "team_alias" => (
            "metadata.user_api_key_team_alias",
            meta(f, "user_api_key_team_alias"),
        ),
        _ => return None,
    };
    value.map(|v| (field.to_owned(), v))
}

fn meta(f: &Fields<'_>, key: &str) -> Option<String> {
    f.metadata.get(key).and_then(Scalar::text)
}

/// The call's labels: those `source.labels` names, then by default each
/// `spend_logs_metadata` entry and each `key:value` tag (see the module
/// documentation). A named label that breaks the limits fails the row; a
/// default one that does is left out.
fn labels(settings: &RowSettings, f: &Fields<'_>) -> Result<crate::source::Labels, String> {
    let mut out = crate::source::Labels::new();
    for (name, from) in &settings.labels {
        let found = match from {
            LabelField::Metadata(k) => metadata_value(f.metadata, k),
            LabelField::Tag(p) => tag_value(f.tags, p).map(|v| ("request_tags".to_owned(), v)),
            LabelField::Field(name) => field_value(f, name),
        };
        if let Some((field, value)) = found {
            check::at_most(&field, &value, MAX_LABEL_VALUE_BYTES)?;
            out.insert(name.clone(), value);
        }
    }
    let caller = f
        .metadata
        .spend_logs_metadata
        .iter()
        .flat_map(|m| m.0.iter())
        .filter_map(|(k, v)| Some((&**k, v.as_ref()?.text()?)));
    let tagged = f.tags.iter().filter_map(|t| {
        let (k, v) = t.split_once(':')?;
        let label = !k.is_empty()
            && !k.contains(char::is_whitespace)
            && !v.is_empty()
            && !v.starts_with(char::is_whitespace);
        label.then(|| (k, v.to_owned()))
    });
    for (k, v) in caller.chain(tagged) {
        if out.len() == MAX_LABELS {
            break;
        }
        if k.len() <= MAX_LABEL_KEY_BYTES
            && v.len() <= MAX_LABEL_VALUE_BYTES
            && !out.contains_key(k)
        {
            out.insert(k.to_owned(), v);
        }
    }
    Ok(out)
}
