//! Offset paging over a spend log that grows while it is read.
//!
//! `/spend/logs/v2` pages with `LIMIT page_size OFFSET (page - 1) *
//! page_size` over `ORDER BY "startTime"`. Past the last row it answers an
//! empty `data` with the same `total`, never an error; `total` stops at
//! 10,000 (`SPEND_LOGS_PAGINATION_COUNT_CAP`, flagged `total_is_capped`),
//! so it cannot tell when the listing ends. The rule here: **a page with
//! fewer rows than `page_size` (an empty one included) is the last**; a
//! listing whose rows are an exact multiple of the page size ends with one
//! empty page.
//!
//! LiteLLM writes its spend log in batches after each call ends, so rows
//! can appear under a read that is under way. A row written before the
//! read position pushes every later row one place on, and the next page
//! starts with rows already read. Rows come in `startTime` order, so a
//! repeat is a row no later than the latest `startTime` read so far (the
//! boundary): the ids of the last [`RECENT_IDS`] rows are kept with their
//! `startTime`, a row among them is handed over once, and a row from
//! before the boundary that is not among them (a burst of more rows
//! written behind the read position than that, or a row written late)
//! fails the read, which is then tried again, rather than being counted
//! twice or taken on trust. Memory stays bounded by [`RECENT_IDS`].
//!
//! LiteLLM orders by `startTime` alone, and two queries may order rows
//! sharing a millisecond differently (PostgreSQL promises no order among
//! ties): when such rows sit on both sides of a page boundary, the next
//! page could repeat one of them and skip another. So when a page holds a
//! row of the boundary's millisecond, the second around it is first read
//! whole, in pages of 1,000, and the rows of that millisecond not read yet
//! are handed over; the offset listing then goes on, its repeats caught as
//! above. (Should one second hold more than 1,000 rows, that re-read pages
//! too and the same caveat applies to it, one level down.)
//!
//! What this cannot see: a row deleted before the read position while the
//! range is read moves later rows one place back, so one is skipped.
//! LiteLLM deletes only rows older than its retention period
//! (`maximum_spend_logs_retention_period`), far behind a settled window.

use super::LiteLlmReader;
use super::errors::explain;
use super::map::{Mapped, map};
use super::query::{MAX_PAGE_SIZE, covering, page_query};
use super::wire::{self, Envelope};
use crate::printable::printable;
use crate::source::rows::CallRow;
use crate::source::{ReadStats, SourceError};
use chrono::{DateTime, SecondsFormat, SubsecRound, TimeDelta, Utc};
use std::collections::{HashMap, VecDeque};
use url::Url;

/// How many of the latest rows read are remembered to recognise a repeat.
pub(super) const RECENT_IDS: usize = 10_000;

/// The path of the spend-log listing below the proxy's base URL.
pub const SPEND_LOGS: &str = "spend/logs/v2";

/// The rows read so far in one listing, as far as repeats need them.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The latest `startTime` read.
    boundary: Option<DateTime<Utc>>,
    /// The last [`RECENT_IDS`] request ids read, with their `startTime`.
    recent: HashMap<String, DateTime<Utc>, foldhash::fast::RandomState>,
    /// The same ids, oldest first.
    order: VecDeque<String>,
    /// Rows recognised as read before.
    pub(super) repeats: u64,
}

/// What to do with a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Not read before: hand it over.
    New,
    /// Read before, on an earlier page: skip it.
    Repeat,
}

impl Seen {
    /// Decides a row of the listing's next page; the message starts with
    /// the field.
    pub(super) fn admit(&mut self, id: &str, at: DateTime<Utc>) -> Result<Verdict, String> {
        if let Some(&before) = self.recent.get(id) {
            if before != at {
                return Err(format!(
                    "request_id: \"{}\" was read before with startTime {}, now with {}",
                    printable(id),
                    time(before),
                    time(at)
                ));
            }
            self.repeats += 1;
            return Ok(Verdict::Repeat);
        }
        if let Some(boundary) = self.boundary
            && at < boundary
        {
            return Err(format!(
                "startTime: {} is before {} of a row read before, and the row is not among \
                 the last {RECENT_IDS} read: the spend log changed under the read (rows \
                 written late, or many written behind the read position); the range is read \
                 again later",
                time(at),
                time(boundary)
            ));
        }
        if self.order.len() == RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.recent.remove(&old);
        }
        self.recent.insert(id.to_owned(), at);
        self.order.push_back(id.to_owned());
        self.boundary = Some(self.boundary.map_or(at, |b| b.max(at)));
        Ok(Verdict::New)
    }
}

/// Checks one page on its own: no more rows than asked for, each id
/// once, in `startTime` order, inside the seconds asked for.
pub(super) fn check_page(
    rows: &[Mapped],
    page_size: u32,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<(), String> {
    if rows.len() > page_size as usize {
        return Err(format!(
            "data: {} rows, more than the page_size {page_size} asked for",
            rows.len()
        ));
    }
    let mut ids: HashMap<&str, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(rows.len(), foldhash::fast::RandomState::default());
    let mut last: Option<DateTime<Utc>> = None;
    for (i, row) in rows.iter().enumerate() {
        if let Some(first) = ids.insert(row.request_id(), i) {
            return Err(format!(
                "data[{i}].request_id: \"{}\" is listed before, at data[{first}]",
                printable(row.request_id())
            ));
        }
        let at = row.at();
        if at < from || at > to {
            return Err(format!(
                "data[{i}].startTime: {} is outside the range asked for ({} to {})",
                time(at),
                time(from),
                time(to)
            ));
        }
        if let Some(before) = last
            && at < before
        {
            return Err(format!(
                "data[{i}].startTime: {} is before {} of data[{}]; rows come in startTime \
                 order (sort_order=asc needs LiteLLM {} or later)",
                time(at),
                time(before),
                i - 1,
                super::errors::MIN_VERSION
            ));
        }
        last = Some(at);
    }
    Ok(())
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl LiteLlmReader {
    /// Reads every model call that started in `[start, end)` (of one
    /// session's when `session_id` is given: LiteLLM's filter is a
    /// substring match, the caller keeps exact matches) into `sink`.
    pub(super) async fn read<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        session_id: Option<&str>,
        sink: F,
    ) -> Result<ReadStats, SourceError>
    where
        F: FnMut(CallRow) -> Result<(), SourceError>,
    {
        if end <= start {
            return Ok(ReadStats::default());
        }
        let endpoint = self.endpoint(SPEND_LOGS)?;
        let mut read = Read {
            path: endpoint.path().to_owned(),
            endpoint,
            reader: self,
            range: (start, end),
            session_id,
            seen: Seen::default(),
            stats: ReadStats::default(),
            repaired: None,
            sink,
        };
        let seconds = covering(start, end);
        let mut page = 0;
        loop {
            page += 1;
            if page > self.settings.max_pages {
                return Err(read.too_long());
            }
            let what = format!("{} page {page}", read.path);
            let rows = read.page(seconds, page, self.page_size, &what).await?;
            let last_page = rows.len() < self.page_size as usize;
            // Rows sharing the boundary's millisecond on both sides of a page
            // boundary may have come in another order this time: read that
            // second whole first.
            if let Some(boundary) = read.seen.boundary
                && read.repaired != Some(boundary)
                && rows.iter().any(|r| r.at() == boundary)
            {
                read.second(boundary).await?;
            }
            read.hand_over(rows, &what, None)?;
            if last_page {
                tracing::debug!(
                    pages = read.stats.pages,
                    rows = read.stats.rows,
                    repeats = read.seen.repeats,
                    "spend logs read"
                );
                return Ok(read.stats);
            }
        }
    }
}

/// One read of the spend log in progress.
struct Read<'a, F> {
    reader: &'a LiteLlmReader,
    endpoint: Url,
    path: String,
    /// `[start, end)`: what is handed over.
    range: (DateTime<Utc>, DateTime<Utc>),
    session_id: Option<&'a str>,
    seen: Seen,
    stats: ReadStats,
    /// The millisecond whose second was read whole last.
    repaired: Option<DateTime<Utc>>,
    sink: F,
}

impl<F> Read<'_, F>
where
    F: FnMut(CallRow) -> Result<(), SourceError>,
{
    /// Reads, parses and checks page `page` of the listing over `seconds`.
    async fn page(
        &mut self,
        seconds: (DateTime<Utc>, DateTime<Utc>),
        page: u64,
        page_size: u32,
        what: &str,
    ) -> Result<Vec<Mapped>, SourceError> {
        let mut url = self.endpoint.clone();
        url.query_pairs_mut()
            .extend_pairs(page_query(seconds, page, page_size, self.session_id));
        let reader = self.reader;
        // Parsed once, where the body was read, into the rows it maps to.
        let parse = |body: &[u8]| {
            let envelope = wire::parse_page(wire::page_text(body)?)?;
            echo(&envelope, page, page_size)?;
            envelope
                .data
                .into_iter()
                .enumerate()
                .map(|(i, row)| map(row, &reader.settings).map_err(|e| format!("data[{i}].{e}")))
                .collect::<Result<Vec<Mapped>, String>>()
        };
        let rows = reader
            .fetch
            .get_parsed(url, what, &mut self.stats, parse)
            .await
            .map_err(|e| explain(e, &reader.key))?;
        check_page(&rows, page_size, seconds)
            .map_err(|m| SourceError::Invalid(format!("{what}: {m}")))?;
        self.stats.pages += 1;
        self.stats.rows += rows.len() as u64;
        Ok(rows)
    }

    /// Hands the page's new model calls in range to the sink (only those
    /// of millisecond `only_at`, when given).
    fn hand_over(
        &mut self,
        rows: Vec<Mapped>,
        what: &str,
        only_at: Option<DateTime<Utc>>,
    ) -> Result<(), SourceError> {
        let (start, end) = self.range;
        for (i, row) in rows.into_iter().enumerate() {
            if only_at.is_some_and(|t| row.at() != t) {
                continue;
            }
            let verdict = self
                .seen
                .admit(row.request_id(), row.at())
                .map_err(|e| SourceError::Invalid(format!("{what}: data[{i}].{e}")))?;
            match row {
                Mapped::Call(call)
                    if verdict == Verdict::New
                        && start <= call.created_at
                        && call.created_at < end =>
                {
                    (self.sink)(call)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads the whole second of millisecond `t` in pages of LiteLLM's
    /// largest size and hands over the rows of `t` not read yet.
    async fn second(&mut self, t: DateTime<Utc>) -> Result<(), SourceError> {
        self.repaired = Some(t);
        let from = t.trunc_subsecs(0);
        let seconds = (from, from + TimeDelta::seconds(1));
        let mut page = 0;
        loop {
            page += 1;
            if page > self.reader.settings.max_pages {
                return Err(self.too_long());
            }
            let what = format!("{} page {page} of the second {}", self.path, time(from));
            let rows = self.page(seconds, page, MAX_PAGE_SIZE, &what).await?;
            let last_page = rows.len() < MAX_PAGE_SIZE as usize;
            self.hand_over(rows, &what, Some(t))?;
            if last_page {
                return Ok(());
            }
        }
    }

    fn too_long(&self) -> SourceError {
        SourceError::Invalid(format!(
            "{}: the listing goes on past {} pages (source.max_pages)",
            self.path, self.reader.settings.max_pages
        ))
    }
}

/// Checks that the answer is the page asked for, when it says which.
fn echo(envelope: &Envelope<'_>, page: u64, page_size: u32) -> Result<(), String> {
    if let Some(answered) = envelope.page
        && answered != page
    {
        return Err(format!(
            "page: page {page} was asked for, the answer is page {answered}"
        ));
    }
    if let Some(answered) = envelope.page_size
        && answered != u64::from(page_size)
    {
        return Err(format!(
            "page_size: {page_size} was asked for, the answer has {answered}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_791_000_000_000 + ms).unwrap_or_default()
    }

    #[test]
    fn a_row_read_again_at_the_boundary_or_behind_it_is_a_repeat() {
        let mut seen = Seen::default();
        assert_eq!(seen.admit("a", at(0)), Ok(Verdict::New));
        assert_eq!(seen.admit("b", at(5)), Ok(Verdict::New));
        assert_eq!(seen.admit("c", at(5)), Ok(Verdict::New));
        // The next page starts two rows early.
        assert_eq!(seen.admit("b", at(5)), Ok(Verdict::Repeat));
        assert_eq!(seen.admit("c", at(5)), Ok(Verdict::Repeat));
        // A row sharing the boundary's time that was not read is new.
        assert_eq!(seen.admit("d", at(5)), Ok(Verdict::New));
        assert_eq!(seen.admit("a", at(0)), Ok(Verdict::Repeat));
        assert_eq!(seen.repeats, 3);
    }

    #[test]
    fn an_unknown_row_behind_the_boundary_or_an_id_that_moved_fails() {
        let mut seen = Seen::default();
        assert_eq!(seen.admit("a", at(10)), Ok(Verdict::New));
        let err = seen.admit("late", at(3)).err().unwrap_or_default();
        assert!(err.starts_with("startTime:"), "{err}");
        assert!(err.contains("changed under the read"), "{err}");
        let err = seen.admit("a", at(11)).err().unwrap_or_default();
        assert!(
            err.starts_with("request_id: \"a\" was read before"),
            "{err}"
        );
    }

    #[test]
    fn memory_is_bounded_and_forgets_the_oldest_first() {
        let mut seen = Seen::default();
        for i in 0..=RECENT_IDS {
            let id = format!("r{i}");
            assert_eq!(seen.admit(&id, at(i as i64)), Ok(Verdict::New));
        }
        assert_eq!(seen.recent.len(), RECENT_IDS);
        assert_eq!(seen.order.len(), RECENT_IDS);
        assert!(!seen.recent.contains_key("r0"));
        assert_eq!(seen.admit("r1", at(1)), Ok(Verdict::Repeat));
        assert!(seen.admit("r0", at(0)).is_err());
    }

    fn other(id: &str, ms: i64) -> Mapped {
        Mapped::Other {
            request_id: id.to_owned(),
            at: at(ms),
        }
    }

    #[test]
    fn a_page_is_held_to_its_size_its_ids_its_order_and_its_range() {
        let range = (at(0), at(100));
        assert_eq!(
            check_page(&[other("a", 1), other("b", 1)], 2, range),
            Ok(())
        );
        let err = check_page(&[other("a", 1), other("b", 2)], 1, range)
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("data: 2 rows, more than"), "{err}");
        let err = check_page(&[other("a", 1), other("a", 2)], 5, range)
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("data[1].request_id"), "{err}");
        let err = check_page(&[other("a", 9), other("b", 2)], 5, range)
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("data[1].startTime"), "{err}");
        assert!(err.contains("sort_order=asc"), "{err}");
        let err = check_page(&[other("a", 101)], 5, range)
            .err()
            .unwrap_or_default();
        assert!(err.contains("outside the range"), "{err}");
    }
}
