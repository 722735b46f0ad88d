//! The detector table: each case a history of windows, the request rows
//! drill-downs read, and the findings expected.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "an uncached conversation among caching peers is flagged",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "nc",
                    "support-agent",
                    0,
                    &[(LUNA, 6, 24_557, 0, 1_290)],
                )],
            ),
            requests: vec![],
            expect: vec![(Kind::NoCache, "nc")],
        },
        Case {
            name: "a conversation whose source never reported cache reads is not judged",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![SessionRecord {
                    cache_unreported: true,
                    ..session(
                        "unknown",
                        "support-agent",
                        0,
                        &[(LUNA, 6, 24_557, 0, 1_290)],
                    )
                }],
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "peers whose cache reads are unknown are no baseline: a cold group stays quiet",
            rules: None,
            windows: vec![
                (0..4)
                    .map(|i| SessionRecord {
                        cache_unreported: true,
                        ..session(
                            &format!("u{i}"),
                            "support-agent",
                            0,
                            &[(LUNA, 6, 24_557, 0, 1_290)],
                        )
                    })
                    .collect(),
            ],
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "prompts of 775, 1,018 and 1,282 tokens average over 1,024 yet none could read the cache",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![uncached(
                    "below",
                    "support-agent",
                    LUNA,
                    &[775, 1_018, 1_282],
                )],
            ),
            requests: vec![("below", prompts("below", LUNA, &[775, 1_018, 1_282]))],
            expect: vec![],
        },
        Case {
            name: "an uncached conversation beside calls to a model without a cache is flagged",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "mixed",
                    "support-agent",
                    0,
                    &[(LUNA, 6, 24_557, 0, 1_290), (NOVA, 2, 8_000, 0, 900)],
                )],
            ),
            requests: vec![],
            expect: vec![(Kind::NoCache, "mixed")],
        },
        Case {
            name: "a cached conversation beside calls to a model without a cache is left alone",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "mixed-cached",
                    "support-agent",
                    0,
                    &[(LUNA, 6, 24_557, 4_000, 1_290), (NOVA, 2, 100_000, 0, 900)],
                )],
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a 1,300-token first prompt then uncached repeats is no_cache",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![uncached(
                    "repeats",
                    "support-agent",
                    LUNA,
                    &[1_300, 1_350, 1_400, 1_450],
                )],
            ),
            requests: vec![(
                "repeats",
                prompts("repeats", LUNA, &[1_300, 1_350, 1_400, 1_450]),
            )],
            expect: vec![(Kind::NoCache, "repeats")],
        },
        Case {
            name: "prompts under a model's 4,096-token minimum are never no_cache",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![uncached(
                    "opus",
                    "support-agent",
                    OPUS,
                    &[2_500, 3_000, 3_500, 3_900],
                )],
            ),
            requests: vec![("opus", prompts("opus", OPUS, &[2_500, 3_000, 3_500, 3_900]))],
            expect: vec![],
        },
        Case {
            name: "a rule's per-model minimum overrides the catalogue",
            rules: Some(
                "no_cache:\n  - name: nc\n    model_min_cacheable_tokens: {gpt-6-luna: 2048}\n",
            ),
            windows: with_history(
                healthy_history(4, 6),
                vec![uncached(
                    "luna-2k",
                    "support-agent",
                    LUNA,
                    &[1_300, 1_350, 1_400, 1_450],
                )],
            ),
            requests: vec![(
                "luna-2k",
                prompts("luna-2k", LUNA, &[1_300, 1_350, 1_400, 1_450]),
            )],
            expect: vec![],
        },
        Case {
            name: "a single-request session is never no_cache",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "one",
                    "support-agent",
                    0,
                    &[(LUNA, 1, 9_000, 0, 300)],
                )],
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a model without a prompt cache is never no_cache",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "nova",
                    "support-agent",
                    0,
                    &[(NOVA, 6, 30_000, 0, 900)],
                )],
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "prompts below the cacheable size are never no_cache",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "short",
                    "support-agent",
                    0,
                    &[(LUNA, 6, 3_000, 0, 300)],
                )],
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a group whose peers do not cache either is left alone",
            rules: None,
            windows: (0..3)
                .map(|w| {
                    (0..6)
                        .map(|k| {
                            session(
                                &format!("b-{w}-{k}"),
                                "batch",
                                w,
                                &[(LUNA, 5, 20_000, 0, 500)],
                            )
                        })
                        .collect()
                })
                .collect(),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a long healthy cached conversation is not a retry loop",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![chat("long", "support-agent", 0, 40)],
            ),
            requests: vec![("long", growing_requests("long", 40))],
            expect: vec![],
        },
        Case {
            name: "a retry loop cheaper than a normal session is flagged against its peers",
            rules: None,
            windows: with_history(healthy_history(4, 6), {
                let mut s = session("loop", "checkout", 0, &[(LUNA, 10, 3_800, 0, 60)]);
                s.errors = 8;
                vec![s]
            }),
            requests: vec![("loop", loop_requests("loop", 10, 380, 8))],
            expect: vec![(Kind::RetryLoop, "loop")],
        },
        Case {
            name: "a few healthy rate-limit retries are not a loop",
            rules: None,
            windows: with_history(healthy_history(4, 6), {
                let mut s = session("retried", "checkout", 0, &[(LUNA, 6, 2_400, 0, 100)]);
                s.errors = 2;
                vec![s]
            }),
            requests: vec![("retried", loop_requests("retried", 3, 400, 2))],
            expect: vec![],
        },
        Case {
            name: "a premium model on tiny calls, unusual for its group, is flagged",
            rules: None,
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "sol",
                    "triage",
                    0,
                    &[(SOL, 3, 217, 0, 44), (LUNA, 2, 290, 0, 50)],
                )],
            ),
            requests: vec![],
            expect: vec![(Kind::OversizedModel, "sol")],
        },
        Case {
            name: "a premium model on big inputs, normal for its group, is left alone",
            rules: None,
            windows: (0..3)
                .map(|w| {
                    (0..5)
                        .map(|k| {
                            session(
                                &format!("r-{w}-{k}"),
                                "research",
                                w,
                                &[(SOL, 4, 90_000, 60_000, 3_000)],
                            )
                        })
                        .collect()
                })
                .collect(),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a premium model a whole group always uses on short prompts is left alone",
            rules: None,
            windows: (0..3)
                .map(|w| {
                    let mut v: Vec<SessionRecord> = (0..5)
                        .map(|k| {
                            session(
                                &format!("l-{w}-{k}"),
                                "legal",
                                w,
                                &[(SOL, 3, 1_500, 0, 200)],
                            )
                        })
                        .collect();
                    v.push(session(
                        &format!("x-{w}"),
                        "other",
                        w,
                        &[(LUNA, 3, 1_500, 0, 200)],
                    ));
                    v
                })
                .collect(),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a traffic spike of healthy sessions raises nothing",
            rules: None,
            windows: {
                let mut h = healthy_history(3, 4);
                h.extend(healthy_history(4, 30).into_iter().skip(3));
                h
            },
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a new group with little history raises nothing for healthy traffic or a lone premium call",
            rules: None,
            windows: with_history(
                healthy_history(2, 4),
                vec![
                    chat("new-1", "onboarding", 0, 4),
                    chat("new-2", "onboarding", 0, 30),
                    session("new-3", "fresh", 0, &[(SOL, 2, 150, 0, 20)]),
                ],
            ),
            requests: vec![("new-2", growing_requests("new-2", 30))],
            expect: vec![],
        },
        Case {
            name: "a per-label rule can silence a group",
            rules: Some(
                "no_cache:\n  - name: default\n  - name: quiet-support\n    match: {feature: support-agent}\n    enabled: false\n",
            ),
            windows: with_history(
                healthy_history(4, 6),
                vec![session(
                    "nc",
                    "support-agent",
                    0,
                    &[(LUNA, 6, 24_557, 0, 1_290)],
                )],
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            name: "a session failing over to a dearer model after failed calls is left alone",
            rules: None,
            windows: with_history(healthy_history(4, 6), {
                let mut s = session(
                    "failover",
                    "triage",
                    0,
                    &[(SOL, 3, 217, 0, 44), (LUNA, 2, 290, 0, 50)],
                );
                s.errors = 1;
                vec![s]
            }),
            requests: vec![],
            expect: vec![],
        },
        Case {
            // A sub-step on the premium model before the session met a
            // failure and retried on its small model: the rows show the
            // premium calls followed no failure.
            name: "tiny premium calls that followed no failure are flagged in a session with failed calls",
            rules: None,
            windows: with_history(healthy_history(4, 6), {
                let mut s = session(
                    "moved-then-failed",
                    "triage",
                    0,
                    &[(SOL, 2, 400, 0, 60), (LUNA, 3, 1_200, 0, 100)],
                );
                s.errors = 1;
                vec![s]
            }),
            requests: vec![(
                "moved-then-failed",
                vec![
                    request("moved-then-failed", 0, SOL, 200, RequestStatus::Success),
                    request("moved-then-failed", 1, SOL, 200, RequestStatus::Success),
                    request("moved-then-failed", 2, LUNA, 400, RequestStatus::Success),
                    request("moved-then-failed", 3, LUNA, 400, RequestStatus::Error),
                    request("moved-then-failed", 4, LUNA, 400, RequestStatus::Success),
                ],
            )],
            expect: vec![(Kind::OversizedModel, "moved-then-failed")],
        },
        Case {
            // The same calls, the premium ones after the failure, the
            // session staying on the fallback: a failover.
            name: "tiny premium calls after a failed call, until the failed model answers, are a failover and left alone",
            rules: None,
            windows: with_history(healthy_history(4, 6), {
                let mut s = session(
                    "failed-then-premium",
                    "triage",
                    0,
                    &[(SOL, 2, 400, 0, 60), (LUNA, 3, 1_200, 0, 100)],
                );
                s.errors = 2;
                vec![s]
            }),
            requests: vec![(
                "failed-then-premium",
                vec![
                    request("failed-then-premium", 0, LUNA, 400, RequestStatus::Success),
                    request("failed-then-premium", 1, LUNA, 400, RequestStatus::Error),
                    request("failed-then-premium", 2, SOL, 200, RequestStatus::Success),
                    request("failed-then-premium", 3, SOL, 200, RequestStatus::Success),
                    request("failed-then-premium", 4, LUNA, 400, RequestStatus::Error),
                ],
            )],
            expect: vec![],
        },
        Case {
            // A failover in which a cheaper model answered too: it was at
            // hand, and the tiny premium calls beside it were not forced.
            name: "tiny premium calls in a failover where a cheaper model also answered are flagged",
            rules: None,
            windows: with_history(healthy_history(4, 6), {
                let mut s = session(
                    "failover-beside-small",
                    "triage",
                    0,
                    &[
                        (LUNA, 1, 200, 0, 0),
                        (SOL, 2, 400, 0, 60),
                        (NOVA, 2, 400, 0, 60),
                    ],
                );
                s.errors = 1;
                vec![s]
            }),
            requests: vec![(
                "failover-beside-small",
                vec![
                    request("failover-beside-small", 0, LUNA, 200, RequestStatus::Error),
                    request("failover-beside-small", 1, SOL, 200, RequestStatus::Success),
                    request("failover-beside-small", 2, SOL, 200, RequestStatus::Success),
                    request(
                        "failover-beside-small",
                        3,
                        NOVA,
                        200,
                        RequestStatus::Success,
                    ),
                    request(
                        "failover-beside-small",
                        4,
                        NOVA,
                        200,
                        RequestStatus::Success,
                    ),
                ],
            )],
            expect: vec![(Kind::OversizedModel, "failover-beside-small")],
        },
        Case {
            name: "a per-label threshold is tuned for one group only",
            rules: Some(
                "oversized_model:\n  - name: default\n  - name: triage-strict\n    match: {feature: triage}\n    max_avg_input_tokens: 50\n",
            ),
            windows: with_history(
                healthy_history(4, 6),
                vec![
                    session("sol-triage", "triage", 0, &[(SOL, 3, 217, 0, 44)]),
                    session("sol-checkout", "checkout", 0, &[(SOL, 3, 217, 0, 44)]),
                    // The group's next session is on the small model: not
                    // the start of a move, so the finding stands at once.
                    session("ck-next", "checkout", 0, &[(LUNA, 3, 1_200, 0, 150)]),
                ],
            ),
            requests: vec![],
            expect: vec![(Kind::OversizedModel, "sol-checkout")],
        },
    ]
}
