//! Tests of whole configuration files: defaults, positions, environment.

use super::document::{missing_field, tidy};
use super::tests_support::*;
use super::*;
use crate::config::env::ADMIN_KEY_VAR;
use crate::secret::Secret;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

#[test]
fn shipped_example_config_and_rules_load_with_the_defaults() -> TestResult {
    let path = root().join("config/costwatch.example.yaml");
    let config = load_with_env(&path, &BTreeMap::new())?;
    assert_eq!(config.path, path);
    let s = &config.source;
    assert_eq!(
        s.api_url().map(|u| u.as_str()),
        Some("http://127.0.0.1:8080/v1")
    );
    assert!(s.common.admin_key.is_none());
    assert_eq!(
        (s.page_limit(), s.http.max_retries, s.http.max_body_bytes),
        (50, 5, 8_388_608)
    );
    assert_eq!(
        [
            s.http.timeout,
            s.http.connect_timeout,
            s.http.retry_base,
            s.http.retry_max,
        ],
        [
            Duration::from_secs(30),
            Duration::from_secs(5),
            Duration::from_millis(500),
            Duration::from_secs(60)
        ]
    );
    assert!(s.common.filter.is_empty());
    let w = &config.windows;
    assert_eq!(
        [w.size, w.settle_lag, w.max_backfill],
        [
            Duration::from_secs(15 * 60),
            Duration::from_secs(2 * 60),
            Duration::from_secs(7 * 24 * 3600)
        ]
    );
    assert_eq!(w.start, None);
    assert_eq!(config.group_by, ["feature"]);
    // Relative to the configuration's folder, not the working directory.
    assert_eq!(
        config.state.url,
        format!(
            "sqlite://{}",
            root().join("config").join("costwatch.db").display()
        )
    );
    let d = &config.detection;
    assert_eq!(
        (
            d.baseline_samples,
            d.max_candidates,
            d.drilldown_concurrency
        ),
        (512, 10_000, 4)
    );
    // No `rules:` in the example: the rules built into the binary, which are
    // the repository's rules/ folder.
    assert!(config.rule_paths.is_empty());
    assert_eq!(
        config.rules,
        default_rules(Path::new(super::rules::BUILTIN_FOLDER))
    );
    assert_default_sections(&config)?;
    assert_eq!(
        config.server.listen,
        Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9464)))
    );
    Ok(())
}

/// The defaults of `schedule`, `alerts` and `notify`.
fn assert_default_sections(config: &Config) -> TestResult {
    let s = &config.schedule;
    assert_eq!(s.cron.text(), "*/5 * * * *");
    assert_eq!(s.timezone, chrono_tz::Tz::UTC);
    assert_eq!(s.max_catch_up_windows, 672);
    let t = DateTime::parse_from_rfc3339("2026-05-04T12:03:10Z")?.with_timezone(&Utc);
    assert_eq!(
        s.next_after(t),
        Some(DateTime::parse_from_rfc3339("2026-05-04T12:05:00Z")?.with_timezone(&Utc))
    );
    let a = &config.alerts;
    let h = |n: u64| Duration::from_secs(n * 3600);
    assert_eq!(
        [a.cooldown, a.resolve_after, a.delivery_deadline],
        [h(6), h(2), h(24)]
    );
    assert_eq!(
        [a.retry_base, a.retry_max],
        [Duration::from_secs(30), Duration::from_secs(30 * 60)]
    );
    assert_eq!(a.realert_growth, 0.0);
    assert!(a.send_resolved);
    assert_eq!((a.top_sessions, a.summary_after_windows), (5, 4));
    assert_eq!(a.gateway_ui_url, None);
    assert!(config.notify.email.is_none());
    assert!(config.notify.webhooks.is_empty());
    Ok(())
}

#[test]
fn a_config_that_sets_nothing_optional_equals_the_example() -> TestResult {
    // The example spells out every default, so this ties the code's
    // defaults to the numbers checked above.
    let minimal = load_with_env(&fixtures().join("minimal.yaml"), &BTreeMap::new())?;
    let example = load_with_env(
        &root().join("config/costwatch.example.yaml"),
        &BTreeMap::new(),
    )?;
    // The state file sits next to each configuration.
    let state = |c: &Config, dir: &Path| {
        assert_eq!(
            c.state.url,
            format!("sqlite://{}", dir.join("costwatch.db").display())
        );
    };
    state(&minimal, &fixtures());
    state(&example, &root().join("config"));
    let parts = |c: &Config| {
        let mut c = c.clone();
        c.state.url = String::new();
        format!(
            "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            c.source,
            c.windows,
            c.group_by,
            c.state,
            c.detection,
            c.schedule,
            c.alerts,
            c.notify,
            c.server
        )
    };
    assert_eq!(parts(&minimal), parts(&example));
    assert_default_sections(&minimal)?;
    Ok(())
}

#[test]
fn config_problems_have_file_line_column_path_and_message() -> TestResult {
    let cases: &[(&str, &[&str])] = &[
        (
            "unknown_key.yaml",
            &[&format!(
                "unknown_key.yaml:3:3: source.page_limt: unknown field `page_limt`, {SOURCE_KEYS}"
            )],
        ),
        (
            "wrong_type.yaml",
            &[
                "wrong_type.yaml:3:15: source.page_limit: invalid type: string \"fifty\", expected a non-negative 32-bit integer",
            ],
        ),
        (
            "semantic.yaml",
            &["semantic.yaml:4:11: windows.size: must divide 24h evenly, got 7m"],
        ),
        (
            "syntax.yaml",
            &["syntax.yaml:3:18: mismatched bracket '[' closed by '}'"],
        ),
        (
            "admin_key_missing.yaml",
            &[
                "admin_key_missing.yaml:3:19: source.admin_key_file: cannot read no_such_key.txt: no such file or directory (os error 2)",
            ],
        ),
        (
            "missing_rules.yaml",
            // The line of the configuration and the path it resolved to; the
            // readable rule file beside it is still checked (and loads).
            &[
                "missing_rules.yaml:3:9: rules[0]: cannot read no_such_rules: no such file or directory (os error 2)",
            ],
        ),
        (
            "no_such_config.yaml",
            &["no_such_config.yaml: cannot read: no such file or directory (os error 2)"],
        ),
    ];
    for (name, want) in cases {
        // The fixture folder is cut off, so paths inside it compare as relative.
        let got = fixture_problems(name, &[])?;
        let got: Vec<String> = got
            .iter()
            .map(|g| g.replace(&format!("{}/", fixtures().display()), ""))
            .collect();
        assert_eq!(got, *want, "{name}");
    }
    Ok(())
}

#[test]
fn every_problem_of_a_file_is_reported_in_file_order() -> TestResult {
    let got = fixture_problems("many_errors.yaml", &[])?;
    let want = [
        "many_errors.yaml:3:12: source.api_url: must be an http or https url, got scheme `ftp`".to_owned(),
        "many_errors.yaml:4:15: source.page_limit: must be between 1 and 50, got 80".to_owned(),
        "many_errors.yaml:5:12: source.timeout: invalid type: integer `30`, expected a duration with a unit, such as `30s` or `15m`".to_owned(),
        "many_errors.yaml:7:14: source.retry_max: must be at least retry_base (2m), got 1m".to_owned(),
        "many_errors.yaml:8:19: source.max_body_bytes: must be at least 1, got 0".to_owned(),
        format!("many_errors.yaml:9:3: source.colour: unknown field `colour`, {SOURCE_KEYS}"),
        "many_errors.yaml:11:9: windows.size: must be at most 24h, got 2days".to_owned(),
        "many_errors.yaml:12:15: windows.settle_lag: must be less than 24h, got 1day".to_owned(),
        "many_errors.yaml:13:10: windows.start: must be an rfc 3339 timestamp such as 2026-10-11T00:00:00Z, got `yesterday`".to_owned(),
        "many_errors.yaml:14:27: group_by[2]: duplicate label `feature`".to_owned(),
        "many_errors.yaml:16:8: state.url: must start with `sqlite:`, `postgres://` or `postgresql://`".to_owned(),
        "many_errors.yaml:18:21: detection.baseline_samples: must be between 16 and 65536, got 8".to_owned(),
        "many_errors.yaml:19:19: detection.max_candidates: must be at least 1, got 0".to_owned(),
        "many_errors.yaml:20:26: detection.drilldown_concurrency: invalid type: string \"many\", expected a non-negative integer".to_owned(),
        format!("many_errors.yaml:22:1: extra: unknown field `extra`, {TOP_KEYS}"),
    ];
    assert_eq!(got, want);
    // The state URL holds a password; no message may repeat it.
    assert!(got.iter().all(|p| !p.contains("hunter2")));
    Ok(())
}

#[test]
fn env_overrides_replace_file_values() -> TestResult {
    let config = load_with_env(
        &fixtures().join("minimal.yaml"),
        &env_of(&[
            ("COSTWATCH_SOURCE__API_URL", "http://127.0.0.1:9/v1"),
            ("COSTWATCH_WINDOWS__SIZE", "5m"),
            ("COSTWATCH_STATE__URL", "postgres://costwatch@db/costwatch"),
            ("COSTWATCH_GROUP_BY", "[feature, team]"),
            ("COSTWATCH_RULES", "rules/dup_a.yaml"),
            ("COSTWATCH_LOG", "debug"),
        ]),
    )?;
    assert_eq!(
        config.source.api_url().map(|u| u.as_str()),
        Some("http://127.0.0.1:9/v1")
    );
    assert_eq!(config.windows.size, Duration::from_secs(300));
    assert_eq!(config.state.url, "postgres://costwatch@db/costwatch");
    assert_eq!(config.group_by, ["feature", "team"]);
    assert_eq!(config.rule_paths, [fixtures().join("rules/dup_a.yaml")]);
    assert_eq!(
        (config.rules.no_cache.len(), config.rules.retry_loop.len()),
        (1, 1)
    );
    // Values the environment does not touch keep the file's or the default.
    assert_eq!(config.source.page_limit(), 50);
    Ok(())
}

#[test]
fn bad_env_overrides_are_reported_against_the_variable() -> TestResult {
    let cases: &[(&str, &str, &str)] = &[
        (
            "COSTWATCH_SOURCE__PAGE_LIMIT",
            "fifty",
            "env COSTWATCH_SOURCE__PAGE_LIMIT: source.page_limit: invalid type: string \"fifty\", expected a non-negative 32-bit integer",
        ),
        (
            "COSTWATCH_WINDOWS__SIZE",
            "7m",
            "env COSTWATCH_WINDOWS__SIZE: windows.size: must divide 24h evenly, got 7m",
        ),
        (
            "COSTWATCH_WINDOWS__SIZE",
            "",
            "env COSTWATCH_WINDOWS__SIZE: windows.size: empty value",
        ),
        (
            "COSTWATCH_SOURCE__API_URL",
            "ftp://127.0.0.1/v1",
            "env COSTWATCH_SOURCE__API_URL: source.api_url: must be an http or https url, got scheme `ftp`",
        ),
        (
            "COSTWATCH_SOURCE__API_URLL",
            "http://127.0.0.1:9/v1",
            &format!(
                "env COSTWATCH_SOURCE__API_URLL: source.api_urll: unknown field `api_urll`, {SOURCE_KEYS}"
            ),
        ),
        (
            "COSTWATCH_SOURCES__API_URL",
            "http://127.0.0.1:9/v1",
            &format!(
                "env COSTWATCH_SOURCES__API_URL: sources: unknown field `sources`, {TOP_KEYS}"
            ),
        ),
        (
            "COSTWATCH_RULES",
            "no_such_rules",
            "env COSTWATCH_RULES: rules[0]: cannot read no_such_rules: no such file or directory (os error 2)",
        ),
    ];
    for (var, value, want) in cases {
        let got = fixture_problems("minimal.yaml", &[(var, value)])?;
        assert_eq!(got, [*want], "{var}={value}");
    }
    Ok(())
}

#[test]
fn the_bounds_of_a_read_default_load_and_are_checked() -> TestResult {
    let config = load_with_env(&fixtures().join("minimal.yaml"), &BTreeMap::new())?;
    assert_eq!(config.source.common.max_pages, 100_000);
    assert_eq!(config.schedule.tick_timeout, Duration::from_secs(30 * 60));

    let env = env_of(&[
        ("COSTWATCH_SOURCE__MAX_PAGES", "2000"),
        ("COSTWATCH_SCHEDULE__TICK_TIMEOUT", "90s"),
    ]);
    let config = load_with_env(&fixtures().join("minimal.yaml"), &env)?;
    assert_eq!(config.source.common.max_pages, 2000);
    assert_eq!(config.schedule.tick_timeout, Duration::from_secs(90));

    assert_eq!(
        fixture_problems("reading_errors.yaml", &[])?,
        [
            "reading_errors.yaml:4:14: source.max_pages: must be at least 1, got 0",
            "reading_errors.yaml:6:17: schedule.tick_timeout: must be greater than 0",
        ]
    );
    let cases: &[(&str, &str, &str)] = &[
        (
            "COSTWATCH_SCHEDULE__TICK_TIMEOUT",
            "0s",
            "env COSTWATCH_SCHEDULE__TICK_TIMEOUT: schedule.tick_timeout: must be greater than 0",
        ),
        (
            "COSTWATCH_SCHEDULE__TICK_TIMEOUT",
            "soon",
            "env COSTWATCH_SCHEDULE__TICK_TIMEOUT: schedule.tick_timeout: invalid duration `soon`: expected number at 0",
        ),
        (
            "COSTWATCH_SOURCE__MAX_PAGES",
            "many",
            "env COSTWATCH_SOURCE__MAX_PAGES: source.max_pages: invalid type: string \"many\", expected a non-negative integer",
        ),
    ];
    for (var, value, want) in cases {
        let got = fixture_problems("minimal.yaml", &[(var, value)])?;
        assert_eq!(got, [*want], "{var}={value}");
    }
    Ok(())
}

#[test]
fn api_url_is_required_from_the_file_or_the_environment() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("costwatch.yaml");
    // Sections with nothing under them take their defaults.
    fs::write(&path, "source:\n  # api_url: to do\nwindows:\n")?;
    fs::create_dir(dir.path().join("rules"))?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded without api_url")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "costwatch.yaml:1:1: source.api_url: missing; set it in the file or with COSTWATCH_SOURCE__API_URL"
        ]
    );
    let env = env_of(&[("COSTWATCH_SOURCE__API_URL", "https://gateway.example/v1")]);
    let config = load_with_env(&path, &env)?;
    assert_eq!(
        config.source.api_url().map(|u| u.as_str()),
        Some("https://gateway.example/v1")
    );
    // A `rules` folder next to the file is not picked up by itself: with no
    // `rules:` the built-in rules apply.
    assert!(config.rule_paths.is_empty());
    assert_eq!(config.rules, crate::config::builtin_rules()?);
    Ok(())
}

#[test]
fn rule_paths_are_relative_to_the_configuration_not_the_working_directory() -> TestResult {
    let dir = tempfile::tempdir()?;
    let sub = dir.path().join("etc");
    fs::create_dir_all(sub.join("my-rules"))?;
    fs::write(
        sub.join("my-rules/cache.yaml"),
        "no_cache:\n  - name: strict\n    max_cached_share: 0.01\n",
    )?;
    let path = sub.join("costwatch.yaml");
    fs::write(
        &path,
        "source:\n  api_url: https://gateway.example/v1\nrules: [my-rules, missing]\n",
    )?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded with a missing rule path")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "etc/costwatch.yaml:3:19: rules[1]: cannot read etc/missing: no such file or directory (os error 2)"
        ]
    );
    fs::write(
        &path,
        "source:\n  api_url: https://gateway.example/v1\nrules: [my-rules]\n",
    )?;
    let config = load_with_env(&path, &BTreeMap::new())?;
    assert_eq!(config.rule_paths, [sub.join("my-rules")]);
    assert_eq!(config.rules.no_cache.len(), 1);
    assert!(config.rules.retry_loop.is_empty(), "only the named rules");
    Ok(())
}

#[test]
fn the_built_in_rules_are_the_shipped_rules_folder() -> TestResult {
    let built_in = crate::config::builtin_rules()?;
    assert_eq!(
        built_in,
        default_rules(Path::new(super::rules::BUILTIN_FOLDER))
    );
    // And exactly the rules of the folder, but for the file each names.
    let mut folder = crate::config::load_rules(&[root().join("rules")])?;
    let builtin = Path::new(super::rules::BUILTIN_FOLDER);
    let rename = |f: &mut std::path::PathBuf| {
        *f = builtin.join(f.file_name().unwrap_or_default());
    };
    folder
        .no_cache
        .iter_mut()
        .for_each(|r| rename(&mut r.meta.file));
    folder
        .oversized_model
        .iter_mut()
        .for_each(|r| rename(&mut r.meta.file));
    folder
        .retry_loop
        .iter_mut()
        .for_each(|r| rename(&mut r.meta.file));
    assert_eq!(built_in, folder);
    assert!(!built_in.no_cache.is_empty() && !built_in.retry_loop.is_empty());
    Ok(())
}

#[test]
fn admin_key_comes_from_env_or_file_and_never_shows() -> TestResult {
    const FROM_FILE: &str = "sk-from-file-0123456789";
    const FROM_ENV: &str = "sk-from-env-9876543210";
    // Fixture, environment, expected key.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<&'a str>);
    let cases: &[Case<'_>] = &[
        (
            "admin_key.yaml",
            &[(ADMIN_KEY_VAR, FROM_ENV)],
            Some(FROM_ENV),
        ),
        ("admin_key.yaml", &[(ADMIN_KEY_VAR, "")], Some(FROM_FILE)),
        ("admin_key.yaml", &[], Some(FROM_FILE)),
        ("minimal.yaml", &[(ADMIN_KEY_VAR, FROM_ENV)], Some(FROM_ENV)),
        ("minimal.yaml", &[], None),
    ];
    for (name, env, want) in cases {
        let config = load_with_env(&fixtures().join(name), &env_of(env))?;
        let key = config.source.common.admin_key.as_ref().map(Secret::expose);
        assert_eq!(key, *want, "{name} {env:?}");
        let debug = format!("{config:?}");
        assert!(
            !debug.contains(FROM_FILE) && !debug.contains(FROM_ENV),
            "{debug}"
        );
    }
    Ok(())
}

#[test]
fn serde_messages_use_config_words() {
    let cases = [
        (
            "invalid type: string \"x\", expected u32",
            "invalid type: string \"x\", expected a non-negative 32-bit integer",
        ),
        (
            "invalid type: integer `5`, expected struct RawWindows",
            "invalid type: integer `5`, expected a mapping",
        ),
        (
            "invalid type: string \"x\", expected f64",
            "invalid type: string \"x\", expected a number",
        ),
        (
            "invalid type: integer `3`, expected string or map",
            "invalid type: integer `3`, expected a string",
        ),
        (
            "unknown field `x`, expected `a` or `b`",
            "unknown field `x`, expected `a` or `b`",
        ),
    ];
    for (raw, want) in cases {
        assert_eq!(tidy(raw), want);
    }
    assert_eq!(
        missing_field("missing field `name`"),
        Some("name".to_owned())
    );
    assert_eq!(missing_field("invalid type"), None);
}

#[test]
fn yaml_errors_have_positions_and_plain_messages() -> TestResult {
    let cases = [
        ("a: 1\na: 2\n", 2, 1, "duplicate mapping key: a"),
        ("a: 1\n---\nb: 2\n", 3, 1, "more than one yaml document"),
        ("a: 'open\n", 1, 4, "unclosed quote"),
    ];
    let dir = tempfile::tempdir()?;
    for (text, line, column, message) in cases {
        let path = dir.path().join("x.yaml");
        fs::write(&path, text)?;
        let err = load_rules(&[path]).err().ok_or("parsed")?;
        let p = &err.problems[0];
        assert_eq!(
            (p.line, p.column, p.message.as_str()),
            (Some(line), Some(column), message),
            "{text:?}"
        );
    }
    Ok(())
}

#[test]
fn the_server_tokenizer_asks_the_model_servers_endpoint() -> TestResult {
    use crate::config::TokenizerChoice;
    // By default, llama-cpp-python's endpoint below the model's origin.
    let text = "investigation:\n  llm_url: http://127.0.0.1:9000/v1\n  tokenizer: server\n";
    let (_dir, path) = config_in_tempdir(text, &[])?;
    let inv = load_with_env(&path, &BTreeMap::new())?
        .sections
        .investigation;
    assert_eq!(inv.tokenizer, TokenizerChoice::Server);
    assert_eq!(
        inv.tokenize_url.as_ref().map(|u| u.as_str()),
        Some("http://127.0.0.1:9000/extras/tokenize/count")
    );
    assert!(!inv.template_escapes_html);
    // Or the one given, with the escaping of the template.
    let text = "investigation:\n  tokenizer: server\n  \
        tokenize_url: http://10.0.0.7:8000/extras/tokenize\n  template_escapes_html: true\n";
    let (_dir, path) = config_in_tempdir(text, &[])?;
    let inv = load_with_env(&path, &BTreeMap::new())?
        .sections
        .investigation;
    assert_eq!(
        inv.tokenize_url.as_ref().map(|u| u.as_str()),
        Some("http://10.0.0.7:8000/extras/tokenize")
    );
    assert!(inv.template_escapes_html);
    // Without `tokenizer: server` neither key is read: said, not ignored.
    let text = "investigation:\n  tokenize_url: http://10.0.0.7:8000/tokenize\n  \
        template_escapes_html: true\n";
    let (dir, path) = config_in_tempdir(text, &[])?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded a tokenize_url without the server tokenizer")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "costwatch.yaml:4:17: investigation.tokenize_url: is only read with `tokenizer: server`",
            "costwatch.yaml:5:26: investigation.template_escapes_html: is only read with `tokenizer: server`",
        ]
    );
    let text = "investigation:\n  tokenizer: server\n  tokenize_url: ftp://x/count\n";
    let (dir, path) = config_in_tempdir(text, &[])?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded an ftp tokenize_url")?;
    let shown = shown(&err, dir.path());
    assert!(
        shown.len() == 1
            && shown[0].starts_with("costwatch.yaml:5:17: investigation.tokenize_url:"),
        "{shown:?}"
    );
    Ok(())
}

#[test]
fn the_generated_configuration_files_are_current() -> TestResult {
    let schema = crate::config::config_schema();
    let files = [
        (
            "config/costwatch.schema.json",
            serde_json::to_string_pretty(&schema)? + "\n",
        ),
        (
            "config/costwatch.example.yaml",
            crate::settings::reference::example(&schema),
        ),
        (
            "docs/src/reference/configuration.md",
            crate::settings::reference::reference(&schema),
        ),
        (
            "docs/src/reference/rules.md",
            crate::settings::reference::rules_reference(&crate::config::rules_schema()),
        ),
    ];
    for (name, want) in files {
        let path = root().join(name);
        // `COSTWATCH_BLESS=1 cargo test --lib config` rewrites the files.
        if std::env::var_os("COSTWATCH_BLESS").is_some() {
            fs::write(&path, &want)?;
        }
        assert!(
            fs::read_to_string(&path)? == want,
            "{name} is stale: run with COSTWATCH_BLESS=1 to update"
        );
    }
    Ok(())
}

#[test]
fn every_mapping_of_the_schemas_knows_its_order_and_documents_its_keys() -> TestResult {
    for schema in [crate::config::config_schema(), rules_schema()] {
        let defs = schema["$defs"].as_object().ok_or("no definitions")?;
        for (name, def) in defs {
            let Some(properties) = def.get("properties").and_then(|p| p.as_object()) else {
                continue;
            };
            let order = def["x-order"]
                .as_array()
                .ok_or(format!("{name}: no x-order"))?;
            assert_eq!(order.len(), properties.len(), "{name}: {order:?}");
            for (key, property) in properties {
                let described = property.get("description").is_some()
                    || crate::settings::resolve(&schema, property)
                        .get("description")
                        .is_some();
                assert!(described, "{name}.{key} has no description");
            }
        }
    }
    Ok(())
}
