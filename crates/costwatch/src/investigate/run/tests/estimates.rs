//! Prompt estimates stay at or above the model's count and within 10% of
//! it: from a deployment's first call with OpenAI's counting, from its
//! second call with the bound, and across a restart that loads what was
//! learned, over incidents whose digests differ in ids, figures and size.

use super::*;
use crate::investigate::model::ToolChoice;
use crate::investigate::tokens::Tokenizer;

/// Prompt tokens as OpenAI's guide to counting tokens with tiktoken
/// counts them for gpt-4o (openai-cookbook, "How to count tokens with
/// tiktoken": `num_tokens_from_messages` and `num_tokens_for_tools`): 3
/// per message plus its role and text, 3 priming the reply, and per
/// function 7, its `name:description`, then 3 for its properties and per
/// property 3 and its `key:type:description` (enums: -3, then 3 and the
/// value per item), and 12 once after the functions. Tool calls in the
/// history are counted as their id, name and arguments plus 3. Written
/// here from the guide, apart from the estimator's own code.
fn openai_guide_count(request: &Value) -> u64 {
    let t = Tokenizer::O200k;
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut n: i64 = 3;
    let c = |x: &str| t.count(x) as i64;
    for m in request["messages"].as_array().unwrap() {
        n += 3 + c(&s(&m["role"])) + c(&s(&m["content"]));
        n += m.get("tool_call_id").map_or(0, |id| c(&s(id)));
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            n += 3 + c(&s(&call["id"]));
            n += c(&s(&call["function"]["name"])) + c(&s(&call["function"]["arguments"]));
        }
    }
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    for f in &tools {
        let f = &f["function"];
        let desc = s(&f["description"]);
        n += 7 + c(&format!("{}:{}", s(&f["name"]), desc.trim_end_matches('.')));
        if let Some(props) = f["parameters"]["properties"].as_object()
            && !props.is_empty()
        {
            n += 3;
            for (key, p) in props {
                n += 3;
                if let Some(items) = p["enum"].as_array() {
                    n -= 3;
                    for item in items {
                        n += 3 + c(&s(item));
                    }
                }
                let ty = p["type"].as_str().unwrap_or("object");
                let pd = s(&p["description"]);
                n += c(&format!("{key}:{ty}:{}", pd.trim_end_matches('.')));
            }
        }
    }
    if !tools.is_empty() {
        n += 12;
    }
    n as u64
}

/// The `i`th incident of the test: its sessions' ids, figures and number
/// differ, so its digest tokenizes differently from the others'.
fn incident(i: usize) -> Alert {
    let mut a = alert();
    let sessions = [1, 3, 2, 5][i % 4];
    a.sessions = (0..sessions)
        .map(|k| {
            let n = 1_000 + 7_919 * (i * 5 + k) as u64;
            AlertSession {
                session_id: if (i + k).is_multiple_of(2) {
                    format!("replay-mismatch-{:012x}", n * 2_654_435_761)
                } else {
                    format!("checkout-{n:012}")
                },
                cost_usd: n as f64 / 1e6,
                impact_usd: n as f64 / 2e6,
                explanation: format!(
                    "{} calls read 0 of {} prompt tokens from the prompt cache",
                    3 + k,
                    n * 3
                ),
                evidence: json!({"requests": 3 + k, "input_tokens": n * 3, "cached_tokens": 0}),
                link: None,
                what_to_do: String::new(),
            }
        })
        .collect();
    a
}

/// One estimate beside the count, and which call it was.
#[derive(Debug)]
struct Call {
    what: &'static str,
    estimate: u64,
    count: u64,
}

/// Runs incidents `from..to` on `model`, each four rounds (the last is
/// the answer, with `tool_choice: "none"`); `first` names the first call.
async fn runs(
    model: &ModelClient,
    range: std::ops::Range<usize>,
    first: &'static str,
) -> Vec<Call> {
    let ledger = MemoryLedger::new();
    let clock = FakeClock::new(now());
    let mut calls = Vec::new();
    for i in range {
        let tools = FakeTools::new(if i.is_multiple_of(2) {
            Behaviour::Rows
        } else {
            Behaviour::ManyRows(6 + i)
        });
        let opts = RunOptions {
            run_id: Some(format!("inv-{i}")),
            ..RunOptions::default()
        };
        let inv = investigate(
            &incident(i),
            &tools,
            model,
            &ledger,
            &caps(),
            &prices(),
            &clock,
            &opts,
        )
        .await;
        assert_eq!(inv.totals.rounds, 4, "{}", render_text(&inv));
        for r in &inv.rounds {
            let what = if calls.is_empty() {
                first
            } else if r.request.tool_choice == ToolChoice::None {
                "answer"
            } else if r.index == 1 {
                "a run's first"
            } else {
                "later"
            };
            calls.push(Call {
                what,
                estimate: r.request.estimated_prompt_tokens,
                count: r.usage.unwrap().prompt_tokens,
            });
        }
        clock.advance(chrono::Duration::minutes(5));
    }
    calls
}

/// Every estimate is at or above the model's count and within 10% above
/// it, except the bound's very first call (it knows nothing of the model
/// yet). Both ways of counting: o200k against a model counting as
/// OpenAI's guide does, and the bound against the scripted model's count
/// of bytes. Two processes of one deployment: the second loads what the
/// first learned, as it would from the state database.
#[tokio::test]
async fn estimates_are_never_below_the_count_and_within_ten_percent_once_calibrated() {
    for tokenizer in [Some(Tokenizer::O200k), None] {
        let server = ScriptedModelServer::start(Script::answer_after(3, "done"))
            .await
            .unwrap();
        if tokenizer.is_some() {
            server
                .model()
                .set_prompt_counter(Arc::new(openai_guide_count));
        }
        let choice = match tokenizer {
            Some(_) => crate::config::TokenizerChoice::O200kBase,
            None => crate::config::TokenizerChoice::None,
        };
        let process = || {
            client(&server, Duration::from_secs(10))
                .0
                .with_tokenizer(choice)
        };
        let first = process();
        let mut calls = runs(&first, 0..2, "deployment's first").await;
        // A restart: a new estimator, loaded with what the first stored.
        let second = process();
        second.estimator().merge(first.estimator().samples());
        calls.extend(runs(&second, 2..4, "process's first").await);
        for (i, c) in calls.iter().enumerate() {
            assert!(
                c.estimate >= c.count,
                "{tokenizer:?} call {i} ({}): {} < {}",
                c.what,
                c.estimate,
                c.count
            );
            let over = c.estimate as f64 / c.count as f64 - 1.0;
            if tokenizer.is_some() || i > 0 {
                assert!(over <= 0.10, "{tokenizer:?} call {i}: {c:?}");
            }
            println!(
                "estimate {tokenizer:?} {}: {} vs {} ({:+.1}%)",
                c.what,
                c.estimate,
                c.count,
                over * 100.0
            );
        }
    }
}
