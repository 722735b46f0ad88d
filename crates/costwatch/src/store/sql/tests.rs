//! The window commit's baselines and models on SQLite: packed rows, rows
//! written as JSON before migration 0012, and more rows than one statement
//! holds; held findings written before migration 0015; received calls
//! stored before migration 0018.

use super::SqlStore;
use crate::detect::GroupBaseline;
use crate::source::Window;
use crate::store::{WindowCommit, WindowStore};
use chrono::{Duration, TimeZone, Utc};
use std::collections::{BTreeSet, HashMap};

fn baseline(seed: u32) -> GroupBaseline {
    let mut b = GroupBaseline::new(512);
    for i in 0..(seed % 7 + 3) {
        b.log_requests.push(f64::from(i * seed).ln_1p() / 3.0);
        b.cached_share.push(f64::from(i) / 9.0);
    }
    b.tiny_call_price.push(f64::from(seed) * 1e-7);
    b.model_calls
        .insert(format!("model-{}", seed % 3), f64::from(seed) / 7.0);
    b
}

#[tokio::test]
async fn baselines_and_models_read_back_as_committed() {
    let store = SqlStore::open("sqlite::memory:").await.unwrap();
    let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    let w = Window {
        start: t0,
        end: t0 + Duration::minutes(5),
    };
    store.init_watermark("job", t0, t0).await.unwrap();
    // More groups and models than one multi-row statement takes.
    let baselines: HashMap<String, GroupBaseline> = (0..250)
        .map(|i| (format!("feature=f{i:03}"), baseline(i)))
        .collect();
    let models: BTreeSet<String> = (0..130).map(|i| format!("m{i:03}")).collect();
    let commit = WindowCommit {
        findings: &[],
        baselines: &baselines,
        models_seen: &models,
        caching: crate::detect::CachingEvidence::none(),
        held: None,
        sessions: 250,
        pages: 5,
        now: w.end,
    };
    store.commit_window("job", w, commit).await.unwrap();

    let mut groups: Vec<String> = baselines.keys().cloned().collect();
    groups.push("feature=never-seen".into());
    let read = store.load_baselines(&groups).await.unwrap();
    assert_eq!(read, baselines);
    let in_use = store.models_in_use(t0).await.unwrap();
    assert_eq!(in_use, models.iter().cloned().collect::<Vec<_>>());
    assert!(
        store
            .models_in_use(w.end + Duration::seconds(1))
            .await
            .unwrap()
            .is_empty(),
        "last seen at the window's end"
    );
}

#[tokio::test]
async fn a_baseline_written_as_json_before_0012_is_still_read_then_packed() {
    let store = SqlStore::open("sqlite::memory:").await.unwrap();
    let old = baseline(5);
    sqlx::query("INSERT INTO baselines (group_key, state, updated_ms) VALUES ($1, $2, 0)")
        .bind("feature=old")
        .bind(serde_json::to_string(&old).unwrap())
        .execute(&store.pool)
        .await
        .unwrap();
    let read = store.load_baselines(&["feature=old".into()]).await.unwrap();
    assert_eq!(read.get("feature=old"), Some(&old));

    let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    store.init_watermark("job", t0, t0).await.unwrap();
    let mut newer = old.clone();
    newer.log_requests.push(2.0);
    let baselines = HashMap::from([("feature=old".to_owned(), newer.clone())]);
    let models = BTreeSet::new();
    let w = Window {
        start: t0,
        end: t0 + Duration::minutes(5),
    };
    let commit = WindowCommit {
        findings: &[],
        baselines: &baselines,
        models_seen: &models,
        caching: crate::detect::CachingEvidence::none(),
        held: None,
        sessions: 1,
        pages: 1,
        now: w.end,
    };
    store.commit_window("job", w, commit).await.unwrap();
    let row = sqlx::query("SELECT state, packed FROM baselines WHERE group_key = 'feature=old'")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    use sqlx::Row;
    assert_eq!(row.get::<String, _>("state"), "");
    assert_eq!(row.get::<Vec<u8>, _>("packed"), newer.to_bytes());
    let read = store.load_baselines(&["feature=old".into()]).await.unwrap();
    assert_eq!(read.get("feature=old"), Some(&newer));
}

#[tokio::test]
async fn unreadable_packed_bytes_are_reported_as_corrupt() {
    let store = SqlStore::open("sqlite::memory:").await.unwrap();
    sqlx::query(
        "INSERT INTO baselines (group_key, state, packed, updated_ms) VALUES ('g', '', $1, 0)",
    )
    .bind(vec![1u8, 2, 3])
    .execute(&store.pool)
    .await
    .unwrap();
    let err = store.load_baselines(&["g".into()]).await.unwrap_err();
    assert!(err.to_string().contains("baseline of g"), "{err}");
}

/// A state file in a fresh folder (kept while the first value lives), its
/// URL, and a pool on it with the migrations up to `version` applied, to
/// fill as an earlier release left it before the store opens it.
async fn state_file_migrated_to(version: i64) -> (tempfile::TempDir, String, sqlx::AnyPool) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("state.db").display()
    );
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::migrate!("../../migrations/sqlite")
        .run_to(version, &pool)
        .await
        .unwrap();
    (dir, url, pool)
}

#[tokio::test]
async fn held_findings_of_0014_read_back_as_no_cache_after_0015() {
    use crate::config::Severity;
    use crate::detect::{Finding, Kind};
    // A state file last migrated by 0014, holding one no_cache finding.
    let (_dir, url, pool) = state_file_migrated_to(14).await;
    let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    let finding = Finding {
        kind: Kind::NoCache,
        session_id: "s-1".into(),
        window: Window {
            start: t0,
            end: t0 + Duration::minutes(15),
        },
        severity: Severity::Warning,
        rule: "no-cache-conversation".into(),
        group: "feature=faq".into(),
        labels: Default::default(),
        cost_usd: 0.01,
        impact_usd: 0.002,
        evidence: serde_json::json!({"missed_calls": 1}),
        explanation: "1 missed read".into(),
    };
    sqlx::query(
        "INSERT INTO held_findings (job, session_id, quiet_at_ms, alone, finding) \
         VALUES ('job', 's-1', $1, 0, $2)",
    )
    .bind((t0 + Duration::minutes(20)).timestamp_millis())
    .bind(serde_json::to_string(&finding).unwrap())
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    // Opening the store applies 0015 and the rest: the row keeps its
    // finding, as a no_cache one without a group move, waiting for no
    // peers.
    let store = SqlStore::open(&url).await.unwrap();
    let held = store.held_findings("job").await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].finding, finding);
    assert_eq!(held[0].quiet_at, t0 + Duration::minutes(20));
    assert!(!held[0].alone);
    assert_eq!(held[0].peers, None);
    use sqlx::Row;
    let kind: String = sqlx::query("SELECT kind FROM held_findings")
        .fetch_one(&store.pool)
        .await
        .unwrap()
        .get("kind");
    assert_eq!(kind, "no_cache");
}

#[tokio::test]
async fn received_calls_of_0017_are_kept_by_0018_and_still_stored_once() {
    use crate::source::RequestStatus;
    use crate::source::otlp::SpanCall;
    use crate::source::rows::CallRow;
    use crate::store::calls::CallStore;
    let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    // A state file last migrated by 0017, holding one received call.
    let (_dir, url, pool) = state_file_migrated_to(17).await;
    sqlx::query(
        "INSERT INTO otlp_calls (span_id, trace_id, conversation_id, created_ms, model, \
         failed, input_tokens, cached_tokens, cache_reported, cache_write_tokens, \
         output_tokens, labels, received_ms, provider) \
         VALUES ('00000000000000aa', 't', 's-1', $1, 'm', 0, 1200, 0, 1, 0, 40, '{}', $1, 'p')",
    )
    .bind(t0.timestamp_millis())
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let store = SqlStore::open(&url).await.unwrap();
    let call = |span: &str, at| SpanCall {
        trace_id: "t".into(),
        conversation: true,
        row: CallRow {
            request_id: span.into(),
            session_id: Some("s-1".into()),
            created_at: at,
            model: "m".into(),
            status: RequestStatus::Success,
            http_status: None,
            error_type: None,
            input_tokens: 1200,
            cached_tokens: 0,
            cache_reported: true,
            cache_write_tokens: 0,
            output_tokens: 40,
            cost_usd: None,
            labels: Default::default(),
            provider: Some("p".into()),
            instrumentation: None,
        },
    };
    // The exporter sends the old call again beside a new one: only the new
    // one is stored.
    let again = [
        call("00000000000000aa", t0),
        call("00000000000000bb", t0 + Duration::seconds(5)),
    ];
    let added = store
        .insert_calls(&again, &[], t0, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(added, 1);
    let page = store
        .calls_page(t0, t0 + Duration::minutes(5), None, 10)
        .await
        .unwrap();
    let ids: Vec<&str> = page.iter().map(|c| c.request_id.as_str()).collect();
    assert_eq!(ids, ["00000000000000aa", "00000000000000bb"]);
    assert_eq!(page[0].provider.as_deref(), Some("p"));
    assert_eq!(page[0].session_id.as_deref(), Some("s-1"));
}
