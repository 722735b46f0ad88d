//! The `alerts` section: how incidents become notifications, and how long
//! their delivery is tried.

use crate::notify::outbox::RetryPolicy;
use crate::settings::units::{opt_http_url, positive, with_unit};
use crate::settings::{Issue, Settings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use url::Url;

/// How incidents become notifications.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<AlertPolicy>)]
pub struct AlertPolicy {
    /// An incident (rule + group) is not alerted again within this time.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub cooldown: Duration,
    /// After the cooldown, re-alert only when the incident's session count
    /// grew by this factor since the last alert (e.g. 2.0); 0 never
    /// re-alerts: an incident is told of once, however long it lasts.
    pub realert_growth: f64,
    /// An incident with no new finding for this long is resolved.
    #[serde(with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub resolve_after: Duration,
    /// A finding within this time after its incident resolved continues
    /// that episode (same start and counts) rather than opening a new one:
    /// a flapping incident is one episode, told once that it fires again.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub reopen_within: Duration,
    /// How long an episode's first notification waits (data time, from the
    /// start of its first window with a finding) for the findings of the
    /// windows after it, so that it tells of them too (0: sent with the
    /// first window).
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub group_wait: Duration,
    /// The floor: an incident worth less than this many dollars a day (at
    /// its rate so far) is recorded but not sent (0 = no floor).
    #[schemars(range(min = 0.0))]
    pub min_impact_usd_per_day: f64,
    /// The floor: an incident of fewer sessions is recorded but not sent.
    #[schemars(range(min = 1))]
    pub min_sessions: u64,
    /// Whether a resolved notification is sent.
    pub send_resolved: bool,
    /// Sessions listed in an alert (largest impact first).
    #[schemars(range(min = 1, max = 50))]
    pub top_sessions: usize,
    /// A catch-up over more than this many windows sends one summary alert
    /// instead of one alert per incident.
    #[schemars(range(min = 1))]
    pub summary_after_windows: usize,
    /// How long delivery of one alert is retried before it is given up.
    #[serde(with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub delivery_deadline: Duration,
    /// First delivery retry delay; doubles per attempt up to `retry_max`.
    #[serde(with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub retry_base: Duration,
    /// Longest delay between delivery attempts.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub retry_max: Duration,
    /// Replaced by `source.ui_url`: read as the base of
    /// `{base}/sessions/{id}` links, with a warning, while that is unset.
    #[serde(with = "opt_http_url")]
    #[schemars(with = "Option<String>")]
    #[schemars(example = "https://gateway.example/ui")]
    pub gateway_ui_url: Option<Url>,
    /// Each session's link in the team's own tool, from `source.ui_url`
    /// and the source's kind (`gateway_ui_url` as the reference gateway's
    /// base when that is unset); worked out when the configuration is
    /// read, not a key of this section.
    #[serde(skip)]
    #[schemars(skip)]
    pub session_links: Option<crate::source::links::SessionLinks>,
}

impl Default for AlertPolicy {
    fn default() -> Self {
        AlertPolicy {
            cooldown: Duration::from_secs(6 * 3600),
            realert_growth: 0.0,
            resolve_after: Duration::from_secs(2 * 3600),
            reopen_within: Duration::ZERO,
            group_wait: Duration::ZERO,
            min_impact_usd_per_day: 0.0,
            min_sessions: 1,
            send_resolved: true,
            top_sessions: 5,
            summary_after_windows: 4,
            delivery_deadline: Duration::from_secs(24 * 3600),
            retry_base: Duration::from_secs(30),
            retry_max: Duration::from_secs(30 * 60),
            gateway_ui_url: None,
            session_links: None,
        }
    }
}

impl Settings for AlertPolicy {
    fn problems(&self) -> Vec<Issue> {
        let growth = self.realert_growth;
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        [
            Issue::when(growth != 0.0 && growth < 1.0, "realert_growth", || {
                format!("must be 0 (never re-alert) or at least 1, got {growth}")
            }),
            (self.group_wait >= self.resolve_after).then(|| {
                Issue::reading(
                    "group_wait",
                    &["resolve_after"],
                    format!(
                        "must be shorter than resolve_after ({}), got {}",
                        fmt(self.resolve_after),
                        fmt(self.group_wait)
                    ),
                )
            }),
            Issue::retry_max_below_base(self.retry_base, self.retry_max),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

impl From<&AlertPolicy> for RetryPolicy {
    /// The delivery backoff the `alerts` section describes.
    fn from(a: &AlertPolicy) -> RetryPolicy {
        RetryPolicy {
            base: a.retry_base,
            max: a.retry_max,
        }
    }
}
