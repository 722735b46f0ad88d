//! Langfuse as a row source: its public observations API, v2, read one
//! generation per model call.
//!
//! Followed from `langfuse/langfuse` at commit `6275144614` (tag
//! `v4.16.0-30`):
//! - `fern/apis/server/definition/observations.yml` (the endpoint, its
//!   query parameters and field groups) and `commons.yml`
//!   (`ObservationV2`);
//! - `web/src/pages/api/public/v2/observations/index.ts` (the handler: one
//!   row more than `limit` is fetched to know whether a `meta.cursor` is
//!   due; a 404 on a server not in v4 mode) and
//!   `web/src/features/public-api/types/observations.ts` (the query:
//!   `limit` 0 to 1000, default 50; the cursor is base64 of JSON
//!   `{lastStartTimeTo, lastTraceId, lastId}`);
//! - `packages/shared/src/server/repositories/events.ts` (rows newest
//!   first, the cursor resumes strictly after the last row) and
//!   `packages/shared/src/server/queries/public-api-filter-builder.ts`
//!   (`fromStartTime` is `>=`, `toStartTime` is `<`);
//! - `packages/shared/src/server/repositories/observations_converters.ts`
//!   (what a row holds: the provided model name under `model`, `totalCost`
//!   taken from `costDetails.total`, `0` when there is none);
//! - `web/src/features/public-api/server/createAuthedProjectAPIRoute.ts`,
//!   `apiAuth.ts` and `withMiddlewares.ts` (HTTP Basic `public:secret`,
//!   401 `{"message": "Invalid credentials. ..."}`, 400
//!   `{"message": "Invalid request data", "error": [...]}`, 429 with
//!   `Retry-After`, 422 when the query ran out of resources);
//! - `web/src/__tests__/server/observations-api-v2.servertest.ts` (which
//!   fields each group returns, on the wire).
//!
//! What each call reads:
//! `GET {api_url}/api/public/v2/observations?type=GENERATION&fromStartTime=
//! &toStartTime=&fields=core,basic,metadata,model,usage,trace_context
//! &limit=&cursor=`. Every row is still held to `start <= startTime < end`
//! on this side. `source.page_limit` is clamped to 1..1000. A listing ends
//! on a page without `meta.cursor`; a cursor handed out twice (a cycle),
//! more than `source.max_pages` pages, rows out of the documented order or
//! an id listed twice, a page cut off or not JSON (after the retries), and
//! a page or row of another shape each fail the read, never taken as
//! empty.
//!
//! Choices where the sources leave room:
//! - The provided model name is read from `providedModelName` (the
//!   published definition) or `model` (what the server sends); a call
//!   without one is model `unknown`.
//! - Strings Langfuse stores as `""` when unset (`sessionId`, `userId`,
//!   `statusMessage`, ...) count as absent.
//! - Tokens and cost: see `usage.rs` (the inclusive prompt from
//!   every spelling the integrations write; a zero `totalCost` beside empty
//!   `costDetails` is "not priced", so costwatch prices the call).
//! - A failed call is `level: ERROR`; its class comes from
//!   `statusMessage` without copying it (`status.rs`).
//! - Session keys: `session_id` is `sessionId`, `user` is `userId`,
//!   `trace` is `traceId`, `metadata.<key>` a metadata value (string,
//!   number or boolean), `tag:<prefix>` the value of a `<prefix>:<value>`
//!   tag. Tags belong to the trace; Langfuse copies them onto each
//!   observation in the `trace_context` group (since v3.175); on an older
//!   server no call has a tag. Metadata values arrive cut at 200
//!   characters (Langfuse's default; `expandMetadata` is not asked for).
//! - Labels: every metadata key with a string, number or boolean value,
//!   plus `source.labels` (the row fields in [`FIELDS`]).
//! - A drill-down into one session asks the server for it when the key is
//!   one it filters on (`sessionId` since Langfuse v4.2, `userId`,
//!   `traceId`) and still keeps only that session's rows here: an older
//!   server ignores a parameter it does not know.
//! - Prices: the project's model definitions (`GET /api/public/models`,
//!   every page; `models.rs`), matched to a call by pattern, start date and
//!   tier as Langfuse matches them (`pricing.rs`), come before
//!   costwatch's tables. Langfuse prices the calls a definition matches
//!   (`costDetails`); the definitions price the others, and give the
//!   detectors every model's prices. A model no definition and no table
//!   prices gets the prices its calls' reported costs teach (the row
//!   source's rule for every source, `crate::pricing::learned`).

mod limits;
mod models;
mod order;
mod pricing;
mod row;
mod status;
mod usage;
mod wire;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::pricing::Definitions;
pub use self::row::FIELDS;

use self::order::Order;
use self::row::Mapper;
use self::wire::Page;
use super::fetch::{CursorsSeen, PageFetcher};
use super::rows::{CallRow, Published, RowReader, RowSettings, SessionKey};
use super::{HttpLimits, ModelPrice, ReadStats, SourceError};
use crate::clock::Sleeper;
use crate::pricing::table::PriceRules;
use crate::secret::Secret;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::header::HeaderValue;
use std::sync::Arc;
use url::Url;

/// The largest `limit` Langfuse accepts.
pub const MAX_PAGE_LIMIT: u32 = 1000;

/// Langfuse's observations, as the registry knows them: pages of 500 by
/// default, of at most [`MAX_PAGE_LIMIT`].
pub const KIND: super::KindFacts = super::KindFacts {
    name: "langfuse",
    reads: "Langfuse's observations",
    default_page_limit: 500,
    max_page_limit: MAX_PAGE_LIMIT,
    label_fields: FIELDS,
    // The web app's session page (`web/src/pages/project/[projectId]/
    // sessions/[sessionId].tsx`); the project is the keys' own.
    session_page: Some("project/{project_id}/sessions/{session_id}"),
    ui_on_api_host: true,
};

/// The keys' project, below the host's base URL
/// (`web/src/pages/api/public/projects/index.ts`).
pub const PROJECTS_PATH: &str = "api/public/projects";

/// The observations API, below the host's base URL.
pub const PATH: &str = "api/public/v2/observations";

/// The model definitions, below the host's base URL.
pub const MODELS_PATH: &str = "api/public/models";

/// The page size the model definitions are read with.
pub const MODELS_PAGE_LIMIT: u32 = models::PAGE_LIMIT;

/// The field groups asked for.
const FIELD_GROUPS: &str = "core,basic,metadata,model,usage,trace_context";

/// How the Langfuse keys are configured, for messages.
const KEYS_HINT: &str = "check the public key in source.public_key (or \
    COSTWATCH_SOURCE__PUBLIC_KEY) and the secret key in COSTWATCH_ADMIN_KEY \
    (or source.admin_key_file), and that both belong to the same project";

/// The query of the first observations page over `[start, end)`: the
/// generations, the field groups read, `limit` a page.
pub fn observations_query(
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    limit: u32,
) -> [(&'static str, String); 5] {
    [
        ("type", row::GENERATION.to_owned()),
        ("fromStartTime", rfc3339(start)),
        ("toStartTime", rfc3339(end)),
        ("fields", FIELD_GROUPS.to_owned()),
        ("limit", limit.to_string()),
    ]
}

/// Reads a Langfuse project's generations through the public API.
#[derive(Clone)]
pub struct LangfuseReader {
    fetch: PageFetcher,
    endpoint: Url,
    models_endpoint: Url,
    projects_endpoint: Url,
    mapper: Mapper,
    page_limit: u32,
    max_pages: u64,
}

impl std::fmt::Debug for LangfuseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LangfuseReader")
            .field("endpoint", &self.endpoint.as_str())
            .field("page_limit", &self.page_limit)
            .field("max_pages", &self.max_pages)
            .finish_non_exhaustive()
    }
}

impl LangfuseReader {
    /// A reader of the Langfuse host at `api_url` (its base URL, e.g.
    /// `https://cloud.langfuse.com`), signing in with the project's public
    /// and secret key.
    pub fn new(
        api_url: Url,
        public_key: &str,
        secret_key: &Secret,
        settings: &RowSettings,
        limits: HttpLimits,
    ) -> Result<Self, SourceError> {
        let auth = basic_auth(public_key, secret_key)?;
        let base = crate::http::as_directory(api_url);
        let join = |path: &str| {
            base.join(path)
                .map_err(|e| SourceError::Rejected(format!("source.api_url: {e}")))
        };
        Ok(LangfuseReader {
            fetch: PageFetcher::new(auth, &limits)?.with_refusal(refusal),
            endpoint: join(PATH)?,
            models_endpoint: join(MODELS_PATH)?,
            projects_endpoint: join(PROJECTS_PATH)?,
            mapper: Mapper::new(settings),
            page_limit: settings.page_limit.clamp(1, MAX_PAGE_LIMIT),
            max_pages: settings.max_pages.max(1),
        })
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.fetch = self.fetch.with_sleeper(sleeper);
        self
    }

    /// The first page's URL: the range, the type, the field groups, the
    /// page size, and `filter` (a server-side filter) if given.
    fn url(&self, start: DateTime<Utc>, end: DateTime<Utc>, filter: Option<(&str, &str)>) -> Url {
        let mut url = self.endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.extend_pairs(observations_query(start, end, self.page_limit));
            if let Some((name, value)) = filter {
                q.append_pair(name, value);
            }
        }
        url
    }

    /// Reads every generation that started in `[start, end)`, handing each
    /// row to `sink`.
    async fn read<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        filter: Option<(&str, &str)>,
        mut sink: F,
    ) -> Result<ReadStats, SourceError>
    where
        F: FnMut(CallRow) -> Result<(), SourceError> + Send,
    {
        let first = self.url(start, end, filter);
        let mut stats = ReadStats::default();
        let mut cursor: Option<String> = None;
        let mut cursors = CursorsSeen::default();
        let mut order = Order::default();
        loop {
            if stats.pages >= self.max_pages {
                return Err(SourceError::Invalid(format!(
                    "observations: the listing goes on past {} pages (source.max_pages)",
                    self.max_pages
                )));
            }
            let mut url = first.clone();
            if let Some(c) = &cursor {
                url.query_pairs_mut().append_pair("cursor", c);
            }
            let what = format!("observations page {}", stats.pages + 1);
            // Parsed and checked where the body was read, borrowing its
            // text; the order so far is followed on a copy, kept once the
            // whole page passed.
            let parse = |body: &[u8]| {
                let page: Page<'_> = crate::decode::json(body)?;
                let listed = page.data.as_ref().map_or(0, Vec::len) as u64;
                let mut followed = order.clone();
                let (rows, next) = self.check(page, &mut followed, start, end)?;
                Ok((rows, next, followed, listed))
            };
            let (rows, next, followed, listed) =
                self.fetch.get_parsed(url, &what, &mut stats, parse).await?;
            order = followed;
            stats.pages += 1;
            stats.rows += listed;
            for row in rows {
                sink(row)?;
            }
            match next {
                Some(next) if !next.is_empty() => {
                    if let Some(first) = cursors.insert(&next, stats.pages) {
                        return Err(SourceError::Invalid(format!(
                            "observations: page {} leads back to the cursor page {first} gave; \
                             the cursors cycle and the listing would never end",
                            stats.pages
                        )));
                    }
                    cursor = Some(next);
                }
                _ => return Ok(stats),
            }
        }
    }

    /// The id of the project the keys belong to, for links to its pages
    /// (`GET /api/public/projects`, which answers the keys' own project).
    pub async fn project_id(&self) -> Result<String, SourceError> {
        #[derive(serde::Deserialize)]
        struct Projects {
            data: Vec<Project>,
        }
        #[derive(serde::Deserialize)]
        struct Project {
            id: String,
        }
        let mut stats = ReadStats::default();
        let answer: Projects = self
            .fetch
            .get_json(self.projects_endpoint.clone(), "projects", &mut stats)
            .await?;
        answer
            .data
            .into_iter()
            .map(|p| p.id)
            .find(|id| !id.is_empty())
            .ok_or_else(|| SourceError::Invalid("projects: data: no project for these keys".into()))
    }

    /// Every page of the project's model definitions. A definition
    /// costwatch cannot use is left out with a warning.
    pub async fn definitions(&self) -> Result<Definitions, SourceError> {
        let mut stats = ReadStats::default();
        let mut read = models::Read::default();
        let mut page = 1u64;
        loop {
            let mut url = self.models_endpoint.clone();
            url.query_pairs_mut()
                .append_pair("page", &page.to_string())
                .append_pair("limit", &models::PAGE_LIMIT.to_string());
            let what = format!("models page {page}");
            let answer: models::Page = self.fetch.get_json(url, &what, &mut stats).await?;
            let invalid = |e: String| SourceError::Invalid(format!("{what}: {e}"));
            const SHAPE: &str = "not a page of Langfuse's model definitions (has the API changed?)";
            let data = answer
                .data
                .ok_or_else(|| invalid(format!("data: missing; {SHAPE}")))?;
            let meta = answer
                .meta
                .ok_or_else(|| invalid(format!("meta: missing; {SHAPE}")))?;
            let full = data.len() >= models::PAGE_LIMIT as usize;
            models::map_page(data, &mut read).map_err(invalid)?;
            let last = meta.total_pages.map_or(!full, |n| page >= n);
            if last {
                break;
            }
            if page >= self.max_pages {
                return Err(SourceError::Invalid(format!(
                    "models: the listing goes on past {} pages (source.max_pages)",
                    self.max_pages
                )));
            }
            page += 1;
        }
        for warning in &read.left_out {
            tracing::warn!(
                definition = %warning,
                "a Langfuse model definition is left out of costwatch's prices"
            );
        }
        Ok(models::definitions(read))
    }

    /// Checks a whole page and maps its rows in `[start, end)`; the next
    /// cursor, if any. A row that fails fails the page before any of it is
    /// handed on.
    fn check(
        &self,
        page: Page<'_>,
        order: &mut Order,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<(Vec<CallRow>, Option<String>), String> {
        const SHAPE: &str = "not a page of Langfuse's v2 observations (has the API changed?)";
        let data = page.data.ok_or_else(|| format!("data: missing; {SHAPE}"))?;
        let meta = page.meta.ok_or_else(|| format!("meta: missing; {SHAPE}"))?;
        if data.len() > self.page_limit as usize {
            return Err(format!(
                "data: {} rows, more than the {} asked for",
                data.len(),
                self.page_limit
            ));
        }
        let mut rows = Vec::with_capacity(data.len());
        for (i, obs) in data.iter().enumerate() {
            let at = |e: String| format!("data[{i}].{e}");
            let started = Mapper::start_time(obs).map_err(at)?;
            order
                .follow(started, Mapper::id(obs).map_err(at)?)
                .map_err(at)?;
            let row = self.mapper.map(obs).map_err(at)?;
            if start <= started && started < end {
                rows.push(row);
            }
        }
        Ok((rows, meta.cursor.map(|c| c.0.into_owned())))
    }
}

impl RowReader for LangfuseReader {
    fn name(&self) -> &'static str {
        "Langfuse"
    }

    /// Each model the definitions name, at its newest definition's
    /// default tier.
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        Ok(self.definitions().await?.listed())
    }

    /// The definitions, which price a call by pattern, start date and tier.
    async fn published(&self) -> Result<Published, SourceError> {
        Ok(Published::Rules(Arc::new(self.definitions().await?)))
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

    async fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<CallRow>, SourceError> {
        let filter = match self.mapper.session_key() {
            SessionKey::Session => Some(("sessionId", session_id)),
            SessionKey::User => Some(("userId", session_id)),
            SessionKey::Trace => Some(("traceId", session_id)),
            SessionKey::Metadata(_) | SessionKey::Tag(_) => None,
        };
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

/// `Basic base64(public:secret)`, marked sensitive.
pub fn basic_auth(public_key: &str, secret_key: &Secret) -> Result<HeaderValue, SourceError> {
    let public_key = public_key.trim();
    if public_key.is_empty() {
        return Err(SourceError::Rejected(
            "the Langfuse public key is not set: put it in source.public_key or \
             COSTWATCH_SOURCE__PUBLIC_KEY"
                .into(),
        ));
    }
    if public_key.contains(':') || public_key.chars().any(char::is_control) {
        return Err(SourceError::Rejected(
            "source.public_key: a Langfuse public key has no `:` and no control characters".into(),
        ));
    }
    if secret_key.is_empty() {
        return Err(SourceError::Rejected(
            "the Langfuse secret key is not set: put it in COSTWATCH_ADMIN_KEY or the file \
             named by source.admin_key_file"
                .into(),
        ));
    }
    let token = STANDARD.encode(format!("{public_key}:{}", secret_key.expose()));
    let mut value = HeaderValue::from_str(&format!("Basic {token}"))
        .map_err(|_| SourceError::Rejected("the Langfuse keys are not a valid header".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// What a refused read means, in Langfuse's terms (the page fetcher's
/// [`Refusal`](super::fetch::Refusal)): refused keys and a wrong URL name
/// the settings to fix; a query Langfuse gave up on (422) is worth another
/// try later.
fn refusal(status: u16, message: String) -> SourceError {
    match status {
        401 | 403 => {
            SourceError::Rejected(format!("{message}; Langfuse refused the keys: {KEYS_HINT}"))
        }
        404 => SourceError::Rejected(format!(
            "{message}; source.api_url must be the Langfuse host's base URL (e.g. \
             https://cloud.langfuse.com, without /api/public), and the server must serve the \
             v2 observations API (Langfuse Cloud, or self-hosted Langfuse v4)"
        )),
        422 => SourceError::Transient(format!(
            "{message}; Langfuse ran out of time or memory for the query: a smaller \
             source.page_limit or shorter windows ask less of it"
        )),
        _ => SourceError::Rejected(message),
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}
