//! Caps that plan: small output caps share their tokens over the rounds,
//! the last call a budget allows is the answer, forced answers say which
//! cap forced them, and prompt estimates stay just above the model's count.

use super::*;
use crate::investigate::tokens::Tokenizer;

#[tokio::test]
async fn a_small_output_cap_still_allows_a_tool_round_and_the_answer() {
    let tools = FakeTools::new(Behaviour::Rows);
    let s = Setup {
        caps: Caps {
            max_output_tokens: 600,
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    let inv = &out.inv;
    assert_eq!(
        inv.stop_reason,
        StopReason::Answered,
        "{}",
        render_text(inv)
    );
    assert_eq!(inv.totals.tool_calls, 1);
    // Four rounds allowed: the first asks for a quarter of the 600.
    assert_eq!(out.requests[0].tool_choice(), Some("auto"));
    assert_eq!(out.requests[0].max_tokens(), Some(150));
    assert!(out.requests[1].max_tokens().unwrap() >= 64);
}

#[tokio::test]
async fn when_the_day_can_pay_for_one_more_call_it_is_the_answer() {
    let tools = FakeTools::new(Behaviour::Rows);
    let probe = run(Script::Investigator, &tools, Setup::default()).await;
    let first = probe.inv.rounds[0].request.reserved_usd;
    // Today's budget has room for the first call and a little more, not
    // for a second call.
    let left = first * 1.5;
    let s = Setup {
        ledger: MemoryLedger::with_spent(day(), caps().max_usd_per_day - left),
        ..Setup::default()
    };
    let tools = FakeTools::new(Behaviour::Rows);
    let out = run(Script::answer_after(3, "done"), &tools, s).await;
    let inv = &out.inv;
    assert_eq!(out.requests.len(), 1, "{}", render_text(inv));
    assert_eq!(out.requests[0].tool_choice(), Some("none"));
    assert_eq!(inv.stop_reason, StopReason::AnsweredAtDailyBudget);
    assert_eq!(inv.answer.as_deref(), Some("done"));
    // The detail quotes what was really left, not what would be.
    let detail = inv.stop_detail.as_deref().unwrap();
    assert!(
        detail.starts_with(&format!("${left:.6} left of today's $1")),
        "{detail}"
    );
    assert!(tools.called().is_empty());
}

/// Whatever the run's or the day's money allows, a run that paid for a
/// call ends with an answer: the last call the money allows is made the
/// answer, and a run that could not afford one calls nothing.
#[tokio::test]
async fn no_paid_run_ends_without_an_answer_whatever_the_money_left() {
    let tools = FakeTools::new(Behaviour::Rows);
    let probe = run(Script::answer_after(5, "done"), &tools, Setup::default()).await;
    let spent = probe.inv.totals.cost_usd;
    let mut forced = std::collections::BTreeSet::new();
    for step in 1..=24 {
        let money = spent * f64::from(step) / 8.0;
        for by_day in [false, true] {
            let mut s = Setup::default();
            if by_day {
                s.ledger = MemoryLedger::with_spent(day(), caps().max_usd_per_day - money);
            } else {
                s.caps.max_usd_per_run = money;
            }
            let out = run(Script::answer_after(5, "done"), &tools, s).await;
            let inv = &out.inv;
            let code = inv.stop_reason.stop_code();
            if inv.rounds.is_empty() {
                assert!(
                    matches!(code, StopCode::RunBudget | StopCode::DailyBudget),
                    "{money}: {code:?}"
                );
            } else {
                assert!(
                    code.answered(),
                    "${money:.6} (day: {by_day}): {}",
                    render_text(inv)
                );
                assert_eq!(inv.answer.as_deref(), Some("done"));
                // Only the last round may answer; the others called tools.
                let last = out.requests.last().unwrap();
                assert_eq!(last.tool_choice(), Some("none"), "{}", render_text(inv));
                forced.insert(code.as_str());
            }
        }
    }
    // Both budgets forced an answer somewhere along the way.
    assert!(forced.contains("answered_at_run_budget"), "{forced:?}");
    assert!(forced.contains("answered_at_daily_budget"), "{forced:?}");
}

/// A model asking for several tools at once gets only those whose results
/// still leave room for the answer; the others are not run, and it is told
/// why.
#[tokio::test]
async fn tool_calls_that_would_leave_no_room_for_the_answer_are_not_run() {
    let script = || Script::AllAtOnce {
        calls: vec![ScriptedCall::search_top_session(); 3],
        text: "done".into(),
    };
    // Small answers, so that money left over from a call's output
    // reservation does not pay for the results.
    let opts = || RunOptions {
        max_tokens_per_call: 64,
        run_id: Some("inv-test".into()),
        ..RunOptions::default()
    };
    let tools = FakeTools::new(Behaviour::ManyRows(200));
    let probe = run(
        script(),
        &tools,
        Setup {
            opts: opts(),
            ..Setup::default()
        },
    )
    .await;
    assert_eq!(
        probe.inv.totals.tool_calls,
        3,
        "{}",
        render_text(&probe.inv)
    );
    // Room for the first round and an answer after one result at the cap,
    // not after three.
    let r1 = &probe.inv.rounds[0].request;
    let result = (caps().max_tool_result_bytes as f64
        / crate::investigate::tokens::PRIOR_BYTES_PER_TOKEN)
        .ceil() as u64;
    let next = r1.estimated_prompt_tokens
        + u64::from(r1.max_tokens)
        + result
        + crate::investigate::run::caps::TOOL_MESSAGE_TOKENS;
    let cap = r1.reserved_usd + prices().worst_case(next, 64) * 1.01;
    let tools = FakeTools::new(Behaviour::ManyRows(200));
    let s = Setup {
        caps: Caps {
            max_usd_per_run: cap,
            ..caps()
        },
        opts: opts(),
        ..Setup::default()
    };
    let out = run(script(), &tools, s).await;
    let inv = &out.inv;
    let calls = &inv.rounds[0].tool_calls;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].status, ToolCallStatus::Ok, "{}", render_text(inv));
    let skipped: Vec<_> = calls
        .iter()
        .filter(|c| c.status == ToolCallStatus::NotExecuted)
        .collect();
    assert!(!skipped.is_empty(), "{}", render_text(inv));
    assert!(
        skipped[0]
            .result
            .starts_with("not run: the caps leave room only for the answer"),
        "{}",
        skipped[0].result
    );
    assert!(
        inv.stop_reason.stop_code().answered(),
        "{}",
        render_text(inv)
    );
    assert_eq!(inv.answer.as_deref(), Some("done"));
    assert_eq!(tools.called().len(), 3 - skipped.len());
}

#[tokio::test]
async fn an_answer_in_the_last_allowed_round_is_labelled_as_forced() {
    let tools = FakeTools::new(Behaviour::Rows);
    let s = Setup {
        caps: Caps {
            max_rounds: 2,
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(Script::answer_after(5, "done"), &tools, s).await;
    let inv = &out.inv;
    assert_eq!(inv.stop_reason, StopReason::AnsweredAtMaxRounds);
    assert_eq!(inv.stop_reason.code(), "answered_at_max_rounds");
    assert_eq!(
        inv.stop_detail.as_deref(),
        Some("round 2 was the last of the 2 rounds allowed")
    );
    assert_eq!(inv.summary(), "done");
    let text = render_text(inv);
    assert!(text.contains("1 tool call\n"), "{text}");
    // A free answer stays `answered`.
    let out = run(Script::answer_after(1, "done"), &tools, Setup::default()).await;
    assert_eq!(out.inv.stop_reason, StopReason::Answered);
    assert_eq!(out.inv.stop_detail, None);
}

/// Prompt tokens as OpenAI's guide to counting tokens with tiktoken
/// counts them for its chat models: 3 per message plus its role and text,
/// 3 priming the reply, and function definitions by the guide's recipe for
/// gpt-4o (7 per function, its `name:description`, 3 for the properties,
/// 3 per property and its `key:type:description`, 12 to end it). Tool
/// calls in the history are counted as their id, name and arguments plus 3.
fn openai_guide_count(request: &Value) -> u64 {
    let t = Tokenizer::O200k;
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut n = 3;
    for m in request["messages"].as_array().unwrap() {
        n += 3 + t.count(&s(&m["role"])) + t.count(&s(&m["content"]));
        n += m.get("tool_call_id").map_or(0, |id| t.count(&s(id)));
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            n += 3 + t.count(&s(&c["id"]));
            n += t.count(&s(&c["function"]["name"])) + t.count(&s(&c["function"]["arguments"]));
        }
    }
    for f in request["tools"].as_array().into_iter().flatten() {
        let f = &f["function"];
        let desc = s(&f["description"]);
        n += 7 + t.count(&format!("{}:{}", s(&f["name"]), desc.trim_end_matches('.')));
        if let Some(props) = f["parameters"]["properties"].as_object() {
            n += 3;
            for (key, p) in props {
                n += 3;
                let ty = p["type"].as_str().unwrap_or("object");
                let pd = s(&p["description"]);
                n += t.count(&format!("{key}:{ty}:{}", pd.trim_end_matches('.')));
            }
        }
        n += 12;
    }
    n
}

/// Every estimate is at or above the model's count; once the model has
/// reported once, estimates are within 10% above it. Both ways of
/// counting: the o200k tokenizer against a model counting as OpenAI's
/// guide does, and the learned bound against the scripted model's count.
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
        let (model, _) = client(&server, Duration::from_secs(10));
        let choice = match tokenizer {
            Some(_) => crate::config::TokenizerChoice::O200kBase,
            None => crate::config::TokenizerChoice::None,
        };
        let model = model.with_tokenizer(choice);
        let tools = FakeTools::new(Behaviour::Rows);
        let ledger = MemoryLedger::new();
        let clock = FakeClock::new(now());
        let mut calls = Vec::new();
        // Two runs: the second starts calibrated by the first.
        for _ in 0..2 {
            let inv = investigate(
                &alert(),
                &tools,
                &model,
                &ledger,
                &caps(),
                &prices(),
                &clock,
                &RunOptions::default(),
            )
            .await;
            assert_eq!(inv.totals.rounds, 4, "{}", render_text(&inv));
            for r in &inv.rounds {
                calls.push((
                    r.request.estimated_prompt_tokens,
                    r.usage.unwrap().prompt_tokens,
                ));
            }
        }
        for (i, &(estimate, count)) in calls.iter().enumerate() {
            assert!(
                estimate >= count,
                "{tokenizer:?} call {i}: {estimate} < {count}"
            );
            if i > 0 {
                let over = estimate as f64 / count as f64 - 1.0;
                assert!(
                    over <= 0.10,
                    "{tokenizer:?} call {i}: {estimate} vs {count}"
                );
            }
        }
        println!("estimates {tokenizer:?} (estimate, count): {calls:?}");
    }
}
