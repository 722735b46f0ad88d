//! How the simulated proxy was set up and which LiteLLM wrote its rows:
//! which callers sent no session id and what the proxy writes for them,
//! and how the usage in `metadata` is spelled.

use std::collections::BTreeSet;

/// What the proxy writes in `session_id` for a call whose caller sent no
/// session id (`general_settings.missing_session_id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MissingSessionId {
    /// The default: the call's trace id, a new UUID per call
    /// (`_get_session_id_for_spend_log` falls back to the standard logging
    /// payload's `trace_id`).
    #[default]
    Trace,
    /// `missing_session_id: omit`: null.
    Omit,
}

/// Where the prompt-cache tokens of a row are written, as the LiteLLM
/// versions that wrote the rows spelled them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageSpelling {
    /// LiteLLM 1.110.2: `additional_usage_values.cache_read_input_tokens`
    /// and `.cache_creation_input_tokens` (when above zero, or always from
    /// Anthropic), `prompt_tokens_details` beside them, and the whole usage
    /// in `usage_object`.
    #[default]
    Normalised,
    /// Rows written before the normalisation:
    /// `additional_usage_values.prompt_tokens_details.cached_tokens` and
    /// `.cache_creation_tokens` only, no `usage_object`.
    DetailsOnly,
    /// Only `usage_object.cache_read_input_tokens` and
    /// `.cache_creation_input_tokens`; `additional_usage_values` empty.
    UsageObject,
    /// Only `usage_object.prompt_tokens_details.cached_tokens` and
    /// `.cache_creation_tokens`; `additional_usage_values` empty.
    UsageObjectDetails,
}

/// The simulated proxy's setup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiteLlmOptions {
    /// Sessions (by the dataset's id) whose calls were sent without a
    /// session id.
    pub without_session_id: BTreeSet<String>,
    /// What the proxy writes for them.
    pub missing_session_id: MissingSessionId,
    /// How the rows spell the prompt-cache tokens.
    pub usage: UsageSpelling,
}
