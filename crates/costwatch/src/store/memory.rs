//! The window path's state in process memory, for a replay whose state is
//! thrown away at its end (`backtest` with its default `--state
//! sqlite::memory:`, `demo`, the quality harness).
//!
//! It keeps what the pipeline reads back (watermarks, baselines, held
//! findings, when each model was last seen, which window first found each
//! finding) with the semantics of [`super::SqlStore`]'s statements: the
//! watermark moves only from `window.start` (else
//! [`StoreError::AlreadyProcessed`] and nothing is written), a finding is
//! new only in the window that first stored it, baselines and the
//! models' last sighting are overwritten, held findings are replaced when
//! the commit carries them. One lock covers a whole commit, so a commit is
//! all or nothing as a transaction is.
//!
//! What only a daemon reads (incidents, window rows, failed attempts) is
//! not kept: a failed read is logged by the pipeline and read again by the
//! replay; nothing afterwards asks the store about it. A replay that must
//! keep its state names a database (`--state sqlite://...`) and gets
//! [`super::SqlStore`].

use super::{StoreError, WindowCommit, WindowStore};
use crate::detect::{CachingEvidence, Finding, GroupBaseline, Held};
use crate::source::Window;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Whether `url` names an SQLite database that lives only as long as its
/// connection (`sqlite::memory:`, `sqlite://:memory:`): state nobody can
/// read after the process ends.
pub fn is_throwaway(url: &str) -> bool {
    url.starts_with("sqlite:") && url.contains(":memory:")
}

/// The window path's state, in memory. See the module.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    watermarks: HashMap<String, DateTime<Utc>>,
    baselines: HashMap<String, GroupBaseline>,
    held: HashMap<String, Vec<Held>>,
    /// Model -> end of the last window it was seen in.
    models_seen: BTreeMap<String, DateTime<Utc>>,
    /// (session, kind) -> start of the window that first found it.
    first_found: HashMap<(String, &'static str), DateTime<Utc>>,
    /// What the traffic showed of the models' caches.
    caching: CachingEvidence,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; were one to, the state
        // it left is still the last whole commit's.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WindowStore for MemoryStore {
    async fn watermark(&self, job: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(self.state().watermarks.get(job).copied())
    }

    async fn init_watermark(
        &self,
        job: &str,
        at: DateTime<Utc>,
        _now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, StoreError> {
        Ok(*self.state().watermarks.entry(job.to_owned()).or_insert(at))
    }

    async fn load_baselines(
        &self,
        groups: &[String],
    ) -> Result<HashMap<String, GroupBaseline>, StoreError> {
        let state = self.state();
        Ok(groups
            .iter()
            .filter_map(|g| state.baselines.get(g).map(|b| (g.clone(), b.clone())))
            .collect())
    }

    async fn held_findings(&self, job: &str) -> Result<Vec<Held>, StoreError> {
        let mut held = self.state().held.get(job).cloned().unwrap_or_default();
        // The order the database returns them in.
        held.sort_by(|a, b| {
            (&a.finding.session_id, a.finding.kind).cmp(&(&b.finding.session_id, b.finding.kind))
        });
        Ok(held)
    }

    async fn models_in_use(&self, since: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        Ok(self
            .state()
            .models_seen
            .iter()
            .filter(|(_, last)| **last >= since)
            .map(|(m, _)| m.clone())
            .collect())
    }

    async fn models_last_seen(&self) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        Ok(self
            .state()
            .models_seen
            .iter()
            .map(|(m, last)| (m.clone(), *last))
            .collect())
    }

    async fn caching_evidence(&self) -> Result<CachingEvidence, StoreError> {
        Ok(self.state().caching.clone())
    }

    async fn commit_window(
        &self,
        job: &str,
        window: Window,
        c: WindowCommit<'_>,
    ) -> Result<Vec<Finding>, StoreError> {
        let mut state = self.state();
        match state.watermarks.get_mut(job) {
            Some(w) if *w == window.start => *w = window.end,
            _ => return Err(StoreError::AlreadyProcessed(window)),
        }
        let mut new = Vec::new();
        for f in c.findings {
            let first = *state
                .first_found
                .entry((f.session_id.clone(), f.kind.as_str()))
                .or_insert(f.window.start);
            if first == window.start {
                new.push(f.clone());
            }
        }
        for (group, b) in c.baselines {
            state.baselines.insert(group.clone(), b.clone());
        }
        for m in c.models_seen {
            state.models_seen.insert(m.clone(), window.end);
        }
        state.caching.merge(c.caching);
        if let Some(held) = c.held {
            state.held.insert(job.to_owned(), held.to_vec());
        }
        Ok(new)
    }

    async fn record_failure(
        &self,
        _job: &str,
        _window: Window,
        _error: &str,
        _now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        // Nothing reads a throwaway replay's failed attempts (see the
        // module); the pipeline has logged it.
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::store::SqlStore;
    use chrono::TimeZone;
    use std::collections::BTreeSet;

    fn t(m: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap() + chrono::Duration::minutes(m)
    }

    fn window(i: i64) -> Window {
        Window {
            start: t(15 * i),
            end: t(15 * i + 15),
        }
    }

    fn finding(session: &str, w: Window) -> Finding {
        Finding {
            kind: crate::detect::Kind::NoCache,
            session_id: session.into(),
            window: w,
            severity: crate::domain::Severity::Warning,
            rule: "no-cache-conversation".into(),
            group: "feature=a".into(),
            labels: [("feature".to_owned(), "a".to_owned())].into(),
            cost_usd: 0.5,
            impact_usd: 0.25,
            evidence: serde_json::json!({"calls": 3, "share": 0.1}),
            explanation: format!("session {session} never read the cache"),
        }
    }

    fn baseline(x: f64) -> GroupBaseline {
        let mut b = GroupBaseline::new(16);
        b.log_requests.push(x);
        b.model_calls.insert("m".into(), x);
        b
    }

    /// The same commits, the same answers, from both stores.
    async fn script<S: WindowStore>(store: &S) -> Vec<String> {
        let mut out = Vec::new();
        let models: BTreeSet<String> = ["luna".to_owned(), "sol".to_owned()].into();
        let no_models = BTreeSet::new();
        let baselines: HashMap<String, GroupBaseline> = [
            ("feature=a".to_owned(), baseline(1.0)),
            ("feature=b".to_owned(), baseline(2.0)),
        ]
        .into();
        let later: HashMap<String, GroupBaseline> =
            [("feature=a".to_owned(), baseline(3.0))].into();
        // One session held for both kinds, the oversized_model one first:
        // both stores give them back in session and kind order.
        let waiting = Held {
            finding: Finding {
                kind: crate::domain::Kind::OversizedModel,
                ..finding("s-held", window(0))
            },
            quiet_at: t(75),
            alone: false,
            peers: Some(crate::detect::PeerWait {
                min_peers: 5,
                min_peer_cached_share: 0.15,
                until: t(1500),
                peers: 2,
                median: Some(0.4),
            }),
        };
        let held = [
            waiting,
            Held {
                finding: finding("s-held", window(0)),
                quiet_at: t(20),
                alone: true,
                peers: None,
            },
        ];
        out.push(format!("{:?}", store.watermark("j").await.unwrap()));
        out.push(format!("{:?}", store.init_watermark("j", t(0), t(0)).await));
        out.push(format!(
            "{:?}",
            store.init_watermark("j", t(45), t(0)).await
        ));
        let commit = |findings, baselines, models_seen, held| WindowCommit {
            findings,
            baselines,
            models_seen,
            caching: crate::detect::CachingEvidence::none(),
            held,
            sessions: 2,
            pages: 1,
            now: t(15),
        };
        let first = [finding("s-1", window(0)), finding("s-2", window(0))];
        let r = store
            .commit_window(
                "j",
                window(0),
                commit(&first, &baselines, &models, Some(&held)),
            )
            .await
            .unwrap();
        out.push(format!("new {:?}", ids(&r)));
        // Refused: the watermark is past it; nothing is written.
        let refused = store
            .commit_window("j", window(0), commit(&[], &later, &no_models, Some(&[])))
            .await;
        out.push(format!(
            "{}",
            matches!(refused, Err(StoreError::AlreadyProcessed(_)))
        ));
        out.push(format!("{:?}", store.held_findings("j").await.unwrap()));
        // s-1 seen again, s-3 new; the held findings are left as they are.
        let second = [finding("s-1", window(1)), finding("s-3", window(1))];
        let r = store
            .commit_window("j", window(1), commit(&second, &later, &no_models, None))
            .await
            .unwrap();
        out.push(format!("new {:?}", ids(&r)));
        out.push(format!("{:?}", store.held_findings("j").await.unwrap()));
        let groups = [
            "feature=a".to_owned(),
            "feature=b".to_owned(),
            "x".to_owned(),
        ];
        let mut loaded: Vec<_> = store
            .load_baselines(&groups)
            .await
            .unwrap()
            .into_iter()
            .collect();
        loaded.sort_by(|a, b| a.0.cmp(&b.0));
        out.push(format!("{loaded:?}"));
        out.push(format!("{:?}", store.models_in_use(t(15)).await.unwrap()));
        out.push(format!("{:?}", store.models_in_use(t(16)).await.unwrap()));
        out.push(format!("{:?}", store.models_last_seen().await.unwrap()));
        let r = store
            .commit_window("j", window(2), commit(&[], &later, &no_models, Some(&[])))
            .await
            .unwrap();
        out.push(format!("new {:?}", ids(&r)));
        out.push(format!("{:?}", store.held_findings("j").await.unwrap()));
        out.push(format!("{:?}", store.watermark("j").await.unwrap()));
        out
    }

    fn ids(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.session_id.as_str()).collect()
    }

    #[tokio::test]
    async fn it_answers_as_the_database_does() {
        let memory = script(&MemoryStore::new()).await;
        let sql = script(&SqlStore::open("sqlite::memory:").await.unwrap()).await;
        assert_eq!(memory, sql);
        // And the script says something: refusals, new findings, held ones.
        assert_eq!(memory[3], "new [\"s-1\", \"s-2\"]");
        assert_eq!(memory[4], "true");
        assert_eq!(memory[6], "new [\"s-3\"]");
        assert!(memory[7].contains("s-held"));
        assert_eq!(memory[13], "[]");
    }

    #[test]
    fn only_in_memory_sqlite_urls_are_throwaway() {
        assert!(is_throwaway("sqlite::memory:"));
        assert!(is_throwaway("sqlite://:memory:"));
        assert!(!is_throwaway("sqlite:///var/lib/costwatch/state.db"));
        assert!(!is_throwaway("postgres://db/costwatch"));
    }
}
