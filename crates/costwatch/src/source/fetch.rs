//! Reading one JSON page from a gateway, the part every source shares.
//!
//! 429 and 5xx answers, network failures and damaged bodies (cut off, or not
//! JSON at all, as when a proxy cuts an answer or puts its own error page
//! in) are retried with exponential backoff (honouring `Retry-After`) under
//! the page's retry budget. A page still damaged after it, or one that is
//! whole JSON but breaks the contract, is [`SourceError::Invalid`]: the
//! window is tried again later, never taken as empty. Messages show the
//! URL's path only, never its query (which may carry label values) and
//! never the credentials.

use super::{HttpLimits, ReadStats, SourceError};
use crate::clock::{Sleeper, TokioSleeper};
use crate::http::{Attempt, ClientSettings, GaveUp, HttpClient, HttpError, RetryPolicy, Target};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;
use url::Url;

/// What a refusal (an error status that is not worth retrying) means in
/// one system's terms: the status and the fetcher's description of the
/// answer, turned into the error the window gets (the settings to fix, or
/// a different verdict such as "try later").
pub type Refusal = fn(status: u16, message: String) -> SourceError;

/// GETs JSON pages with one credential, retrying what is worth retrying.
#[derive(Clone)]
pub struct PageFetcher {
    http: HttpClient,
    auth: HeaderValue,
    max_body_bytes: usize,
    retry: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
    refusal: Option<Refusal>,
}

impl fmt::Debug for PageFetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageFetcher")
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl PageFetcher {
    /// A fetcher sending `auth` as the `Authorization` header (marked
    /// sensitive by the caller) under `limits`.
    pub fn new(auth: HeaderValue, limits: &HttpLimits) -> Result<PageFetcher, SourceError> {
        let http = HttpClient::new(ClientSettings::with_timeouts(
            limits.timeout,
            limits.connect_timeout,
        ))
        .map_err(|e| SourceError::Rejected(e.to_string()))?;
        Ok(PageFetcher {
            http,
            auth,
            max_body_bytes: limits.max_body_bytes,
            // 429, 5xx, network failures, cut-off and damaged bodies: a
            // read is harmless to repeat.
            retry: RetryPolicy::exponential(
                limits.max_retries,
                limits.retry_base,
                limits.retry_max,
            ),
            sleeper: Arc::new(TokioSleeper),
            refusal: None,
        })
    }

    /// Explains refusals with `refusal` instead of passing them on as
    /// [`SourceError::Rejected`] with the answer's description only.
    pub fn with_refusal(mut self, refusal: Refusal) -> Self {
        self.refusal = Some(refusal);
        self
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// GETs `url` and parses its body as `T`, with retries: 429, 5xx and
    /// network failures, and bodies that are not JSON at all (cut off, or
    /// an error page a proxy put in), are tried again under the retry
    /// policy. `what` names the page in errors (`sessions page 2`).
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        url: Url,
        what: &str,
        stats: &mut ReadStats,
    ) -> Result<T, SourceError> {
        self.get_parsed(url, what, stats, |body| crate::decode::json::<T>(body))
            .await
    }

    /// [`PageFetcher::get_json`] with the body parsed by `parse`, which
    /// names the failing field in its error as `decode::json` does. `parse`
    /// sees the body once, where it was read: what it makes (the page's
    /// rows, checked) may borrow from it while it runs, and its error is
    /// the page's (tried again when the body is not JSON at all).
    pub async fn get_parsed<T>(
        &self,
        url: Url,
        what: &str,
        stats: &mut ReadStats,
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, SourceError> {
        let target = Target::path("GET", &url);
        let call = target.to_string();
        let attempt = || async {
            let request = self
                .http
                .reqwest()
                .get(url.clone())
                .header(AUTHORIZATION, self.auth.clone());
            let body = self
                .http
                .fetch(request, &target, self.max_body_bytes)
                .await
                .map_err(|e| match self.retry.attempt(e) {
                    Attempt::Retry { error, retry_after } => Attempt::Retry {
                        error: ReadFailure::Http(error),
                        retry_after,
                    },
                    Attempt::Stop(error) => Attempt::Stop(ReadFailure::Http(error)),
                })?;
            parse(&body).map_err(|message| {
                if damaged(&body) {
                    Attempt::Retry {
                        error: ReadFailure::Damaged { message },
                        retry_after: None,
                    }
                } else {
                    Attempt::Stop(ReadFailure::Invalid { message })
                }
            })
        };
        let done = self
            .retry
            .run(self.sleeper.as_ref(), &call, attempt)
            .await
            .map_err(|gave_up| self.read_error(what, gave_up))?;
        stats.retries += u64::from(done.retries);
        Ok(done.value)
    }

    /// What a read that gave up means for the window.
    fn read_error(&self, what: &str, gave_up: GaveUp<ReadFailure>) -> SourceError {
        match gave_up.error {
            ReadFailure::Http(e) => self.source_error(e),
            ReadFailure::Damaged { message } if gave_up.attempts > 1 => SourceError::Invalid(
                format!("{what}: {message} (read {} times)", gave_up.attempts),
            ),
            ReadFailure::Damaged { message } | ReadFailure::Invalid { message } => {
                SourceError::Invalid(format!("{what}: {message}"))
            }
        }
    }

    /// What a failed call means for the window.
    fn source_error(&self, error: HttpError) -> SourceError {
        match error {
            HttpError::TooLarge { .. } => SourceError::Invalid(error.to_string()),
            e if self.retry.is_transient(&e) => SourceError::Transient(e.to_string()),
            e => {
                let message = e.to_string();
                match (&e, self.refusal) {
                    (HttpError::Status { status, .. }, Some(explain)) => explain(*status, message),
                    _ => SourceError::Rejected(message),
                }
            }
        }
    }
}

/// Why one attempt at reading a page failed.
#[derive(Debug)]
enum ReadFailure {
    /// The exchange failed.
    Http(HttpError),
    /// The body is not JSON at all: cut off, or some other document.
    Damaged {
        /// What the parser said.
        message: String,
    },
    /// The body is JSON that breaks the contract.
    Invalid {
        /// Which field, and what is wrong with it.
        message: String,
    },
}

impl fmt::Display for ReadFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadFailure::Http(e) => e.fmt(f),
            ReadFailure::Damaged { message } => write!(f, "damaged body: {message}"),
            ReadFailure::Invalid { message } => write!(f, "invalid body: {message}"),
        }
    }
}

/// Whether `body` is not a JSON document at all (cut off, an HTML error
/// page), as opposed to JSON that breaks the contract. A damaged body may
/// read whole next time; a contract violation will not.
fn damaged(body: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err()
}

/// The cursors one listing handed out, with the page that gave each.
///
/// Kept as 64-bit fingerprints under a key drawn for this listing, so even
/// a listing at the page cap costs a few megabytes at most. Two different cursors that
/// share a fingerprint would fail the read as a cycle; with a fresh key per
/// listing that is vanishingly rare and does not repeat when the window is
/// read again.
#[derive(Default)]
pub struct CursorsSeen {
    key: RandomState,
    pages: HashMap<u64, u64>,
}

impl CursorsSeen {
    /// Records that page `page` gave `cursor`; returns the page that gave it
    /// before, if one did.
    pub fn insert(&mut self, cursor: &str, page: u64) -> Option<u64> {
        let fingerprint = self.key.hash_one(cursor);
        match self.pages.get(&fingerprint) {
            Some(first) => Some(*first),
            None => {
                self.pages.insert(fingerprint, page);
                None
            }
        }
    }
}
