//! The performance benchmark's reports and parsing.

use super::*;

fn time(cpu: f64, wall: f64, rss_kib: u64) -> TimeReport {
    TimeReport {
        user_secs: cpu,
        sys_secs: 0.0,
        wall_secs: wall,
        max_rss_kib: rss_kib,
        exit_status: 0,
    }
}

#[test]
fn medians_and_per_session_cpu() {
    let runs = [
        time(3.0, 10.0, 2048),
        time(1.0, 30.0, 1024),
        time(2.0, 20.0, 4096),
    ];
    let m = Medians::of(&runs);
    assert_eq!((m.cpu_secs, m.wall_secs, m.max_rss_mib), (2.0, 20.0, 2.0));
    assert_eq!(m.cpu_us_per_session(1_000_000), 2.0);
    assert_eq!(
        time(1.5, 2.25, 2048).summary(),
        "1.50 s CPU, 2.25 s wall, 2.0 MiB peak"
    );
}

#[test]
fn targets_compare_medians_with_the_issue() {
    let mut r = PerfReport::new(1_000_000, 0);
    r.costwatch = vec![time(1.8, 10.0, 30 * 1024)];
    r.floor = vec![time(1.5, 12.0, 5 * 1024)];
    r.python = vec![time(20.0, 30.0, 60 * 1024)];
    r.idle = Ok(vec![IdleReport {
        sessions: 10_000,
        rss_max_mib: 18.0,
        ..IdleReport::default()
    }]);
    let t = targets(&r);
    let met: Vec<bool> = t.iter().map(|t| t.met).collect();
    assert_eq!(met, [true, false, true, true]);
    assert!(t[1].result.starts_with("11.1x"), "{}", t[1].result);
    assert_eq!(t[0].result, "1.80 us (fetching the pages alone: 1.50 us)");
    assert!(table(&r, false).contains("nothing parsed"));
    r.costwatch = vec![time(2.5, 10.0, 300 * 1024)];
    r.idle = Err("pending".into());
    let met: Vec<bool> = targets(&r).iter().map(|t| t.met).collect();
    assert_eq!(met, [false, false, false, false]);
}

#[test]
fn a_window_whose_waste_went_unfound_misses_the_findings_target() {
    let score = |kind: Kind, tp: usize, fp: usize, fn_: usize| ClassScore {
        kind,
        true_positives: tp,
        false_positives: fp,
        false_negatives: fn_,
        precision: if tp + fp == 0 {
            1.0
        } else {
            tp as f64 / (tp + fp) as f64
        },
        recall: if tp + fn_ == 0 {
            1.0
        } else {
            tp as f64 / (tp + fn_) as f64
        },
        f1: 0.0,
    };
    let mut r = PerfReport::new(1_000_000, 0);
    r.costwatch = vec![time(1.8, 10.0, 30 * 1024)];
    r.costwatch_scores = vec![
        score(Kind::NoCache, 962, 0, 0),
        score(Kind::RetryLoop, 526, 0, 0),
    ];
    let found = |r: &PerfReport| {
        targets(r)
            .into_iter()
            .find(|t| t.what.starts_with("costwatch precision and recall"))
            .unwrap()
    };
    assert!(found(&r).met);
    // Nothing found of a class: fast, and wrong.
    r.costwatch_scores[0] = score(Kind::NoCache, 0, 0, 962);
    let t = found(&r);
    assert!(!t.met);
    assert_eq!(t.result, "lowest: no_cache P 1.000 R 0.000 (0 fp, 962 fn)");
}

#[test]
fn the_serve_announcement_round_trips() {
    let line = serve_announcement("http://127.0.0.1:1/v1", "k", (10, 26, 24), 1.5);
    assert_eq!(field(&line, "url"), Some("http://127.0.0.1:1/v1"));
    assert_eq!(field(&line, "key"), Some("k"));
    assert_eq!(field(&line, "requests"), Some("26"));
    assert_eq!(field(&line, "in_range"), Some("24"));
    assert_eq!(field(&line, "generate_secs"), Some("1.50"));
    assert_eq!(field(&line, "nope"), None);
}

#[test]
fn jsonl_findings_keep_kind_and_session() {
    let text = "{\"kind\":\"retry_loop\",\"session_id\":\"a\"}\nnot json\n{\"kind\":\"nope\",\"session_id\":\"b\"}\n";
    let f = read_jsonl_findings(text);
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].kind, f[0].session_id.as_str()),
        (Kind::RetryLoop, "a")
    );
}

#[test]
fn the_next_cursor_is_read_from_the_end_of_a_page() {
    let page =
        br#"{"data": [{"session_id": "a", "next_cursor": "no"}], "next_cursor": "b2Zmc2V0OjUw"}"#;
    assert_eq!(
        floor::next_cursor(page).unwrap().as_deref(),
        Some("b2Zmc2V0OjUw")
    );
    let last = br#"{"data": [], "next_cursor" : null}"#;
    assert_eq!(floor::next_cursor(last).unwrap(), None);
    // A page cut off before its cursor is an error, not the last page.
    assert!(floor::next_cursor(br#"{"data": [{"session_id": "a"}"#).is_err());
    assert!(floor::next_cursor(br#"{"data": [], "next_cursor": 7}"#).is_err());
    assert_eq!(
        (
            floor::pages_for(0),
            floor::pages_for(50),
            floor::pages_for(51)
        ),
        (1, 1, 2)
    );
}
