//! Tests of rule files.

use super::rules::RuleLists;
use super::tests_support::*;
use super::*;
use std::fs;

#[test]
fn rules_with_only_a_name_get_the_defaults() -> TestResult {
    let dir = tempfile::tempdir()?;
    for (file, text) in [
        ("no_cache.yaml", "no_cache: [{name: no-cache-conversation}]"),
        (
            "oversized_model.yaml",
            "oversized_model:\n  - name: premium-model-on-tiny-calls\n",
        ),
        ("retry_loop.yaml", "retry_loop:\n  - name: retry-loop\n"),
    ] {
        fs::write(dir.path().join(file), text)?;
    }
    let rules = load_rules(&[dir.path().to_path_buf()])?;
    assert_eq!(rules, default_rules(dir.path()));
    Ok(())
}

#[test]
fn rule_problems_are_all_reported_with_positions() -> TestResult {
    let cases: &[(&str, &[&str])] = &[
        (
            "bad_values.yaml",
            &[
                "bad_values.yaml:4:19: no_cache[0].min_requests: must be at least 2, got 1",
                "bad_values.yaml:5:23: no_cache[0].max_cached_share: must be between 0 and 1, got 1.5",
                "bad_values.yaml:6:28: no_cache[0].min_peer_cached_share: must be between 0 and 1, got -0.1",
                "bad_values.yaml:7:16: no_cache[0].min_peers: must be at least 1, got 0",
                "bad_values.yaml:8:21: no_cache[0].min_impact_usd: must be at least 0, got -1",
                "bad_values.yaml:10:11: oversized_model[0].name: must not be empty",
                "bad_values.yaml:11:26: oversized_model[0].premium_price_ratio: must be at least 1, got 0.5",
                "bad_values.yaml:12:29: oversized_model[0].min_premium_cost_share: must be between 0 and 1, got 2",
                "bad_values.yaml:13:22: oversized_model[0].max_group_share: must be between 0 and 1, got 1.01",
                "bad_values.yaml:16:19: retry_loop[0].min_requests: must be at least 2, got 0",
                "bad_values.yaml:17:26: retry_loop[0].min_ratio_to_median: must be at least 1, got 0.9",
                "bad_values.yaml:18:19: retry_loop[0].min_robust_z: must be greater than 0, got 0",
                "bad_values.yaml:19:24: retry_loop[0].min_identical_run: must be at least 2, got 1",
                "bad_values.yaml:20:28: retry_loop[0].input_tolerance_ratio: must be between 0 and 1, got 3",
            ],
        ),
        (
            "bad_types.yaml",
            &[
                "bad_types.yaml:4:5: no_cache[0].min_request: unknown field `min_request`, expected one of `name`, `severity`, `match`, `enabled`, `min_requests`, `min_avg_input_tokens`, `min_cacheable_tokens`, `model_min_cacheable_tokens`, `cache_lifetime_seconds`, `model_cache_lifetime_seconds`, `min_missed_calls`, `judge_once_ended`, `max_cached_share`, `min_peer_cached_share`, `min_peers`, `wait_for_peers`, `min_impact_usd`",
                "bad_types.yaml:5:23: no_cache[0].max_cached_share: invalid type: string \"lots\", expected a number",
                "bad_types.yaml:6:5: no_cache[1]: missing field `name`",
                "bad_types.yaml:6:15: no_cache[1].severity: unknown variant `urgent`, expected one of `info`, `warning`, `critical`",
                "bad_types.yaml:7:5: no_cache[2]: invalid type: integer `42`, expected a mapping",
                "bad_types.yaml:9:19: no_cache[3].match.team: invalid type: sequence, expected a string",
                "bad_types.yaml:10:16: no_cache[3].min_peers: must be at least 1, got 0",
                "bad_types.yaml:12:11: retry_loop[0].name: invalid type: sequence, expected a string",
                "bad_types.yaml:13:19: retry_loop[0].min_requests: invalid type: floating point `2.5`, expected a non-negative integer",
                "bad_types.yaml:14:1: unknown_kind: unknown field `unknown_kind`, expected one of `no_cache`, `oversized_model`, `retry_loop`",
            ],
        ),
    ];
    let dir = fixtures().join("rules");
    for (name, want) in cases {
        let err = load_rules(&[dir.join(name)])
            .err()
            .ok_or_else(|| format!("{name} loaded without problems"))?;
        assert_eq!(shown(&err, &dir), *want, "{name}");
    }
    Ok(())
}

#[test]
fn problems_of_all_rule_files_are_collected() -> TestResult {
    let dir = fixtures().join("rules");
    let err = load_rules(&[dir.clone(), dir.join("no_such.yaml")])
        .err()
        .ok_or("loaded without problems")?;
    let files: Vec<String> = shown(&err, &dir)
        .iter()
        .map(|p| p.split(':').next().unwrap_or_default().to_owned())
        .collect();
    let mut distinct = files.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        [
            "bad_types.yaml",
            "bad_values.yaml",
            "dup_b.yaml",
            "no_such.yaml"
        ]
    );
    assert_eq!(files.len(), 10 + 14 + 1 + 1);
    Ok(())
}

#[test]
fn duplicate_rule_names_are_reported_at_the_second_naming_the_first() -> TestResult {
    let dir = fixtures().join("rules");
    let err = load_rules(&[dir.join("dup_a.yaml"), dir.join("dup_b.yaml")])
        .err()
        .ok_or("loaded without problems")?;
    // The same name in two kinds is fine; twice in one kind is not.
    assert_eq!(
        shown(&err, &dir),
        [
            "dup_b.yaml:3:11: no_cache[1].name: duplicate rule name `shared-name`, first defined at dup_a.yaml:2:11"
        ]
    );
    Ok(())
}

#[test]
fn a_rule_folder_gives_its_yaml_files_in_name_order() -> TestResult {
    let dir = tempfile::tempdir()?;
    let files = [
        ("b.yaml", "no_cache: [{name: from-b}]"),
        ("a.yml", "no_cache: [{name: from-a}]"),
        ("c.json", "no_cache: [{name: from-json}]"),
        (".hidden.yaml", "no_cache: [{name: from-hidden}]"),
        ("empty.yaml", "# no rules yet\n"),
    ];
    for (file, text) in files {
        fs::write(dir.path().join(file), text)?;
    }
    fs::create_dir(dir.path().join("sub"))?;
    fs::write(
        dir.path().join("sub/d.yaml"),
        "no_cache: [{name: from-sub}]",
    )?;
    let rules = load_rules(&[dir.path().to_path_buf()])?;
    let names: Vec<&str> = rules
        .no_cache
        .iter()
        .map(|r| r.meta.name.as_str())
        .collect();
    assert_eq!(names, ["from-a", "from-b"]);
    assert_eq!(rules.no_cache[0].meta.file, dir.path().join("a.yml"));
    Ok(())
}

#[test]
fn committed_rule_schema_is_current() -> TestResult {
    let path = root().join("rules/rules.schema.json");
    let want = serde_json::to_string_pretty(&rules_schema())? + "\n";
    // `COSTWATCH_BLESS=1 cargo test --lib config` rewrites the file.
    if std::env::var_os("COSTWATCH_BLESS").is_some() {
        fs::write(&path, &want)?;
    }
    assert_eq!(
        fs::read_to_string(&path)?,
        want,
        "run with COSTWATCH_BLESS=1 to update"
    );
    Ok(())
}

#[test]
fn rule_schema_describes_every_kind_and_parameter() -> TestResult {
    let schema = rules_schema();
    let kinds: Vec<&String> = schema["properties"]
        .as_object()
        .ok_or("no properties")?
        .keys()
        .collect();
    // The loader's own list of kinds must match the schema's.
    let lists = serde_json::to_value(RuleLists::default())?;
    let loader: Vec<&String> = lists.as_object().ok_or("not an object")?.keys().collect();
    assert_eq!(kinds, loader);
    let rule = &schema["$defs"]["NoCacheRule"];
    assert_eq!(rule["required"], serde_json::json!(["name"]));
    assert_eq!(rule["properties"]["max_cached_share"]["default"], 0.05);
    assert_eq!(rule["properties"]["max_cached_share"]["maximum"], 1.0);
    assert!(
        rule["properties"]["min_requests"]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Fewest calls"))
    );
    assert_eq!(schema["additionalProperties"], false);
    Ok(())
}

#[test]
fn removed_move_settings_and_a_bad_accept_after_are_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("moves.yaml");
    fs::write(
        &path,
        "oversized_model:\n  - name: a\n    recent_sessions: 20\n    moved_after_sessions: 3\n  - name: b\n    accept_after: soon\n  - name: c\n    accept_after: 0s\n    design_model: gpt-6.1-sol\n",
    )?;
    let err = load_rules(std::slice::from_ref(&path))
        .err()
        .ok_or("loaded without problems")?;
    let removed = "was removed: costwatch no longer concludes that a group moved to a premium model on purpose; declare the move with design_model, and accept_after says when an undeclared one becomes the group's normal";
    assert_eq!(
        shown(&err, dir.path()),
        [
            format!("moves.yaml:3:22: oversized_model[0].recent_sessions: recent_sessions {removed}"),
            format!("moves.yaml:4:27: oversized_model[0].moved_after_sessions: moved_after_sessions {removed}"),
            "moves.yaml:6:19: oversized_model[1].accept_after: invalid duration `soon`: expected number at 0".to_owned(),
            "moves.yaml:8:19: oversized_model[2].accept_after: must be greater than 0".to_owned(),
        ]
    );
    let ok = dir.path().join("declared.yaml");
    fs::write(
        &ok,
        "oversized_model:\n  - name: summarize-on-sonnet\n    match: {feature: summarize}\n    design_model: claude-sonnet-4-5\n    accept_after: 36h\n",
    )?;
    let rules = load_rules(&[ok])?;
    let rule = &rules.oversized_model[0];
    assert_eq!(rule.design_model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(rule.accept_after, std::time::Duration::from_secs(36 * 3600));
    Ok(())
}
