//! The reference gateway's REST API (`/sessions`, `/requests`, `/models`).
//!
//! Pages are streamed one at a time into the caller's sink; a window is only
//! reported read when its last page arrived whole. 429 and 5xx answers and
//! network failures are retried with exponential backoff (honouring
//! `Retry-After`); a malformed, truncated or incomplete page fails the read
//! so the window is tried again later, never taken as empty.

use super::wire::{self, Page, WireRequest, WireSession};
use super::{
    HttpLimits, Labels, ModelPrice, ReadStats, RequestRecord, SessionRecord, Source, SourceError,
    Window,
};
use crate::clock::{Sleeper, TokioSleeper};
use crate::http::{ClientSettings, HttpClient, HttpError, RetryPolicy, Target};
use crate::secret::Secret;
use chrono::SecondsFormat;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use std::sync::Arc;
use url::Url;

/// Client for one gateway.
#[derive(Clone)]
pub struct GatewaySource {
    http: HttpClient,
    base: Url,
    auth: HeaderValue,
    page_limit: u32,
    labels: Labels,
    max_body_bytes: usize,
    retry: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
}

impl std::fmt::Debug for GatewaySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewaySource")
            .field("base", &self.base.as_str())
            .field("page_limit", &self.page_limit)
            .finish_non_exhaustive()
    }
}

impl GatewaySource {
    /// Builds a client for the API rooted at `base` (e.g. `https://gw/v1`).
    pub fn new(
        base: Url,
        admin_key: &Secret,
        page_limit: u32,
        labels: Labels,
        limits: HttpLimits,
    ) -> Result<Self, SourceError> {
        let http = HttpClient::new(ClientSettings::with_timeouts(
            limits.timeout,
            limits.connect_timeout,
        ))
        .map_err(|e| SourceError::Rejected(e.to_string()))?;
        let auth = crate::http::bearer(admin_key)
            .ok_or_else(|| SourceError::Rejected("admin key is not a valid header value".into()))?;
        Ok(GatewaySource {
            http,
            base: crate::http::as_directory(base),
            auth,
            page_limit: page_limit.clamp(1, 50),
            labels,
            max_body_bytes: limits.max_body_bytes,
            // 429, 5xx, network failures and cut-off bodies: a read is
            // harmless to repeat.
            retry: RetryPolicy::exponential(
                limits.max_retries,
                limits.retry_base,
                limits.retry_max,
            ),
            sleeper: Arc::new(TokioSleeper),
        })
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    fn url(&self, path: &str, query: &[(String, String)]) -> Result<Url, SourceError> {
        Ok(with_query(self.endpoint(path)?, query))
    }

    /// The URL of `path` without a query.
    fn endpoint(&self, path: &str) -> Result<Url, SourceError> {
        self.base
            .join(path)
            .map_err(|e| SourceError::Rejected(format!("bad url for {path}: {e}")))
    }

    fn label_query(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.labels
            .iter()
            .map(|(k, v)| (format!("metadata.{k}"), v.clone()))
    }

    /// GETs one URL with retries; returns the whole body.
    async fn get(&self, url: Url, stats: &mut ReadStats) -> Result<Vec<u8>, SourceError> {
        // The query may carry label values: messages show the path only.
        let target = Target::path("GET", &url);
        let request = || {
            self.http
                .reqwest()
                .get(url.clone())
                .header(AUTHORIZATION, self.auth.clone())
        };
        let done = self
            .http
            .fetch_with_retries(
                &self.retry,
                self.sleeper.as_ref(),
                &target,
                self.max_body_bytes,
                request,
            )
            .await
            .map_err(|gave_up| self.source_error(gave_up.error))?;
        stats.retries += u64::from(done.retries);
        Ok(done.value)
    }

    /// What a failed call means for the window.
    fn source_error(&self, error: HttpError) -> SourceError {
        match error {
            HttpError::TooLarge { .. } => SourceError::Invalid(error.to_string()),
            e if self.retry.is_transient(&e) => SourceError::Transient(e.to_string()),
            e => SourceError::Rejected(e.to_string()),
        }
    }

    /// Walks a cursor-paginated listing, handing every row to `each`.
    async fn paginate<T, F>(
        &self,
        path: &str,
        base_query: Vec<(String, String)>,
        mut each: F,
    ) -> Result<ReadStats, SourceError>
    where
        T: wire::Row,
        F: FnMut(T) -> Result<(), SourceError>,
    {
        let mut stats = ReadStats::default();
        let mut cursor: Option<String> = None;
        // Joined once; each page only adds its query.
        let endpoint = self.endpoint(path)?;
        let mut pages = wire::Pages::new(self.page_limit);
        loop {
            let mut query = base_query.clone();
            query.push(("limit".into(), self.page_limit.to_string()));
            if let Some(c) = &cursor {
                query.push(("cursor".into(), c.clone()));
            }
            let url = with_query(endpoint.clone(), &query);
            let body = self.get(url, &mut stats).await?;
            let page: Page<T> = pages.parse(&body).map_err(|e| {
                SourceError::Invalid(format!("{path} page {}: {e}", stats.pages + 1))
            })?;
            stats.pages += 1;
            stats.rows += page.data.len() as u64;
            for row in page.data {
                each(row)?;
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => {
                    if cursor.as_deref() == Some(next.as_str()) {
                        return Err(SourceError::Invalid(format!(
                            "{path}: the gateway returned the same cursor twice"
                        )));
                    }
                    cursor = Some(next);
                }
                _ => return Ok(stats),
            }
        }
    }
}

/// `url` with `query` appended.
fn with_query(mut url: Url, query: &[(String, String)]) -> Url {
    url.query_pairs_mut().extend_pairs(query.iter());
    url
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Source for GatewaySource {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        let mut stats = ReadStats::default();
        let url = self.url("models", &[])?;
        let body = self.get(url, &mut stats).await?;
        wire::models(&body).map_err(|e| SourceError::Invalid(format!("models: {e}")))
    }

    async fn sessions<F>(&self, window: Window, mut sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        let mut query = vec![
            ("start".to_owned(), rfc3339(window.start)),
            ("end".to_owned(), rfc3339(window.end)),
        ];
        query.extend(self.label_query());
        self.paginate::<WireSession, _>("sessions", query, |row| {
            sink(row.into_record(window.start));
            Ok(())
        })
        .await
    }

    async fn session_requests(&self, session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        let mut out = Vec::new();
        let query = vec![("session_id".to_owned(), session_id.to_owned())];
        self.paginate::<WireRequest, _>("requests", query, |row| {
            out.push(row.into_record());
            Ok(())
        })
        .await?;
        wire::drill_down(session_id, &out)
            .map_err(|e| SourceError::Invalid(format!("requests: {e}")))?;
        out.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then(a.request_id.cmp(&b.request_id))
        });
        Ok(out)
    }
}
