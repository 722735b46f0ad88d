//! [`Metrics::render`]: the counters in the Prometheus text exposition
//! format 0.0.4.

use super::Metrics;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

impl Metrics {
    /// The metrics in the Prometheus text format 0.0.4.
    ///
    /// `costwatch_watermark_lag_seconds` has no sample until both a
    /// watermark and a current time were set, and
    /// `costwatch_last_tick_timestamp_seconds` none until the first tick.
    /// `costwatch_up` is 1 until a tick fails and then follows the result of
    /// the last tick.
    pub fn render(&self) -> String {
        let state = self.lock().clone();
        let mut out = String::with_capacity(4096);

        family(
            &mut out,
            "costwatch_windows_processed_total",
            "counter",
            "Windows read, checked and stored.",
        );
        sample(
            &mut out,
            "costwatch_windows_processed_total",
            &[],
            self.windows_processed.load(Ordering::Relaxed) as f64,
        );

        family(
            &mut out,
            "costwatch_window_failures_total",
            "counter",
            "Window runs that failed and will be retried.",
        );
        sample(
            &mut out,
            "costwatch_window_failures_total",
            &[],
            self.window_failures.load(Ordering::Relaxed) as f64,
        );

        family(
            &mut out,
            "costwatch_sessions_read_total",
            "counter",
            "Sessions read from the gateway.",
        );
        sample(
            &mut out,
            "costwatch_sessions_read_total",
            &[],
            self.sessions_read.load(Ordering::Relaxed) as f64,
        );

        family(
            &mut out,
            "costwatch_drilldowns_skipped_total",
            "counter",
            "Retry-loop suspects whose request rows were not read: over their rule's drilldown_budget in their window.",
        );
        sample(
            &mut out,
            "costwatch_drilldowns_skipped_total",
            &[],
            self.drilldowns_skipped.load(Ordering::Relaxed) as f64,
        );

        family(
            &mut out,
            "costwatch_findings_held",
            "gauge",
            "no_cache findings of sessions still going at the last window's end, held for the windows after it to decide.",
        );
        sample(
            &mut out,
            "costwatch_findings_held",
            &[],
            self.findings_held.load(Ordering::Relaxed) as f64,
        );

        family(
            &mut out,
            "costwatch_watermark_lag_seconds",
            "gauge",
            "Seconds between the daemon's current time and the end of the last completed window.",
        );
        if let (Some(watermark), Some(now)) = (state.watermark, state.now) {
            let lag = (now - watermark).num_milliseconds() as f64 / 1000.0;
            sample(&mut out, "costwatch_watermark_lag_seconds", &[], lag);
        }

        labelled(
            &mut out,
            "costwatch_findings_total",
            "Findings by detector kind.",
            "kind",
            &state.findings,
        );
        labelled(
            &mut out,
            "costwatch_alerts_enqueued_total",
            "Alerts put in the outbox, by kind.",
            "kind",
            &state.alerts_enqueued,
        );
        labelled(
            &mut out,
            "costwatch_alerts_silenced_total",
            "Notifications held back by a silence, by incident kind.",
            "kind",
            &state.alerts_silenced,
        );
        family(
            &mut out,
            "costwatch_incidents_below_floor",
            "gauge",
            "Open incidents below alerts.min_impact_usd_per_day or alerts.min_sessions, recorded but not sent, by kind.",
        );
        for (kind, n) in &state.below_floor {
            sample(
                &mut out,
                "costwatch_incidents_below_floor",
                &[("kind", kind)],
                *n as f64,
            );
        }

        family(
            &mut out,
            "costwatch_deliveries_total",
            "counter",
            "Alert delivery attempts by channel and result (sent or failed).",
        );
        for ((channel, ok), count) in &state.deliveries {
            let result = if *ok { "sent" } else { "failed" };
            sample(
                &mut out,
                "costwatch_deliveries_total",
                &[("channel", channel), ("result", result)],
                *count as f64,
            );
        }

        labelled(
            &mut out,
            "costwatch_gateway_errors_total",
            "Gateway errors by kind (transient, rejected or invalid).",
            "kind",
            &state.gateway_errors,
        );
        labelled(
            &mut out,
            "costwatch_otlp_requests_total",
            "OTLP export requests received, by outcome (accepted, or why refused).",
            "outcome",
            &state.otlp_requests,
        );
        labelled(
            &mut out,
            "costwatch_otlp_spans_total",
            "OTLP spans of accepted exports, by outcome (stored, duplicate, rejected, other, without_usage, late).",
            "outcome",
            &state.otlp_spans,
        );

        family(
            &mut out,
            "costwatch_investigation_spend_usd_total",
            "counter",
            "US dollars spent on investigation model calls.",
        );
        sample(
            &mut out,
            "costwatch_investigation_spend_usd_total",
            &[],
            state.investigation_spend_usd,
        );

        family(
            &mut out,
            "costwatch_last_tick_timestamp_seconds",
            "gauge",
            "Unix time of the last scheduler tick.",
        );
        if let Some((at, _)) = state.last_tick {
            sample(
                &mut out,
                "costwatch_last_tick_timestamp_seconds",
                &[],
                at.timestamp_millis() as f64 / 1000.0,
            );
        }

        family(
            &mut out,
            "costwatch_up",
            "gauge",
            "1 unless the last scheduler tick failed.",
        );
        let up = state.last_tick.is_none_or(|(_, ok)| ok);
        sample(&mut out, "costwatch_up", &[], if up { 1.0 } else { 0.0 });

        // Named like Prometheus's own `prometheus_config_last_reload_*`.
        family(
            &mut out,
            "costwatch_config_last_reload_successful",
            "gauge",
            "0 when the last configuration reload was refused (the previous configuration still runs).",
        );
        let ok = if state.config_ok { 1.0 } else { 0.0 };
        sample(&mut out, "costwatch_config_last_reload_successful", &[], ok);
        family(
            &mut out,
            "costwatch_config_last_reload_success_timestamp_seconds",
            "gauge",
            "Unix time the running configuration was loaded.",
        );
        if let Some(at) = state.config_loaded_at {
            sample(
                &mut out,
                "costwatch_config_last_reload_success_timestamp_seconds",
                &[],
                at.timestamp_millis() as f64 / 1000.0,
            );
        }

        out
    }
}

/// Writes the `# HELP` and `# TYPE` lines of a family.
pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes a counter family with one label and one sample per label value.
pub(super) fn labelled(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: &BTreeMap<String, u64>,
) {
    family(out, name, "counter", help);
    for (value, count) in values {
        sample(out, name, &[(label, value)], *count as f64);
    }
}

/// Writes one sample line.
pub(super) fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{label}=\"{}\"", escape_label_value(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_value(value));
    out.push('\n');
}

/// A label value with `\`, `"` and line feeds escaped.
pub(super) fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Help text with `\` and line feeds escaped.
pub(super) fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as the format spells it (`+Inf`, `-Inf`, `NaN`).
pub(super) fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        v.to_string()
    }
}
