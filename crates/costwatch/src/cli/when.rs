//! Times on the command line: an RFC 3339 instant, or a duration ago
//! (`24h`, `7d`, `1h30m`), and durations (`--for 24h`).

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::time::Duration;

/// A point in time as given: absolute, or that long before now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// An RFC 3339 instant.
    At(DateTime<Utc>),
    /// This long before now.
    Ago(Duration),
}

impl When {
    /// The instant, counting an `Ago` back from `now`.
    pub fn at(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            When::At(t) => t,
            When::Ago(d) => ChronoDuration::from_std(d)
                .ok()
                .and_then(|d| now.checked_sub_signed(d))
                .unwrap_or(DateTime::<Utc>::MIN_UTC),
        }
    }
}

/// Parses `--since`/`--until`: RFC 3339 (`2026-11-02T12:00:00Z`) or a
/// duration ago (`24h`, `30m`, `7d`).
pub fn parse_when(text: &str) -> Result<When, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(When::At(t.with_timezone(&Utc)));
    }
    humantime::parse_duration(text).map(When::Ago).map_err(|_| {
        format!("expected an RFC 3339 time (2026-11-02T12:00:00Z) or a duration ago (24h, 30m, 7d), not {text:?}")
    })
}

/// Parses a duration such as `24h`, `90m` or `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("expected a duration such as 24h, 90m or 1h30m: {e}"))
}

/// Parses an RFC 3339 instant.
pub fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("expected an RFC 3339 time such as 2026-11-02T12:00:00Z: {e}"))
}

/// `t` as RFC 3339 in UTC, to the second.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `t` for a table: `2026-11-02 12:00`.
pub fn short(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn since_takes_an_instant_or_a_duration_ago() {
        let now = Utc.with_ymd_and_hms(2026, 11, 2, 12, 0, 0).unwrap();
        assert_eq!(
            parse_when("2026-11-01T10:00:00+02:00").unwrap().at(now),
            Utc.with_ymd_and_hms(2026, 11, 1, 8, 0, 0).unwrap()
        );
        assert_eq!(
            parse_when("24h").unwrap().at(now),
            now - ChronoDuration::hours(24)
        );
        assert_eq!(
            parse_when("7d").unwrap().at(now),
            now - ChronoDuration::days(7)
        );
        assert!(parse_when("yesterday").unwrap_err().contains("RFC 3339"));
    }
}
