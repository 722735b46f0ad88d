//! What a run leaves for people: tool results shaped and cut as valid JSON,
//! an alert that carries the transcript once and stays small, and the
//! whole record for the state database.

use super::*;
use crate::domain::investigation::ALERT_RESULT_BYTES;
use crate::notify::render::{WebhookShape, email_html, email_text, transcript_text, webhook_body};

#[tokio::test]
async fn long_tool_results_lose_whole_rows_and_stay_json() {
    let tools = FakeTools::new(Behaviour::ManyRows(200));
    let out = run(Script::answer_after(1, "done"), &tools, Setup::default()).await;
    let call = &out.inv.rounds[0].tool_calls[0];
    assert!(call.truncated);
    assert!(call.result.len() <= caps().max_tool_result_bytes);
    let v: Value = serde_json::from_str(&call.result).unwrap();
    let rows = v["data"]["rows"].as_array().unwrap();
    assert!(rows.len() > 10 && rows.len() < 200, "{}", rows.len());
    assert_eq!(
        v["data"]["same"]["session_id"],
        "replay-mismatch-a14896679e70"
    );
    let note = v["truncated"].as_str().unwrap();
    assert!(
        note.starts_with(&format!("showing {} of 200 rows of data", rows.len())),
        "{note}"
    );
    // The model got exactly that text.
    let sent = &out.requests[1].json["messages"];
    let tool_msg = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_msg["content"], call.result.as_str());
}

/// A four-round run with results at the size cap: its alert carries the
/// transcript once and stays under 16 KB on every channel, while the whole
/// record keeps every result as the model saw it.
#[tokio::test]
async fn a_four_round_alert_carries_the_transcript_once_in_under_16_kb() {
    let tools = FakeTools::new(Behaviour::ManyRows(200));
    let out = run(
        Script::NeverStops(ScriptedCall::search_top_session()),
        &tools,
        Setup::default(),
    )
    .await;
    let inv = &out.inv;
    assert_eq!(inv.totals.rounds, 4);
    let report = InvestigationReport::of(inv);
    let mut alert = alert();
    alert.investigation = Some(report.clone());
    let webhook = webhook_body(&alert, WebhookShape::Generic).to_string();
    let text = transcript_text(&report);
    let email = email_text(&alert).len() + email_html(&alert).len() + text.len();
    let full = InvestigationReport::full(inv);
    let before = serde_json::to_string(&full).unwrap().len() + render_text(inv).len();
    println!(
        "alert sizes: webhook {} B, email {} B (the whole record as JSON and text: {} B)",
        webhook.len(),
        email,
        before
    );
    assert!(webhook.len() <= 16 * 1024, "{}", webhook.len());
    assert!(email <= 16 * 1024, "{email}");
    assert!(!webhook.contains("transcript_text"));
    // The email's attachment is text: no JSON copy of the transcript.
    assert!(!text.contains("\"client_request_id\""));
    for round in &report.transcript {
        for c in &round.tool_calls {
            if c.status == ToolCallStatus::Ok {
                assert!(c.result.len() <= ALERT_RESULT_BYTES);
                assert!(c.clipped_from.is_some_and(|n| n > ALERT_RESULT_BYTES));
                let v: Value = serde_json::from_str(&c.result).unwrap();
                assert!(v["truncated"].is_string());
            }
        }
    }
    assert!(text.contains("shortened here (costwatch investigation show inv-test)"));
    // The later rounds share a prefix above the prompt cache's minimum:
    // the model reported cached tokens, and the transcript shows the share.
    let share = report.cached_share().unwrap();
    assert!(report.cached_tokens > 0 && share > 0.0, "{report:?}");
    assert!(
        text.contains(&format!(
            "({} cached, {:.0}%)",
            report.cached_tokens,
            share * 100.0
        )),
        "{text}"
    );
    // The whole record keeps what the model saw.
    let back: Investigation = serde_json::from_str(&serde_json::to_string(inv).unwrap()).unwrap();
    assert!(back.rounds[0].tool_calls[0].result.len() > ALERT_RESULT_BYTES);
}
