//! Caps that plan: small output caps share their tokens over the rounds,
//! the last call a budget allows is the answer, forced answers say which
//! cap forced them.

use super::*;

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
