//! The `alerts` section.

use super::document::Doc;
use super::fields::http_url;
use super::to_usize;
use crate::config::AlertsConfig;
use crate::config::raw::RawAlerts;
use url::Url;

pub(super) fn alerts_config(doc: &mut Doc, raw: RawAlerts) -> Option<AlertsConfig> {
    let growth = raw.realert_growth;
    doc.check(
        growth == 0.0 || growth >= 1.0,
        "alerts.realert_growth",
        || format!("must be 0 (never re-alert) or at least 1, got {growth}"),
    );
    if doc.positive_duration("alerts.resolve_after", raw.resolve_after.0) {
        doc.check(
            raw.group_wait.0 < raw.resolve_after.0,
            "alerts.group_wait",
            || {
                format!(
                    "must be shorter than resolve_after ({}), got {}",
                    humantime::format_duration(raw.resolve_after.0),
                    humantime::format_duration(raw.group_wait.0)
                )
            },
        );
    }
    doc.at_least_f64(
        "alerts.min_impact_usd_per_day",
        raw.min_impact_usd_per_day,
        0.0,
    );
    doc.at_least_u64("alerts.min_sessions", raw.min_sessions, 1);
    doc.between_u64("alerts.top_sessions", raw.top_sessions, 1, 50);
    doc.at_least_u64("alerts.summary_after_windows", raw.summary_after_windows, 1);
    doc.positive_duration("alerts.delivery_deadline", raw.delivery_deadline.0);
    let base_ok = doc.positive_duration("alerts.retry_base", raw.retry_base.0);
    if base_ok && !doc.is_tainted("alerts.retry_base") {
        doc.check(
            raw.retry_max.0 >= raw.retry_base.0,
            "alerts.retry_max",
            || {
                format!(
                    "must be at least retry_base ({}), got {}",
                    humantime::format_duration(raw.retry_base.0),
                    humantime::format_duration(raw.retry_max.0)
                )
            },
        );
    }
    let gateway_ui_url = match raw.gateway_ui_url.as_deref() {
        None => None,
        Some(url) => Some(http_url(doc, "alerts.gateway_ui_url", url)?),
    };
    Some(alerts(raw, gateway_ui_url))
}

/// The typed section from checked raw values.
fn alerts(raw: RawAlerts, gateway_ui_url: Option<Url>) -> AlertsConfig {
    AlertsConfig {
        cooldown: raw.cooldown.0,
        realert_growth: raw.realert_growth,
        resolve_after: raw.resolve_after.0,
        reopen_within: raw.reopen_within.0,
        group_wait: raw.group_wait.0,
        min_impact_usd_per_day: raw.min_impact_usd_per_day,
        min_sessions: raw.min_sessions,
        send_resolved: raw.send_resolved,
        top_sessions: to_usize(raw.top_sessions),
        summary_after_windows: to_usize(raw.summary_after_windows),
        delivery_deadline: raw.delivery_deadline.0,
        retry_base: raw.retry_base.0,
        retry_max: raw.retry_max.0,
        gateway_ui_url,
    }
}

impl Default for AlertsConfig {
    /// The defaults of `alerts` (which name no gateway UI).
    fn default() -> Self {
        alerts(RawAlerts::default(), None)
    }
}
