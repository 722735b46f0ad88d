//! The Langfuse source beside `crates/costwatch-bench/langfuse.py`: the
//! simulator serves the scenario as a Langfuse project's generations
//! (`GET /api/public/v2/observations`, one per call), and the script reads
//! the same observations with the project's key pair, pages of 1,000
//! grouped by `sessionId` ([`super::compare`]).
//!
//! The floor of this path ([`fetch_pages`]) requests what costwatch's
//! Langfuse source requests, with its query and sign-in
//! (`costwatch::source::langfuse`'s `observations_query`, `basic_auth`):
//! every page of the model definitions once, then for each window the
//! generations with `meta.cursor` paging until a page has no cursor. A
//! page with a cursor counts as full; the last page's rows are counted.

use super::compare::ServedSource;
use crate::BenchError;
use crate::perf::floor::{Fetched, PageClient, Range, endpoint, paging, read_from};
use costwatch::secret::Secret;
use costwatch::source::langfuse::{self, MAX_PAGE_LIMIT};
use costwatch::source::{HttpLimits, SourceKind};
use costwatch_sim::langfuse::DEFAULT_PUBLIC_KEY;

/// Langfuse at the simulator's root, read with the project's public key
/// and the simulator's admin key as the secret key.
pub const LANGFUSE: ServedSource = ServedSource {
    name: "langfuse",
    title: "Langfuse",
    rows: "generations",
    config: |root| {
        format!("  kind: langfuse\n  api_url: {root}\n  public_key: {DEFAULT_PUBLIC_KEY}\n")
    },
    reader_args: |served| {
        vec![
            "--url".to_owned(),
            served.root_url().to_owned(),
            "--public-key".to_owned(),
            DEFAULT_PUBLIC_KEY.to_owned(),
        ]
    },
    script_key_env: "LANGFUSE_SECRET_KEY",
};

/// Reads every page costwatch's Langfuse source requests over `windows`
/// from Langfuse at `root`, signing in with the project's key pair.
pub async fn fetch_pages(
    root: &str,
    public_key: &str,
    secret_key: &str,
    windows: &[Range],
) -> Result<Fetched, BenchError> {
    let auth = langfuse::basic_auth(public_key, &Secret::new(secret_key))
        .map_err(|e| BenchError::setup("the Langfuse keys", e))?;
    let client = PageClient::new(auth, &HttpLimits::default())?;
    let mut fetched = Fetched::default();
    // The model definitions, every page, read once per process.
    let models = endpoint(root, langfuse::MODELS_PATH)?;
    for page in 1u64.. {
        let mut url = models.clone();
        url.query_pairs_mut()
            .append_pair("page", &page.to_string())
            .append_pair("limit", &langfuse::MODELS_PAGE_LIMIT.to_string());
        let body = client.get(url).await?;
        fetched.page(&body);
        if page >= total_pages(&body)? {
            break;
        }
    }
    let observations = endpoint(root, langfuse::PATH)?;
    let limit = SourceKind::Langfuse
        .default_page_limit()
        .clamp(1, MAX_PAGE_LIMIT);
    for (i, &(start, end)) in windows.iter().enumerate() {
        let mut first = observations.clone();
        first
            .query_pairs_mut()
            .extend_pairs(langfuse::observations_query(
                read_from(i, start),
                end,
                limit,
            ));
        let mut cursor: Option<String> = None;
        loop {
            let mut url = first.clone();
            if let Some(c) = &cursor {
                url.query_pairs_mut().append_pair("cursor", c);
            }
            let body = client.get(url).await?;
            fetched.page(&body);
            cursor = next_cursor(&body)?;
            // A page with a cursor is full (Langfuse fetched one row more
            // than the limit to know it is due); the last is counted.
            fetched.listed(match cursor {
                Some(_) => u64::from(limit),
                None => paging::count_keys(&body, "startTime"),
            });
            if cursor.is_none() {
                break;
            }
        }
    }
    Ok(fetched)
}

/// An observations page's `meta.cursor` (`None` on the last page: none, or
/// empty). Langfuse writes `meta` last, after `data`; a page that does not
/// end with a whole `meta` and the envelope's closing brace was cut off,
/// and is an error.
pub fn next_cursor(body: &[u8]) -> Result<Option<String>, BenchError> {
    let cut = || BenchError::Setup("an observations page without meta after its rows".into());
    let meta = paging::last_key(body, "meta").ok_or_else(cut)?;
    let end = paging::object_end(body, meta).ok_or_else(cut)?;
    if !paging::only_close_after(body, end) {
        return Err(cut());
    }
    let Some(at) = paging::first_key(&body[..end], "cursor", meta) else {
        return Ok(None);
    };
    Ok(paging::string_or_null(body, at, "meta.cursor")?
        .filter(|c| !c.is_empty())
        .map(|c| String::from_utf8_lossy(c).into_owned()))
}

/// A model definitions page's `meta.totalPages`.
pub fn total_pages(body: &[u8]) -> Result<u64, BenchError> {
    paging::last_key(body, "totalPages")
        .filter(|_| paging::closed(body))
        .and_then(|at| paging::number(body, at))
        .ok_or_else(|| BenchError::Setup("a models page without meta.totalPages".into()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const PAGE: &[u8] = br#"{"data":[{"id":"a","startTime":"2026-10-11T11:00:00.250Z","metadata":{"cursor":"no"}},{"id":"b","startTime":"2026-10-11T11:00:01.000Z"}],"meta":{"cursor":"eyJsYXN0In0="}}"#;

    #[test]
    fn an_observations_page_gives_its_cursor_and_a_cut_page_is_an_error() {
        assert_eq!(next_cursor(PAGE).unwrap().as_deref(), Some("eyJsYXN0In0="));
        assert_eq!(paging::count_keys(PAGE, "startTime"), 2);
        assert_eq!(next_cursor(br#"{"data":[],"meta":{}}"#).unwrap(), None);
        assert_eq!(
            next_cursor(br#"{"data":[], "meta": {"cursor": ""}}"#).unwrap(),
            None
        );
        // Cut after a row: no meta, so neither a cursor nor a last page.
        let cut = &PAGE[..PAGE.iter().position(|b| *b == b'}').unwrap() + 1];
        assert!(next_cursor(cut).is_err());
        assert!(next_cursor(&PAGE[..PAGE.len() - 1]).is_err());
        assert!(next_cursor(br#"{"data":[],"meta":{"cursor":7}}"#).is_err());
    }

    #[test]
    fn a_models_page_gives_its_total_pages() {
        let page = br#"{"data":[{"id":"m","modelName":"gpt-4o"}],"meta":{"page":1,"limit":100,"totalItems":1,"totalPages":3}}"#;
        assert_eq!(total_pages(page).unwrap(), 3);
        assert!(total_pages(&page[..page.len() - 2]).is_err());
        assert!(total_pages(br#"{"data":[],"meta":{}}"#).is_err());
    }
}
