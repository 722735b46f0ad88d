//! What `/metrics` shows, parsed back sample by sample.

use super::exposition::{escape_help, format_value};
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

const FAMILIES: [(&str, &str); 19] = [
    ("costwatch_windows_processed_total", "counter"),
    ("costwatch_window_failures_total", "counter"),
    ("costwatch_sessions_read_total", "counter"),
    ("costwatch_drilldowns_skipped_total", "counter"),
    ("costwatch_findings_held", "gauge"),
    ("costwatch_watermark_lag_seconds", "gauge"),
    ("costwatch_findings_total", "counter"),
    ("costwatch_alerts_enqueued_total", "counter"),
    ("costwatch_alerts_silenced_total", "counter"),
    ("costwatch_incidents_below_floor", "gauge"),
    ("costwatch_deliveries_total", "counter"),
    ("costwatch_gateway_errors_total", "counter"),
    ("costwatch_otlp_requests_total", "counter"),
    ("costwatch_otlp_spans_total", "counter"),
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
        "costwatch_drilldowns_skipped_total",
        "costwatch_findings_held",
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
    m.drilldowns_skipped(7);
    m.drilldowns_skipped(0);
    m.set_findings_held(4);
    m.set_findings_held(2);
    m.set_watermark(at(12, 0, 0));
    m.set_now(at(12, 7, 30));
    m.finding("no_cache");
    m.finding("no_cache");
    m.finding("retry_loop");
    m.alert_enqueued("no_cache");
    m.alert_silenced("retry_loop");
    m.set_below_floor(&[("no_cache".to_owned(), 3)].into());
    m.set_below_floor(&[("retry_loop".to_owned(), 1)].into());
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
    assert_eq!(v("costwatch_drilldowns_skipped_total", &[]), Some(7.0));
    assert_eq!(v("costwatch_findings_held", &[]), Some(2.0), "the last one");
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
    // A gauge: the last evaluation's counts, earlier kinds back at 0.
    let floor = "costwatch_incidents_below_floor";
    assert_eq!(v(floor, &[("kind", "retry_loop")]), Some(1.0));
    assert_eq!(v(floor, &[("kind", "no_cache")]), Some(0.0));
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
