//! The query of one `/spend/logs/v2` page.
//!
//! LiteLLM reads `start_date` and `end_date` as `YYYY-MM-DD HH:MM:SS` (or
//! `YYYY-MM-DD`) in UTC and keeps rows with `start_date <= startTime <=
//! end_date`, both ends included, to the second; `startTime` itself is
//! kept to the millisecond (`timestamp(3)`). So `[start, end)` is asked for
//! as `[floor(start), ceil(end)]` to the second, and the reader keeps
//! exactly `start <= startTime < end` of what comes back.

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};

/// LiteLLM's largest `page_size` (`le=1000` since 1.95.0).
pub const MAX_PAGE_SIZE: u32 = 1000;

/// The date format `/spend/logs/v2` parses (`%Y-%m-%d %H:%M:%S`).
const DATE: &str = "%Y-%m-%d %H:%M:%S";

/// The whole seconds that cover `[start, end)`: `start` rounded down,
/// `end` rounded up; both are included by LiteLLM.
pub fn covering(start: DateTime<Utc>, end: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let floor = start.trunc_subsecs(0);
    let end_floor = end.trunc_subsecs(0);
    let ceil = if end_floor == end {
        end
    } else {
        end_floor + TimeDelta::seconds(1)
    };
    (floor, ceil)
}

/// The query of page `page` (1-based) over the seconds `covering` gave,
/// sorted by `startTime` ascending, model calls only, optionally one
/// session's rows (LiteLLM matches `session_id` as a substring).
pub fn page_query(
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    page: u64,
    page_size: u32,
    session_id: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut q = vec![
        ("start_date", from.format(DATE).to_string()),
        ("end_date", to.format(DATE).to_string()),
        ("page", page.to_string()),
        ("page_size", page_size.to_string()),
        ("sort_by", "startTime".to_owned()),
        ("sort_order", "asc".to_owned()),
        ("span_type", "llm".to_owned()),
    ];
    if let Some(id) = session_id {
        q.push(("session_id", id.to_owned()));
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn a_range_is_asked_for_in_the_whole_seconds_that_cover_it() {
        let (from, to) = covering(t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"));
        assert_eq!(
            (from, to),
            (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"))
        );
        let (from, to) = covering(t("2026-10-11T11:00:00.250Z"), t("2026-10-11T11:59:59.001Z"));
        assert_eq!(
            (from, to),
            (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"))
        );
    }

    #[test]
    fn the_query_speaks_litellms_date_format_and_sorts_ascending() {
        let q = page_query(
            (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z")),
            3,
            1000,
            Some("abc"),
        );
        let find = |k: &str| q.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(find("start_date"), Some("2026-10-11 11:00:00"));
        assert_eq!(find("end_date"), Some("2026-10-11 12:00:00"));
        assert_eq!(find("page"), Some("3"));
        assert_eq!(find("page_size"), Some("1000"));
        assert_eq!(find("sort_by"), Some("startTime"));
        assert_eq!(find("sort_order"), Some("asc"));
        assert_eq!(find("session_id"), Some("abc"));
    }
}
