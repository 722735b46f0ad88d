//! An Alertmanager stand-in: `POST /api/v2/alerts`, keeping alerts the way
//! Alertmanager does, on a clock the caller supplies, so a test can ask
//! which alerts Alertmanager would show as firing at any moment.
//!
//! It follows prometheus/alertmanager:
//! - `api/v2/api.go`, `postAlertsHandler`: a posted alert's `UpdatedAt` is
//!   the time it arrived; without `startsAt` it starts then; without
//!   `endsAt` it ends at arrival plus `resolve_timeout` (`global.resolve_timeout`,
//!   5m by default in `config/config.go`) and is marked as timing out.
//! - `provider/mem/mem.go`, `Alerts.Put`: a post with the labels of a stored
//!   alert is merged with it when their activity ranges overlap, and
//!   replaces it otherwise.
//! - `types/types.go`, `Alert.Merge`: the younger post wins, with the earlier
//!   start; if the younger is resolved, a later end of the older one is kept
//!   only if that one is resolved too; if the younger is still firing, a
//!   later explicit (not timed-out) end of the older one is kept.
//! - An alert is firing while its end is after now (`Alert.Resolved`).
//!
//! Labels identify an alert; annotations are kept but play no part here.

use crate::http::Listening;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the stand-in reads the time of day.
pub type Now = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// An alert's identity: its labels.
pub type LabelSet = BTreeMap<String, String>;

/// One element of a `POST /api/v2/alerts` body (`postableAlert` in
/// Alertmanager's OpenAPI spec).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Postable {
    labels: LabelSet,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    starts_at: Option<DateTime<Utc>>,
    #[serde(default)]
    ends_at: Option<DateTime<Utc>>,
    #[serde(default, rename = "generatorURL")]
    _generator_url: Option<String>,
}

/// An alert as Alertmanager keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAlert {
    /// The labels that identify it.
    pub labels: LabelSet,
    /// The annotations of the latest post.
    pub annotations: BTreeMap<String, String>,
    /// When it started.
    pub starts_at: DateTime<Utc>,
    /// When it ends (or ended).
    pub ends_at: DateTime<Utc>,
    /// When it was last posted.
    pub updated_at: DateTime<Utc>,
    /// Whether its end came from `resolve_timeout` rather than the sender.
    pub timeout: bool,
}

impl StoredAlert {
    /// Whether it is resolved at `t`.
    pub fn resolved_at(&self, t: DateTime<Utc>) -> bool {
        self.ends_at <= t
    }

    /// `Alert.Merge`: `self` and `younger` have the same labels.
    fn merge(&self, younger: &StoredAlert, now: DateTime<Utc>) -> StoredAlert {
        if younger.updated_at < self.updated_at {
            return younger.merge(self, now);
        }
        let mut res = younger.clone();
        if self.starts_at < younger.starts_at {
            res.starts_at = self.starts_at;
        }
        if younger.resolved_at(now) {
            if self.resolved_at(now) && self.ends_at > younger.ends_at {
                res.ends_at = self.ends_at;
            }
        } else if self.ends_at > younger.ends_at && !self.timeout {
            res.ends_at = self.ends_at;
        }
        res
    }
}

/// One post as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    /// When it arrived.
    pub at: DateTime<Utc>,
    /// The alert's labels.
    pub labels: LabelSet,
    /// The `endsAt` it carried, if any.
    pub ends_at: Option<DateTime<Utc>>,
}

struct Shared {
    now: Now,
    resolve_timeout: Duration,
    alerts: Mutex<BTreeMap<LabelSet, StoredAlert>>,
    posts: Mutex<Vec<Post>>,
}

/// A running Alertmanager stand-in; stops when dropped.
pub struct AlertmanagerSim {
    listening: Listening,
    shared: Arc<Shared>,
}

impl AlertmanagerSim {
    /// Serves on 127.0.0.1:0 with Alertmanager's default `resolve_timeout`
    /// (5m), reading the time from `now`.
    pub async fn start(now: Now) -> std::io::Result<AlertmanagerSim> {
        let shared = Arc::new(Shared {
            now,
            resolve_timeout: Duration::from_secs(300),
            alerts: Mutex::new(BTreeMap::new()),
            posts: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/api/v2/alerts", post(post_alerts))
            .with_state(shared.clone());
        let listening = Listening::start(SocketAddr::from(([127, 0, 0, 1], 0)), app).await?;
        Ok(AlertmanagerSim { listening, shared })
    }

    /// The URL to post alerts to.
    pub fn alerts_url(&self) -> String {
        format!("http://{}/api/v2/alerts", self.listening.addr())
    }

    /// Every post so far, in arrival order.
    pub fn posts(&self) -> Vec<Post> {
        self.shared
            .posts
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// The alerts kept now, whether firing or resolved.
    pub fn alerts(&self) -> Vec<StoredAlert> {
        self.shared
            .alerts
            .lock()
            .map(|a| a.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The alerts that are firing at `t` as far as the posts so far go.
    pub fn firing_at(&self, t: DateTime<Utc>) -> Vec<StoredAlert> {
        self.alerts()
            .into_iter()
            .filter(|a| !a.resolved_at(t))
            .collect()
    }
}

async fn post_alerts(State(shared): State<Arc<Shared>>, body: String) -> StatusCode {
    let Ok(postable) = serde_json::from_str::<Vec<Postable>>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let now = (shared.now)();
    let timeout =
        chrono::Duration::from_std(shared.resolve_timeout).unwrap_or(chrono::Duration::zero());
    let (Ok(mut alerts), Ok(mut posts)) = (shared.alerts.lock(), shared.posts.lock()) else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    for p in postable {
        if p.labels.is_empty() {
            return StatusCode::BAD_REQUEST;
        }
        posts.push(Post {
            at: now,
            labels: p.labels.clone(),
            ends_at: p.ends_at,
        });
        let starts_at = p.starts_at.or(p.ends_at).unwrap_or(now);
        let (ends_at, timed_out) = match p.ends_at {
            Some(end) => (end, false),
            None => (now + timeout, true),
        };
        if ends_at < starts_at {
            return StatusCode::BAD_REQUEST;
        }
        let mut alert = StoredAlert {
            labels: p.labels.clone(),
            annotations: p.annotations,
            starts_at,
            ends_at,
            updated_at: now,
            timeout: timed_out,
        };
        if let Some(old) = alerts.get(&p.labels) {
            let overlaps = (alert.ends_at > old.starts_at && alert.ends_at < old.ends_at)
                || (alert.starts_at > old.starts_at && alert.starts_at < old.ends_at);
            if overlaps {
                alert = old.merge(&alert, now);
            }
        }
        alerts.insert(p.labels, alert);
    }
    StatusCode::OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap() + chrono::Duration::minutes(min)
    }

    fn alert(starts: i64, ends: i64, updated: i64, timeout: bool) -> StoredAlert {
        StoredAlert {
            labels: LabelSet::from([("alertname".to_owned(), "x".to_owned())]),
            annotations: BTreeMap::new(),
            starts_at: t(starts),
            ends_at: t(ends),
            updated_at: t(updated),
            timeout,
        }
    }

    #[test]
    fn the_younger_post_wins_but_a_later_explicit_end_of_a_firing_alert_is_kept() {
        // A firing alert re-posted without endsAt keeps the sender's later end.
        let old = alert(0, 8, 0, false);
        let young = alert(0, 6, 1, true);
        assert_eq!(old.merge(&young, t(1)).ends_at, t(8));
        // A resolution ends it, whatever the older post said.
        let resolved = alert(0, 1, 1, false);
        assert_eq!(old.merge(&resolved, t(1)).ends_at, t(1));
        // A firing post after a resolution makes it fire again.
        let done = alert(0, 1, 1, false);
        let again = alert(0, 5, 2, false);
        assert!(!done.merge(&again, t(2)).resolved_at(t(2)));
    }
}
