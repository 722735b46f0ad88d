//! The status page: what it reads from a real SQLite state, and how it
//! renders (every value escaped, every section with its "none" line).

use super::data::*;
use super::html::render;
use super::{ReplicaView, StatusPage};
use crate::clock::FakeClock;
use crate::config::Severity;
use crate::detect::{Finding, Kind};
use crate::investigate::BudgetLedger;
use crate::pipeline::Schedule;
use crate::silence::NewSilence;
use crate::source::Window;
use crate::store::{SilenceStore, SqlStore, Store, WindowCommit, WindowStore};
use chrono::{DateTime, Duration as ChronoDuration, NaiveDate, TimeZone, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 2, h, m, 0).unwrap()
}

/// Every kind of text the gateway could send, in one string: markup,
/// quotes, an entity, a terminal escape, a line break and a bidi override.
const HOSTILE: &str =
    "<script>alert(\"x\")</script><img src=x onerror='y'>&amp;\u{1b}[2J\r\n\u{202e}";

/// The tag names the page is made of; nothing else may appear.
const TAGS: [&str; 32] = [
    "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p",
    "code", "ul", "li", "nav", "a", "main", "section", "div", "table", "thead", "tbody", "tr",
    "th", "td", "span", "br", "small", "dl", "dt", "dd",
];
const MORE_TAGS: [&str; 8] = [
    "footer", "meter", "svg", "g", "rect", "line", "text", "desc",
];

fn tags(page: &str) -> BTreeSet<String> {
    page.match_indices('<')
        .map(|(i, _)| {
            page[i + 1..]
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
                .collect()
        })
        .collect()
}

pub(super) fn finding(id: &str, kind: Kind, group: &str, window: Window) -> Finding {
    Finding {
        kind,
        session_id: id.into(),
        window,
        severity: Severity::Critical,
        rule: kind.as_str().into(),
        group: group.into(),
        labels: BTreeMap::from([(
            "feature".to_owned(),
            group.trim_start_matches("feature=").to_owned(),
        )]),
        cost_usd: 1.5,
        impact_usd: 0.25,
        evidence: serde_json::Value::Null,
        explanation: format!("session {id} resent its whole prompt"),
    }
}

fn hostile_status(now: DateTime<Utc>) -> Status {
    let incident = IncidentView {
        fingerprint: "0123456789abcdef01234567".into(),
        kind: HOSTILE.into(),
        severity: HOSTILE.into(),
        group: HOSTILE.into(),
        open: true,
        sessions: 3,
        impact_usd: 0.5,
        since: at(9, 0),
        last_finding: at(10, 0),
        notified: true,
        notifications: 2,
        silenced_by: None,
        last_error: Some(HOSTILE.into()),
    };
    let finding = FindingView {
        window_start: at(9, 0),
        kind: HOSTILE.into(),
        severity: HOSTILE.into(),
        session_id: HOSTILE.into(),
        group: HOSTILE.into(),
        cost_usd: 1.0,
        impact_usd: 0.5,
        explanation: HOSTILE.into(),
    };
    let silence = SilenceView {
        id: 7,
        conditions: HOSTILE.into(),
        starts_at: at(8, 0),
        ends_at: at(20, 0),
        author: HOSTILE.into(),
        reason: HOSTILE.into(),
        holding: 1,
    };
    let window = WindowView {
        start: at(9, 0),
        end: at(10, 0),
        status: HOSTILE.into(),
        attempts: 3,
        sessions: 0,
        findings: 0,
        last_error: Some(HOSTILE.into()),
        updated_at: at(10, 5),
    };
    let resolved = IncidentView {
        open: false,
        last_error: None,
        ..incident.clone()
    };
    let group = GroupView {
        group: HOSTILE.into(),
        kind: Kind::RetryLoop,
        sessions: 2,
        impact_usd: 1.5,
    };
    Status {
        generated_at: now,
        impact: Section::Read(impact_view(
            at(0, 0).date_naive() - ChronoDuration::days(29),
            at(0, 0).date_naive(),
            at(10, 0),
            &[],
        )),
        top_groups: Section::Read(Capped::of(vec![group], 5)),
        last_incidents: Section::Read(Capped::of(vec![resolved], 5)),
        replica: ReplicaView {
            name: HOSTILE.into(),
            last_tick: Some(at(10, 5)),
            leader: true,
            failed_reads_in_row: 4,
            // Not the gateway's error (that one is shown once, as the
            // source's): a stuck tick.
            unhealthy: Some(format!("the tick is stuck {HOSTILE}")),
        },
        incidents: Section::Read(Capped::of(vec![incident], 5)),
        findings: Section::Read(FindingsView {
            since: at(0, 0),
            until: at(10, 0),
            list: Capped::of(vec![finding], 5),
        }),
        silences: Section::Read(Capped::of(vec![silence], 5)),
        jobs: Section::Read(Capped::of(
            vec![JobView {
                job: HOSTILE.into(),
                watermark: at(10, 0),
                lag_seconds: 3600,
                windows_due: Some(1),
                evaluated: Some(at(10, 0)),
                windows: Capped::of(vec![window], 5),
            }],
            5,
        )),
        source: Section::Read(SourceView {
            job: HOSTILE.into(),
            healthy: false,
            incident: Some(SourceIncident {
                open: true,
                since: at(10, 0),
                last_failure: at(11, 0),
                last_error: Some(HOSTILE.into()),
                notified: false,
            }),
            last_read: Some(at(10, 1)),
            last_read_window: Some((at(9, 0), at(10, 0))),
            lease_holder: Some(HOSTILE.into()),
            lease_expires: Some(at(11, 30)),
            caching_facts: vec![crate::detect::no_cache::CachingFacts {
                model: HOSTILE.into(),
                min_cacheable_tokens: 1_024,
                min_cacheable_from: crate::detect::FactFrom::Observed,
                cache_lifetime_seconds: 300,
                cache_lifetime_from: crate::detect::FactFrom::Table,
                contradicted_min: Some((2_048, crate::detect::FactFrom::Table)),
                contradicted_lifetime: None,
            }],
        }),
        budget: Section::Failed {
            error: HOSTILE.into(),
        },
    }
}

#[test]
fn every_value_from_the_state_is_escaped_and_no_markup_gets_through() {
    let page = render(&hostile_status(at(11, 0)));
    let allowed: BTreeSet<String> = TAGS
        .iter()
        .chain(MORE_TAGS.iter())
        .map(|t| (*t).to_owned())
        .collect();
    let found = tags(&page);
    assert!(
        found.is_subset(&allowed),
        "{:?}",
        found.difference(&allowed)
    );
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("onerror='"), "{page}");
    assert!(
        !page
            .chars()
            .any(|c| crate::printable::is_unsafe(c) && c != '\n'),
        "a raw control or bidi character in the page"
    );
    let escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x \
                   onerror=&#39;y&#39;&gt;&amp;amp;\\x1b[2J\\r\\n\\u{202e}";
    // The top group, the last incident's kind, severity and group, the
    // open incident's kind, severity, group and error, the finding's five
    // strings, the silence's three, the window's two, the job, the
    // source's error and lease holder, the model of its caching facts, the
    // replica's name and reason, and the budget's error.
    assert_eq!(page.matches(escaped).count(), 25, "{page}");
}

#[test]
fn each_section_says_none_when_there_is_nothing() {
    let now = at(11, 0);
    let status = Status {
        generated_at: now,
        replica: ReplicaView {
            name: "host-1".into(),
            ..ReplicaView::default()
        },
        impact: Section::Read(impact_view(
            at(0, 0).date_naive() - ChronoDuration::days(29),
            at(0, 0).date_naive(),
            at(10, 0),
            &[],
        )),
        top_groups: Section::Read(Capped::of(Vec::new(), 5)),
        last_incidents: Section::Read(Capped::of(Vec::new(), 5)),
        incidents: Section::Read(Capped::of(Vec::new(), 5)),
        findings: Section::Read(FindingsView {
            since: at(0, 0),
            until: at(10, 0),
            list: Capped::of(Vec::new(), 5),
        }),
        silences: Section::Read(Capped::of(Vec::new(), 5)),
        jobs: Section::Read(Capped::of(Vec::new(), 5)),
        source: Section::Read(SourceView {
            job: "main".into(),
            healthy: true,
            incident: None,
            last_read: None,
            last_read_window: None,
            lease_holder: None,
            lease_expires: None,
            caching_facts: Vec::new(),
        }),
        budget: Section::Read(BudgetView {
            enabled: false,
            day: NaiveDate::from_ymd_opt(2026, 11, 2).unwrap(),
            spent_usd: 0.0,
            cap_usd: 1.0,
            investigations: 0,
        }),
    };
    let page = render(&status);
    for line in [
        "<li class=\"ok\">0 open incidents</li>",
        "No waste found in the 30 days to Nov 2 (UTC).",
        "No findings in these days.",
        "No incidents yet.",
        "<li class=\"ok\">gateway healthy</li>",
        "<li>0 silences active</li>",
        "No open incidents.",
        "No findings in that day.",
        "No active silences.",
        "No window was processed yet.",
        "never: no window was committed yet",
        "<dt>Failures</dt><dd>none recorded</dd>",
        "no tick yet",
        "$0.00 of $1.00",
        "disabled (investigation.enabled is false)",
    ] {
        assert!(page.contains(line), "{line} in:\n{page}");
    }
    assert!(!page.contains("<table>"), "no table without rows");
}

#[test]
fn a_section_that_cannot_be_read_says_why_and_the_others_still_show() {
    let mut status = hostile_status(at(11, 0));
    status.incidents = Section::Failed {
        error: "state database unavailable: pool timed out".into(),
    };
    let page = render(&status);
    assert!(
        page.contains("Could not be read: state database unavailable: pool timed out"),
        "{page}"
    );
    assert!(page.contains("<li class=\"bad\">incidents unknown</li>"));
    assert!(page.contains("id=\"silences\"") && page.contains("Active silences"));
    assert!(page.contains("held back") || page.contains("1 open incident"));
    // Every section is closed: the document stays well nested.
    assert_eq!(
        page.matches("<section").count(),
        page.matches("</section>").count()
    );
    assert_eq!(page.matches("<section").count(), 9);
}

#[test]
fn a_capped_list_says_there_are_more() {
    let mut status = hostile_status(at(11, 0));
    if let Section::Read(list) = &mut status.incidents {
        list.more = true;
    }
    let page = render(&status);
    assert!(page.contains("1+ open incident"), "{page}");
    assert!(
        page.contains("Only the first 1; <code>costwatch incidents --status open</code>"),
        "{page}"
    );
    let capped = Capped::of(vec![1, 2, 3], 2);
    assert_eq!((capped.items, capped.more), (vec![1, 2], true));
    let whole = Capped::of(vec![1, 2], 2);
    assert_eq!((whole.items, whole.more), (vec![1, 2], false));
}

#[test]
fn times_money_and_durations_are_written_for_people() {
    use super::html::{relative, span, usd};
    assert_eq!(usd(0.02491), "$0.025");
    assert_eq!(usd(0.0038), "$0.0038");
    assert_eq!(usd(0.51), "$0.51");
    assert_eq!(usd(0.0), "$0.00");
    assert_eq!(usd(4.2), "$4.20");
    assert_eq!(usd(f64::NAN), "$?");
    assert_eq!(span(ChronoDuration::seconds(12)), "12s");
    assert_eq!(span(ChronoDuration::seconds(250)), "4m 10s");
    assert_eq!(span(ChronoDuration::minutes(185)), "3h 05m");
    assert_eq!(span(ChronoDuration::hours(24 * 51 + 18)), "51d 18h");
    assert_eq!(span(ChronoDuration::seconds(-5)), "0s");
    assert_eq!(relative(at(10, 0), at(11, 30)), "1h 30m ago");
    assert_eq!(relative(at(12, 0), at(11, 30)), "in 30m 00s");
}

/// A SQLite state at 10:00 of data time: windows 08:00 and 09:00 done
/// (findings in both, and one a day older), 10:00 failed twice, a failed
/// read of the gateway, a silence on retry_loop and some budget spent.
async fn state(dir: &tempfile::TempDir, now: DateTime<Utc>) -> SqlStore {
    let url = format!("sqlite://{}", dir.path().join("state.db").display());
    let store = SqlStore::open(&url).await.unwrap();
    store
        .init_watermark("main", at(8, 0) - ChronoDuration::days(1), now)
        .await
        .unwrap();
    let baselines = HashMap::new();
    let models = BTreeSet::new();
    let old = Window {
        start: at(8, 0) - ChronoDuration::days(1),
        end: at(9, 0) - ChronoDuration::days(1),
    };
    let windows = [
        (
            old,
            vec![finding("old-session", Kind::NoCache, "feature=batch", old)],
        ),
        (
            Window {
                start: at(9, 0) - ChronoDuration::days(1),
                end: at(8, 0),
            },
            Vec::new(),
        ),
        (
            Window {
                start: at(8, 0),
                end: at(9, 0),
            },
            Vec::new(),
        ),
        (
            Window {
                start: at(9, 0),
                end: at(10, 0),
            },
            Vec::new(),
        ),
    ];
    for (n, (w, mut found)) in windows.into_iter().enumerate() {
        if n == 2 {
            found.push(finding("s-<1>", Kind::NoCache, "feature=batch", w));
        }
        if n == 3 {
            found.push(finding("s-2", Kind::RetryLoop, "feature=checkout", w));
            found.push(finding("s-3", Kind::NoCache, "feature=batch", w));
        }
        let commit = WindowCommit {
            findings: &found,
            baselines: &baselines,
            models_seen: &models,
            caching: crate::detect::CachingEvidence::none(),
            held: None,
            sessions: 10,
            pages: 1,
            now: w.end + ChronoDuration::minutes(2),
        };
        store.commit_window("main", w, commit).await.unwrap();
    }
    let failed = Window {
        start: at(10, 0),
        end: at(11, 0),
    };
    for _ in 0..2 {
        store
            .record_failure("main", failed, "gateway answered 503 <html>", now)
            .await
            .unwrap();
    }
    store
        .source_failed("main", "gateway answered 503 <html>", now)
        .await
        .unwrap();
    store
        .add_silence(
            &NewSilence {
                kind: Some("retry_loop".into()),
                group: None,
                matchers: BTreeMap::new(),
                starts_at: now - ChronoDuration::hours(1),
                ends_at: now + ChronoDuration::hours(5),
                author: "ops".into(),
                reason: "checkout retries are being fixed".into(),
            },
            now - ChronoDuration::hours(1),
        )
        .await
        .unwrap();
    assert!(store.reserve(now.date_naive(), 0.125, 1.0).await.unwrap());
    store
}

pub(super) fn parts(store: SqlStore) -> Parts {
    Parts {
        store,
        schedule: Schedule {
            job: "main".into(),
            windows: crate::config::WindowConfig {
                size: Duration::from_secs(3600),
                settle_lag: Duration::from_secs(120),
                start: None,
                max_backfill: Duration::from_secs(7 * 86_400),
            },
        },
        investigations: true,
        day_cap_usd: 1.0,
    }
}

#[tokio::test]
async fn the_page_is_read_from_the_state_with_each_figure_computed() {
    let dir = tempfile::TempDir::new().unwrap();
    let now = at(12, 30);
    let store = state(&dir, now).await;
    let replica = ReplicaView {
        name: "host-1".into(),
        last_tick: Some(now),
        leader: true,
        failed_reads_in_row: 2,
        unhealthy: Some("gateway answered 503".into()),
    };
    let s = read(&parts(store), now, replica.clone()).await;
    assert_eq!(s.generated_at, now);
    assert_eq!(s.replica, replica);

    // Three open incidents: the gateway's, retry_loop (silenced) and
    // no_cache, most recently active first.
    let incidents = s.incidents.read().unwrap();
    let kinds: Vec<&str> = incidents.items.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(!incidents.more);
    let retry = incidents
        .items
        .iter()
        .find(|i| i.kind == "retry_loop")
        .unwrap();
    let no_cache = incidents
        .items
        .iter()
        .find(|i| i.kind == "no_cache")
        .unwrap();
    let silences = s.silences.read().unwrap();
    assert_eq!(silences.items.len(), 1);
    assert_eq!(retry.silenced_by, Some(silences.items[0].id));
    assert_eq!(no_cache.silenced_by, None);
    assert_eq!(
        no_cache.sessions, 3,
        "every no_cache finding of feature=batch"
    );
    assert!((no_cache.impact_usd - 0.75).abs() < 1e-9);
    assert!(!no_cache.notified);
    assert_eq!(silences.items[0].holding, 1);
    assert_eq!(silences.items[0].conditions, "kind=retry_loop");

    // Findings of the day of data before the watermark (10:00), newest first.
    let findings = s.findings.read().unwrap();
    assert_eq!(
        (findings.since, findings.until),
        (at(10, 0) - ChronoDuration::days(1), at(10, 0))
    );
    let ids: Vec<&str> = findings
        .list
        .items
        .iter()
        .map(|f| f.session_id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["s-3", "s-2", "s-<1>"],
        "the one a day older is left out"
    );

    // The main job: newest window first, the failed one with its attempts.
    let jobs = s.jobs.read().unwrap();
    assert_eq!(jobs.items.len(), 1);
    let main = &jobs.items[0];
    assert_eq!(main.watermark, at(10, 0));
    assert_eq!(main.lag_seconds, 2 * 3600 + 30 * 60);
    assert_eq!(
        main.windows_due,
        Some(2),
        "10:00 and 11:00 ended over 2 minutes ago"
    );
    let first = &main.windows.items[0];
    assert_eq!(
        (first.start, first.status.as_str(), first.attempts),
        (at(10, 0), "failed", 2)
    );
    assert_eq!(
        first.last_error.as_deref(),
        Some("gateway answered 503 <html>")
    );
    assert_eq!(main.windows.items[1].status, "done");
    assert_eq!(main.windows.items.len(), 5);

    // The gateway: unhealthy since the failed read; last read whole at the
    // 09:00 window's commit.
    let source = s.source.read().unwrap();
    assert!(!source.healthy);
    let incident = source.incident.as_ref().unwrap();
    assert!(incident.open);
    assert_eq!(incident.since, now);
    assert_eq!(
        incident.last_error.as_deref(),
        Some("gateway answered 503 <html>")
    );
    assert_eq!(source.last_read, Some(at(10, 2)));
    assert_eq!(source.last_read_window, Some((at(9, 0), at(10, 0))));

    let budget = s.budget.read().unwrap();
    assert_eq!(budget.day, now.date_naive());
    assert!((budget.spent_usd - 0.125).abs() < 1e-9);
    assert_eq!(
        (budget.cap_usd, budget.investigations, budget.enabled),
        (1.0, 0, true)
    );

    let page = render(&s);
    for text in [
        "3 open incidents",
        "gateway unhealthy",
        "held back by silence 1",
        "<code>s-&lt;1&gt;</code>",
        "gateway answered 503 &lt;html&gt;",
        "$0.12 of $1.00",
        "checkout retries are being fixed",
    ] {
        assert!(page.contains(text), "{text} in:\n{page}");
    }
}

#[tokio::test]
async fn reading_changes_nothing_and_a_reload_swaps_the_state() {
    let dir = tempfile::TempDir::new().unwrap();
    let now = at(12, 30);
    let store = state(&dir, now).await;
    let before = store.windows("main").await.unwrap();
    let clock = Arc::new(FakeClock::new(now));
    let page = StatusPage::new(parts(store.clone()), clock, Arc::new(ReplicaView::default));
    let s = page.read().await.unwrap();
    assert_eq!(s.incidents.read().unwrap().items.len(), 3);
    assert_eq!(store.windows("main").await.unwrap(), before);
    assert_eq!(store.watermark("main").await.unwrap(), Some(at(10, 0)));

    let empty_dir = tempfile::TempDir::new().unwrap();
    let empty = SqlStore::open(&format!(
        "sqlite://{}",
        empty_dir.path().join("state.db").display()
    ))
    .await
    .unwrap();
    page.replace(parts(empty));
    let s = page.read().await.unwrap();
    assert!(s.incidents.read().unwrap().items.is_empty());
    assert!(s.jobs.read().unwrap().items.is_empty());
    assert!(s.source.read().unwrap().healthy);
}

#[tokio::test]
async fn the_endpoint_serves_the_page_as_html_or_json_never_cached() {
    use crate::ops::http::{HealthFn, HealthReport, serve};
    use crate::ops::metrics::Metrics;
    let dir = tempfile::TempDir::new().unwrap();
    let now = at(12, 30);
    let store = state(&dir, now).await;
    let page = StatusPage::new(
        parts(store),
        Arc::new(FakeClock::new(now)),
        Arc::new(ReplicaView::default),
    );
    let health: HealthFn = Arc::new(HealthReport::default);
    let (stop, rx) = tokio::sync::watch::channel(false);
    let (addr, task) = serve(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::new(Metrics::new()),
        health,
        Some(page),
        None,
        rx,
    )
    .await
    .unwrap();
    let client = reqwest::Client::new();

    let res = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let header = |name: &str| res.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    assert_eq!(header("cache-control"), "no-store");
    assert_eq!(header("x-content-type-options"), "nosniff");
    let csp = header("content-security-policy");
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(!csp.contains("script-src"), "{csp}");
    let body = res.text().await.unwrap();
    assert!(body.starts_with("<!DOCTYPE html>"), "{body}");
    assert!(body.contains("3 open incidents"), "{body}");

    let res = client
        .get(format!("http://{addr}/?format=json"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let json: serde_json::Value = res.json().await.unwrap();
    assert_eq!(json["incidents"]["items"].as_array().unwrap().len(), 3);
    assert_eq!(json["findings"]["list"]["items"][2]["session_id"], "s-<1>");
    assert_eq!(
        json["jobs"]["items"][0]["windows"]["items"][0]["status"],
        "failed"
    );
    assert_eq!(json["budget"]["spent_usd"], 0.125);
    assert_eq!(json["source"]["healthy"], false);

    let res = client
        .get(format!("http://{addr}/?format=xml"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let res = client.post(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(res.status(), 405);

    drop(client);
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
}
