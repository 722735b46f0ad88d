//! The LiteLLM proxy as a row source: its spend log (`GET /spend/logs/v2`)
//! read as [`CallRow`]s, its model catalogue (`GET /model/info`) as
//! prices.
//!
//! Followed from the source of LiteLLM 1.110.2 (the PyPI wheel):
//! `litellm/proxy/spend_tracking/spend_management_endpoints.py`
//! (`ui_view_spend_logs`, which serves both `/spend/logs/v2` and
//! `/spend/logs/ui`), `spend_tracking/spend_tracking_utils.py` (how a row
//! is written: `get_logging_payload`, `_get_session_id_for_spend_log`),
//! `proxy/_types.py` (`SpendLogsPayload`, `SpendLogsMetadata`,
//! `ProxyException`), `proxy/schema.prisma` (`LiteLLM_SpendLogs`),
//! `proxy/proxy_server.py` (`model_info_v1`, the error handlers) and
//! `proxy/auth/` (the 401 answers); timestamps as Prisma's engine writes
//! them in raw query results (`prisma-engines`,
//! `sql-query-connector/src/ser_raw.rs`: chrono's `to_rfc3339`).
//!
//! # The API
//!
//! - `Authorization: Bearer <key>`: the master key, or a virtual key of a
//!   proxy admin (`proxy_admin` or `proxy_admin_viewer`). Other roles are
//!   not refused but read only their own rows (`_spend_log_read_scope`),
//!   which would make every window look small. A bad key is a 401 with
//!   `{"error": {"message", "type", "param", "code": "401"}}`.
//! - `start_date`, `end_date` (both required, `YYYY-MM-DD HH:MM:SS` in
//!   UTC, both ends included), `page` (from 1), `page_size` (1 to 1000;
//!   otherwise a 422 `{"detail": [...]}`), `sort_by=startTime`,
//!   `sort_order=asc`, `span_type=llm` (model calls only; older versions
//!   ignore it, and `map.rs` skips the other call types anyway),
//!   `session_id` (a substring match, `LIKE %id%`). See `query.rs` for the
//!   dates and `listing.rs` for the paging and the end of a listing.
//! - The answer is `{data, total, page, page_size, total_pages,
//!   total_is_capped}`; `total` stops at 10,000 and is not used.
//! - `/spend/logs/v2` exists since LiteLLM 1.80.8; a `page_size` of 1000
//!   since 1.95.0 (100 before), which is the version the reader needs
//!   (`errors.rs`).
//!
//! # A row as a call
//!
//! | `CallRow` | spend-log row |
//! |---|---|
//! | `request_id` | `request_id` |
//! | `created_at` | `startTime` (`2026-10-11T11:24:03.120+00:00`, milliseconds) |
//! | `model` | `model_group` (the name asked for, as `/model/info` lists it), else `model`, else `unknown-model` |
//! | `status` | `status`: `failure` is an error; `success` and null (older rows) are not |
//! | `error_type`, `http_status` | `metadata.error_information.error_class`, and its `error_code` when that is an HTTP status |
//! | `input_tokens` | `prompt_tokens` (the whole prompt; see `usage.rs`) |
//! | `cached_tokens`, `cache_write_tokens` | `metadata.additional_usage_values` and the other spellings in `usage.rs` |
//! | `output_tokens` | `completion_tokens` |
//! | `cost_usd` | `spend` (dollars, always present) |
//!
//! `http_status` stays `None` on success: LiteLLM does not log the
//! provider's status then. `cache_hit` is LiteLLM's response cache and is
//! not read as prompt-cache tokens; such a call is handed over as logged
//! (usually at no cost). Rows that are not model calls (MCP tool calls,
//! agent spans, batch totals) are paged past. `metadata.attempted_retries`
//! and `attempted_fallbacks` have no place in a `CallRow` and are not read.
//!
//! # Sessions
//!
//! `session_id` holds the session the caller sent (`x-litellm-session-id`,
//! `litellm_session_id`, `metadata.session_id`, or an agent's session
//! header). When it sent none, LiteLLM writes the call's trace id instead
//! (`_get_session_id_for_spend_log`: the standard logging payload's
//! `trace_id`, which is `litellm_trace_id`, a new UUID per call unless the
//! caller sent `x-litellm-trace-id`), or null under `general_settings.
//! missing_session_id: omit`. With `source.session_key: session_id`:
//!
//! - null or empty is `None`;
//! - a value equal to the row's `request_id` or `litellm_call_id` (the id
//!   LiteLLM's own session grouping falls back to) is `None`;
//! - a per-call trace id cannot be told from a session id the caller chose
//!   (both are often UUIDs, and the trace id appears in no other column),
//!   so it is kept: each such call is then a session of one call, which is
//!   what `None` amounts to downstream (judged on its own), never joined
//!   with another call.
//!
//! `trace` reads the same column without those rules (LiteLLM writes the
//! trace id there). `metadata.<key>` reads the caller's
//! `metadata.spend_logs_metadata[key]`, then a field of `metadata` itself
//! (`user_api_key_alias`, ...); `user` reads `end_user`; `tag:<prefix>`
//! the first request tag `<prefix>:<value>`.
//!
//! # Labels
//!
//! First those `source.labels` names ([`LabelField`]: `metadata.<key>` and
//! `tag:<prefix>` as for the session key, a row field from [`FIELDS`]);
//! then by default each string, number or boolean of
//! `spend_logs_metadata`, then each request tag of the form `key:value`
//! (LiteLLM's own header tags, written `User-Agent: curl/8.5` with a
//! space, are not labels by default). An earlier source wins a name. A
//! named label over the limits fails the page; a default one is left out,
//! as are defaults past 64 labels.
//!
//! [`LabelField`]: crate::source::rows::LabelField

mod check;
mod errors;
mod listing;
mod map;
mod metadata;
mod models;
mod query;
mod usage;
mod wire;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::listing::SPEND_LOGS;
pub use self::query::{MAX_PAGE_SIZE, covering, page_query};

use self::errors::explain;
use self::wire::ModelInfoList;
use super::fetch::PageFetcher;
use super::rows::{CallRow, RowReader, RowSettings, SessionKey};
use super::{HttpLimits, ModelPrice, ReadStats, SourceError};
use crate::clock::Sleeper;
use crate::secret::Secret;
use chrono::{DateTime, Utc};
use std::fmt;
use std::sync::Arc;
use url::Url;

/// The row fields `source.labels` can name (`LabelField::Field`) for a
/// LiteLLM source: `team_id`, `team_alias` (`metadata.
/// user_api_key_team_alias`), `key_alias` (`metadata.user_api_key_alias`),
/// `user` (`end_user`), `user_id` (the key's internal user, column
/// `user`), `organization_id`, `model`, `model_group`, `model_id`,
/// `provider` (`custom_llm_provider`) and `call_type`.
/// The LiteLLM proxy's spend logs, as the registry knows them: pages of
/// 500 by default, of at most 1000 (`/spend/logs/v2`'s largest).
pub const KIND: super::KindFacts = super::KindFacts {
    name: "litellm",
    reads: "the LiteLLM proxy's spend logs",
    default_page_limit: 500,
    max_page_limit: 1000,
    label_fields: FIELDS,
    // The proxy UI's log page takes a session (BerriAI/litellm PR #34879).
    session_page: Some("ui/logs?session_id={session_id}"),
    ui_on_api_host: true,
};

pub const FIELDS: &[&str] = &[
    "team_id",
    "team_alias",
    "key_alias",
    "user",
    "user_id",
    "organization_id",
    "model",
    "model_group",
    "model_id",
    "provider",
    "call_type",
];

/// Reads a LiteLLM proxy's spend log and model catalogue.
#[derive(Clone)]
pub struct LiteLlmReader {
    fetch: PageFetcher,
    base: Url,
    key: Secret,
    settings: RowSettings,
    page_size: u32,
}

impl fmt::Debug for LiteLlmReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiteLlmReader")
            .field("base", &self.base.as_str())
            .field("page_size", &self.page_size)
            .field("max_pages", &self.settings.max_pages)
            .finish_non_exhaustive()
    }
}

impl LiteLlmReader {
    /// A reader of the proxy at `api_url` (its base URL, e.g.
    /// `https://litellm.example.com`), sending `key` as a bearer token.
    /// Pages hold `settings.page_limit` rows, at most LiteLLM's 1000.
    pub fn new(
        api_url: Url,
        key: &Secret,
        settings: &RowSettings,
        limits: HttpLimits,
    ) -> Result<Self, SourceError> {
        let auth = crate::http::bearer(key).ok_or_else(|| {
            SourceError::Rejected(
                "the admin key is not a valid header value (COSTWATCH_ADMIN_KEY or \
                 source.admin_key_file)"
                    .into(),
            )
        })?;
        Ok(LiteLlmReader {
            fetch: PageFetcher::new(auth, &limits)?.with_refusal(errors::refusal),
            base: crate::http::as_directory(api_url),
            key: key.clone(),
            settings: settings.clone(),
            page_size: settings.page_limit.clamp(1, query::MAX_PAGE_SIZE),
        })
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.fetch = self.fetch.with_sleeper(sleeper);
        self
    }

    /// The URL of `path` below the base URL, without a query.
    fn endpoint(&self, path: &str) -> Result<Url, SourceError> {
        self.base
            .join(path)
            .map_err(|e| SourceError::Rejected(format!("bad url for {path}: {e}")))
    }
}

impl RowReader for LiteLlmReader {
    fn name(&self) -> &'static str {
        "LiteLLM proxy"
    }

    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        let url = self.endpoint("model/info")?;
        let path = url.path().to_owned();
        let mut stats = ReadStats::default();
        let body: serde_json::Value = self
            .fetch
            .get_json(url, "model/info", &mut stats)
            .await
            .map_err(|e| explain(e, &self.key))?;
        let invalid = |m: String| SourceError::Invalid(format!("{path}: {m}"));
        let list: ModelInfoList = wire::parse(body).map_err(invalid)?;
        models::prices(list.data).map_err(invalid)
    }

    async fn calls<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        sink: F,
    ) -> Result<ReadStats, SourceError>
    where
        F: FnMut(CallRow) -> Result<(), SourceError> + Send,
    {
        self.read(start, end, None, sink).await
    }

    /// With `source.session_key` `session_id` or `trace`, LiteLLM filters
    /// on the `session_id` column (a substring match) and the exact
    /// matches are kept; with another key the range is read whole.
    async fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<CallRow>, SourceError> {
        let filter = matches!(
            self.settings.session_key,
            SessionKey::Session | SessionKey::Trace
        )
        .then_some(session_id);
        let mut out = Vec::new();
        self.read(start, end, filter, |row| {
            if row.session_id.as_deref() == Some(session_id) {
                out.push(row);
            }
            Ok(())
        })
        .await?;
        Ok(out)
    }
}
