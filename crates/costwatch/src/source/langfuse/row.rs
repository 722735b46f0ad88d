//! One observation into a [`CallRow`]: the checks, the session key and the
//! labels.
//!
//! Errors name the field (`usageDetails.input: -5 is negative`); the caller
//! puts the row's place in front (`data[3].`).

use super::limits::{self, Key, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES, MAX_LABELS};
use super::wire::{Metadata, Observation, text};
use super::{status, usage};
use crate::printable::printable;
use crate::source::json::{Scalar, Text};
use crate::source::rows::{CallRow, LabelField, RowSettings, SessionKey};
use crate::source::{Labels, RequestStatus};
use chrono::{DateTime, Utc};

/// The only observation type read: a model call.
pub(super) const GENERATION: &str = "GENERATION";

/// What `model` becomes when the observation names none.
pub(super) const UNKNOWN_MODEL: &str = "unknown";

/// Said after a field that a page of Langfuse's v2 observations always has.
const CHANGED: &str = "not the shape of Langfuse's v2 observations (has the API changed?)";

/// The row fields a label can come from (`source.labels` values that are
/// neither `metadata.<key>` nor `tag:<prefix>`), and the observation field
/// each reads.
pub const FIELDS: &[&str] = &[
    "name",
    "environment",
    "version",
    "release",
    "trace_name",
    "user",
    "session",
    "trace",
];

/// Maps observations as the `source` settings say.
#[derive(Debug, Clone)]
pub(super) struct Mapper {
    session_key: SessionKey,
    labels: Vec<(String, LabelField)>,
}

impl Mapper {
    pub(super) fn new(settings: &RowSettings) -> Mapper {
        Mapper {
            session_key: settings.session_key.clone(),
            labels: settings
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The session key's setting.
    pub(super) fn session_key(&self) -> &SessionKey {
        &self.session_key
    }

    /// The observation's start time, which every row must have.
    pub(super) fn start_time(obs: &Observation<'_>) -> Result<DateTime<Utc>, String> {
        obs.start_time
            .ok_or_else(|| format!("startTime: missing; {CHANGED}"))
    }

    /// The observation's id, which every row must have (1 to 256 bytes).
    pub(super) fn id<'o>(obs: &'o Observation<'_>) -> Result<&'o str, String> {
        let id = obs
            .id
            .as_deref()
            .ok_or_else(|| format!("id: missing; {CHANGED}"))?;
        limits::id("id", id)?;
        Ok(id)
    }

    /// Checks one observation and maps it.
    pub(super) fn map(&self, obs: &Observation<'_>) -> Result<CallRow, String> {
        let request_id = Self::id(obs)?.to_owned();
        let created_at = Self::start_time(obs)?;
        match obs.kind.as_deref() {
            Some(GENERATION) => {}
            Some(other) => {
                return Err(format!(
                    "type: \"{}\", but only {GENERATION} observations were asked for",
                    printable(other)
                ));
            }
            None => return Err(format!("type: missing; {CHANGED}")),
        }
        let level = obs
            .level
            .as_deref()
            .ok_or_else(|| format!("level: missing (field group basic); {CHANGED}"))?;
        let usage_details = obs
            .usage_details
            .as_ref()
            .ok_or_else(|| format!("usageDetails: missing (field group usage); {CHANGED}"))?;
        let tokens = usage::tokens(usage_details)?;
        let cost_usd = usage::cost(obs.total_cost, obs.cost_details.as_ref())?;
        let model = model(obs)?;
        let (status, http_status, error_type) = if level == "ERROR" {
            let (http, class) = status::classify(text(&obs.status_message));
            (RequestStatus::Error, http, Some(class))
        } else {
            (RequestStatus::Success, None, None)
        };
        let session_id = self.session(obs)?;
        let labels = self.labels(obs)?;
        Ok(CallRow {
            request_id,
            session_id,
            created_at,
            model,
            status,
            http_status,
            error_type,
            input_tokens: tokens.input,
            cached_tokens: tokens.cached,
            cache_reported: true,
            instrumentation: None,
            cache_write_tokens: tokens.write,
            output_tokens: tokens.output,
            cost_usd,
            labels,
            // Observations name no deployment.
            provider: None,
        })
    }

    /// The session the call belongs to under `source.session_key`.
    fn session(&self, obs: &Observation<'_>) -> Result<Option<String>, String> {
        let value = match &self.session_key {
            SessionKey::Session => text(&obs.session_id).map(str::to_owned),
            SessionKey::User => text(&obs.user_id).map(str::to_owned),
            SessionKey::Trace => text(&obs.trace_id).map(str::to_owned),
            SessionKey::Metadata(key) => metadata_value(obs, key),
            SessionKey::Tag(prefix) => tag_value(obs, prefix),
        };
        if let Some(v) = &value {
            let field = match &self.session_key {
                SessionKey::Session => "sessionId".to_owned(),
                SessionKey::User => "userId".to_owned(),
                SessionKey::Trace => "traceId".to_owned(),
                SessionKey::Metadata(key) => Key("metadata", key).to_string(),
                SessionKey::Tag(_) => "tags".to_owned(),
            };
            limits::id(field, v)?;
        }
        Ok(value)
    }

    /// The configured labels, then the observation's metadata: each key
    /// with a string, number or boolean value is a label, up to the limit
    /// of labels per call (keys in order); metadata keys or values outside
    /// the label limits are not labels. A configured label wins over a
    /// metadata key of the same name, even when the call has no value for
    /// it.
    fn labels(&self, obs: &Observation<'_>) -> Result<Labels, String> {
        let mut labels = Labels::new();
        for (name, field) in &self.labels {
            let value = match field {
                LabelField::Metadata(key) => metadata_value(obs, key),
                LabelField::Tag(prefix) => tag_value(obs, prefix),
                LabelField::Field(name) => field_value(obs, name).map(str::to_owned),
            };
            if let Some(value) = value {
                if value.len() > MAX_LABEL_VALUE_BYTES {
                    return Err(limits::too_long(
                        format_args!("labels.{}", printable(name)),
                        value.len(),
                        MAX_LABEL_VALUE_BYTES,
                    ));
                }
                labels.insert(name.clone(), value);
            }
        }
        let Some(Metadata(Some(metadata))) = &obs.metadata else {
            return Ok(labels);
        };
        for (key, value) in &metadata.0 {
            if labels.len() >= MAX_LABELS {
                break;
            }
            if key.is_empty()
                || key.len() > MAX_LABEL_KEY_BYTES
                || self.labels.iter().any(|(name, _)| name.as_str() == &**key)
            {
                continue;
            }
            let value = value.as_ref().and_then(scalar);
            if let Some(value) = value.filter(|v| v.len() <= MAX_LABEL_VALUE_BYTES) {
                labels.insert(key.to_string(), value);
            }
        }
        Ok(labels)
    }
}

/// The model the call names: `providedModelName` (the published name), else
/// `model` (what the server sends); [`UNKNOWN_MODEL`] when it names none.
/// One of the keys must be there: the `model` field group was asked for.
fn model(obs: &Observation<'_>) -> Result<String, String> {
    if obs.model.is_none() && obs.provided_model_name.is_none() {
        return Err(format!(
            "model: missing, and no providedModelName (field group model); {CHANGED}"
        ));
    }
    let named = |v: &Option<Option<Text<'_>>>| {
        v.as_ref()
            .and_then(|v| v.as_deref())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let (field, name) = match named(&obs.provided_model_name) {
        Some(name) => ("providedModelName", name),
        None => match named(&obs.model) {
            Some(name) => ("model", name),
            None => return Ok(UNKNOWN_MODEL.to_owned()),
        },
    };
    limits::id(field, &name)?;
    Ok(name)
}

/// A metadata value that can be a key or a label: a non-empty string, a
/// number or a boolean, as text. Langfuse parses metadata values that read
/// as JSON, so `"42"` comes back as the number `42`.
fn scalar(value: &Scalar<'_>) -> Option<String> {
    value.text()
}

fn metadata_value(obs: &Observation<'_>, key: &str) -> Option<String> {
    match &obs.metadata {
        Some(Metadata(Some(m))) => m.get(key).and_then(scalar),
        _ => None,
    }
}

/// The value of the first `<prefix>:<value>` tag. Tags belong to the trace;
/// Langfuse copies them onto each observation (field group
/// `trace_context`).
fn tag_value(obs: &Observation<'_>, prefix: &str) -> Option<String> {
    obs.tags.as_ref()?.iter().find_map(|tag| {
        tag.strip_prefix(prefix)?
            .strip_prefix(':')
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    })
}

/// The value of one of [`FIELDS`].
fn field_value<'a>(obs: &'a Observation<'_>, name: &str) -> Option<&'a str> {
    match name {
        "name" => text(&obs.name),
        "environment" => text(&obs.environment),
        "version" => text(&obs.version),
        "release" => text(&obs.release),
        "trace_name" => text(&obs.trace_name),
        "user" => text(&obs.user_id),
        "session" => text(&obs.session_id),
        "trace" => text(&obs.trace_id),
        _ => None,
    }
}
