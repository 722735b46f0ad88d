//! The reference gateway's REST API (`/sessions`, `/requests`, `/models`).
//!
//! Pages are streamed one at a time into the caller's sink; a window is only
//! reported read when its last page arrived whole. 429 and 5xx answers and
//! network failures are retried with exponential backoff (honouring
//! `Retry-After`); a malformed, truncated or incomplete page fails the read
//! so the window is tried again later, never taken as empty.

use super::wire::{self, ModelList, Page, WireRequest, WireSession};
use super::{
    HttpLimits, Labels, ModelPrice, ReadStats, RequestRecord, SessionRecord, Source, SourceError,
    Window,
};
use crate::clock::{Sleeper, TokioSleeper};
use crate::secret::Secret;
use chrono::SecondsFormat;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Client for one gateway.
#[derive(Clone)]
pub struct GatewaySource {
    http: reqwest::Client,
    base: Url,
    auth: HeaderValue,
    page_limit: u32,
    labels: Labels,
    limits: HttpLimits,
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
        let http = reqwest::Client::builder()
            .timeout(limits.timeout)
            .connect_timeout(limits.connect_timeout)
            .user_agent(concat!("costwatch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SourceError::Rejected(format!("cannot build http client: {e}")))?;
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", admin_key.expose()))
            .map_err(|_| SourceError::Rejected("admin key is not a valid header value".into()))?;
        auth.set_sensitive(true);
        let mut base = base;
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        Ok(GatewaySource {
            http,
            base,
            auth,
            page_limit: page_limit.clamp(1, 50),
            labels,
            limits,
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
        let mut attempt: u32 = 0;
        loop {
            let outcome = self.get_once(&url).await;
            let (err, retry_after) = match outcome {
                Ok(body) => return Ok(body),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(e, after)) => (e, after),
            };
            if attempt >= self.limits.max_retries {
                return Err(err);
            }
            let backoff = self
                .limits
                .retry_base
                .saturating_mul(2u32.saturating_pow(attempt))
                .min(self.limits.retry_max);
            let wait = retry_after.map_or(backoff, |a| a.min(self.limits.retry_max));
            tracing::warn!(
                url = %redact_query(&url),
                attempt = attempt + 1,
                wait_ms = wait.as_millis() as u64,
                error = %err,
                "gateway call failed; retrying"
            );
            stats.retries += 1;
            attempt += 1;
            self.sleeper.sleep(wait).await;
        }
    }

    async fn get_once(&self, url: &Url) -> Result<Vec<u8>, Attempt> {
        let resp = self
            .http
            .get(url.clone())
            .header(AUTHORIZATION, self.auth.clone())
            .send()
            .await
            .map_err(|e| Attempt::Retry(SourceError::Transient(describe(&e)), None))?;
        let status = resp.status();
        if status.is_success() {
            return self.read_body(resp).await;
        }
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = self.read_body(resp).await.unwrap_or_default();
        let message = error_message(&body);
        let what = format!("{} {}: {message}", status.as_u16(), url.path());
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Err(Attempt::Retry(SourceError::Transient(what), retry_after))
        } else {
            Err(Attempt::Fatal(SourceError::Rejected(what)))
        }
    }

    /// Reads a body chunk by chunk, refusing anything over the size cap.
    async fn read_body(&self, mut resp: reqwest::Response) -> Result<Vec<u8>, Attempt> {
        let cap = self.limits.max_body_bytes;
        if resp.content_length().is_some_and(|n| n as usize > cap) {
            return Err(Attempt::Fatal(SourceError::Invalid(format!(
                "response body is larger than max_body_bytes ({cap})"
            ))));
        }
        // Sized once from Content-Length (within the cap) rather than grown
        // chunk by chunk.
        let expected = resp.content_length().map_or(0, |n| n as usize);
        let mut body = Vec::with_capacity(expected.min(cap));
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > cap {
                        return Err(Attempt::Fatal(SourceError::Invalid(format!(
                            "response body is larger than max_body_bytes ({cap})"
                        ))));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(e) => {
                    return Err(Attempt::Retry(
                        SourceError::Transient(format!("body cut off: {}", describe(&e))),
                        None,
                    ));
                }
            }
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
        T: for<'de> serde::Deserialize<'de>,
        F: FnMut(T) -> Result<(), SourceError>,
    {
        let mut stats = ReadStats::default();
        let mut cursor: Option<String> = None;
        // Joined once; each page only adds its query.
        let endpoint = self.endpoint(path)?;
        loop {
            let mut query = base_query.clone();
            query.push(("limit".into(), self.page_limit.to_string()));
            if let Some(c) = &cursor {
                query.push(("cursor".into(), c.clone()));
            }
            let url = with_query(endpoint.clone(), &query);
            let body = self.get(url, &mut stats).await?;
            let page: Page<T> = wire::parse(&body).map_err(|e| {
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

/// How one attempt ended.
enum Attempt {
    /// Try again, after the server's `Retry-After` if it gave one.
    Retry(SourceError, Option<Duration>),
    /// Stop.
    Fatal(SourceError),
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The gateway's `{"error": {"message": ...}}`, or a short prefix of the body.
fn error_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: Inner,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<Envelope>(body) {
        Ok(e) => format!("{} {}", e.error.code, e.error.message)
            .trim()
            .to_owned(),
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    }
}

/// A reqwest error without the URL (which may carry label values).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect error"
    } else if e.is_body() || e.is_decode() {
        "body error"
    } else {
        "request error"
    };
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = src {
        detail = s.to_string();
        src = s.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

fn redact_query(url: &Url) -> String {
    url.path().to_owned()
}

impl Source for GatewaySource {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        let mut stats = ReadStats::default();
        let url = self.url("models", &[])?;
        let body = self.get(url, &mut stats).await?;
        let list: ModelList =
            wire::parse(&body).map_err(|e| SourceError::Invalid(format!("models: {e}")))?;
        Ok(list.data.into_iter().map(|m| m.into_record()).collect())
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
            let rec = row
                .into_record(window.start)
                .map_err(SourceError::Invalid)?;
            sink(rec);
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
        out.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then(a.request_id.cmp(&b.request_id))
        });
        Ok(out)
    }
}
