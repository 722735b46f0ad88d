//! The seed window served over loopback and run through the real pipeline.

use crate::support::{clock, detector, gateway, seed_dataset, sqlite_url, start_sim, ts};
use costwatch::backtest::{self, Replay};
use costwatch::detect::{Finding, Kind};
use costwatch::store::{SqlStore, Store, WindowStore};
use std::collections::BTreeSet;
use std::time::Duration;
use tempfile::TempDir;

const NO_CACHE: &str = "replay-mismatch-a14896679e70";
const OVERSIZED: &str = "subagent-sol-9b31c0e4d2aa";
const RETRY_LOOP: &str = "retry-loop-7f2e81c09ab5";

/// Replays 11:00-12:00 as one window with pages of `page_limit`; returns the
/// replay and what the state file holds afterwards.
async fn replay_seed(page_limit: u32) -> (Replay, Vec<Finding>) {
    let sim = start_sim(seed_dataset()).await;
    let (source, sleeper) = gateway(&sim, page_limit);
    let dir = TempDir::new().unwrap();
    let url = sqlite_url(&dir);
    let (from, to) = (ts("2026-10-11T11:00:00Z"), ts("2026-10-11T12:00:00Z"));
    let replay = backtest::replay(
        source,
        detector(),
        &url,
        from,
        to,
        Duration::from_secs(3600),
        4,
        clock(to),
        &backtest::WindowRetries::none(),
        |_| {},
    )
    .await
    .unwrap();
    assert!(sleeper.delays().is_empty(), "nothing was retried");
    let store = SqlStore::open(&url).await.unwrap();
    let stored = store.findings(from, to).await.unwrap();
    let windows = store.windows(backtest::BACKTEST_JOB).await.unwrap();
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].status, "done");
    assert_eq!(windows[0].sessions, 26);
    assert_eq!(windows[0].findings, 3);
    assert_eq!(
        store.watermark(backtest::BACKTEST_JOB).await.unwrap(),
        Some(to)
    );
    store.close().await;
    (replay, stored)
}

fn ids_of(findings: &[Finding], kind: Kind) -> BTreeSet<&str> {
    findings
        .iter()
        .filter(|f| f.kind == kind)
        .map(|f| f.session_id.as_str())
        .collect()
}

fn find(findings: &[Finding], kind: Kind) -> &Finding {
    findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} finding in {findings:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_window_flags_exactly_the_three_known_sessions() {
    let (replay, stored) = replay_seed(50).await;
    assert_eq!(replay.windows, 1);
    assert_eq!(replay.sessions, 26);
    let f = &replay.findings;
    assert_eq!(f.len(), 3, "{f:#?}");
    assert_eq!(ids_of(f, Kind::NoCache), BTreeSet::from([NO_CACHE]));
    assert_eq!(ids_of(f, Kind::OversizedModel), BTreeSet::from([OVERSIZED]));
    assert_eq!(ids_of(f, Kind::RetryLoop), BTreeSet::from([RETRY_LOOP]));

    let window_start = ts("2026-10-11T11:00:00Z");
    for finding in f {
        assert!(finding.impact_usd > 0.0, "{finding:#?}");
        assert!(finding.impact_usd <= finding.cost_usd, "{finding:#?}");
        assert!(!finding.explanation.trim().is_empty(), "{finding:#?}");
        assert!(finding.evidence.is_object(), "{finding:#?}");
        assert_eq!(finding.window.start, window_start);
        assert!(finding.group.starts_with("feature="), "{finding:#?}");
    }

    let nc = &find(f, Kind::NoCache).evidence;
    assert_eq!(nc["cached_tokens"], 0, "{nc}");
    assert_eq!(nc["requests"], 6, "{nc}");
    assert_eq!(nc["input_tokens"], 24557, "{nc}");

    let os = find(f, Kind::OversizedModel);
    assert!(os.explanation.contains("gpt-6.1-sol"), "{}", os.explanation);
    assert!(
        os.evidence["premium_cost_share"].as_f64().unwrap() >= 0.5,
        "{}",
        os.evidence
    );

    let rl = &find(f, Kind::RetryLoop).evidence;
    assert_eq!(rl["longest_identical_run"], 10, "{rl}");
    assert_eq!(rl["requests"], 10, "{rl}");

    // What was stored is what was reported.
    assert_eq!(stored, replay.findings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_window_gives_the_same_findings_in_pages_of_five() {
    let (whole, _) = replay_seed(50).await;
    let (paged, stored) = replay_seed(5).await;
    assert_eq!(paged.sessions, 26);
    assert_eq!(paged.findings, whole.findings);
    assert_eq!(stored, whole.findings);
}
