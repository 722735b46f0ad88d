//! The outbox's delivery order, on SQLite and PostgreSQL: an incident's
//! notifications reach each channel in their order, even when one of them
//! waits in backoff.

use crate::pg::PgCluster;
use crate::support::*;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::alerting::deliver_due;
use costwatch::notify::outbox::{Channel, RetryPolicy};
use costwatch::notify::{Alert, AlertStatus, Notifier, NotifyError};
use costwatch::store::{SqlStore, Store};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A channel with a name that records the idempotency keys it accepted and
/// fails its first `fail_next` calls as a receiver that is down would.
#[derive(Default)]
pub struct Named {
    pub name: String,
    pub keys: Mutex<Vec<String>>,
    pub fail_next: AtomicUsize,
}

impl Named {
    pub fn new(name: &str, fail_next: usize) -> Arc<Named> {
        Arc::new(Named {
            name: name.to_owned(),
            keys: Mutex::default(),
            fail_next: AtomicUsize::new(fail_next),
        })
    }

    pub fn keys(&self) -> Vec<String> {
        self.keys.lock().unwrap().clone()
    }
}

impl Notifier for Named {
    fn name(&self) -> &str {
        &self.name
    }

    async fn send(&self, alert: &Alert) -> Result<(), NotifyError> {
        if self.fail_next.load(Ordering::SeqCst) > 0 {
            self.fail_next.fetch_sub(1, Ordering::SeqCst);
            return Err(NotifyError::Transient("receiver down".into()));
        }
        self.keys.lock().unwrap().push(alert.idempotency_key());
        Ok(())
    }
}

/// The `sequence`-th notification of incident `fingerprint`.
pub fn notification(
    fingerprint: &str,
    status: AlertStatus,
    sequence: u32,
    at: DateTime<Utc>,
) -> Alert {
    let mut a = costwatch::notify::sample_alert(at);
    a.fingerprint = fingerprint.to_owned();
    a.status = status;
    a.sequence = sequence;
    a
}

const RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_secs(30),
    max: Duration::from_secs(1800),
};

async fn an_incident_reaches_each_channel_in_order(store: &SqlStore) {
    let t0 = ts("2026-11-02T10:00:00Z");
    let at = |s: i64| t0 + ChronoDuration::seconds(s);
    let flaky = Named::new("flaky", 1);
    let steady = Named::new("steady", 0);
    let channels: Vec<Arc<dyn Channel>> = vec![flaky.clone(), steady.clone()];
    let names = ["flaky".to_owned(), "steady".to_owned()];
    let deliver = |now| {
        deliver_due(
            store,
            &channels,
            RETRY,
            "replica-a",
            Duration::from_secs(15),
            now,
        )
    };
    let deadline = at(86_400);

    // The firing notification: the flaky receiver is down, so it waits in
    // backoff for 30 s; the steady one has it at once.
    let firing = notification("incident-a", AlertStatus::Firing, 1, t0);
    store
        .enqueue(None, &[], &[firing], &names, t0, deadline)
        .await
        .unwrap();
    let r = deliver(t0).await.unwrap();
    assert_eq!((r.sent, r.retrying), (1, 1));

    // Ten seconds later the incident resolves, and another incident fires.
    let resolved = notification("incident-a", AlertStatus::Resolved, 2, at(10));
    let other = notification("incident-b", AlertStatus::Firing, 1, at(10));
    store
        .enqueue(None, &[], &[resolved, other], &names, at(10), deadline)
        .await
        .unwrap();
    deliver(at(10)).await.unwrap();
    assert_eq!(
        flaky.keys(),
        ["incident-b:firing:1"],
        "the resolution waits behind its firing notification; another incident does not"
    );
    assert_eq!(
        steady.keys(),
        [
            "incident-a:firing:1",
            "incident-a:resolved:2",
            "incident-b:firing:1"
        ]
    );

    // Once the backoff is over, both go out in one pass, in their order.
    deliver(at(31)).await.unwrap();
    assert_eq!(
        flaky.keys(),
        [
            "incident-b:firing:1",
            "incident-a:firing:1",
            "incident-a:resolved:2"
        ]
    );
    let rows = store.outbox().await.unwrap();
    assert!(rows.iter().all(|o| o.status == "sent"), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incident_reaches_each_channel_in_order_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    an_incident_reaches_each_channel_in_order(&SqlStore::open(&sqlite_url(&dir)).await.unwrap())
        .await;
    let pg = PgCluster::start();
    an_incident_reaches_each_channel_in_order(&SqlStore::open(&pg.url()).await.unwrap()).await;
}
