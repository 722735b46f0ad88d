//! The manual's pictures (`docs/src/images/`), made by the project itself
//! from one fixed state: the status page and an alert email as headless
//! chromium renders them, and the alert chart of each kind as costwatch
//! draws it.
//!
//! `COSTWATCH_BLESS=1 cargo test -p costwatch --test it pictures` makes
//! them again. Without it the test checks they are not stale:
//! `pictures.json` records the SHA-256 of each picture's input (the exact
//! HTML given to the browser; for a chart, which costwatch draws the same
//! every time, the PNG itself), and a picture whose input changed fails,
//! named with the command. Screenshots are never compared pixel by pixel:
//! chromium versions draw text differently. When a browser is there (and
//! always under `CI=true`), the screenshots are also taken and checked.

use crate::status::{chromium, decode, headless, rgb};
use base64::Engine as _;
use chrono::{DateTime, Duration as ChronoDuration, TimeZone, Timelike, Utc};
use costwatch::detect::{Finding, GroupBaseline};
use costwatch::domain::{Kind, Severity};
use costwatch::incidents::{Decision, alert_session, build_alert, fingerprint};
use costwatch::investigate::BudgetLedger;
use costwatch::notify::chart::encode::indexed_png;
use costwatch::notify::chart::{ChartSpec, render_png};
use costwatch::notify::render::email_html_with_chart;
use costwatch::ops::status::impact_svg::colour;
use costwatch::ops::status::{Parts, ReplicaView, data, html};
use costwatch::pipeline::Schedule;
use costwatch::source::Window;
use costwatch::source::links::SessionLinks;
use costwatch::store::{
    IncidentUpdate, Inspect, SilenceStore, SqlStore, StatusStore, Store, WindowCommit, WindowStore,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tempfile::TempDir;

/// The command that makes the pictures again.
const COMMAND: &str = "COSTWATCH_BLESS=1 cargo test -p costwatch --test it pictures";

/// Largest a committed picture may be.
const MAX_BYTES: usize = 300 * 1024;

/// When the pictures are taken: half an hour after the last window.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, 11, 12, 30, 0).unwrap()
}

fn images() -> PathBuf {
    crate::support::manifest_dir().join("docs/src/images")
}

/// The shipped rule of `kind` (`rules/`).
fn rule_name(kind: Kind) -> &'static str {
    match kind {
        Kind::NoCache => "no-cache-conversation",
        Kind::OversizedModel => "premium-model-on-tiny-calls",
        Kind::RetryLoop => "retry-loop",
    }
}

/// A finding of the picture's state.
fn finding(n: usize, kind: Kind, group: &str, window: Window, usd: f64) -> Finding {
    let feature = group.trim_start_matches("feature=");
    // Evidence and explanations in the detectors' own words.
    let (evidence, explanation, rule) = match kind {
        Kind::NoCache => {
            let calls = 9 + n % 7;
            let prompt = calls * 14_200;
            let avoidable = (usd * 0.78 * 1e4).round() / 1e4;
            (
                serde_json::json!({
                    "requests": calls,
                    "cached_share": 0.0,
                    "dominant_cause": "prefix_changed",
                    "cache_miss_causes": {
                        "cold_start": {"calls": 1, "usd": 0.0},
                        "prefix_changed": {"calls": calls - 1, "usd": avoidable},
                        "written_never_read": {"calls": calls, "usd": ((usd - avoidable) * 1e4).round() / 1e4},
                    },
                }),
                format!(
                    "{calls} calls read 0 of {prompt} prompt tokens from the prompt cache (0.0%) \
                     while 212 peers in {group} cached a median 70%; {m} of the {m} calls that \
                     could have read it read nothing; most of what could have been saved is \
                     prefix_changed, {m} calls and ${avoidable:.4} of ${usd:.4} (78%): the \
                     prompt's start changed between calls, as a timestamp or a reordered tool \
                     list does",
                    m = calls - 1,
                ),
                rule_name(kind),
            )
        }
        Kind::RetryLoop => {
            let calls = 60 + 37 * (n % 5);
            (
                serde_json::json!({"requests": calls}),
                format!(
                    "{calls} calls where peers in {group} make a median 6: {} consecutive \
                     near-identical calls to gpt-4.1-mini (9120 tokens each, {} failed); the \
                     extra calls cost about ${usd:.5}",
                    calls - 2,
                    calls - 3,
                ),
                rule_name(kind),
            )
        }
        Kind::OversizedModel => (
            serde_json::json!({"tiny_call_price": 15.0 + (n % 4) as f64 * 2.5}),
            format!(
                "12 calls to gpt-4.1 (5x the cheapest model in use) averaged 310 prompt tokens \
                 and made 97% of the session's cost; on gpt-4.1-mini they would have cost \
                 ${:.5} instead of ${:.5}",
                usd * 0.25,
                usd * 1.25
            ),
            rule_name(kind),
        ),
    };
    Finding {
        kind,
        session_id: format!("{feature}-{:04x}", 0x1a2b + n * 97),
        window,
        severity: if usd >= 2.0 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        rule: rule.into(),
        group: group.into(),
        labels: BTreeMap::from([("feature".to_owned(), feature.to_owned())]),
        cost_usd: usd * 1.6,
        impact_usd: usd,
        evidence,
        explanation,
    }
}

/// What happened on day `d` (0 the first of 30, 29 the day of the
/// pictures): (kind, group, sessions, impact of each). A prompt change
/// breaks the support agent's caching in the last ten days, checkout
/// loops twice, triage moves to a premium model twelve days ago, and the
/// gateway was down on days 4, 5 and 12 (nothing found).
fn day_plan(d: usize) -> Vec<(Kind, &'static str, usize, f64)> {
    if [4, 5, 12].contains(&d) {
        return Vec::new();
    }
    let mut plan = Vec::new();
    let support = if d >= 20 { 3 + d % 4 } else { 1 + d % 2 };
    plan.push((
        Kind::NoCache,
        "feature=support-agent",
        support,
        0.9 + 0.05 * (d % 5) as f64,
    ));
    if d.is_multiple_of(3) && d < 24 {
        plan.push((Kind::NoCache, "feature=summarize", 1, 0.35));
    }
    if [7, 8, 23].contains(&d) {
        plan.push((Kind::RetryLoop, "feature=checkout", 2 + d % 2, 3.2));
    }
    if d >= 17 {
        plan.push((Kind::OversizedModel, "feature=triage", 4 + d % 3, 0.42));
    }
    plan
}

/// The incidents resolved at the end of day `d`: the episode it ends.
fn resolved_after(d: usize) -> Vec<(Kind, &'static str)> {
    match d {
        10 => vec![(Kind::RetryLoop, "feature=checkout")],
        25 => vec![
            (Kind::RetryLoop, "feature=checkout"),
            (Kind::NoCache, "feature=summarize"),
        ],
        _ => Vec::new(),
    }
}

/// The state: 30 days of data to 2026-10-11 12:00 (daily windows, then
/// hourly ones over the last day and a half), the incidents they opened,
/// some resolved, a silence, a lease and some investigation budget spent.
async fn state(dir: &TempDir) -> SqlStore {
    let store = SqlStore::open(&crate::support::sqlite_url(dir))
        .await
        .unwrap();
    let first = Utc.with_ymd_and_hms(2026, 9, 12, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2026, 10, 11, 12, 0, 0).unwrap();
    let hourly_from = first + ChronoDuration::days(28);
    store.init_watermark("main", first, first).await.unwrap();
    let mut windows = Vec::new();
    let mut start = first;
    while start < end {
        let size = if start < hourly_from {
            ChronoDuration::days(1)
        } else {
            ChronoDuration::hours(1)
        };
        windows.push(Window {
            start,
            end: start + size,
        });
        start += size;
    }
    let (baselines, models) = (HashMap::new(), BTreeSet::new());
    let mut n = 0;
    for w in windows {
        let d = usize::try_from((w.start - first).num_days()).unwrap();
        let hourly = w.end - w.start == ChronoDuration::hours(1);
        let mut found = Vec::new();
        for (kind, group, sessions, usd) in day_plan(d) {
            for s in 0..sessions {
                // Over the hourly days, a day's sessions are spread over
                // its hours.
                if hourly && (7 + 5 * s) % 24 != w.start.hour() as usize {
                    continue;
                }
                n += 1;
                found.push(finding(
                    n,
                    kind,
                    group,
                    w,
                    usd * (1.0 + 0.1 * (s % 3) as f64),
                ));
            }
        }
        let commit = WindowCommit {
            findings: &found,
            baselines: &baselines,
            models_seen: &models,
            caching: costwatch::detect::CachingEvidence::none(),
            held: None,
            sessions: 40,
            pages: 1,
            now: w.end + ChronoDuration::minutes(2),
        };
        store.commit_window("main", w, commit).await.unwrap();
        if w.end.date_naive() != w.start.date_naive() {
            let updates: Vec<IncidentUpdate> = resolved_after(d)
                .into_iter()
                .map(|(kind, group)| IncidentUpdate {
                    fingerprint: fingerprint(kind.as_str(), rule_name(kind), group),
                    firing: false,
                    notified: None,
                    notified_sessions: 0,
                    sequence: 1,
                    reopen_until: None,
                })
                .collect();
            if !updates.is_empty() {
                let at = w.end + ChronoDuration::minutes(5);
                store
                    .enqueue(None, &updates, &[], &[], at, at)
                    .await
                    .unwrap();
            }
        }
    }
    // The last evaluation saw every window, and told of the open incidents.
    let mut told = Vec::new();
    for (kind, group) in [
        (Kind::NoCache, "feature=support-agent"),
        (Kind::OversizedModel, "feature=triage"),
    ] {
        let fp = fingerprint(kind.as_str(), rule_name(kind), group);
        let open = store.incident(&fp).await.unwrap().unwrap().incident;
        told.push(IncidentUpdate {
            fingerprint: fp,
            firing: true,
            notified: Some(open.started + ChronoDuration::hours(1)),
            notified_sessions: open.session_count,
            sequence: 1,
            reopen_until: None,
        });
    }
    let evaluated = costwatch::store::Evaluated {
        job: "main",
        to: end,
    };
    store
        .enqueue(Some(evaluated), &told, &[], &[], end, end)
        .await
        .unwrap();
    store
        .add_silence(
            &costwatch::silence::NewSilence {
                kind: Some("oversized_model".into()),
                group: None,
                matchers: BTreeMap::from([("feature".to_owned(), "triage".to_owned())]),
                starts_at: now() - ChronoDuration::hours(3),
                ends_at: now() + ChronoDuration::days(2),
                author: "ana".into(),
                reason: "triage moves back to the small model on Tuesday".into(),
            },
            now() - ChronoDuration::hours(3),
        )
        .await
        .unwrap();
    assert!(
        store
            .try_lease(
                "job:main",
                "costwatch-1",
                now() - ChronoDuration::minutes(1),
                now() + ChronoDuration::minutes(4)
            )
            .await
            .unwrap()
    );
    assert!(store.reserve(now().date_naive(), 0.38, 2.0).await.unwrap());
    store
}

/// The status page of the state, as the endpoint serves it at [`now`].
async fn status_page(store: &SqlStore) -> (String, data::Status) {
    let parts = Parts {
        store: store.clone(),
        schedule: Schedule {
            job: "main".into(),
            windows: costwatch::config::WindowConfig {
                size: Duration::from_secs(3600),
                settle_lag: Duration::from_secs(120),
                start: None,
                max_backfill: Duration::from_secs(7 * 86_400),
            },
        },
        investigations: true,
        day_cap_usd: 2.0,
    };
    let replica = ReplicaView {
        name: "costwatch-1".into(),
        last_tick: Some(now() - ChronoDuration::minutes(1)),
        leader: true,
        failed_reads_in_row: 0,
        unhealthy: None,
    };
    let status = data::read(&parts, now(), replica).await;
    (html::render(&status), status)
}

/// The baseline of a peer group whose values of `kind`'s metric sit where
/// healthy sessions are.
fn baseline(kind: Kind) -> GroupBaseline {
    let mut b = GroupBaseline::new(512);
    for i in 0..300u32 {
        let x = f64::from(i % 31) / 30.0;
        match kind {
            Kind::NoCache => b.cached_share.push(0.55 + 0.3 * x),
            Kind::RetryLoop => b.log_requests.push((3.0 + 8.0 * x).ln()),
            Kind::OversizedModel => b.tiny_call_price.push(if i % 25 == 0 { 0.45 } else { 0.0 }),
        }
    }
    b
}

/// The firing alert of the incident of `kind` in `group`, as the daemon
/// builds it, its chart captured against [`baseline`].
async fn alert_of(store: &SqlStore, kind: Kind, group: &str) -> costwatch::notify::Alert {
    let fp = fingerprint(kind.as_str(), rule_name(kind), group);
    let incident = store.incident(&fp).await.unwrap().unwrap().incident;
    let (findings, _) = store.findings_of(&incident, 5).await.unwrap();
    let sessions = findings
        .into_iter()
        .map(|f| {
            let links = SessionLinks::below("https://gateway.example.com", "sessions/{session_id}");
            alert_session(f, Some(&links))
        })
        .collect();
    let mut alert = build_alert(&incident, Decision::Fire, sessions, now(), now());
    alert.chart = ChartSpec::capture(kind, group, &baseline(kind), &alert.sessions);
    assert!(alert.chart.is_some(), "{kind}: a chart");
    alert
}

/// A picture: its file, its input, and how it is made from it.
struct Picture {
    name: String,
    input: Vec<u8>,
    make: Make,
}

enum Make {
    /// The input is the PNG.
    Drawn,
    /// The input is HTML that chromium shows in a window of this size.
    Browser { width: u32, height: u32 },
}

async fn pictures(dir: &TempDir) -> (Vec<Picture>, data::Status) {
    let store = state(dir).await;
    let (page, status) = status_page(&store).await;
    let mut list = vec![Picture {
        name: "status-page.png".into(),
        input: page.into_bytes(),
        make: Make::Browser {
            width: 1280,
            height: 4400,
        },
    }];
    let email = alert_of(&store, Kind::NoCache, "feature=support-agent").await;
    let chart = render_png(email.chart.as_ref().unwrap()).unwrap();
    // The email's HTML part as sent, its chart (an inline part) given to
    // the browser as a data: URL.
    let data_url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&chart)
    );
    let email_html = email_html_with_chart(&email, Some("chart")).replace("cid:chart", &data_url);
    list.push(Picture {
        name: "alert-email.png".into(),
        input: email_html.into_bytes(),
        make: Make::Browser {
            width: 800,
            height: 2000,
        },
    });
    for (kind, group) in [
        (Kind::NoCache, "feature=support-agent"),
        (Kind::OversizedModel, "feature=triage"),
        (Kind::RetryLoop, "feature=checkout"),
    ] {
        let alert = alert_of(&store, kind, group).await;
        list.push(Picture {
            name: format!("chart-{kind}.png"),
            input: render_png(alert.chart.as_ref().unwrap()).unwrap(),
            make: Make::Drawn,
        });
    }
    (list, status)
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The picture of `p`, made in `work` (a browser's profile and files).
fn make(p: &Picture, browser: Option<&Path>, work: &Path) -> Vec<u8> {
    match p.make {
        Make::Drawn => p.input.clone(),
        Make::Browser { width, height } => {
            let browser = browser.expect("a browser");
            let page = work.join(p.name.replace(".png", ".html"));
            std::fs::write(&page, &p.input).unwrap();
            let shot = work.join(&p.name);
            let arg = format!("--screenshot={}", shot.display());
            let size = format!("--window-size={width},{height}");
            let url = format!("file://{}", page.display());
            headless(browser, work, &[&arg, &size], &url);
            let (w, h, pixels) = decode(&shot);
            assert_eq!((w, h), (width, height), "{}", p.name);
            // The whole document fits: its last rows are background.
            let bottom = &pixels[pixels.len() - 20 * w as usize..];
            assert!(
                bottom.iter().all(|px| *px == pixels[pixels.len() - 1]),
                "{} is cut off at {height} px: make its window taller",
                p.name
            );
            // A page has a few flat colours and its text's edges: 256
            // colours keep it as it looks, at a third of the bytes.
            indexed_png(&pixels.concat(), w, h).unwrap()
        }
    }
}

/// How many pixels of `png` are exactly `hex` (`#rrggbb`).
fn pixels_of(png: &[u8], hex: &str, work: &Path) -> usize {
    let file = work.join("count.png");
    std::fs::write(&file, png).unwrap();
    let want = rgb(hex);
    decode(&file).2.iter().filter(|p| **p == want).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pictures_of_the_manual_are_made_from_their_inputs_and_not_stale() {
    let bless = std::env::var_os("COSTWATCH_BLESS").is_some();
    let dir = TempDir::new().unwrap();
    let (list, status) = pictures(&dir).await;

    // The state is what the pictures are meant to show.
    let impact = status.impact.read().unwrap();
    assert_eq!(impact.days.len(), 30);
    let empty: Vec<usize> = (0..30)
        .filter(|d| impact.days[*d].kinds.is_empty())
        .collect();
    assert_eq!(empty, [4, 5, 12], "the outage days are gaps");
    assert!(
        impact.last_week_usd > impact.week_before_usd,
        "getting worse"
    );
    let last = status.last_incidents.read().unwrap();
    assert!(last.items.iter().any(|i| !i.open), "a resolved incident");
    assert!(last.items.iter().any(|i| i.open), "an open incident");

    let browser = if bless {
        Some(chromium().expect("COSTWATCH_BLESS=1 makes screenshots: set COSTWATCH_CHROMIUM"))
    } else {
        chromium()
    };
    let manifest_path = images().join("pictures.json");
    let work = TempDir::new().unwrap();
    if bless {
        std::fs::create_dir_all(images()).unwrap();
        let mut inputs = BTreeMap::new();
        for p in &list {
            let png = make(p, browser.as_deref(), work.path());
            std::fs::write(images().join(&p.name), &png).unwrap();
            assert!(png.len() < MAX_BYTES, "{}: {} bytes", p.name, png.len());
            inputs.insert(p.name.clone(), sha256(&p.input));
        }
        let manifest = serde_json::json!({
            "about": "SHA-256 of each picture's input: the HTML given to the browser, or the PNG costwatch draws",
            "command": COMMAND,
            "inputs": inputs,
        });
        let text = serde_json::to_string_pretty(&manifest).unwrap() + "\n";
        std::fs::write(&manifest_path, text).unwrap();
        eprintln!("pictures written to {}", images().display());
        return;
    }

    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&manifest_path)
            .unwrap_or_else(|e| panic!("{}: {e}; run {COMMAND}", manifest_path.display())),
    )
    .unwrap();
    let recorded = manifest["inputs"].as_object().unwrap();
    let names: BTreeSet<&str> = list.iter().map(|p| p.name.as_str()).collect();
    let listed: BTreeSet<&str> = recorded.keys().map(String::as_str).collect();
    assert_eq!(
        listed, names,
        "pictures.json lists other pictures: run {COMMAND}"
    );
    let mut stale = Vec::new();
    for p in &list {
        let file = images().join(&p.name);
        let size = std::fs::metadata(&file).map(|m| m.len()).ok();
        if recorded[&p.name] != sha256(&p.input).as_str() || size.is_none() {
            stale.push(format!("docs/src/images/{}", p.name));
        }
        if let Some(size) = size {
            assert!(size < MAX_BYTES as u64, "{}: {size} bytes", p.name);
        }
    }
    assert!(
        stale.is_empty(),
        "stale: {} (what they show changed); run {COMMAND} and commit the pictures",
        stale.join(", ")
    );

    // Where there is a browser, the screenshots are taken and looked at.
    let Some(browser) = browser else {
        return;
    };
    for p in &list {
        let png = make(p, Some(&browser), work.path());
        match p.name.as_str() {
            "status-page.png" => {
                for kind in Kind::ALL {
                    let n = pixels_of(&png, colour(kind), work.path());
                    assert!(n > 200, "{n} pixels of {kind}'s colour on the status page");
                }
            }
            "alert-email.png" => {
                let red = costwatch::notify::chart::draw::FLAGGED;
                let hex = format!("#{:02x}{:02x}{:02x}", red.0, red.1, red.2);
                let n = pixels_of(&png, &hex, work.path());
                assert!(n > 50, "{n} red pixels: the email's chart did not show");
            }
            _ => {}
        }
    }
}
