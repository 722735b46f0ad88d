//! Tests of the renderings, and the sample alert other channels test with.

use super::signature::hmac_sha256;
use super::slack::{SLACK_HEADER_MAX, SLACK_TEXT_MAX};
use super::*;
use crate::config::Severity;
use crate::domain::investigation::sample_report;
use crate::notify::ALERT_SCHEMA_VERSION;
use crate::notify::AlertSession;
use crate::source::{Labels, Window};
use chrono::{TimeZone, Utc};

/// A firing no-cache alert with two sessions and an investigation.
pub(crate) fn sample_alert() -> Alert {
    let t = |h| Utc.with_ymd_and_hms(2026, 3, 4, h, 0, 0).unwrap();
    let mut labels = Labels::new();
    labels.insert("feature".into(), "support-agent".into());
    labels.insert("team".into(), "care".into());
    Alert {
        version: ALERT_SCHEMA_VERSION.into(),
        fingerprint: "fp-0123456789abcdef".into(),
        sequence: 0,
        status: AlertStatus::Firing,
        kind: AlertKind::NoCache,
        severity: Severity::Warning,
        rule: Some("cache-long-conversations".into()),
        group: "feature=support-agent".into(),
        labels,
        title: title_for(
            AlertKind::NoCache,
            "feature=support-agent",
            12,
            4.2,
            AlertStatus::Firing,
        ),
        summary:
            "12 long conversations in feature=support-agent sent their whole history uncached."
                .into(),
        session_count: 12,
        impact_usd: 8.4,
        impact_usd_per_day: 4.2,
        sessions: vec![
            AlertSession {
                session_id: "sess-top-001".into(),
                cost_usd: 1.75,
                impact_usd: 1.3125,
                explanation: "34 calls re-sent 900k prompt tokens, none cached".into(),
                evidence: json!({"requests": 34, "input_tokens": 900000, "cached_tokens": 0}),
                link: Some("https://gateway.example.com/logs?session=sess-top-001".into()),
                what_to_do: String::new(),
            },
            AlertSession {
                session_id: "sess-second-002".into(),
                cost_usd: 0.9,
                impact_usd: 0.61,
                explanation: "20 calls, none cached".into(),
                evidence: json!({"requests": 20}),
                link: None,
                what_to_do: String::new(),
            },
        ],
        window: Window {
            start: t(10),
            end: t(11),
        },
        starts_at: t(10),
        ends_at: None,
        valid_until: None,
        chart: None,
        incidents: Vec::new(),
        investigation: Some(sample_report(
            "The agent rebuilds its prompt every turn.",
            0.0375,
        )),
        created_at: t(11),
    }
}

#[test]
fn titles_name_kind_group_sessions_and_daily_impact() {
    assert_eq!(
        title_for(
            AlertKind::NoCache,
            "feature=support-agent",
            12,
            4.2,
            AlertStatus::Firing
        ),
        "[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day"
    );
    assert_eq!(
        title_for(
            AlertKind::RetryLoop,
            "feature=x",
            1,
            0.5,
            AlertStatus::Resolved
        ),
        "[costwatch] RESOLVED retry_loop in feature=x: 1 session, +$0.50 in all"
    );
    assert_eq!(
        title_for(AlertKind::SourceUnhealthy, "", 0, 0.0, AlertStatus::Firing),
        "[costwatch] source_unhealthy"
    );
    assert_eq!(
        title_for(AlertKind::Test, "a\nb", 2, 0.004, AlertStatus::Firing),
        "[costwatch] test in a b: 2 sessions, +$0.0040/day"
    );
}

#[test]
fn subject_is_the_title_on_one_line() {
    let mut alert = sample_alert();
    assert_eq!(email_subject(&alert), alert.title);
    alert.title = "a\r\nBcc: x@example.com".into();
    assert_eq!(email_subject(&alert), "a\\r\\nBcc: x@example.com");
    alert.title = "[costwatch] no_cache in feature=\u{1b}[2Jtxt.exe\u{202e}fdp.".into();
    assert_eq!(
        email_subject(&alert),
        "[costwatch] no_cache in feature=\\x1b[2Jtxt.exe\\u{202e}fdp."
    );
}

#[test]
fn titles_and_text_bodies_carry_no_control_or_bidi_character() {
    let title = title_for(
        AlertKind::NoCache,
        "feature=a\u{202e}b\u{85}c",
        2,
        0.004,
        AlertStatus::Firing,
    );
    assert_eq!(
        title,
        "[costwatch] no_cache in feature=a b c: 2 sessions, +$0.0040/day"
    );
    let mut alert = sample_alert();
    alert.sessions[0].session_id = "sess\r\n2. forged  cost $0.00".into();
    alert.sessions[0].explanation = "x\u{1b}[8m".into();
    let text = email_text(&alert);
    assert!(
        text.contains("1. sess\\r\\n2. forged  cost $0.00  cost $1.75"),
        "{text}"
    );
    assert!(text.contains("   x\\x1b[8m\n"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("2. forged")), "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text}");
}

#[test]
fn text_body_has_what_where_how_much_sessions_evidence_and_investigation() {
    let text = email_text(&sample_alert());
    for needle in [
        "[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day",
        "no_cache (warning, firing), rule cache-long-conversations",
        "Where:        feature=support-agent",
        "feature=support-agent, team=care",
        "+$8.40 above peers over 12 sessions, +$4.20/day",
        "1. sess-top-001  cost $1.75  impact +$1.31",
        "34 calls re-sent 900k prompt tokens",
        "https://gateway.example.com/logs?session=sess-top-001",
        "2. sess-second-002",
        "Evidence for sess-top-001:",
        "  \"input_tokens\": 900000",
        "[2026-03-04T10:00:00Z, 2026-03-04T11:00:00Z)",
        "Started:      2026-03-04T10:00:00Z",
        "Investigation (cost $0.037):",
        "The agent rebuilds its prompt every turn.",
        "Fingerprint:  fp-0123456789abcdef",
        "Notification: fp-0123456789abcdef:firing:0",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(!text.contains("Resolved:"));
    // One session is one session.
    let mut one = sample_alert();
    one.session_count = 1;
    assert!(email_text(&one).contains("above peers over 1 session, +$4.20/day"));
}

#[test]
fn investigation_without_summary_is_left_out() {
    let mut alert = sample_alert();
    alert.investigation = Some(sample_report("  ", 0.01));
    assert!(!email_text(&alert).contains("Investigation"));
    assert!(!email_html(&alert).contains("Investigation"));
}

#[test]
fn html_escapes_every_value() {
    let mut alert = sample_alert();
    alert
        .labels
        .insert("feature".into(), "<script>alert(1)</script>".into());
    alert.group = "feature=<b>x</b>".into();
    alert.summary = "a & b \"quoted\"".into();
    alert.sessions[0].session_id = "<img src=x onerror=y>".into();
    alert.sessions[0].evidence = json!({"note": "</pre><script>"});
    alert.sessions[1].link = Some("javascript:alert(1)".into());
    let html = email_html(&alert);
    assert!(!html.contains("<script>"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>x"), "{html}");
    assert!(!html.contains("javascript:"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("a &amp; b &quot;quoted&quot;"));
    assert!(html.contains("&lt;/pre&gt;&lt;script&gt;"));
    // The http(s) link of the top session is kept, escaped.
    assert!(html.contains("<a href=\"https://gateway.example.com/logs?session="));
}

#[test]
fn html_has_sessions_table_and_facts() {
    let html = email_html(&sample_alert());
    for needle in [
        "<td>+$1.31</td>",
        "<td>$1.75</td>",
        "sess-second-002",
        "Investigation (cost $0.037)",
        "fp-0123456789abcdef:firing:0",
        "&quot;cached_tokens&quot;: 0",
        "2026-03-04T10:00:00Z",
    ] {
        assert!(html.contains(needle), "missing {needle:?} in:\n{html}");
    }
}

#[test]
fn resolved_bodies_say_when() {
    let mut alert = sample_alert();
    alert.status = AlertStatus::Resolved;
    alert.ends_at = Some(Utc.with_ymd_and_hms(2026, 3, 4, 15, 0, 0).unwrap());
    assert!(email_text(&alert).contains("Resolved:     2026-03-04T15:00:00Z"));
}

#[test]
fn generic_body_is_the_alert_and_round_trips() {
    let alert = sample_alert();
    let body = webhook_body(&alert, WebhookShape::Generic);
    assert_eq!(body["version"], "costwatch.alert.v1");
    assert_eq!(body["status"], "firing");
    assert_eq!(body["kind"], "no_cache");
    assert_eq!(body["severity"], "warning");
    assert_eq!(body["sessions"][0]["session_id"], "sess-top-001");
    assert_eq!(body["window"]["start"], "2026-03-04T10:00:00Z");
    let back: Alert = serde_json::from_value(body).unwrap();
    assert_eq!(back, alert);
}

#[test]
fn slack_body_has_text_and_blocks() {
    let mut alert = sample_alert();
    alert.sessions[1].explanation = "uses <!channel> & more".into();
    let body = webhook_body(&alert, WebhookShape::Slack);
    assert_eq!(body["text"], alert.title.as_str());
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert_eq!(blocks[0]["text"]["type"], "plain_text");
    assert_eq!(blocks[0]["text"]["text"], alert.title.as_str());
    let all = body.to_string();
    assert!(all.contains("sess-top-001"));
    assert!(all.contains("+$1.31"));
    assert!(all.contains("The agent rebuilds its prompt"));
    assert!(all.contains("uses &lt;!channel&gt; &amp; more"));
    assert!(!all.contains("<!channel>"));
    assert!(all.contains("<https://gateway.example.com/logs?session=sess-top-001|sess-top-001>"));
    for block in blocks {
        if let Some(text) = block["text"]["text"].as_str() {
            assert!(text.chars().count() <= SLACK_TEXT_MAX);
        }
    }
}

#[test]
fn slack_texts_are_cut_to_the_limits() {
    let mut alert = sample_alert();
    alert.title = "t".repeat(400);
    alert.summary = "s".repeat(5000);
    let body = webhook_body(&alert, WebhookShape::Slack);
    let header = body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert_eq!(header.chars().count(), SLACK_HEADER_MAX);
    assert!(header.ends_with('…'));
    let summary = body["blocks"][1]["text"]["text"].as_str().unwrap();
    assert_eq!(summary.chars().count(), SLACK_TEXT_MAX);
}

#[test]
fn alertmanager_body_firing() {
    let mut alert = sample_alert();
    alert.labels.insert("alertname".into(), "spoof".into());
    alert
        .labels
        .insert("app.kubernetes/name".into(), "x".into());
    let body = webhook_body(&alert, WebhookShape::Alertmanager);
    let list = body.as_array().unwrap();
    assert_eq!(list.len(), 1);
    let a = &list[0];
    assert_eq!(a["labels"]["alertname"], "costwatch_no_cache");
    assert_eq!(a["labels"]["severity"], "warning");
    assert_eq!(a["labels"]["group"], "feature=support-agent");
    assert_eq!(a["labels"]["fingerprint"], "fp-0123456789abcdef");
    assert_eq!(a["labels"]["feature"], "support-agent");
    assert_eq!(a["labels"]["team"], "care");
    assert_eq!(a["labels"]["rule"], "cache-long-conversations");
    assert_eq!(a["labels"]["app_kubernetes_name"], "x");
    assert_eq!(a["annotations"]["summary"], alert.title.as_str());
    assert_eq!(a["annotations"]["description"], alert.summary.as_str());
    assert_eq!(a["startsAt"], "2026-03-04T10:00:00Z");
    assert!(a.get("endsAt").is_none());
    assert_eq!(
        a["generatorURL"],
        "https://gateway.example.com/logs?session=sess-top-001"
    );
    // Every label value is a string, as Alertmanager requires.
    for value in a["labels"].as_object().unwrap().values() {
        assert!(value.is_string());
    }
}

#[test]
fn alertmanager_body_resolved_has_ends_at() {
    let mut alert = sample_alert();
    alert.status = AlertStatus::Resolved;
    alert.ends_at = Some(Utc.with_ymd_and_hms(2026, 3, 4, 15, 0, 0).unwrap());
    alert.sessions.clear();
    let body = webhook_body(&alert, WebhookShape::Alertmanager);
    assert_eq!(body[0]["endsAt"], "2026-03-04T15:00:00Z");
    assert!(body[0].get("generatorURL").is_none());
}

#[test]
fn alertmanager_body_firing_holds_until_valid_until() {
    let mut alert = sample_alert();
    alert.valid_until = Some(Utc.with_ymd_and_hms(2026, 3, 4, 11, 4, 0).unwrap());
    let body = webhook_body(&alert, WebhookShape::Alertmanager);
    assert_eq!(body[0]["endsAt"], "2026-03-04T11:04:00Z");
    // The generic shape never carries it: it is the delivery's, not the alert's.
    let generic = webhook_body(&alert, WebhookShape::Generic);
    assert!(generic.get("valid_until").is_none(), "{generic}");
    assert_eq!(generic["ends_at"], serde_json::Value::Null);
}

#[test]
fn signature_matches_rfc_4231_vectors() {
    // RFC 4231 test case 2 (short key).
    assert_eq!(
        signature("Jefe", b"what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // RFC 4231 test case 6 (a key longer than the block is hashed first).
    let key = vec![0xaa_u8; 131];
    let mac = hmac_sha256(
        &key,
        b"Test Using Larger Than Block-Size Key - Hash Key First",
    );
    assert_eq!(
        hex::encode(mac),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
    // A key of exactly one block is used as is.
    let exact = "k".repeat(64);
    assert!(verify_signature(&exact, b"x", &signature(&exact, b"x")));
    assert_ne!(signature(&exact, b"x"), signature(&"k".repeat(65), b"x"));
}

#[test]
fn verify_signature_accepts_only_the_right_secret_and_body() {
    let sig = signature("s3cret", b"{\"a\":1}");
    assert!(sig.starts_with("sha256="));
    assert_eq!(sig.len(), "sha256=".len() + 64);
    assert!(verify_signature("s3cret", b"{\"a\":1}", &sig));
    assert!(!verify_signature("wrong", b"{\"a\":1}", &sig));
    assert!(!verify_signature("s3cret", b"{\"a\":2}", &sig));
    assert!(!verify_signature("s3cret", b"{\"a\":1}", &sig[7..]));
    assert!(!verify_signature("s3cret", b"{\"a\":1}", "sha256=zz"));
}

/// The sample alert with a chart of its two sessions.
fn alert_with_chart() -> Alert {
    let mut alert = sample_alert();
    let mut b = crate::detect::GroupBaseline::new(64);
    for i in 0..40 {
        b.cached_share.push(0.5 + f64::from(i % 5) / 10.0);
    }
    for s in &mut alert.sessions {
        s.evidence = serde_json::json!({"cached_share": 0.0});
    }
    alert.chart = crate::notify::chart::ChartSpec::capture(
        crate::domain::Kind::NoCache,
        &alert.group,
        &b,
        &alert.sessions,
    );
    assert!(alert.chart.is_some());
    alert
}

#[test]
fn slack_shows_the_chart_only_with_a_public_url() {
    let alert = alert_with_chart();
    let image = |body: &serde_json::Value| {
        body["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "image")
            .cloned()
    };
    // Without server.public_url: no image block, the body as before.
    let plain = webhook_body(&alert, WebhookShape::Slack);
    assert_eq!(image(&plain), None);
    assert_eq!(
        webhook_body_linked(&alert, WebhookShape::Slack, None),
        plain
    );
    let base = url::Url::parse("https://costwatch.example.com/ops/").unwrap();
    let linked = webhook_body_linked(&alert, WebhookShape::Slack, Some(&base));
    let block = image(&linked).expect("an image block");
    assert_eq!(
        block["image_url"],
        "https://costwatch.example.com/ops/incidents/fp-0123456789abcdef/chart.png"
    );
    assert!(
        block["alt_text"]
            .as_str()
            .unwrap()
            .starts_with("Chart: cache-read share per session in feature=support-agent")
    );
    // Just before the context line.
    let blocks = linked["blocks"].as_array().unwrap();
    assert_eq!(blocks[blocks.len() - 2]["type"], "image");
    // An alert without a chart gets no block even with the URL.
    let none = webhook_body_linked(&sample_alert(), WebhookShape::Slack, Some(&base));
    assert_eq!(image(&none), None);
    // The generic body carries the spec as data.
    let generic = webhook_body_linked(&alert, WebhookShape::Generic, Some(&base));
    assert_eq!(generic["chart"]["metric"], "cached_share");
    assert_eq!(generic["chart"]["flagged"][0]["value"], 0.0);
}

#[test]
fn the_email_says_what_the_chart_shows_and_the_html_references_it() {
    let alert = alert_with_chart();
    let line = alert.chart.as_ref().unwrap().describe();
    assert!(email_text(&alert).contains(&format!("\n{line}\n")));
    let html = email_html_with_chart(&alert, Some("chart.1@example.com"));
    assert!(html.contains("<img src=\"cid:chart.1@example.com\" width=\"600\" height=\"260\" alt=\"Chart: cache-read share"), "{html}");
    // Without an image part, no reference to one.
    assert!(!email_html(&alert).contains("<img"));
    assert!(!email_text(&sample_alert()).contains("Chart:"));
}
