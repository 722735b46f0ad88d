//! Tests of the quality report: medians, figures, summaries, targets and
//! the table, and serving a dataset live or historically.

use super::*;

fn score(kind: Kind, p: f64, r: f64) -> ClassScore {
    ClassScore {
        kind,
        true_positives: 0,
        false_positives: 0,
        false_negatives: 0,
        precision: p,
        recall: r,
        f1: if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        },
    }
}

fn result(seed: u64, p: f64, alerts: usize, incidents: usize) -> SeedResult {
    let sys = |p: f64, alerts: usize, false_alerts: usize| SystemResult {
        scores: Kind::ALL.into_iter().map(|k| score(k, p, 1.0)).collect(),
        alerts: Kind::ALL
            .into_iter()
            .map(|k| {
                (
                    k,
                    AlertTally {
                        alerts,
                        false_alerts,
                        episodes: alerts,
                        missed_incidents: 0,
                    },
                )
            })
            .collect(),
    };
    SeedResult {
        seed,
        sessions: 10,
        requests: 20,
        incidents: Kind::ALL.into_iter().map(|k| (k, incidents)).collect(),
        costwatch: sys(p, alerts, 0),
        baseline: sys(p / 10.0, alerts * 5, alerts * 4),
        replay_secs: 0.0,
    }
}

#[test]
fn median_and_mean_of_odd_even_and_empty() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[]), 0.0);
    assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    assert_eq!(mean(&[]), 0.0);
}

#[test]
fn figures_divide_alerts_by_incidents() {
    let r = result(1, 1.0, 6, 3);
    let f = Figures::of(&r.costwatch, Kind::NoCache, 3);
    assert_eq!((f.alerts_per_incident, f.false_alerts), (2.0, 0.0));
    let b = Figures::of(&r.baseline, Kind::NoCache, 3);
    assert_eq!((b.alerts_per_incident, b.false_alerts), (10.0, 24.0));
    assert!((b.precision - 0.1).abs() < 1e-12);
    // No real incident: alerts are counted as they are.
    assert_eq!(
        Figures::of(&r.costwatch, Kind::NoCache, 0).alerts_per_incident,
        6.0
    );
}

#[test]
fn summary_takes_median_and_mean_per_kind_and_system() {
    let results = [
        result(1, 0.9, 2, 2),
        result(2, 1.0, 4, 2),
        result(3, 0.5, 12, 2),
    ];
    let s = summary(&results);
    assert_eq!(s.len(), 3);
    let (kind, [cw_med, base_med, cw_mean, base_mean]) = s[1];
    assert_eq!(kind, Kind::OversizedModel);
    assert_eq!(cw_med.precision, 0.9);
    assert!((cw_mean.precision - 0.8).abs() < 1e-12);
    assert_eq!(cw_med.alerts_per_incident, 2.0);
    assert!((cw_mean.alerts_per_incident - 3.0).abs() < 1e-12);
    assert!((base_med.precision - 0.09).abs() < 1e-12);
    assert_eq!(base_med.false_alerts, 16.0);
    assert!((base_mean.false_alerts - 24.0).abs() < 1e-12);
}

#[test]
fn targets_name_the_worst_class_and_judge_the_baseline() {
    let results = [result(7, 1.0, 2, 2), result(11, 0.96, 2, 2)];
    let t = targets(&results);
    assert_eq!(t.len(), 3);
    assert!(!t[0].met, "precision 0.96 misses 0.97");
    assert!(
        t[0].result.contains("0.960") && t[0].result.contains("seed 11"),
        "{}",
        t[0].result
    );
    assert!(t[1].met, "recall is 1 everywhere");
    assert!(t[2].met, "baseline precision is a tenth of costwatch's");
    let close = [SeedResult {
        baseline: result(1, 0.9, 2, 2).costwatch,
        ..result(1, 1.0, 2, 2)
    }];
    assert!(
        !targets(&close)[2].met,
        "a baseline as good is not far below"
    );
    assert!(targets_table(&t, false).contains("NOT met"));
}

#[test]
fn alerting_targets_count_missed_incidents_extra_alerts_and_false_ones() {
    let good = [result(7, 1.0, 2, 2), result(11, 1.0, 1, 2)];
    let t = alerting_targets(&good);
    assert_eq!(t.len(), 3);
    assert!(t.iter().all(|t| t.met), "{t:?}");
    assert_eq!(t[0].result, "0 of 12 missed");
    let mut noisy = result(11, 1.0, 3, 2);
    if let Some(a) = noisy.costwatch.alerts.get_mut(&Kind::RetryLoop) {
        a.missed_incidents = 1;
        a.false_alerts = 2;
    }
    let t = alerting_targets(&[result(7, 1.0, 2, 2), noisy]);
    assert!(!t[0].met && t[0].result == "1 of 12 missed", "{:?}", t[0]);
    assert!(!t[1].met && t[1].result.contains("1.50") && t[1].result.contains("seed 11"));
    assert!(!t[2].met && t[2].result == "2 false alerts", "{:?}", t[2]);
    assert!(alerting_targets(&[]).iter().all(|t| !t.met));
}

#[test]
fn the_table_has_a_row_per_seed_and_kind_plus_median_and_mean() {
    let results = [result(7, 1.0, 2, 2), result(11, 0.5, 2, 2)];
    let text = table(&results, false);
    assert_eq!(text.lines().count(), 1 + 6 + 6);
    assert!(text.lines().any(|l| l.starts_with("median  retry_loop")));
    let md = table(&results, true);
    assert!(md.lines().nth(1).unwrap().starts_with("| ---"));
    assert!(md.lines().all(|l| l.starts_with('|') && l.ends_with('|')));
}

/// A checkout session of sixteen identical rate-limited calls: three in the
/// first 15-minute window of the day, thirteen in the second (after the
/// first window's settle lag).
fn split_loop() -> (costwatch_sim::Dataset, ScenarioParams) {
    use costwatch_sim::{SimRequest, SimSession, Truth};
    let params = ScenarioParams {
        days: 1,
        ..ScenarioParams::default()
    };
    let labels: std::collections::BTreeMap<String, String> =
        [("feature".to_owned(), "checkout".to_owned())].into();
    let requests = (0..16)
        .map(|i| {
            let minute = if i < 3 { 13 } else { 20 };
            SimRequest {
                request_id: format!("req_{i:016x}"),
                session_id: "checkout-000000000001".into(),
                created_at: params.start
                    + ChronoDuration::minutes(minute)
                    + ChronoDuration::seconds(i * 5),
                model: "gpt-6-luna".into(),
                status: "error".into(),
                http_status: 429,
                error_type: Some("RateLimitError".into()),
                input_tokens: 400,
                cached_tokens: 0,
                cache_write_tokens: 0,
                output_tokens: 0,
                cost_usd: 0.0,
                latency_ms: 100,
                labels: labels.clone(),
            }
        })
        .collect();
    let session = SimSession {
        session_id: "checkout-000000000001".into(),
        labels,
        requests,
        fixed_row: None,
    };
    let mut truth = Truth::default();
    truth.insert("retry_loop", "checkout-000000000001");
    let d = costwatch_sim::Dataset::new(scenario::catalogue(), vec![session], truth);
    (d, params)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_window_sees_only_the_calls_made_by_its_end() {
    let rules = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../rules"));
    let second_window = ScenarioParams::default().start + ChronoDuration::minutes(15);
    for (serving, found_in) in [
        (Serving::Historical, ScenarioParams::default().start),
        (Serving::Live, second_window),
    ] {
        let (d, params) = split_loop();
        let run = run_dataset(1, d, &params, rules, &Default::default(), serving)
            .await
            .unwrap();
        for findings in [&run.costwatch, &run.baseline] {
            let windows: Vec<_> = findings
                .iter()
                .filter(|f| f.kind == Kind::RetryLoop)
                .map(|f| f.window.start)
                .collect();
            assert_eq!(windows, [found_in], "{serving:?}");
        }
        assert_eq!(
            run.result.costwatch.score(Kind::RetryLoop).unwrap().recall,
            1.0
        );
    }
}

#[test]
fn the_replay_reads_the_sessions_of_the_last_day_whole_and_a_window_more() {
    use chrono::TimeZone;
    let from = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    let end = from + ChronoDuration::days(4);
    // The last call long before the end: the end stands.
    let early = from + ChronoDuration::hours(90);
    assert_eq!(replay_end(from, end, Some(early)), end);
    assert_eq!(replay_end(from, end, None), end);
    // A session started on the last day runs 14 seconds past it: its
    // window, then one more for a finding held until it is quiet.
    let late = end + ChronoDuration::seconds(14);
    assert_eq!(
        replay_end(from, end, Some(late)),
        end + ChronoDuration::minutes(30)
    );
    // Its last call two minutes before the end: one window more.
    let just_before = end - ChronoDuration::minutes(2);
    assert_eq!(
        replay_end(from, end, Some(just_before)),
        end + ChronoDuration::minutes(15)
    );
}
