//! `costwatch alerts --render` through the built binary: what the next tick
//! would send, rendered as each channel would get it, with the state left
//! exactly as it was; then the real evaluation queues exactly that.

use crate::operator::{command, json_of, run, seeded, state_url, stdout_of};
use crate::support::*;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config::WebhookShape;
use costwatch::notify::render::{email_subject, email_text, webhook_body};
use costwatch::store::{SqlStore, Store};
use serde_json::Value;
use sqlx::Row;
use std::collections::BTreeMap;

/// Every row of every table of a SQLite state, as text.
pub async fn dump(url: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let tables: Vec<String> =
        sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("name"))
            .collect();
    assert!(tables.contains(&"silences".to_owned()), "{tables:?}");
    let mut out = BTreeMap::new();
    for t in tables {
        // Every value as its SQL literal (`quote`): text the driver reads
        // whatever the column holds (blobs and dates included).
        let columns: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT name FROM pragma_table_info('{t}') ORDER BY cid"
        )))
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|r| format!("quote(\"{}\")", r.get::<String, _>("name")))
        .collect();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM \"{t}\" ORDER BY rowid",
            columns.join(", ")
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect())
            .collect();
        assert!(
            !rows.is_empty() || t != "findings",
            "the state has findings"
        );
        out.insert(t, rows);
    }
    pool.close().await;
    out
}

fn upcoming(preview: &Value) -> &Vec<Value> {
    preview["upcoming"].as_array().unwrap()
}

/// What `channel` would get for the notification with `key`.
fn rendering<'a>(preview: &'a Value, key: &str, channel: &str) -> &'a Value {
    upcoming(preview)
        .iter()
        .find(|u| {
            let a = &u["alert"];
            format!(
                "{}:{}:{}",
                a["fingerprint"].as_str().unwrap(),
                a["status"].as_str().unwrap(),
                a["sequence"]
            ) == key
        })
        .unwrap_or_else(|| panic!("{key} not in {preview}"))["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == channel)
        .unwrap_or_else(|| panic!("no {channel} for {key}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_render_shows_what_each_channel_would_get_and_changes_nothing() {
    let (dir, cfg) = seeded(seed_dataset()).await;
    let url = state_url(&dir);
    // A silence on the checkout group: its retry loop is held back.
    let id = stdout_of(command(
        &cfg,
        &[
            "silence",
            "add",
            "--match",
            "feature=checkout",
            "--for",
            "1h",
            "--reason",
            "fix deploying",
        ],
    ))
    .await;
    let id: i64 = id.trim().parse().unwrap();

    let before = dump(&url).await;
    let text = stdout_of(command(&cfg, &["alerts", "--render"])).await;
    let summary = stdout_of(command(&cfg, &["alerts"])).await;
    let preview = json_of(command(&cfg, &["alerts", "--render", "--format", "json"])).await;
    assert_eq!(dump(&url).await, before, "a dry run changes nothing");

    assert_eq!(preview["windows"], 1);
    assert_eq!(preview["data_now"], "2026-10-11T12:00:00Z");
    let mut firing: Vec<(&str, &str)> = upcoming(&preview)
        .iter()
        .map(|u| {
            assert_eq!(u["origin"], "evaluation", "{u}");
            assert_eq!(u["alert"]["status"], "firing", "{u}");
            let channels: Vec<&str> = u["channels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["channel"].as_str().unwrap())
                .collect();
            assert_eq!(channels, ["email", "chat", "am"], "{u}");
            (
                u["alert"]["kind"].as_str().unwrap(),
                u["alert"]["group"].as_str().unwrap(),
            )
        })
        .collect();
    firing.sort();
    assert_eq!(
        firing,
        [
            ("no_cache", "feature=support-agent"),
            ("oversized_model", "feature=triage")
        ]
    );
    let held = preview["silenced"].as_array().unwrap();
    assert_eq!(held.len(), 1, "{preview}");
    assert_eq!(held[0]["silence_id"], id);
    assert_eq!(held[0]["kind"], "retry_loop");
    assert!(text.contains("Held back by silences:"), "{text}");
    assert!(
        text.contains("Subject: [costwatch] no_cache in feature=support-agent"),
        "{text}"
    );
    assert!(
        text.contains("-- chat (webhook, slack shape): POST with"),
        "{text}"
    );
    assert!(text.contains("X-Costwatch-Idempotency-Key: "), "{text}");
    assert!(
        summary.contains("== 1/2 new firing: [costwatch]"),
        "{summary}"
    );
    assert!(
        !summary.contains("Subject:"),
        "bodies only with --render:\n{summary}"
    );

    // The real evaluation queues exactly what was shown.
    let loaded = costwatch::config::load(&cfg).unwrap();
    let store = SqlStore::open(&url).await.unwrap();
    let now = SystemClock.now();
    let channels = ["email".to_owned(), "chat".to_owned(), "am".to_owned()];
    let alerts = costwatch::alerting::evaluate(
        &store,
        "main",
        &loaded.alerts,
        ts("2026-10-11T12:00:00Z"),
        true,
        &channels,
        now,
        now + chrono::Duration::days(1),
    )
    .await
    .unwrap();
    assert_eq!(alerts.len(), 2);
    for a in &alerts {
        let key = a.idempotency_key();
        let email = rendering(&preview, &key, "email");
        assert_eq!(email["type"], "email");
        assert_eq!(email["subject"], email_subject(a).as_str());
        assert_eq!(email["text"], email_text(a).as_str());
        assert_eq!(email["to"], serde_json::json!(["ops@example.com"]));
        let chat = rendering(&preview, &key, "chat");
        assert_eq!(chat["body"], webhook_body(a, WebhookShape::Slack));
        let am = rendering(&preview, &key, "am");
        let sent = webhook_body(a, WebhookShape::Alertmanager);
        for field in ["labels", "annotations", "startsAt"] {
            assert_eq!(am["body"][0][field], sent[0][field], "{field}");
        }
        // A firing alert holds at Alertmanager for 4 × the re-post interval.
        let ends = ts(am["body"][0]["endsAt"].as_str().unwrap());
        assert!(ends > now + chrono::Duration::seconds(200), "{ends}");
    }

    // Queued and due: the next pass sends them; nothing new is decided.
    let queued = json_of(command(&cfg, &["alerts", "--render", "--format", "json"])).await;
    let origins: Vec<&str> = upcoming(&queued)
        .iter()
        .map(|u| u["origin"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["queued", "queued"], "{queued}");
    assert_eq!(queued["silenced"].as_array().unwrap().len(), 1);

    // Delivered a while ago: Alertmanager is due its re-posts, the others
    // get nothing more.
    let claimed = store
        .claim_deliveries("test", now, now + chrono::Duration::minutes(1), 100)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 6);
    for d in claimed {
        store
            .delivered(d.id, now - chrono::Duration::minutes(10))
            .await
            .unwrap();
    }
    store.close().await;
    let before = dump(&url).await;
    let reposts = json_of(command(&cfg, &["alerts", "--render", "--format", "json"])).await;
    assert_eq!(dump(&url).await, before, "a dry run claims nothing");
    for u in upcoming(&reposts) {
        assert_eq!(u["origin"], "repost", "{u}");
        let channels: Vec<&str> = u["channels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["channel"].as_str().unwrap())
            .collect();
        assert_eq!(channels, ["am"]);
    }
    assert_eq!(upcoming(&reposts).len(), 2, "{reposts}");

    // Without a state there is nothing to show, and none is created.
    let empty = tempfile::TempDir::new().unwrap();
    let cfg = crate::operator::config(empty.path());
    let out = run(command(&cfg, &["alerts"])).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no state database at"));
    assert!(!empty.path().join("state.db").exists());
}
