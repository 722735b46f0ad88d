//! The tick's deadline (`schedule.tick_timeout`): a read that stalls is
//! abandoned, its window stays due, and a tick that read no window counts as
//! a failed read of the gateway (`source_unhealthy`); a catch-up that made
//! progress just stops there.

use crate::daemon::{Recorder, settings};
use crate::support::*;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::clock::{Clock, FakeClock};
use costwatch::daemon::Daemon;
use costwatch::notify::outbox::Channel;
use costwatch::notify::{AlertKind, AlertStatus};
use costwatch::ops::metrics::Metrics;
use costwatch::pipeline::Pipeline;
use costwatch::source::reference::ReferenceSource;
use costwatch::source::{
    ModelPrice, ReadStats, RequestRecord, SessionRecord, Source, SourceError, Window,
};
use costwatch::store::{SqlStore, Store};
use costwatch_sim::scenario::{ScenarioParams, generate};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The gateway client, except that reading the sessions of any window that
/// starts at or after `stall_from` never ends (a gateway that stops
/// answering mid-listing without closing the connection).
#[derive(Clone)]
struct Stalling {
    inner: ReferenceSource,
    stall_from: Arc<Mutex<Option<DateTime<Utc>>>>,
}

impl Stalling {
    fn stall_from(&self, t: Option<DateTime<Utc>>) {
        *self.stall_from.lock().unwrap() = t;
    }
}

impl Source for Stalling {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        self.inner.models().await
    }

    async fn sessions<F>(&self, window: Window, sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        let stalls = self
            .stall_from
            .lock()
            .unwrap()
            .is_some_and(|t| window.start >= t);
        if stalls {
            std::future::pending::<()>().await;
        }
        self.inner.sessions(window, sink).await
    }

    async fn session_requests(&self, session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        self.inner.session_requests(session_id).await
    }
}

/// One tick; a tick that never ends fails the test after a minute instead
/// of hanging it.
async fn tick<S: Source + Clone + 'static>(
    daemon: &Daemon<S, SqlStore>,
) -> costwatch::daemon::TickReport {
    tokio::time::timeout(Duration::from_secs(60), daemon.tick())
        .await
        .expect("the tick ends")
        .unwrap()
}

/// Long enough for a tick to read a window of the small scenario on a busy
/// machine many times over; a stalled read always runs into it.
const TICK_TIMEOUT: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_read_hits_the_deadline_and_a_tick_without_progress_raises_source_unhealthy() {
    let params = ScenarioParams {
        days: 1,
        sessions_per_day: 1200,
        ..ScenarioParams::default()
    };
    let start = params.start;
    let sim = start_sim(generate(&params)).await;
    let (gateway, _) = gateway(&sim, 50);
    let source = Stalling {
        inner: gateway,
        stall_from: Arc::default(),
    };
    let dir = tempfile::tempdir().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    // 00:47: the windows 00:00, 00:15 and 00:30 are due.
    let clock = FakeClock::new(start + ChronoDuration::minutes(47));
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let schedule = quarter_hours(start);
    let pipeline = Pipeline::new(
        source.clone(),
        store,
        detector(),
        schedule,
        4,
        shared.clone(),
    );
    let recorder = Arc::new(Recorder::default());
    let mut s = settings(vec![recorder.clone() as Arc<dyn Channel>]);
    s.tick_timeout = TICK_TIMEOUT;
    let metrics: Arc<Metrics> = s.metrics.clone();
    let daemon = Daemon::new(pipeline, s, shared);
    let window = |i: i64| Window {
        start: start + ChronoDuration::minutes(15 * i),
        end: start + ChronoDuration::minutes(15 * (i + 1)),
    };

    // The gateway stops answering from the second window on: the first is
    // committed, the second abandoned at the deadline. The catch-up made
    // progress, so the tick is not a failure.
    source.stall_from(Some(window(1).start));
    let first = tick(&daemon).await;
    assert_eq!(first.windows, 1);
    assert_eq!(first.source_error, None);
    assert_eq!(first.watermark, Some(window(1).start));
    let rows = daemon.store().windows("main").await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!((rows[0].status.as_str(), rows[0].attempts), ("done", 1));
    assert_eq!(rows[1].window, window(1));
    assert_eq!((rows[1].status.as_str(), rows[1].attempts), ("failed", 1));
    let message = rows[1].last_error.clone().unwrap_or_default();
    assert!(
        message.contains("not read within the tick's deadline of 3s"),
        "{message}"
    );
    assert!(recorder.received.lock().unwrap().is_empty());
    assert!(metrics.render().contains("\ncostwatch_up 1\n"));

    // The next tick reads no window before its deadline: a failed read of
    // the gateway, like an outage. The window stays due, nothing is
    // committed empty, and one source_unhealthy alert goes out.
    clock.advance(ChronoDuration::minutes(5));
    let second = tick(&daemon).await;
    assert_eq!(second.windows, 0);
    let error = second.source_error.clone().unwrap_or_default();
    assert!(
        error.contains(&format!("window {}", window(1))) && error.contains("deadline of 3s"),
        "{error}"
    );
    assert_eq!(second.watermark, Some(window(1).start));
    let rows = daemon.store().windows("main").await.unwrap();
    assert_eq!((rows[1].status.as_str(), rows[1].attempts), ("failed", 2));
    assert!(
        daemon
            .store()
            .findings(window(1).start, window(3).end)
            .await
            .unwrap()
            .is_empty()
    );
    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(
        (alerts[0].kind, alerts[0].status),
        (AlertKind::SourceUnhealthy, AlertStatus::Firing)
    );
    let text = metrics.render();
    assert!(text.contains("\ncostwatch_up 0\n"), "{text}");
    assert!(
        text.contains("costwatch_gateway_errors_total{kind=\"transient\"} 1"),
        "{text}"
    );

    // The gateway answers again: the windows are read and the incident
    // resolves.
    source.stall_from(None);
    clock.advance(ChronoDuration::minutes(5));
    let third = tick(&daemon).await;
    assert_eq!(third.source_error, None);
    assert_eq!(third.windows, 2);
    assert_eq!(third.watermark, Some(window(2).end));
    let rows = daemon.store().windows("main").await.unwrap();
    assert!(rows.iter().all(|w| w.status == "done"), "{rows:#?}");
    assert_eq!(rows[1].attempts, 3);
    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 2);
    assert_eq!(
        (alerts[1].kind, alerts[1].status),
        (AlertKind::SourceUnhealthy, AlertStatus::Resolved)
    );
    assert!(metrics.render().contains("\ncostwatch_up 1\n"));
}
