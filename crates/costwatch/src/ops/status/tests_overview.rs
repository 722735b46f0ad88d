//! The top of the status page: the impact chart's bars and axis, what it
//! says in words, and the groups and last incidents read from a real
//! SQLite state.

use super::data::*;
use super::html::render;
use super::impact_svg::{AXIS, Axis, colour, layout, svg};
use super::overview::in_words;
use super::tests::{at, finding, parts};
use crate::detect::Kind;
use crate::incidents::fingerprint;
use crate::source::Window;
use crate::store::status::DayImpact;
use crate::store::{IncidentUpdate, SqlStore, Store, WindowCommit, WindowStore};
use chrono::{Duration as ChronoDuration, NaiveDate};
use std::collections::{BTreeSet, HashMap};

/// The 30 days to 2026-11-02.
fn first() -> NaiveDate {
    at(0, 0).date_naive() - ChronoDuration::days(29)
}

/// The days to 2026-11-02 with `rows` (days after the first, kind,
/// impact), one session each.
fn view(rows: &[(i64, Kind, f64)]) -> ImpactView {
    let rows: Vec<DayImpact> = rows
        .iter()
        .map(|(d, kind, usd)| DayImpact {
            day: first() + ChronoDuration::days(*d),
            kind: *kind,
            sessions: 1,
            impact_usd: *usd,
        })
        .collect();
    impact_view(first(), at(0, 0).date_naive(), at(10, 0), &rows)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.11
}

#[test]
fn a_bars_height_follows_its_days_impact() {
    let v = view(&[
        (3, Kind::NoCache, 4.0),
        (10, Kind::NoCache, 2.0),
        (20, Kind::NoCache, 1.0),
    ]);
    let (axis, bars) = layout(&v);
    assert_eq!(
        axis,
        Axis {
            top: 4.0,
            step: 1.0
        }
    );
    let height = |d: i64| {
        bars.iter()
            .find(|b| b.day == first() + ChronoDuration::days(d))
            .unwrap()
            .height
    };
    let full = height(3);
    assert!(full > 100.0, "the largest day fills the axis: {full}");
    assert!(close(height(10), full / 2.0), "{}", height(10));
    assert!(close(height(20), full / 4.0), "{}", height(20));
    for b in &bars {
        assert!(close(b.y + b.height, AXIS), "every bar stands on the axis");
    }
    // Later days are further right.
    let xs: Vec<f64> = bars.iter().map(|b| b.x).collect();
    assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
}

#[test]
fn the_kinds_of_a_day_stack_in_one_bar() {
    let v = view(&[
        (29, Kind::RetryLoop, 3.0),
        (29, Kind::NoCache, 1.0),
        (29, Kind::OversizedModel, 2.0),
    ]);
    let (_, bars) = layout(&v);
    let kinds: Vec<Kind> = bars.iter().map(|b| b.kind).collect();
    assert_eq!(kinds, Kind::ALL, "from the axis up, in the kinds' order");
    assert!(bars.iter().all(|b| b.x == bars[0].x), "one bar");
    assert!(close(bars[0].y + bars[0].height, AXIS));
    for pair in bars.windows(2) {
        assert!(close(pair[1].y + pair[1].height, pair[0].y), "{pair:?}");
    }
    assert!(close(bars[1].height, 2.0 * bars[0].height));
    assert!(close(bars[2].height, 3.0 * bars[0].height));
    let mut page = String::new();
    svg(&mut page, &v, "t", "d").unwrap();
    for kind in Kind::ALL {
        let fill = format!("fill=\"{}\"", colour(kind));
        assert_eq!(page.matches(&fill).count(), 1, "{kind} in {page}");
    }
    let colours: BTreeSet<&str> = Kind::ALL.iter().map(|k| colour(*k)).collect();
    assert_eq!(colours.len(), 3, "one colour per kind");
}

#[test]
fn an_empty_day_draws_nothing() {
    let v = view(&[
        (5, Kind::NoCache, 2.0),
        (6, Kind::RetryLoop, 0.0),
        (7, Kind::OversizedModel, 1.0),
    ]);
    assert_eq!(v.days.len(), 30);
    assert!(v.days[6].kinds.iter().all(|k| k.impact_usd == 0.0));
    assert!(v.days[4].kinds.is_empty());
    let (_, bars) = layout(&v);
    let days: Vec<NaiveDate> = bars.iter().map(|b| b.day).collect();
    assert_eq!(
        days,
        [
            first() + ChronoDuration::days(5),
            first() + ChronoDuration::days(7)
        ]
    );
    let mut page = String::new();
    svg(&mut page, &v, "t", "d").unwrap();
    let drawn = page
        .split("<g class=\"bars\">")
        .nth(1)
        .and_then(|rest| rest.split("</g>").next())
        .unwrap();
    assert_eq!(drawn.matches("<rect").count(), 2, "{drawn}");
    // A tiny impact still shows.
    let (_, bars) = layout(&view(&[
        (1, Kind::NoCache, 100.0),
        (2, Kind::NoCache, 0.001),
    ]));
    assert!(bars[1].height >= 1.0, "{:?}", bars[1]);
}

#[test]
fn the_dollar_axis_has_a_few_round_ticks() {
    let cases = [
        (7.3, 8.0, 2.0),
        (4.0, 4.0, 1.0),
        (0.034, 0.04, 0.01),
        (130.0, 150.0, 50.0),
        (0.0, 1.0, 0.25),
        (f64::NAN, 1.0, 0.25),
    ];
    for (max, top, step) in cases {
        let a = Axis::over(max);
        assert!(
            (a.top - top).abs() < 1e-12 && (a.step - step).abs() < 1e-12,
            "{max}: {a:?}"
        );
        let n = a.ticks().count();
        assert!((3..=6).contains(&n), "{max}: {n} ticks");
    }
    let a = Axis::over(7.3);
    let labels: Vec<String> = a.ticks().map(|v| a.label(v)).collect();
    assert_eq!(labels, ["$0", "$2", "$4", "$6", "$8"]);
    let a = Axis::over(0.034);
    let labels: Vec<String> = a.ticks().map(|v| a.label(v)).collect();
    assert_eq!(labels, ["$0", "$0.01", "$0.02", "$0.03", "$0.04"]);
}

#[test]
fn the_words_say_the_total_and_whether_it_is_getting_worse() {
    // Days 16..23 are the week before, 23..30 the last week.
    let worse = view(&[
        (2, Kind::RetryLoop, 5.0),
        (17, Kind::NoCache, 20.0),
        (25, Kind::NoCache, 10.0),
        (29, Kind::OversizedModel, 20.0),
    ]);
    assert_eq!(
        (worse.total_usd, worse.last_week_usd, worse.week_before_usd),
        (55.0, 30.0, 20.0)
    );
    assert_eq!(
        in_words(&worse),
        "$55.00 over the 30 days to Nov 2 (UTC): no_cache $30.00, oversized_model $20.00, \
         retry_loop $5.00. The last 7 days: $30.00, up 50% on the 7 days before ($20.00)."
    );
    let better = view(&[(17, Kind::NoCache, 30.0), (25, Kind::NoCache, 10.0)]);
    assert!(
        in_words(&better)
            .ends_with("The last 7 days: $10.00, down 67% on the 7 days before ($30.00)."),
        "{}",
        in_words(&better)
    );
    let new = view(&[(25, Kind::NoCache, 10.0)]);
    assert!(in_words(&new).ends_with("against nothing the 7 days before."));
    let over = view(&[(3, Kind::NoCache, 10.0)]);
    assert!(in_words(&over).ends_with("The last 7 days: nothing, nor the 7 days before."));
    assert_eq!(
        in_words(&view(&[])),
        "No waste found in the 30 days to Nov 2 (UTC)."
    );
}

/// A state whose findings are in three groups, by impact not in the
/// order of their names, over two days, the retry_loop incident resolved.
async fn overview_state(dir: &tempfile::TempDir) -> SqlStore {
    let store = SqlStore::open(&format!(
        "sqlite://{}",
        dir.path().join("state.db").display()
    ))
    .await
    .unwrap();
    let yesterday = Window {
        start: at(8, 0) - ChronoDuration::days(1),
        end: at(9, 0) - ChronoDuration::days(1),
    };
    let between = Window {
        start: yesterday.end,
        end: at(9, 0),
    };
    let today = Window {
        start: at(9, 0),
        end: at(10, 0),
    };
    store
        .init_watermark("main", yesterday.start, yesterday.end)
        .await
        .unwrap();
    let impact = |mut f: crate::detect::Finding, usd: f64| {
        f.impact_usd = usd;
        f
    };
    let (baselines, models) = (HashMap::new(), BTreeSet::new());
    for (w, found) in [
        (
            yesterday,
            vec![
                impact(finding("a-1", Kind::NoCache, "feature=a", yesterday), 0.5),
                impact(finding("z-1", Kind::RetryLoop, "feature=z", yesterday), 2.0),
            ],
        ),
        (between, Vec::new()),
        (
            today,
            vec![
                impact(
                    finding("m-1", Kind::OversizedModel, "feature=m", today),
                    6.0,
                ),
                impact(finding("z-2", Kind::RetryLoop, "feature=z", today), 1.5),
                impact(finding("a-2", Kind::NoCache, "feature=a", today), 0.25),
            ],
        ),
    ] {
        let commit = WindowCommit {
            findings: &found,
            baselines: &baselines,
            models_seen: &models,
            caching: crate::detect::CachingEvidence::none(),
            held: None,
            sessions: 10,
            pages: 1,
            now: w.end,
        };
        store.commit_window("main", w, commit).await.unwrap();
    }
    let retry = fingerprint("retry_loop", "retry_loop", "feature=z");
    let resolve = IncidentUpdate {
        fingerprint: retry,
        firing: false,
        notified: None,
        notified_sessions: 0,
        sequence: 1,
        reopen_until: None,
    };
    store
        .enqueue(None, &[resolve], &[], &[], at(10, 5), at(11, 0))
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn the_top_of_the_page_is_read_from_the_state() {
    let dir = tempfile::TempDir::new().unwrap();
    let store = overview_state(&dir).await;
    let s = read(&parts(store), at(12, 0), Default::default()).await;

    let impact = s.impact.read().unwrap();
    assert_eq!(impact.until, at(10, 0), "the watermark");
    assert_eq!(impact.days.len(), 30);
    assert_eq!(impact.days[29].day, at(0, 0).date_naive());
    type Day = (NaiveDate, Vec<(Kind, u64, f64)>);
    let by_day: Vec<Day> = impact
        .days
        .iter()
        .filter(|d| !d.kinds.is_empty())
        .map(|d| {
            let kinds = d
                .kinds
                .iter()
                .map(|k| (k.kind, k.sessions, k.impact_usd))
                .collect();
            (d.day, kinds)
        })
        .collect();
    let day = |d: i64| at(0, 0).date_naive() + ChronoDuration::days(d);
    assert_eq!(
        by_day,
        [
            (
                day(-1),
                vec![(Kind::NoCache, 1, 0.5), (Kind::RetryLoop, 1, 2.0)]
            ),
            (
                day(0),
                vec![
                    (Kind::NoCache, 1, 0.25),
                    (Kind::OversizedModel, 1, 6.0),
                    (Kind::RetryLoop, 1, 1.5)
                ]
            ),
        ],
        "each finding on the UTC day of the window it was first seen in"
    );
    assert_eq!(impact.total_usd, 10.25);
    assert_eq!(impact.last_week_usd, 10.25);

    // The groups by impact, not by name.
    let groups: Vec<(&str, Kind, u64, f64)> = s
        .top_groups
        .read()
        .unwrap()
        .items
        .iter()
        .map(|g| (g.group.as_str(), g.kind, g.sessions, g.impact_usd))
        .collect();
    assert_eq!(
        groups,
        [
            ("feature=m", Kind::OversizedModel, 1, 6.0),
            ("feature=z", Kind::RetryLoop, 2, 3.5),
            ("feature=a", Kind::NoCache, 2, 0.75),
        ]
    );

    // The resolved incident is listed with the open ones.
    let last = s.last_incidents.read().unwrap();
    let states: BTreeSet<(&str, bool)> = last
        .items
        .iter()
        .map(|i| (i.group.as_str(), i.open))
        .collect();
    assert_eq!(
        states,
        BTreeSet::from([
            ("feature=a", true),
            ("feature=m", true),
            ("feature=z", false)
        ])
    );
    assert_eq!(s.incidents.read().unwrap().items.len(), 2, "open only");

    let page = render(&s);
    let at_ = |needle: &str| {
        page.find(needle)
            .unwrap_or_else(|| panic!("{needle} in:\n{page}"))
    };
    assert!(at_("id=\"impact\"") < at_("id=\"groups\""));
    assert!(at_("id=\"groups\"") < at_("id=\"last-incidents\""));
    assert!(at_("id=\"last-incidents\"") < at_("id=\"incidents\""));
    assert!(at_("feature=m") < at_("feature=z"), "the groups by impact");
    let last_section = &page[at_("id=\"last-incidents\"")..at_("id=\"incidents\"")];
    assert!(
        last_section.contains("<span class=\"ok\">resolved</span>"),
        "{last_section}"
    );
    assert!(page.contains("<svg class=\"impact\""));
    assert!(page.contains(
        "$10.25 over the 30 days to Nov 2 (UTC): no_cache $0.75, oversized_model $6.00, \
         retry_loop $3.50. The last 7 days: $10.25, against nothing the 7 days before."
    ));
}
