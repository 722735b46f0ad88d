//! Alertmanager keeps costwatch's firing alerts firing until they resolve:
//! the daemon posts them again every `repost_interval` with an `endsAt`,
//! from stored state, so re-posts survive a restart and replicas sharing
//! PostgreSQL do not multiply them. Checked against the Alertmanager
//! stand-in, which keeps alerts the way Alertmanager does, on the test's
//! fake clock.

use crate::daemon::settings;
use crate::pg::PgCluster;
use crate::support::*;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::clock::{Clock, FakeClock};
use costwatch::config::WebhookShape;
use costwatch::daemon::Daemon;
use costwatch::notify::outbox::Channel;
use costwatch::notify::webhook::{WebhookNotifier, WebhookSettings};
use costwatch::pipeline::Pipeline;
use costwatch::source::reference::ReferenceSource;
use costwatch::store::{SqlStore, Store};
use costwatch_sim::SimServer;
use costwatch_sim::alertmanager::AlertmanagerSim;
use costwatch_sim::scenario::{ScenarioParams, generate};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

type Node = Daemon<ReferenceSource, SqlStore>;

/// A daemon named `replica` over `url`, on 15-minute windows from `start`,
/// delivering to the Alertmanager stand-in.
async fn node(
    sim: &SimServer,
    url: &str,
    replica: &str,
    am: &AlertmanagerSim,
    start: DateTime<Utc>,
    clock: &FakeClock,
) -> Node {
    let (source, _) = gateway(sim, 50);
    let store = SqlStore::open(url).await.unwrap();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let schedule = quarter_hours(start);
    let pipeline = Pipeline::new(source, store, detector(), schedule, 4, shared.clone());
    let channel = WebhookNotifier::new(WebhookSettings {
        name: "am".into(),
        url: url::Url::parse(&am.alerts_url()).unwrap(),
        shape: WebhookShape::Alertmanager,
        secret_file: None,
        secret: None,
        timeout: Duration::from_secs(5),
        repost_interval: Duration::from_secs(60),
    })
    .unwrap();
    let mut s = settings(vec![Arc::new(channel) as Arc<dyn Channel>]);
    s.replica = replica.to_owned();
    Daemon::new(pipeline, s, shared)
}

/// The `fingerprint` labels of the alerts Alertmanager shows firing now.
fn am_firing(am: &AlertmanagerSim, now: DateTime<Utc>) -> BTreeSet<String> {
    am.firing_at(now)
        .into_iter()
        .map(|a| a.labels["fingerprint"].clone())
        .collect()
}

/// The incidents costwatch has told about and that have not resolved.
async fn told_and_firing(store: &SqlStore) -> BTreeSet<String> {
    store
        .open_incidents()
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.notified.is_some())
        .map(|i| i.fingerprint)
        .collect()
}

/// A day of traffic, a tick every 15 minutes and a delivery pass every
/// minute in between (by every node, at the same time). `restart_at` swaps
/// the nodes for new ones on fresh connections at that tick. After every
/// pass, Alertmanager must show exactly the incidents costwatch holds
/// firing, including incidents firing for longer than Alertmanager's
/// 5-minute `resolve_timeout`.
async fn a_day_against_alertmanager(url: &str, replicas: &[&str], restart_at: Option<usize>) {
    let params = ScenarioParams {
        days: 1,
        sessions_per_day: 1200,
        ..ScenarioParams::default()
    };
    let start = params.start;
    let sim = start_sim(generate(&params)).await;
    let clock = FakeClock::new(start + ChronoDuration::minutes(17));
    let c = clock.clone();
    let am = AlertmanagerSim::start(Arc::new(move || c.now()))
        .await
        .unwrap();
    let mut nodes = Vec::new();
    for r in replicas {
        nodes.push(node(&sim, url, r, &am, start, &clock).await);
    }
    let check = SqlStore::open(url).await.unwrap();
    let mut firing_since: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    let mut held_past_timeout = BTreeSet::new();
    for tick in 0..96 {
        if restart_at == Some(tick) {
            nodes.clear();
            for r in replicas {
                nodes.push(node(&sim, url, r, &am, start, &clock).await);
            }
        }
        for n in &nodes {
            n.tick().await.unwrap();
        }
        for minute in 0..15 {
            if minute > 0 {
                // Every node's pass at the same time, as replicas would.
                match nodes.as_slice() {
                    [one] => drop(one.deliver().await.unwrap()),
                    [one, two] => {
                        let (a, b) = tokio::join!(one.deliver(), two.deliver());
                        a.unwrap();
                        b.unwrap();
                    }
                    _ => unreachable!("one or two nodes"),
                }
            }
            let now = clock.now();
            let told = told_and_firing(&check).await;
            assert_eq!(
                am_firing(&am, now),
                told,
                "at {now}: Alertmanager shows what costwatch holds firing"
            );
            firing_since.retain(|fp, _| told.contains(fp));
            for fp in &told {
                let since = *firing_since.entry(fp.clone()).or_insert(now);
                if now - since > ChronoDuration::minutes(5) {
                    held_past_timeout.insert(fp.clone());
                }
            }
            clock.advance(ChronoDuration::minutes(1));
        }
    }
    assert!(
        held_past_timeout.len() >= 2,
        "incidents fired for longer than resolve_timeout: {held_past_timeout:?}"
    );
    assert!(told_and_firing(&check).await.len() < held_past_timeout.len());

    // Each firing post holds for 4 × max(15 s, 1m) and comes a minute after
    // the last one: never twice in one pass, whatever the replicas.
    let mut last: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    let mut reposts = 0;
    for p in am.posts() {
        let Some(ends) = p.ends_at.filter(|e| *e > p.at) else {
            continue;
        };
        assert_eq!(ends - p.at, ChronoDuration::minutes(4), "{p:?}");
        let fp = p.labels["fingerprint"].clone();
        if let Some(before) = last.insert(fp, p.at) {
            assert!(p.at - before >= ChronoDuration::minutes(1), "{p:?}");
            reposts += 1;
        }
    }
    assert!(reposts > 20, "{reposts} re-posts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_keeps_an_incident_firing_until_it_resolves_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    a_day_against_alertmanager(&sqlite_url(&dir), &["one"], Some(48)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_keep_alertmanager_current_without_double_posts() {
    let pg = PgCluster::start();
    a_day_against_alertmanager(&pg.url(), &["one", "two"], None).await;
}
