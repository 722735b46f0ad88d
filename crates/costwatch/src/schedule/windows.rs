//! The `windows` section: how time is cut into windows.

use crate::settings::units::{opt_timestamp, with_unit};
use crate::settings::{Issue, Settings};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// How time is cut into windows.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<WindowConfig>)]
pub struct WindowConfig {
    /// Length of one window, from 1m to 24h and dividing 24h evenly;
    /// windows are aligned to multiples of it since the Unix epoch.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub size: Duration,
    /// How long after a window's end it is read, so late log rows have
    /// landed; less than 24h.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub settle_lag: Duration,
    /// Where processing starts when there is no watermark yet (RFC 3339);
    /// unset, `now - max_backfill`.
    #[serde(with = "opt_timestamp")]
    #[schemars(with = "Option<String>")]
    #[schemars(example = "2026-10-11T00:00:00Z")]
    pub start: Option<DateTime<Utc>>,
    /// How far back `run` and `once` ever reach: older windows, those
    /// after an older `start` too, are skipped with one warning
    /// (`costwatch backtest` reads history); at least `size`.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub max_backfill: Duration,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            size: Duration::from_secs(15 * 60),
            settle_lag: Duration::from_secs(2 * 60),
            start: None,
            max_backfill: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl Settings for WindowConfig {
    fn problems(&self) -> Vec<Issue> {
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        let size = self.size;
        let size_problem = if size < Duration::from_secs(60) {
            Some(format!("must be at least 1m, got {}", fmt(size)))
        } else if size > DAY {
            Some(format!("must be at most 24h, got {}", fmt(size)))
        } else if !DAY.as_nanos().is_multiple_of(size.as_nanos()) {
            Some(format!("must divide 24h evenly, got {}", fmt(size)))
        } else {
            None
        };
        let backfill = (size_problem.is_none() && self.max_backfill < size).then(|| {
            Issue::reading(
                "max_backfill",
                &["size"],
                format!(
                    "must be at least windows.size ({}), got {}",
                    fmt(size),
                    fmt(self.max_backfill)
                ),
            )
        });
        [
            size_problem.map(|m| Issue::new("size", m)),
            Issue::when(self.settle_lag >= DAY, "settle_lag", || {
                format!("must be less than 24h, got {}", fmt(self.settle_lag))
            }),
            backfill,
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}
