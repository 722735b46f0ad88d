//! The daemon's counters and gauges, rendered in the Prometheus text
//! exposition format 0.0.4.
//!
//! The format is small enough to write by hand: a `# HELP` and a `# TYPE`
//! line per family, then one `name{label="value"} number` line per sample.
//! Label values escape `\`, `"` and newlines; help text escapes `\` and
//! newlines.

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Gateway error kinds that are always exported, at zero until seen, so that
/// `rate()` works from the first scrape.
const GATEWAY_ERROR_KINDS: [&str; 3] = ["transient", "rejected", "invalid"];

/// Everything the daemon counts, shared as `Arc<Metrics>`.
///
/// Every method takes `&self`; the plain counters are atomics and the
/// labelled ones sit behind one mutex that is held only to add a number or to
/// copy the values out for rendering.
#[derive(Debug)]
pub struct Metrics {
    windows_processed: AtomicU64,
    window_failures: AtomicU64,
    sessions_read: AtomicU64,
    state: Mutex<State>,
}

/// The labelled counters, gauges and timestamps.
#[derive(Debug, Clone, Default)]
struct State {
    watermark: Option<DateTime<Utc>>,
    now: Option<DateTime<Utc>>,
    findings: BTreeMap<String, u64>,
    alerts_enqueued: BTreeMap<String, u64>,
    /// Notifications held back by a silence, by incident kind.
    alerts_silenced: BTreeMap<String, u64>,
    /// Keyed by channel, then `true` for sent and `false` for failed.
    deliveries: BTreeMap<(String, bool), u64>,
    gateway_errors: BTreeMap<String, u64>,
    investigation_spend_usd: f64,
    last_tick: Option<(DateTime<Utc>, bool)>,
    /// Whether the last load of the configuration (at start or on SIGHUP)
    /// succeeded, and when one last did.
    config_ok: bool,
    config_loaded_at: Option<DateTime<Utc>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All counters at zero, no watermark and no tick yet.
    pub fn new() -> Self {
        let gateway_errors = GATEWAY_ERROR_KINDS
            .iter()
            .map(|k| ((*k).to_owned(), 0))
            .collect();
        Metrics {
            windows_processed: AtomicU64::new(0),
            window_failures: AtomicU64::new(0),
            sessions_read: AtomicU64::new(0),
            state: Mutex::new(State {
                gateway_errors,
                config_ok: true,
                ..State::default()
            }),
        }
    }

    /// Counts `n` windows that were read, checked and stored.
    pub fn windows_processed(&self, n: u64) {
        self.windows_processed.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one window whose processing failed (it will be retried).
    pub fn window_failed(&self) {
        self.window_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` sessions read from the gateway.
    pub fn sessions_read(&self, n: u64) {
        self.sessions_read.fetch_add(n, Ordering::Relaxed);
    }

    /// Records the end of the last completed window.
    pub fn set_watermark(&self, t: DateTime<Utc>) {
        self.lock().watermark = Some(t);
    }

    /// Records the daemon clock's current time, against which the watermark
    /// lag is measured.
    pub fn set_now(&self, t: DateTime<Utc>) {
        self.lock().now = Some(t);
    }

    /// Counts one finding of `kind` (for example `no_cache`).
    pub fn finding(&self, kind: &str) {
        bump(&mut self.lock().findings, kind);
    }

    /// Counts one alert of `kind` put in the outbox.
    pub fn alert_enqueued(&self, kind: &str) {
        bump(&mut self.lock().alerts_enqueued, kind);
    }

    /// Counts one notification of an incident of `kind` held back by a
    /// silence (once per silence, incident episode and status).
    pub fn alert_silenced(&self, kind: &str) {
        bump(&mut self.lock().alerts_silenced, kind);
    }

    /// Counts one delivery attempt on `channel` that was sent (`ok`) or failed.
    pub fn delivery(&self, channel: &str, ok: bool) {
        let mut state = self.lock();
        let count = state
            .deliveries
            .entry((channel.to_owned(), ok))
            .or_insert(0);
        *count = count.saturating_add(1);
    }

    /// Counts one gateway error of `kind`: `transient`, `rejected` or
    /// `invalid`.
    pub fn gateway_error(&self, kind: &str) {
        bump(&mut self.lock().gateway_errors, kind);
    }

    /// Adds `usd` spent on investigation model calls; negative or non-finite
    /// amounts are ignored because a counter never goes down.
    pub fn investigation_spend(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            self.lock().investigation_spend_usd += usd;
        }
    }

    /// Records a scheduler tick at `at` and whether it succeeded.
    pub fn tick(&self, ok: bool, at: DateTime<Utc>) {
        self.lock().last_tick = Some((at, ok));
    }

    /// Records a load of the configuration at `at` (at start or on SIGHUP)
    /// and whether it was taken; a refused reload leaves the running one.
    pub fn config_load(&self, ok: bool, at: DateTime<Utc>) {
        let mut state = self.lock();
        state.config_ok = ok;
        if ok {
            state.config_loaded_at = Some(at);
        }
    }

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

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves only whole numbers behind, so
        // the values are still worth reporting.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Adds one to `key`'s count.
fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(count) => *count = count.saturating_add(1),
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

/// Writes the `# HELP` and `# TYPE` lines of a family.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes a counter family with one label and one sample per label value.
fn labelled(out: &mut String, name: &str, help: &str, label: &str, values: &BTreeMap<String, u64>) {
    family(out, name, "counter", help);
    for (value, count) in values {
        sample(out, name, &[(label, value)], *count as f64);
    }
}

/// Writes one sample line.
fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
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
fn escape_label_value(v: &str) -> String {
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
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as the format spells it (`+Inf`, `-Inf`, `NaN`).
fn format_value(v: f64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::collections::BTreeSet;

    /// One parsed sample: name, labels in order, value.
    #[derive(Debug, Clone, PartialEq)]
    struct Sample {
        name: String,
        labels: Vec<(String, String)>,
        value: f64,
    }

    /// A strict reader for the subset of the format `render` writes. It
    /// fails the test on any line it does not understand, on a sample whose
    /// family has no `# TYPE` line before it, and on a repeated family.
    fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
        assert!(text.ends_with('\n'), "output must end with a line feed");
        let mut types = BTreeMap::new();
        let mut helps = BTreeSet::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("help text");
                assert!(!help.is_empty(), "empty help for {name}");
                assert!(helps.insert(name.to_owned()), "repeated HELP {name}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("type");
                assert!(["counter", "gauge"].contains(&kind), "unknown type {kind}");
                assert!(helps.contains(name), "TYPE before HELP for {name}");
                let old = types.insert(name.to_owned(), kind.to_owned());
                assert!(old.is_none(), "repeated TYPE {name}");
                continue;
            }
            assert!(!line.starts_with('#'), "stray comment {line:?}");
            let s = parse_sample(line);
            assert!(
                types.contains_key(&s.name),
                "sample {line:?} before its TYPE line"
            );
            if types[&s.name] == "counter" {
                assert!(s.name.ends_with("_total"), "counter {}", s.name);
            }
            samples.push(s);
        }
        (samples, types)
    }

    fn parse_sample(line: &str) -> Sample {
        let name_end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value in {line:?}"));
        let name = &line[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name {name:?}"
        );
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(after) = rest.strip_prefix('{') {
            let mut chars = after.char_indices().peekable();
            loop {
                let (start, _) = *chars.peek().expect("label");
                let eq = after[start..].find('=').expect("label =") + start;
                let label = after[start..eq].to_owned();
                for _ in start..=eq {
                    chars.next();
                }
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "in {line:?}");
                let mut value = String::new();
                loop {
                    match chars.next().expect("unterminated label value").1 {
                        '\\' => match chars.next().expect("escape").1 {
                            '\\' => value.push('\\'),
                            '"' => value.push('"'),
                            'n' => value.push('\n'),
                            c => panic!("bad escape \\{c} in {line:?}"),
                        },
                        '"' => break,
                        '\n' => panic!("raw line feed in {line:?}"),
                        c => value.push(c),
                    }
                }
                labels.push((label, value));
                match chars.next().expect("label end") {
                    (_, ',') => continue,
                    (i, '}') => {
                        rest = &after[i + 1..];
                        break;
                    }
                    (_, c) => panic!("unexpected {c:?} in {line:?}"),
                }
            }
        }
        let value = rest.strip_prefix(' ').expect("space before value");
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("bad value {v:?}")),
        };
        Sample {
            name: name.to_owned(),
            labels,
            value,
        }
    }

    /// The value of the one sample named `name` with exactly `labels`.
    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<_> = samples
            .iter()
            .filter(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && s.labels
                        .iter()
                        .zip(labels)
                        .all(|((k, v), (k2, v2))| k == k2 && v == v2)
            })
            .collect();
        assert!(found.len() <= 1, "duplicate sample {name} {labels:?}");
        found.first().map(|s| s.value)
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, h, m, s).unwrap()
    }

    const FAMILIES: [(&str, &str); 14] = [
        ("costwatch_windows_processed_total", "counter"),
        ("costwatch_window_failures_total", "counter"),
        ("costwatch_sessions_read_total", "counter"),
        ("costwatch_watermark_lag_seconds", "gauge"),
        ("costwatch_findings_total", "counter"),
        ("costwatch_alerts_enqueued_total", "counter"),
        ("costwatch_alerts_silenced_total", "counter"),
        ("costwatch_deliveries_total", "counter"),
        ("costwatch_gateway_errors_total", "counter"),
        ("costwatch_investigation_spend_usd_total", "counter"),
        ("costwatch_last_tick_timestamp_seconds", "gauge"),
        ("costwatch_up", "gauge"),
        ("costwatch_config_last_reload_successful", "gauge"),
        (
            "costwatch_config_last_reload_success_timestamp_seconds",
            "gauge",
        ),
    ];

    #[test]
    fn fresh_metrics_declare_every_family_and_start_at_zero() {
        let (samples, types) = parse(&Metrics::new().render());
        let expected: BTreeMap<String, String> = FAMILIES
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect();
        assert_eq!(types, expected);
        for name in [
            "costwatch_windows_processed_total",
            "costwatch_window_failures_total",
            "costwatch_sessions_read_total",
            "costwatch_investigation_spend_usd_total",
        ] {
            assert_eq!(value(&samples, name, &[]), Some(0.0), "{name}");
        }
        for kind in GATEWAY_ERROR_KINDS {
            assert_eq!(
                value(
                    &samples,
                    "costwatch_gateway_errors_total",
                    &[("kind", kind)]
                ),
                Some(0.0)
            );
        }
        assert_eq!(
            value(&samples, "costwatch_watermark_lag_seconds", &[]),
            None
        );
        assert_eq!(
            value(&samples, "costwatch_last_tick_timestamp_seconds", &[]),
            None
        );
        assert!(samples.iter().all(|s| s.name != "costwatch_findings_total"));
        assert_eq!(value(&samples, "costwatch_up", &[]), Some(1.0));
    }

    #[test]
    fn every_call_shows_up_in_its_sample() {
        let m = Metrics::new();
        m.windows_processed(3);
        m.windows_processed(2);
        m.window_failed();
        m.sessions_read(40);
        m.sessions_read(2);
        m.set_watermark(at(12, 0, 0));
        m.set_now(at(12, 7, 30));
        m.finding("no_cache");
        m.finding("no_cache");
        m.finding("retry_loop");
        m.alert_enqueued("no_cache");
        m.alert_silenced("retry_loop");
        m.delivery("email", true);
        m.delivery("email", true);
        m.delivery("email", false);
        m.delivery("webhook", false);
        m.gateway_error("transient");
        m.gateway_error("transient");
        m.gateway_error("rejected");
        m.investigation_spend(0.25);
        m.investigation_spend(1.5);
        m.investigation_spend(-3.0);
        m.investigation_spend(f64::NAN);
        m.tick(true, at(12, 7, 30));

        let (s, _) = parse(&m.render());
        let v = |name: &str, labels: &[(&str, &str)]| value(&s, name, labels);
        assert_eq!(v("costwatch_windows_processed_total", &[]), Some(5.0));
        assert_eq!(v("costwatch_window_failures_total", &[]), Some(1.0));
        assert_eq!(v("costwatch_sessions_read_total", &[]), Some(42.0));
        assert_eq!(v("costwatch_watermark_lag_seconds", &[]), Some(450.0));
        let findings = "costwatch_findings_total";
        assert_eq!(v(findings, &[("kind", "no_cache")]), Some(2.0));
        assert_eq!(v(findings, &[("kind", "retry_loop")]), Some(1.0));
        assert_eq!(v(findings, &[("kind", "oversized_model")]), None);
        assert_eq!(
            v("costwatch_alerts_enqueued_total", &[("kind", "no_cache")]),
            Some(1.0)
        );
        let silenced = "costwatch_alerts_silenced_total";
        assert_eq!(v(silenced, &[("kind", "retry_loop")]), Some(1.0));
        let d = "costwatch_deliveries_total";
        assert_eq!(v(d, &[("channel", "email"), ("result", "sent")]), Some(2.0));
        assert_eq!(
            v(d, &[("channel", "email"), ("result", "failed")]),
            Some(1.0)
        );
        assert_eq!(
            v(d, &[("channel", "webhook"), ("result", "failed")]),
            Some(1.0)
        );
        assert_eq!(v(d, &[("channel", "webhook"), ("result", "sent")]), None);
        let g = "costwatch_gateway_errors_total";
        assert_eq!(v(g, &[("kind", "transient")]), Some(2.0));
        assert_eq!(v(g, &[("kind", "rejected")]), Some(1.0));
        assert_eq!(v(g, &[("kind", "invalid")]), Some(0.0));
        assert_eq!(
            v("costwatch_investigation_spend_usd_total", &[]),
            Some(1.75)
        );
        assert_eq!(
            v("costwatch_last_tick_timestamp_seconds", &[]),
            Some(at(12, 7, 30).timestamp() as f64)
        );
        assert_eq!(v("costwatch_up", &[]), Some(1.0));
    }

    #[test]
    fn a_failed_tick_sets_up_to_zero_and_a_good_one_back() {
        let m = Metrics::new();
        m.tick(false, at(12, 0, 0));
        let (s, _) = parse(&m.render());
        assert_eq!(value(&s, "costwatch_up", &[]), Some(0.0));
        m.tick(true, at(12, 5, 0));
        let (s, _) = parse(&m.render());
        assert_eq!(value(&s, "costwatch_up", &[]), Some(1.0));
        assert_eq!(
            value(&s, "costwatch_last_tick_timestamp_seconds", &[]),
            Some(at(12, 5, 0).timestamp() as f64)
        );
    }

    #[test]
    fn a_refused_reload_shows_until_one_is_taken_and_keeps_the_last_good_time() {
        let m = Metrics::new();
        let (s, _) = parse(&m.render());
        assert_eq!(
            value(&s, "costwatch_config_last_reload_successful", &[]),
            Some(1.0)
        );
        m.config_load(true, at(12, 0, 0));
        m.config_load(false, at(12, 5, 0));
        let (s, _) = parse(&m.render());
        assert_eq!(
            value(&s, "costwatch_config_last_reload_successful", &[]),
            Some(0.0)
        );
        assert_eq!(
            value(
                &s,
                "costwatch_config_last_reload_success_timestamp_seconds",
                &[]
            ),
            Some(at(12, 0, 0).timestamp() as f64)
        );
        m.config_load(true, at(12, 9, 0));
        let (s, _) = parse(&m.render());
        assert_eq!(
            value(&s, "costwatch_config_last_reload_successful", &[]),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "costwatch_config_last_reload_success_timestamp_seconds",
                &[]
            ),
            Some(at(12, 9, 0).timestamp() as f64)
        );
    }

    #[test]
    fn lag_follows_the_latest_watermark_and_keeps_milliseconds() {
        let m = Metrics::new();
        m.set_now(at(12, 0, 0));
        let (s, _) = parse(&m.render());
        assert_eq!(value(&s, "costwatch_watermark_lag_seconds", &[]), None);
        m.set_watermark(at(11, 0, 0));
        m.set_watermark(at(11, 55, 0));
        m.set_now(at(12, 0, 0) + chrono::Duration::milliseconds(250));
        let (s, _) = parse(&m.render());
        assert_eq!(
            value(&s, "costwatch_watermark_lag_seconds", &[]),
            Some(300.25)
        );
    }

    #[test]
    fn label_values_are_escaped_and_read_back_unchanged() {
        let m = Metrics::new();
        let odd = "a\"b\\c\nd";
        m.finding(odd);
        m.delivery("hook \"ops\"", false);
        let text = m.render();
        assert!(
            text.contains(r#"costwatch_findings_total{kind="a\"b\\c\nd"} 1"#),
            "{text}"
        );
        assert_eq!(text, m.render(), "rendering must not change anything");
        let (s, _) = parse(&text);
        assert_eq!(
            value(&s, "costwatch_findings_total", &[("kind", odd)]),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "costwatch_deliveries_total",
                &[("channel", "hook \"ops\""), ("result", "failed")]
            ),
            Some(1.0)
        );
    }

    #[test]
    fn special_values_use_the_format_spelling() {
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(1e21), "1000000000000000000000");
        assert_eq!(format_value(0.5), "0.5");
        assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    }

    #[test]
    fn counters_are_shared_across_threads() {
        let m = std::sync::Arc::new(Metrics::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        m.windows_processed(1);
                        m.finding("no_cache");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let (s, _) = parse(&m.render());
        assert_eq!(
            value(&s, "costwatch_windows_processed_total", &[]),
            Some(4000.0)
        );
        assert_eq!(
            value(&s, "costwatch_findings_total", &[("kind", "no_cache")]),
            Some(4000.0)
        );
    }
}
