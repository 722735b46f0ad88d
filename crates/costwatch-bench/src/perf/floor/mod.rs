//! The floor of the page path: every page a reader of the gateway's API
//! requests, fetched with the HTTP client costwatch reads it with
//! (`costwatch::http::HttpClient`: reqwest, its settings, its capped body
//! reader), one after the other on one thread as `costwatch backtest`
//! reads them, and nothing parsed but the paging fields ([`paging`]). Its
//! CPU is what a reader of this API pays before it looks at one call;
//! `perf` and the sources' comparisons run it as its own process
//! (`costwatch-bench fetch-pages`).
//!
//! The reference gateway's sessions are listed here; LiteLLM's spend logs
//! and Langfuse's observations in [`crate::sources::litellm`] and
//! [`crate::sources::langfuse`], each as its costwatch source requests
//! them.

pub mod paging;

use super::rfc;
use crate::BenchError;
use crate::measure::{self, TimeReport};
use chrono::{DateTime, Utc};
use costwatch::http::{ClientSettings, HttpClient, Target, as_directory, bearer};
use costwatch::secret::Secret;
use costwatch::source::HttpLimits;
use costwatch::source::rows::Rows;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use std::path::Path;
use std::time::Duration;
use url::Url;

/// The largest page the gateway serves (gateway-api.md, `limit`).
pub const PAGE_LIMIT: usize = 50;

/// A window: `[start, end)`.
pub type Range = (DateTime<Utc>, DateTime<Utc>);

/// What was fetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fetched {
    /// Pages read, every request counted.
    pub pages: u64,
    /// Bytes of their bodies.
    pub bytes: u64,
    /// Calls the listings' pages held in their windows, when the listing
    /// counts them: each once (pages read again, and rows listed past a
    /// window's end, are left out); the first window's lookback counts.
    pub rows: Option<u64>,
}

impl Fetched {
    /// Counts one page read.
    pub fn page(&mut self, body: &[u8]) {
        self.pages += 1;
        self.bytes += body.len() as u64;
    }

    /// Counts `n` calls listed.
    pub fn listed(&mut self, n: u64) {
        self.rows = Some(self.rows.unwrap_or(0) + n);
    }

    /// The line `fetch-pages` prints: `pages=3 bytes=1200 rows=140`.
    pub fn line(&self) -> String {
        let rows = self.rows.map_or(String::new(), |r| format!(" rows={r}"));
        format!("pages={} bytes={}{rows}", self.pages, self.bytes)
    }

    /// [`Fetched::line`] read back.
    pub fn parse(text: &str) -> Option<Fetched> {
        let field = |key: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .map(str::parse::<u64>)
        };
        Some(Fetched {
            pages: field("pages")?.ok()?,
            bytes: field("bytes")?.ok()?,
            rows: field("rows").transpose().ok()?,
        })
    }
}

/// GETs pages with costwatch's HTTP client and one credential.
pub struct PageClient {
    http: HttpClient,
    auth: HeaderValue,
    max_body_bytes: usize,
}

impl PageClient {
    /// A client sending `auth` as the `Authorization` header, with the
    /// timeouts and body cap of `limits`.
    pub fn new(auth: HeaderValue, limits: &HttpLimits) -> Result<PageClient, BenchError> {
        let http = HttpClient::new(ClientSettings::with_timeouts(
            limits.timeout,
            limits.connect_timeout,
        ))
        .map_err(|e| BenchError::setup("HTTP client", e))?;
        Ok(PageClient {
            http,
            auth,
            max_body_bytes: limits.max_body_bytes,
        })
    }

    /// The body of `GET url`, read whole under the cap.
    pub async fn get(&self, url: Url) -> Result<Vec<u8>, BenchError> {
        let target = Target::path("GET", &url);
        let request = self
            .http
            .reqwest()
            .get(url)
            .header(AUTHORIZATION, self.auth.clone());
        self.http
            .fetch(request, &target, self.max_body_bytes)
            .await
            .map_err(|e| BenchError::setup("page", e))
    }
}

/// `path` below the base URL `base`.
pub fn endpoint(base: &str, path: &str) -> Result<Url, BenchError> {
    let base = Url::parse(base).map_err(|e| BenchError::setup("api url", e))?;
    as_directory(base)
        .join(path)
        .map_err(|e| BenchError::setup("api url", e))
}

/// The windows `costwatch backtest` steps through over `[from, to)`: whole
/// windows of `size` from `from` on, or the range as one window.
pub fn windows(from: DateTime<Utc>, to: DateTime<Utc>, size: Option<Duration>) -> Vec<Range> {
    let Some(step) = size.and_then(|s| chrono::Duration::from_std(s).ok()) else {
        return vec![(from, to)];
    };
    if step <= chrono::Duration::zero() {
        return vec![(from, to)];
    }
    let mut out = Vec::new();
    let mut start = from;
    while start + step <= to {
        out.push((start, start + step));
        start += step;
    }
    out
}

/// Where a row source reads window `i` (starting at `start`) from: the
/// first with the default session lookback before it, each later one from
/// its start, the sessions still open carried over from the window before
/// (`costwatch::source::rows::RowSource`).
pub fn read_from(i: usize, start: DateTime<Utc>) -> DateTime<Utc> {
    if i > 0 {
        return start;
    }
    chrono::Duration::from_std(Rows::default().session_lookback)
        .ok()
        .and_then(|lookback| start.checked_sub_signed(lookback))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The pages a listing of `sessions` sessions takes (at least one, the
/// empty page of an empty window).
pub fn pages_for(sessions: usize) -> u64 {
    sessions.div_ceil(PAGE_LIMIT).max(1) as u64
}

/// Reads every page of `GET {api_url}/sessions` over each window.
pub async fn fetch_pages(
    api_url: &str,
    key: &str,
    windows: &[Range],
) -> Result<Fetched, BenchError> {
    let auth = bearer(&Secret::new(key))
        .ok_or_else(|| BenchError::Setup("the admin key cannot be a header".into()))?;
    let limits = HttpLimits {
        timeout: Duration::from_secs(60),
        connect_timeout: Duration::from_secs(10),
        max_body_bytes: 64 << 20,
        ..HttpLimits::default()
    };
    let client = PageClient::new(auth, &limits)?;
    let sessions = endpoint(api_url, "sessions")?;
    let limit = PAGE_LIMIT.to_string();
    let mut fetched = Fetched::default();
    for &(from, to) in windows {
        let (start, end) = (rfc(from), rfc(to));
        let mut cursor: Option<String> = None;
        loop {
            let mut url = sessions.clone();
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("start", &start)
                    .append_pair("end", &end)
                    .append_pair("limit", &limit);
                if let Some(c) = &cursor {
                    q.append_pair("cursor", c);
                }
            }
            let body = client.get(url).await?;
            fetched.page(&body);
            cursor = next_cursor(&body)?;
            if cursor.is_none() {
                break;
            }
        }
    }
    Ok(fetched)
}

/// The page's `next_cursor` (`None` on the last page), found from its end,
/// where the gateway writes it, without parsing the page. A page with no
/// `next_cursor` at all is an error, not a last page.
pub fn next_cursor(body: &[u8]) -> Result<Option<String>, BenchError> {
    let at = paging::last_key(body, "next_cursor")
        .ok_or_else(|| BenchError::Setup("a page without next_cursor".into()))?;
    Ok(paging::string_or_null(body, at, "next_cursor")?
        .map(|c| String::from_utf8_lossy(c).into_owned()))
}

/// Runs `costwatch-bench args` (a `fetch-pages`) `runs` times under
/// `/usr/bin/time -v`, its output kept in `dir`; `check` judges each
/// run's [`Fetched`] (that it read every page, or every call). Returns the
/// runs and what the first fetched.
pub fn timed_runs(
    bench: &Path,
    args: &[String],
    env: &[(&str, &str)],
    runs: usize,
    dir: &Path,
    progress: &mut impl FnMut(&str),
    check: impl Fn(&Fetched) -> Result<(), String>,
) -> Result<(Vec<TimeReport>, Fetched), BenchError> {
    let mut out = Vec::new();
    let mut first = Fetched::default();
    for i in 0..runs {
        let stdout = dir.join(format!("stdout-{i}"));
        let r = measure::timed(bench, args, env, &stdout, &dir.join(format!("stderr-{i}")))?;
        let text =
            std::fs::read_to_string(&stdout).map_err(|e| BenchError::setup("fetch-pages", e))?;
        let fetched = Fetched::parse(&text)
            .ok_or_else(|| BenchError::Setup(format!("fetch-pages printed `{}`", text.trim())))?;
        check(&fetched).map_err(|e| BenchError::Setup(format!("fetch-pages {e}")))?;
        progress(&format!("fetch-pages run {}: {}", i + 1, r.summary()));
        if i == 0 {
            first = fetched;
        }
        out.push(r);
    }
    Ok((out, first))
}
