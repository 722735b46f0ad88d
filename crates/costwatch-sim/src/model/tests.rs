//! Tests of the scripted model over HTTP: token counting, the OpenAI answer
//! shape, scripts, `max_tokens`, the key and faults.

use super::usage::cached_tokens;
use super::*;
use serde_json::{Value, json};

async fn post(server: &ScriptedModelServer, key: &str, body: &Value) -> (u16, Value) {
    let res = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn request(messages: Value, tool_choice: &str, max_tokens: u64) -> Value {
    json!({
        "model": "sim",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "search_requests",
            "description": "rows", "parameters": {"type": "object"}}}],
        "tool_choice": tool_choice,
        "max_tokens": max_tokens,
    })
}

fn digest_messages() -> Value {
    json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Incident: no_cache\n- session \"s-1\" cost $0.1\n"}
    ])
}

#[tokio::test]
async fn it_counts_prompt_tokens_from_the_bytes_and_answers_in_openai_shape() {
    let server = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let body = request(digest_messages(), "auto", 500);
    let (status, answer) = post(&server, DEFAULT_INFERENCE_KEY, &body).await;
    assert_eq!(status, 200, "{answer}");
    let expected =
        (body["tools"].to_string().len() + body["messages"].to_string().len()).div_ceil(4) as u64;
    assert_eq!(answer["usage"]["prompt_tokens"], expected);
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let call = &answer["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "search_requests");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"session_id": "s-1"}));
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].prompt_tokens, expected);
    assert_eq!(recorded[0].tools(), vec!["search_requests"]);
    assert_eq!(recorded[0].tool_choice(), Some("auto"));
}

#[tokio::test]
async fn it_answers_when_told_to_and_never_exceeds_max_tokens() {
    let server = ScriptedModelServer::start(Script::answer_after(3, &"x".repeat(400)))
        .await
        .unwrap();
    let (_, answer) = post(
        &server,
        DEFAULT_INFERENCE_KEY,
        &request(digest_messages(), "none", 10),
    )
    .await;
    let msg = &answer["choices"][0]["message"];
    assert!(msg.get("tool_calls").is_none(), "{answer}");
    assert_eq!(msg["content"].as_str().unwrap().len(), 40);
    assert_eq!(answer["usage"]["completion_tokens"], 10);
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn a_wrong_key_is_refused_and_faults_are_served_in_order() {
    let server = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let body = request(digest_messages(), "auto", 100);
    assert_eq!(post(&server, "nope", &body).await.0, 401);
    server.model().push_fault(ModelFault::Status(429));
    server.model().push_fault(ModelFault::NoUsage);
    assert_eq!(post(&server, DEFAULT_INFERENCE_KEY, &body).await.0, 429);
    let (status, answer) = post(&server, DEFAULT_INFERENCE_KEY, &body).await;
    assert_eq!(status, 200);
    assert!(answer.get("usage").is_none());
    let (_, answer) = post(&server, DEFAULT_INFERENCE_KEY, &body).await;
    assert!(answer.get("usage").is_some());
}

#[test]
fn a_shared_prefix_is_cached_from_1024_tokens_in_steps_of_128() {
    let earlier = vec!["a".repeat(5000)];
    assert_eq!(cached_tokens(&"a".repeat(4000), &earlier), 0);
    assert_eq!(
        cached_tokens(&format!("{}b", "a".repeat(4800)), &earlier),
        1152
    );
}
