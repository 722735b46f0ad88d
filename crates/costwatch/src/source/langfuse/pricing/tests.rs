//! Definitions read from `GET /api/public/models` answers and matched to
//! calls as Langfuse matches them.

use super::super::models::{Read, WireDefinition, definitions, map_page};
use super::*;
use chrono::TimeZone;
use serde_json::{Value, json};

fn read(data: Value) -> Read {
    let data: Vec<WireDefinition> = serde_json::from_value(data).unwrap();
    let mut read = Read::default();
    map_page(data, &mut read).unwrap();
    read
}

fn defs(data: Value) -> Definitions {
    definitions(read(data))
}

fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap()
}

/// A managed definition with flat prices per token.
fn def(name: &str, pattern: &str, start: Option<&str>, input: f64, output: f64) -> Value {
    json!({
        "id": format!("{name}-{}", start.unwrap_or("none")), "modelName": name,
        "matchPattern": pattern, "startDate": start, "unit": "TOKENS",
        "inputPrice": input, "outputPrice": output, "totalPrice": null,
        "isLangfuseManaged": true, "prices": {}, "pricingTiers": []
    })
}

fn input_price(d: &Definitions, model: &str, when: DateTime<Utc>) -> Option<f64> {
    d.price(model, when, None).map(|p| p.input_usd_per_mtok)
}

#[test]
fn a_pattern_matches_names_with_a_provider_prefix_and_in_any_case() {
    let d = defs(json!([def(
        "gpt-4o",
        "(?i)^(openai/)?(gpt-4o)$",
        None,
        2.5e-6,
        1e-5
    )]));
    let when = at(2026, 1, 1);
    for name in ["gpt-4o", "openai/gpt-4o", "GPT-4o", "OpenAI/GPT-4O"] {
        let p = d
            .price(name, when, None)
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(p.id, name, "priced under the call's own name");
        assert_eq!((p.input_usd_per_mtok, p.output_usd_per_mtok), (2.5, 10.0));
    }
    for name in ["gpt-4o-mini", "azure/gpt-4o", "my-gpt-4o"] {
        assert_eq!(d.price(name, when, None), None, "{name}");
    }
}

#[test]
fn a_pattern_without_the_case_flag_is_case_sensitive_and_searched_anywhere() {
    let d = defs(json!([def("ft", "ft:gpt-4o", None, 1e-6, 1e-6)]));
    let when = at(2026, 1, 1);
    assert!(d.price("ft:gpt-4o:acme:2026", when, None).is_some());
    assert!(d.price("FT:GPT-4O:acme", when, None).is_none());
}

#[test]
fn the_newest_start_date_not_after_the_call_wins() {
    let d = defs(json!([
        def("m", "(?i)^m$", None, 9e-6, 9e-6),
        def("m", "(?i)^m$", Some("2025-03-01T00:00:00.000Z"), 2e-6, 8e-6),
        def("m", "(?i)^m$", Some("2026-01-15T00:00:00.000Z"), 1e-6, 4e-6),
        def("m", "(?i)^m$", Some("2030-01-01"), 5e-7, 2e-6),
    ]));
    assert_eq!(
        input_price(&d, "m", at(2024, 6, 1)),
        Some(9.0),
        "before any date"
    );
    assert_eq!(input_price(&d, "m", at(2025, 6, 1)), Some(2.0));
    assert_eq!(input_price(&d, "m", at(2026, 10, 11)), Some(1.0));
    let start = Utc.with_ymd_and_hms(2026, 1, 15, 0, 0, 0).unwrap();
    assert_eq!(input_price(&d, "m", start), Some(1.0), "from its start on");
    assert_eq!(input_price(&d, "m", at(2030, 1, 2)), Some(0.5));
    // A listing shows the newest.
    assert_eq!(d.listed()[0].input_usd_per_mtok, 0.5);
}

#[test]
fn the_projects_own_definition_wins_over_a_managed_one() {
    let mut own = def("m", "(?i)^m$", Some("2025-01-01T00:00:00Z"), 3e-6, 3e-6);
    own["isLangfuseManaged"] = json!(false);
    let d = defs(json!([
        def("m", "(?i)^m$", Some("2026-01-01T00:00:00Z"), 1e-6, 1e-6),
        own
    ]));
    assert_eq!(input_price(&d, "m", at(2026, 6, 1)), Some(3.0));
}

#[test]
fn a_tier_prices_the_calls_its_conditions_hold_for() {
    let prices = json!({"input": 3e-6, "output": 1.5e-5, "input_cache_read": 3e-7,
        "cache_read_input_tokens": 3e-7, "input_cache_creation": 3.75e-6,
        "input_cache_creation_1h": 6e-6});
    let doubled = json!({"input": 6e-6, "output": 2.25e-5, "input_cache_read": 6e-7,
        "cache_read_input_tokens": 6e-7, "input_cache_creation": 7.5e-6,
        "input_cache_creation_1h": 1.2e-5});
    let d = defs(json!([{
        "id": "c", "modelName": "claude-x", "matchPattern": "(?i)^(anthropic/)?(claude-x)$",
        "startDate": null, "unit": "TOKENS", "isLangfuseManaged": true,
        "pricingTiers": [
            {"id": "t0", "name": "Standard", "isDefault": true, "priority": 0,
             "conditions": [], "prices": prices},
            {"id": "t2", "name": "Tagged", "isDefault": false, "priority": 2,
             "conditions": [{"source": "metadata", "key": "tier", "operator": "in",
                             "values": ["batch"]}], "prices": doubled},
            {"id": "t1", "name": "Large Context", "isDefault": false, "priority": 1,
             "conditions": [{"usageDetailPattern": "INPUT", "operator": "gt",
                             "value": 200000, "caseSensitive": false}], "prices": doubled}
        ]
    }]));
    let when = at(2026, 1, 1);
    let small = Billed::of(150_000, 40_000, 10_000, 1_000);
    let large = Billed::of(250_000, 40_000, 10_000, 1_000);
    let p = d.price("claude-x", when, Some(&small)).unwrap();
    assert_eq!(p.input_usd_per_mtok, 3.0);
    assert_eq!(p.cached_input_usd_per_mtok, Some(0.3));
    assert_eq!(
        p.cache_write_usd_per_mtok,
        Some(3.75),
        "the five-minute write"
    );
    assert!(p.supports_prompt_cache);
    // The whole prompt (uncached, read, written) is what `input` sums.
    let p = d.price("claude-x", when, Some(&large)).unwrap();
    assert_eq!((p.input_usd_per_mtok, p.output_usd_per_mtok), (6.0, 22.5));
    // No usage: the default tier, as the detectors' catalogue has it.
    assert_eq!(input_price(&d, "claude-x", when), Some(3.0));
}

#[test]
fn a_case_sensitive_condition_must_match_the_key_as_written() {
    let tier = |pattern: &str, case: bool| {
        json!([{
            "id": "m", "modelName": "m", "matchPattern": "^m$", "startDate": null,
            "unit": "TOKENS", "isLangfuseManaged": true,
            "pricingTiers": [
                {"name": "Standard", "isDefault": true, "priority": 0, "conditions": [],
                 "prices": {"input": 1e-6, "output": 1e-6}},
                {"name": "Big", "isDefault": false, "priority": 1, "prices": {"input": 2e-6, "output": 2e-6},
                 "conditions": [{"usageDetailPattern": pattern, "operator": "gte",
                                 "value": 10, "caseSensitive": case}]}
            ]
        }])
    };
    let b = Billed::of(10, 0, 0, 0);
    let when = at(2026, 1, 1);
    let price = |d: &Definitions| d.price("m", when, Some(&b)).unwrap().input_usd_per_mtok;
    assert_eq!(price(&defs(tier("^INPUT$", false))), 2.0);
    assert_eq!(price(&defs(tier("^INPUT$", true))), 1.0);
    assert_eq!(price(&defs(tier("^input$", true))), 2.0);
}

#[test]
fn prices_come_from_tiers_else_the_flat_map_else_the_legacy_fields() {
    let mut flat = def("a", "^a$", None, 9e-6, 9e-6);
    flat["prices"] = json!({"input": {"price": 1e-6}, "output": {"price": 2e-6},
                            "input_cached_tokens": {"price": 1e-7}});
    let legacy = def("b", "^b$", None, 4e-7, 1.6e-6);
    let mut total = def("c", "^c$", None, 0.0, 0.0);
    total["inputPrice"] = Value::Null;
    total["outputPrice"] = Value::Null;
    total["totalPrice"] = json!(5e-6);
    let d = defs(json!([flat, legacy, total]));
    let when = at(2026, 1, 1);
    let a = d.price("a", when, None).unwrap();
    assert_eq!((a.input_usd_per_mtok, a.output_usd_per_mtok), (1.0, 2.0));
    assert_eq!(a.cached_input_usd_per_mtok, Some(0.1));
    let b = d.price("b", when, None).unwrap();
    assert_eq!((b.input_usd_per_mtok, b.output_usd_per_mtok), (0.4, 1.6));
    assert_eq!(b.cached_input_usd_per_mtok, None);
    assert!(!b.supports_prompt_cache);
    let c = d.price("c", when, None).unwrap();
    assert_eq!((c.input_usd_per_mtok, c.output_usd_per_mtok), (5.0, 5.0));
}

#[test]
fn what_costwatch_cannot_use_is_left_out_and_what_is_malformed_fails() {
    let mut images = def("img", "^img$", None, 1e-3, 1e-3);
    images["unit"] = json!("IMAGES");
    let lookahead = def("la", "^la(?=x)", None, 1e-6, 1e-6);
    let r = read(json!([
        images,
        lookahead,
        def("ok", "^ok$", None, 1e-6, 1e-6)
    ]));
    assert_eq!(r.definitions.len(), 1);
    assert_eq!(r.left_out.len(), 1);
    assert!(
        r.left_out[0].starts_with("data[1].matchPattern"),
        "{:?}",
        r.left_out
    );

    let fails = |d: Value| {
        let data: Vec<WireDefinition> = serde_json::from_value(json!([d])).unwrap();
        map_page(data, &mut Read::default()).unwrap_err()
    };
    let mut no_pattern = def("x", "^x$", None, 1e-6, 1e-6);
    no_pattern.as_object_mut().unwrap().remove("matchPattern");
    assert!(fails(no_pattern).starts_with("data[0].matchPattern: missing"));
    let negative = def("x", "^x$", None, -1e-6, 1e-6);
    let err = fails(negative);
    assert!(
        err.starts_with("data[0].pricingTiers[0].prices.input"),
        "{err}"
    );
    let err = fails(def("x", "^x$", Some("soon"), 1e-6, 1e-6));
    assert!(err.starts_with("data[0].startDate"), "{err}");
}
