//! The `windows` and `schedule` sections: when windows are cut and read.

use super::document::Doc;
use super::to_usize;
use crate::config::raw::{RawSchedule, RawWindows};
use crate::config::schedule::parse_cron;
use crate::config::{ScheduleConfig, WindowConfig};
use chrono::{DateTime, Utc};
use std::time::Duration;

pub(super) const DAY: Duration = Duration::from_secs(24 * 3600);

pub(super) fn window_config(doc: &mut Doc, raw: RawWindows) -> Option<WindowConfig> {
    let size = raw.size.0;
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    let size_ok = if size < Duration::from_secs(60) {
        doc.check(false, "windows.size", || {
            format!("must be at least 1m, got {}", fmt(size))
        })
    } else if size > DAY {
        doc.check(false, "windows.size", || {
            format!("must be at most 24h, got {}", fmt(size))
        })
    } else {
        doc.check(
            DAY.as_nanos().is_multiple_of(size.as_nanos()),
            "windows.size",
            || format!("must divide 24h evenly, got {}", fmt(size)),
        )
    };
    doc.check(raw.settle_lag.0 < DAY, "windows.settle_lag", || {
        format!("must be less than 24h, got {}", fmt(raw.settle_lag.0))
    });
    if size_ok && !doc.is_tainted("windows.size") {
        doc.check(raw.max_backfill.0 >= size, "windows.max_backfill", || {
            format!(
                "must be at least windows.size ({}), got {}",
                fmt(size),
                fmt(raw.max_backfill.0)
            )
        });
    }
    let start = match raw.start.as_deref().map(DateTime::parse_from_rfc3339) {
        None => None,
        Some(Ok(t)) => Some(t.with_timezone(&Utc)),
        Some(Err(_)) => {
            let got = raw.start.unwrap_or_default();
            doc.check(false, "windows.start", || {
                format!("must be an rfc 3339 timestamp such as 2026-10-11T00:00:00Z, got `{got}`")
            });
            return None;
        }
    };
    Some(WindowConfig {
        size,
        settle_lag: raw.settle_lag.0,
        start,
        max_backfill: raw.max_backfill.0,
    })
}

pub(super) fn schedule_config(doc: &mut Doc, raw: RawSchedule) -> Option<ScheduleConfig> {
    let cron = match parse_cron(&raw.cron) {
        Ok(cron) => Some(cron),
        Err(message) => {
            doc.check(false, "schedule.cron", || message);
            None
        }
    };
    let timezone = match raw.timezone.parse::<chrono_tz::Tz>() {
        Ok(tz) => Some(tz),
        Err(_) => {
            let got = &raw.timezone;
            doc.check(false, "schedule.timezone", || {
                format!("unknown time zone `{got}`; expected an iana name such as `UTC` or `Europe/Berlin`")
            });
            None
        }
    };
    doc.at_least_u64("schedule.max_catch_up_windows", raw.max_catch_up_windows, 1);
    doc.positive_duration("schedule.tick_timeout", raw.tick_timeout.0);
    Some(ScheduleConfig {
        cron_text: raw.cron,
        cron: cron?,
        timezone: timezone?,
        max_catch_up_windows: to_usize(raw.max_catch_up_windows),
        tick_timeout: raw.tick_timeout.0,
    })
}
