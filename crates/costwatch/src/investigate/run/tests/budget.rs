//! The caps and the day's budget: tokens, dollars, reservations, and
//! model failures counted at their worst case.

use super::*;

#[tokio::test]
async fn the_input_token_cap_makes_the_round_final_and_then_stops() {
    // Room for one call but not two: the first call must answer, and a
    // model that calls tools anyway is stopped by the cap.
    let tools = FakeTools::new(Behaviour::Rows);
    let probe = run(Script::Investigator, &tools, Setup::default()).await;
    let first = probe.inv.rounds[0].request.estimated_prompt_tokens;
    let s = Setup {
        caps: Caps {
            max_input_tokens: first * 2 - 1,
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(
        Script::NeverStops(ScriptedCall::search_top_session()),
        &tools,
        s,
    )
    .await;
    assert_eq!(out.inv.stop_reason, StopReason::TokenCap);
    assert_eq!(out.requests.len(), 1);
    assert_eq!(out.requests[0].tool_choice(), Some("none"));
    // A well-behaved model answers in that one round.
    let s = Setup {
        caps: Caps {
            max_input_tokens: first * 2 - 1,
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    // The answer was forced by the token cap, and the record says so.
    assert_eq!(out.inv.stop_reason, StopReason::AnsweredAtTokenCap);
    assert_eq!(out.inv.totals.tool_calls, 0);
    // Below one prompt: no call at all.
    let s = Setup {
        caps: Caps {
            max_input_tokens: first - 1,
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert_eq!(out.inv.stop_reason, StopReason::TokenCap);
    assert!(out.requests.is_empty());
    assert!(
        out.inv
            .stop_detail
            .as_deref()
            .unwrap()
            .contains("input tokens left")
    );
}

#[tokio::test]
async fn max_tokens_shrinks_to_the_dollars_left_and_the_run_cap_holds() {
    let tools = FakeTools::new(Behaviour::Rows);
    let probe = run(Script::Investigator, &tools, Setup::default()).await;
    let first = probe.inv.rounds[0].request.estimated_prompt_tokens;
    // Dollars for the first prompt and 100 output tokens, exactly.
    let cap = prices().worst_case(first, 100);
    let s = Setup {
        caps: Caps {
            max_usd_per_run: cap,
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert_eq!(out.requests[0].max_tokens(), Some(100));
    assert_eq!(out.inv.rounds[0].request.reserved_usd, cap);
    assert!(out.inv.totals.cost_usd <= cap);
    // The only call was also the last possible one, so it had to answer.
    assert_eq!(out.requests[0].tool_choice(), Some("none"));
    assert_eq!(out.inv.stop_reason, StopReason::AnsweredAtRunBudget);
    // Less than a useful answer's worth: refused before calling.
    let s = Setup {
        caps: Caps {
            max_usd_per_run: prices().worst_case(first, 63),
            ..caps()
        },
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert_eq!(out.inv.stop_reason, StopReason::RunBudget);
    assert!(out.requests.is_empty());
}

#[tokio::test]
async fn the_daily_budget_is_reserved_before_and_settled_after_each_call() {
    let tools = FakeTools::new(Behaviour::Rows);
    // Almost all of today's budget is gone: no call is made.
    let s = Setup {
        ledger: MemoryLedger::with_spent(day(), 0.99999),
        ..Setup::default()
    };
    let server = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let (model, _) = client(&server, Duration::from_secs(5));
    let inv = investigate(
        &s.alert,
        &tools,
        &model,
        &s.ledger,
        &s.caps,
        &prices(),
        &s.clock,
        &s.opts,
    )
    .await;
    assert_eq!(inv.stop_reason, StopReason::DailyBudget);
    assert!(server.requests().is_empty());
    assert_eq!(s.ledger.spent(day()).await.unwrap(), 0.99999);
    // Two runs in a row: the ledger holds what both cost.
    let ledger = MemoryLedger::new();
    let mut total = 0.0;
    for _ in 0..2 {
        let inv = investigate(
            &s.alert,
            &tools,
            &model,
            &ledger,
            &s.caps,
            &prices(),
            &s.clock,
            &s.opts,
        )
        .await;
        assert_eq!(inv.stop_reason, StopReason::Answered);
        total += inv.totals.cost_usd;
    }
    assert!((ledger.spent(day()).await.unwrap() - total).abs() < 1e-12);
}

/// A ledger whose reservations always fail, as when another replica
/// took the rest of the day's budget between the check and the call.
struct RacedLedger;

impl BudgetLedger for RacedLedger {
    async fn reserve(&self, _: NaiveDate, _: f64, _: f64) -> Result<bool, LedgerError> {
        Ok(false)
    }
    async fn settle(&self, _: NaiveDate, _: f64, _: f64) -> Result<(), LedgerError> {
        Ok(())
    }
    async fn spent(&self, _: NaiveDate) -> Result<f64, LedgerError> {
        Ok(0.0)
    }
}

#[tokio::test]
async fn a_lost_reservation_stops_the_run_without_calling() {
    let tools = FakeTools::new(Behaviour::Rows);
    let server = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let (model, _) = client(&server, Duration::from_secs(5));
    let s = Setup::default();
    let inv = investigate(
        &s.alert,
        &tools,
        &model,
        &RacedLedger,
        &s.caps,
        &prices(),
        &s.clock,
        &s.opts,
    )
    .await;
    assert_eq!(inv.stop_reason, StopReason::DailyBudget);
    assert!(inv.stop_detail.unwrap().contains("another run"));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn rate_limits_are_retried_and_recorded() {
    let tools = FakeTools::new(Behaviour::Rows);
    let s = Setup {
        faults: vec![ModelFault::Status(429), ModelFault::Status(503)],
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert_eq!(out.inv.stop_reason, StopReason::Answered);
    assert_eq!(out.inv.rounds[0].retries, 2);
    // Retry-After: 1 on the 429, then the backoff.
    assert_eq!(
        out.sleeper.delays(),
        vec![Duration::from_secs(1), Duration::from_millis(20)]
    );
}

#[tokio::test]
async fn a_failing_model_stops_the_run_and_costs_nothing_when_unbilled() {
    let tools = FakeTools::new(Behaviour::Rows);
    let s = Setup {
        faults: vec![ModelFault::Status(500); 3],
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert!(matches!(out.inv.stop_reason, StopReason::ModelError(ref e) if e.contains("500")));
    assert_eq!(out.inv.totals.cost_usd, 0.0);
    assert_eq!(out.inv.rounds[0].error_type.as_deref(), Some("ServerError"));
    let s = Setup {
        faults: vec![ModelFault::Status(401)],
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert!(matches!(out.inv.stop_reason, StopReason::ModelError(_)));
    assert_eq!(out.requests.len(), 1);
}

#[tokio::test]
async fn an_unreadable_answer_is_counted_at_its_worst_case() {
    for fault in [ModelFault::Garbage, ModelFault::NoUsage] {
        let tools = FakeTools::new(Behaviour::Rows);
        let s = Setup {
            faults: vec![fault],
            ..Setup::default()
        };
        let out = run(Script::Investigator, &tools, s).await;
        let inv = &out.inv;
        assert!(matches!(inv.stop_reason, StopReason::ModelError(_)));
        assert!(inv.rounds[0].cost_is_worst_case);
        assert_eq!(inv.totals.cost_usd, inv.rounds[0].request.reserved_usd);
        assert_eq!(
            out.requests.len(),
            1,
            "not retried: it may have been billed"
        );
    }
}

#[tokio::test]
async fn a_hanging_model_times_out_and_is_counted_at_its_worst_case() {
    let tools = FakeTools::new(Behaviour::Rows);
    let s = Setup {
        faults: vec![ModelFault::Hang],
        model_timeout: Duration::from_millis(200),
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    let inv = &out.inv;
    assert!(
        matches!(inv.stop_reason, StopReason::ModelError(_)),
        "{:?}",
        inv.stop_reason
    );
    assert_eq!(inv.rounds[0].error_type.as_deref(), Some("Timeout"));
    assert!(inv.rounds[0].cost_is_worst_case);
    assert_eq!(out.requests.len(), 1);
}

#[tokio::test]
async fn usage_above_the_estimate_goes_on_within_the_caps_and_stops_past_one() {
    // Three times the scripted count (half again the first estimate) still
    // fits the caps: the run goes on and answers.
    let tools = FakeTools::new(Behaviour::Rows);
    let s = Setup {
        faults: vec![ModelFault::OverReport(3)],
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    assert_eq!(
        out.inv.stop_reason,
        StopReason::Answered,
        "{}",
        render_text(&out.inv)
    );
    let r = &out.inv.rounds[0];
    assert!(r.usage.unwrap().prompt_tokens > r.request.estimated_prompt_tokens);
    // Fifty times passes the input cap: the run stops at once and says by
    // how much.
    let s = Setup {
        faults: vec![ModelFault::OverReport(50)],
        ..Setup::default()
    };
    let out = run(Script::Investigator, &tools, s).await;
    let inv = &out.inv;
    assert_eq!(
        inv.stop_reason,
        StopReason::TokenCap,
        "{}",
        render_text(inv)
    );
    assert_eq!(inv.rounds.len(), 1);
    assert_eq!(inv.rounds[0].error_type.as_deref(), Some("UsageOverCap"));
    let detail = inv.stop_detail.as_deref().unwrap();
    assert!(
        detail.contains(&format!(
            "{} input tokens used of the 20000 allowed",
            inv.totals.input_tokens
        )),
        "{detail}"
    );
}
