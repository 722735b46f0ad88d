//! The floor of the page path: every page of a window fetched with the HTTP
//! client costwatch reads the gateway with (`costwatch::http::HttpClient`:
//! reqwest, its settings, its capped body reader), one after the other on
//! one thread as `costwatch backtest` reads them, and nothing parsed. Its
//! CPU is what a reader of this API pays before it looks at one session;
//! `perf` runs it as its own process (`costwatch-bench fetch-pages`).

use super::rfc;
use crate::BenchError;
use chrono::{DateTime, Utc};
use costwatch::http::{ClientSettings, HttpClient, Target, as_directory, bearer};
use costwatch::secret::Secret;
use std::time::Duration;
use url::Url;

/// The largest page the gateway serves (gateway-api.md, `limit`).
pub const PAGE_LIMIT: usize = 50;

/// What was fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    /// Pages read.
    pub pages: u64,
    /// Bytes of their bodies.
    pub bytes: u64,
}

/// The pages a listing of `sessions` sessions takes (at least one, the
/// empty page of an empty window).
pub fn pages_for(sessions: usize) -> u64 {
    sessions.div_ceil(PAGE_LIMIT).max(1) as u64
}

/// Reads every page of `GET {api_url}/sessions` over `[from, to)`.
pub async fn fetch_pages(
    api_url: &str,
    key: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Fetched, BenchError> {
    let http = HttpClient::new(ClientSettings::with_timeouts(
        Duration::from_secs(60),
        Duration::from_secs(10),
    ))
    .map_err(|e| BenchError::setup("HTTP client", e))?;
    let base = Url::parse(api_url).map_err(|e| BenchError::setup("api url", e))?;
    let endpoint = as_directory(base)
        .join("sessions")
        .map_err(|e| BenchError::setup("api url", e))?;
    let auth = bearer(&Secret::new(key))
        .ok_or_else(|| BenchError::Setup("the admin key cannot be a header".into()))?;
    let target = Target::path("GET", &endpoint);
    let (start, end) = (rfc(from), rfc(to));
    let limit = PAGE_LIMIT.to_string();
    let mut fetched = Fetched { pages: 0, bytes: 0 };
    let mut cursor: Option<String> = None;
    loop {
        let mut url = endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("start", &start)
                .append_pair("end", &end)
                .append_pair("limit", &limit);
            if let Some(c) = &cursor {
                q.append_pair("cursor", c);
            }
        }
        let request = http
            .reqwest()
            .get(url)
            .header("authorization", auth.clone());
        let body = http
            .fetch(request, &target, 64 << 20)
            .await
            .map_err(|e| BenchError::setup("page", e))?;
        fetched.pages += 1;
        fetched.bytes += body.len() as u64;
        cursor = next_cursor(&body)?;
        if cursor.is_none() {
            return Ok(fetched);
        }
    }
}

/// The page's `next_cursor` (`None` on the last page), found from its end,
/// where the gateway writes it, without parsing the page. A page with no
/// `next_cursor` at all is an error, not a last page.
pub fn next_cursor(body: &[u8]) -> Result<Option<String>, BenchError> {
    const KEY: &[u8] = b"\"next_cursor\"";
    let at = body
        .windows(KEY.len())
        .rposition(|w| w == KEY)
        .ok_or_else(|| BenchError::Setup("a page without next_cursor".into()))?;
    let rest = &body[at + KEY.len()..];
    let value_at = rest
        .iter()
        .position(|b| !(b.is_ascii_whitespace() || *b == b':'))
        .unwrap_or(rest.len());
    let rest = &rest[value_at..];
    if rest.starts_with(b"null") {
        return Ok(None);
    }
    let value = rest
        .strip_prefix(b"\"")
        .and_then(|r| r.iter().position(|b| *b == b'"').map(|end| &r[..end]))
        .ok_or_else(|| BenchError::Setup("a next_cursor that is not a string".into()))?;
    Ok(Some(String::from_utf8_lossy(value).into_owned()))
}
