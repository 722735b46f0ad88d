//! The reference gateway's REST API (`/sessions`, `/requests`, `/models`).
//!
//! Pages are streamed one at a time into the caller's sink; a window is only
//! reported read when its last page arrived whole. 429 and 5xx answers,
//! network failures and damaged bodies (cut off, or not JSON at all, as when
//! a proxy cuts an answer or puts its own error page in) are retried with
//! exponential backoff (honouring `Retry-After`) under the page's retry
//! budget. A page still damaged after it, or one that is whole JSON but
//! breaks the contract (a row without a required field), fails the read so
//! the window is tried again later, never taken as empty.
//!
//! A listing ends only on a page without `next_cursor`. One that hands out
//! a cursor it already gave (a cycle such as A, B, A, B, which would be
//! read forever, or any other repeat, which would hand rows over twice) or
//! that runs past `max_pages` pages fails the read.

mod check;
mod wire;

use self::check::{Pages, Row, drill_down};
use self::wire::{Page, WireRequest, WireSession};
use super::fetch::{CursorsSeen, PageFetcher};
use super::{
    HttpLimits, Labels, ModelPrice, ReadStats, RequestRecord, SessionRecord, Source, SourceError,
    Window,
};
use crate::clock::Sleeper;
use crate::secret::Secret;
use chrono::SecondsFormat;
use std::sync::Arc;
use url::Url;

/// The reference gateway, as the registry knows it: pages of 50 at most.
pub const KIND: super::KindFacts = super::KindFacts {
    name: "reference",
    reads: "the reference gateway API",
    default_page_limit: 50,
    max_page_limit: 50,
    label_fields: &[],
    session_page: Some("sessions/{session_id}"),
    ui_on_api_host: false,
};

/// Most pages read in one listing when `source.max_pages` is not set: five
/// million rows in pages of 50, well above the largest window measured
/// (a million sessions, 20,000 pages).
pub const DEFAULT_MAX_PAGES: u64 = 100_000;

/// Client for one gateway.
#[derive(Clone)]
pub struct ReferenceSource {
    fetch: PageFetcher,
    base: Url,
    page_limit: u32,
    max_pages: u64,
    labels: Labels,
}

impl std::fmt::Debug for ReferenceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReferenceSource")
            .field("base", &self.base.as_str())
            .field("page_limit", &self.page_limit)
            .field("max_pages", &self.max_pages)
            .finish_non_exhaustive()
    }
}

impl ReferenceSource {
    /// Builds a client for the API rooted at `base` (e.g. `https://gw/v1`),
    /// reading at most [`DEFAULT_MAX_PAGES`] pages per listing.
    pub fn new(
        base: Url,
        admin_key: &Secret,
        page_limit: u32,
        labels: Labels,
        limits: HttpLimits,
    ) -> Result<Self, SourceError> {
        let auth = crate::http::bearer(admin_key)
            .ok_or_else(|| SourceError::Rejected("admin key is not a valid header value".into()))?;
        Ok(ReferenceSource {
            fetch: PageFetcher::new(auth, &limits)?,
            base: crate::http::as_directory(base),
            page_limit: page_limit.clamp(1, 50),
            max_pages: DEFAULT_MAX_PAGES,
            labels,
        })
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.fetch = self.fetch.with_sleeper(sleeper);
        self
    }

    /// Caps the pages read in one listing (at least 1): a listing that goes
    /// on longer fails the read.
    pub fn with_max_pages(mut self, max_pages: u64) -> Self {
        self.max_pages = max_pages.max(1);
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

    /// Walks a cursor-paginated listing, handing every row to `each`. Fails
    /// on a cursor the listing already handed out and past `max_pages`
    /// pages.
    async fn paginate<T, F>(
        &self,
        path: &str,
        base_query: Vec<(String, String)>,
        mut each: F,
    ) -> Result<ReadStats, SourceError>
    where
        T: Row,
        F: FnMut(T) -> Result<(), SourceError>,
    {
        let mut stats = ReadStats::default();
        let mut cursor: Option<String> = None;
        let mut cursors = CursorsSeen::default();
        // Joined once; each page only adds its query.
        let endpoint = self.endpoint(path)?;
        let mut pages = Pages::new(self.page_limit);
        loop {
            if stats.pages >= self.max_pages {
                return Err(SourceError::Invalid(format!(
                    "{path}: the listing goes on past {} pages (source.max_pages)",
                    self.max_pages
                )));
            }
            let mut query = base_query.clone();
            query.push(("limit".into(), self.page_limit.to_string()));
            if let Some(c) = &cursor {
                query.push(("cursor".into(), c.clone()));
            }
            let url = with_query(endpoint.clone(), &query);
            let what = format!("{path} page {}", stats.pages + 1);
            let page: Page<T> = self
                .fetch
                .get_parsed(url, &what, &mut stats, |body| {
                    crate::decode::json::<Page<T>>(body)
                })
                .await?;
            pages
                .check(&page.data)
                .map_err(|e| SourceError::Invalid(format!("{what}: {e}")))?;
            stats.pages += 1;
            stats.rows += page.data.len() as u64;
            for row in page.data {
                each(row)?;
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => {
                    if let Some(first) = cursors.insert(&next, stats.pages) {
                        return Err(SourceError::Invalid(format!(
                            "{path}: page {} leads back to the cursor page {first} gave; \
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
}

/// `url` with `query` appended.
fn with_query(mut url: Url, query: &[(String, String)]) -> Url {
    url.query_pairs_mut().extend_pairs(query.iter());
    url
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Source for ReferenceSource {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        let mut stats = ReadStats::default();
        let url = self.url("models", &[])?;
        self.fetch
            .get_parsed(url, "models", &mut stats, crate::pricing::list::parse)
            .await
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
        drill_down(session_id, &out).map_err(|e| SourceError::Invalid(format!("requests: {e}")))?;
        out.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then(a.request_id.cmp(&b.request_id))
        });
        Ok(out)
    }
}
