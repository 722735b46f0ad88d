//! The LiteLLM source beside `crates/costwatch-bench/litellm.py`: the
//! simulator serves the scenario as a LiteLLM proxy's spend logs
//! (`GET /spend/logs/v2`), and the script reads the same pages of 1,000
//! rows with the master key, grouped by `session_id` ([`super::compare`]).
//!
//! The floor of this path ([`fetch_pages`]) requests what costwatch's
//! LiteLLM source requests, with its query (`costwatch::source::litellm`'s
//! `covering` and `page_query`): `GET /model/info` once, then for each window the
//! listing's pages over the whole seconds that cover it, until a page
//! holds fewer rows than the page size, and the second of a row sharing
//! its millisecond with the last row of the page before, read whole in
//! pages of 1,000. It counts the rows of each page (paging needs that),
//! less those listed past the window's end ([`past_end`]).

use super::compare::ServedSource;
use crate::BenchError;
use crate::perf::floor::{Fetched, PageClient, Range, endpoint, paging, read_from};
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use costwatch::http::bearer;
use costwatch::secret::Secret;
use costwatch::source::litellm::{self, covering};
use costwatch::source::{HttpLimits, SourceKind};
use url::Url;

/// The LiteLLM proxy at the simulator's root, read with its master key.
pub const LITELLM: ServedSource = ServedSource {
    name: "litellm",
    title: "LiteLLM",
    rows: "spend-log rows",
    config: |root| format!("  kind: litellm\n  api_url: {root}\n"),
    reader_args: |served| vec!["--url".to_owned(), served.root_url().to_owned()],
    script_key_env: "COSTWATCH_ADMIN_KEY",
};

/// LiteLLM's largest `page_size`: a second read whole is read in pages of
/// it.
const MAX_PAGE_SIZE: u64 = litellm::MAX_PAGE_SIZE as u64;

/// Reads every page costwatch's LiteLLM source requests over `windows`
/// from the proxy at `root`, with the master key `key`.
pub async fn fetch_pages(root: &str, key: &str, windows: &[Range]) -> Result<Fetched, BenchError> {
    let auth = bearer(&Secret::new(key))
        .ok_or_else(|| BenchError::Setup("the master key cannot be a header".into()))?;
    let client = PageClient::new(auth, &HttpLimits::default())?;
    let logs = endpoint(root, litellm::SPEND_LOGS)?;
    let mut fetched = Fetched::default();
    // The catalogue, read once per process.
    fetched.page(&client.get(endpoint(root, "model/info")?).await?);
    let page_size = u64::from(SourceKind::Litellm.default_page_limit()).clamp(1, MAX_PAGE_SIZE);
    for (i, &(start, end)) in windows.iter().enumerate() {
        let seconds = covering(read_from(i, start), end);
        // The latest startTime read, and the one whose second was read whole.
        let mut boundary: Option<String> = None;
        let mut repaired: Option<String> = None;
        for page in 1.. {
            let body = client
                .get(page_url(&logs, seconds, page, page_size))
                .await?;
            let rows = page_rows(&body)?;
            fetched.page(&body);
            fetched.listed(rows - past_end(&body, end)?);
            if let Some(b) = &boundary
                && repaired.as_ref() != Some(b)
                && start_time(&body, paging::first_key(&body, "startTime", 0))?.as_ref() == Some(b)
            {
                read_second(&client, &logs, b, &mut fetched).await?;
                repaired = Some(b.clone());
            }
            if let Some(last) = start_time(&body, paging::last_key(&body, "startTime"))? {
                boundary = Some(last);
            }
            if rows < page_size {
                break;
            }
        }
    }
    Ok(fetched)
}

/// Reads the second of the row time `t` whole, in pages of
/// [`MAX_PAGE_SIZE`]; its rows were listed already, so only the pages
/// count.
async fn read_second(
    client: &PageClient,
    logs: &Url,
    t: &str,
    fetched: &mut Fetched,
) -> Result<(), BenchError> {
    let at = DateTime::parse_from_rfc3339(t)
        .map_err(|e| BenchError::setup("startTime", e))?
        .with_timezone(&Utc)
        .trunc_subsecs(0);
    for page in 1.. {
        let body = client
            .get(page_url(
                logs,
                (at, at + TimeDelta::seconds(1)),
                page,
                MAX_PAGE_SIZE,
            ))
            .await?;
        fetched.page(&body);
        if page_rows(&body)? < MAX_PAGE_SIZE {
            break;
        }
    }
    Ok(())
}

/// The rows at the end of a page that start at or after `end`: LiteLLM
/// includes the whole second of `end_date`, and costwatch leaves them to
/// the next window. Rows come in `startTime` order, so they are the page's
/// last, found from its end; most pages end before `end`, one time read.
pub fn past_end(body: &[u8], end: DateTime<Utc>) -> Result<u64, BenchError> {
    let mut n = 0;
    for at in paging::keys_from_end(body, "startTime") {
        let Some(t) = start_time(body, Some(at))? else {
            break;
        };
        let t = DateTime::parse_from_rfc3339(&t).map_err(|e| BenchError::setup("startTime", e))?;
        if t < end {
            break;
        }
        n += 1;
    }
    Ok(n)
}

/// The string value at `at`, if any.
fn start_time(body: &[u8], at: Option<usize>) -> Result<Option<String>, BenchError> {
    let Some(at) = at else { return Ok(None) };
    Ok(paging::string_or_null(body, at, "startTime")?
        .map(|t| String::from_utf8_lossy(t).into_owned()))
}

/// Page `page` of the listing over `seconds`, as costwatch's source asks
/// for it.
fn page_url(logs: &Url, seconds: Range, page: u64, page_size: u64) -> Url {
    let size = u32::try_from(page_size).unwrap_or(litellm::MAX_PAGE_SIZE);
    let mut url = logs.clone();
    url.query_pairs_mut()
        .extend_pairs(litellm::page_query(seconds, page, size, None));
    url
}

/// The rows of a spend-log page: its `startTime` keys, one a row. LiteLLM
/// writes `page_size` after `data`, and no object after it; a page
/// without it after its rows, or not closed, was cut off, which would
/// otherwise pass for a last page.
pub fn page_rows(body: &[u8]) -> Result<u64, BenchError> {
    let cut = || BenchError::Setup("a spend-log page without page_size after its rows".into());
    let envelope = paging::last_key(body, "page_size")
        .filter(|_| paging::closed(body))
        .ok_or_else(cut)?;
    if paging::first_key(body, "startTime", envelope).is_some() {
        return Err(cut());
    }
    Ok(paging::count_keys(&body[..envelope], "startTime"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const PAGE: &[u8] = br#"{"data":[{"request_id":"a","startTime":"2026-10-11T11:00:00.250000+00:00","completionStartTime":"x","metadata":{"status":"success"}},{"request_id":"b","startTime":"2026-10-11T11:00:01+00:00"}],"total":2,"page":1,"page_size":500,"total_pages":1}"#;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_spend_log_page_counts_its_rows_and_a_cut_page_is_an_error() {
        assert_eq!(page_rows(PAGE).unwrap(), 2);
        assert_eq!(
            page_rows(br#"{"data":[],"total":0,"page":2,"page_size":500,"total_pages":0}"#)
                .unwrap(),
            0
        );
        // Cut after a row: fewer rows than the page size, yet no last page.
        let cut = &PAGE[..PAGE.iter().position(|b| *b == b'}').unwrap() + 1];
        assert!(page_rows(cut).is_err());
        assert!(page_rows(&PAGE[..PAGE.len() - 1]).is_err());
    }

    #[test]
    fn rows_listed_past_the_windows_end_are_found_from_the_pages_end() {
        // The window ends at 11:00:01: its last row is the next window's.
        assert_eq!(past_end(PAGE, t("2026-10-11T11:00:01Z")).unwrap(), 1);
        assert_eq!(past_end(PAGE, t("2026-10-11T11:00:00.100Z")).unwrap(), 2);
        assert_eq!(past_end(PAGE, t("2026-10-11T11:00:02Z")).unwrap(), 0);
    }

    #[test]
    fn the_query_is_the_sources_over_the_seconds_covering_the_window() {
        let seconds = covering(t("2026-10-11T11:00:00.250Z"), t("2026-10-11T11:15:00.001Z"));
        assert_eq!(
            seconds,
            (t("2026-10-11T11:00:00Z"), t("2026-10-11T11:15:01Z"))
        );
        let url = page_url(
            &Url::parse("http://h/spend/logs/v2").unwrap(),
            seconds,
            2,
            500,
        );
        assert_eq!(
            url.query(),
            Some(
                "start_date=2026-10-11+11%3A00%3A00&end_date=2026-10-11+11%3A15%3A01&page=2\
                 &page_size=500&sort_by=startTime&sort_order=asc&span_type=llm"
            )
        );
        assert_eq!(
            start_time(PAGE, paging::last_key(PAGE, "startTime"))
                .unwrap()
                .as_deref(),
            Some("2026-10-11T11:00:01+00:00")
        );
    }
}
