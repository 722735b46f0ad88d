//! Tests of the `source` section's kinds and row-source settings.

use super::tests_support::*;
use super::*;
use crate::config::KindConfig;
use crate::source::SourceKind;
use crate::source::rows::{LabelField, SessionKey};
use std::fs;
use std::time::Duration;

/// Files written beside the configuration: name and content.
type Files<'a> = &'a [(&'a str, &'a str)];

/// Loads `source` (a YAML block) with no rules, from a new folder holding
/// `files`; the problems as shown, else the config.
fn load_source(
    source: &str,
    files: &[(&str, &str)],
) -> Result<Result<Config, Vec<String>>, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("costwatch.yaml");
    fs::write(&path, format!("source:\n{source}rules: []\n"))?;
    for (name, content) in files {
        fs::write(dir.path().join(name), content)?;
    }
    Ok(load_with_env(&path, &BTreeMap::new()).map_err(|e| shown(&e, dir.path())))
}

#[test]
fn a_litellm_source_reads_its_row_settings() -> TestResult {
    let models = r#"{"data": [{"id": "house-model", "input_usd_per_mtok": 1.0,
        "cached_input_usd_per_mtok": 0.1, "cache_write_usd_per_mtok": 1.25,
        "output_usd_per_mtok": 4.0, "supports_prompt_cache": true}]}"#;
    let config = load_source(
        "  kind: litellm\n  api_url: http://127.0.0.1:4000\n  session_key: metadata.conversation\n  \
         labels: {feature: 'tag:feature', team: team_id}\n  filter: {env: prod}\n  \
         models_file: models.json\n  session_lookback: 2h\n",
        &[("models.json", models)],
    )?
    .map_err(|p| p.join("\n"))?;
    let s = &config.source;
    assert_eq!(s.kind(), SourceKind::Litellm);
    assert_eq!(s.page_limit(), 500, "the row sources' default page");
    let rows = s.rows().ok_or("no row settings")?;
    assert_eq!(
        rows.session_key,
        SessionKey::Metadata("conversation".into())
    );
    assert_eq!(
        rows.labels.get("feature"),
        Some(&LabelField::Tag("feature".into()))
    );
    assert_eq!(
        rows.labels.get("team"),
        Some(&LabelField::Field("team_id".into()))
    );
    assert_eq!(s.common.filter.get("env").map(String::as_str), Some("prod"));
    assert_eq!(s.models.len(), 1);
    assert_eq!(s.models[0].id, "house-model");
    assert_eq!(rows.session_lookback, Duration::from_secs(7200));
    assert_eq!(rows.filter, s.common.filter);
    Ok(())
}

#[test]
fn the_reference_source_keeps_labels_as_its_filter() -> TestResult {
    let config = load_source(
        "  api_url: http://127.0.0.1:8080/v1\n  labels: {env: prod}\n",
        &[],
    )?
    .map_err(|p| p.join("\n"))?;
    assert_eq!(config.source.kind(), SourceKind::Reference);
    assert_eq!(
        config.source.common.filter.get("env").map(String::as_str),
        Some("prod")
    );
    Ok(())
}

#[test]
fn a_key_of_another_kind_set_to_null_is_not_written() -> TestResult {
    let config = load_source("  kind: otlp\n  api_url: null\n  public_key: null\n", &[])?
        .map_err(|p| p.join("\n"))?;
    assert_eq!(config.source.kind(), SourceKind::Otlp);
    // Null is not a pass for a key no kind reads.
    let problems = load_source("  kind: otlp\n  api_ulr: null\n", &[])?
        .err()
        .unwrap_or_default();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("unknown field `api_ulr`")),
        "{problems:?}"
    );
    Ok(())
}

#[test]
fn source_mistakes_name_the_line_and_the_setting() -> TestResult {
    let cases: &[(&str, Files, &str)] = &[
        (
            "  kind: helicone\n  api_url: http://h\n",
            &[],
            "costwatch.yaml:2:9: source.kind: unknown source kind `helicone`; expected one of reference, litellm, langfuse",
        ),
        (
            "  kind: langfuse\n  api_url: http://h\n",
            &[],
            "source.public_key: missing; set it in the file or with COSTWATCH_SOURCE__PUBLIC_KEY",
        ),
        (
            "  api_url: http://h\n  public_key: pk-lf-1\n",
            &[],
            "source.public_key: only read with kind: langfuse (this source is reference)",
        ),
        (
            "  api_url: http://h\n  session_key: user\n",
            &[],
            "source.session_key: only read with kind: litellm or langfuse (this source is reference)",
        ),
        (
            "  kind: litellm\n  api_url: http://h\n  session_key: conversation\n",
            &[],
            "costwatch.yaml:4:16: source.session_key: `conversation` is not a session key",
        ),
        (
            "  kind: litellm\n  api_url: http://h\n  labels: {team: squad}\n",
            &[],
            "source.labels.team: `squad` is not a field: use metadata.<key>, tag:<prefix> or one of team_id",
        ),
        (
            "  kind: litellm\n  api_url: http://h\n  page_limit: 5000\n",
            &[],
            "source.page_limit: must be between 1 and 1000, got 5000",
        ),
        (
            "  kind: litellm\n  api_url: http://h\n  models_file: models.json\n",
            &[(
                "models.json",
                r#"{"data": [{"id": "m", "input_usd_per_mtok": "cheap"}]}"#,
            )],
            "source.models_file: ",
        ),
        (
            "  api_url: http://h\n  labels: {a: b}\n  filter: {c: d}\n",
            &[],
            "source.labels: set source.filter or source.labels (its old spelling), not both",
        ),
        (
            "  kind: litellm\n  api_url: http://h\n  labels: {'': team_id}\n",
            &[],
            "source.labels: label names must not be empty",
        ),
        (
            "  api_url: http://h\n  session_lookback: 2h\n",
            &[],
            "source.session_lookback: only read with kind: litellm, langfuse, otlp or otlp_files (this source is reference)",
        ),
    ];
    for (source, files, want) in cases {
        let problems = load_source(source, files)?.err().unwrap_or_default();
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{source:?}: want {want:?} in {problems:#?}"
        );
    }
    // A broken price table names the file and the field in it.
    let problems = load_source(
        "  kind: litellm\n  api_url: http://h\n  models_file: models.json\n",
        &[(
            "models.json",
            r#"{"data": [{"id": "m", "input_usd_per_mtok": "cheap"}]}"#,
        )],
    )?
    .err()
    .unwrap_or_default();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("models.json: data[0].input_usd_per_mtok")),
        "{problems:#?}"
    );
    Ok(())
}

#[test]
fn an_otlp_source_needs_no_url_nor_key_and_reads_its_receiver_settings() -> TestResult {
    use crate::source::otlp::{AttrRef, InputTokens, SessionFallback};
    let config = load_source(
        "  kind: otlp\n  listen: 0.0.0.0:14318\n  token_file: otlp_token\n  \
         session_fallback: resource.service.instance.id\n  input_tokens: uncached\n  \
         labels: {team: span.app.team, region: resource.cloud.region}\n  \
         max_request_bytes: 1048576\n  max_requests_per_second: 50\n  retention: 3d\n",
        &[("otlp_token", "tok-123\n")],
    )?
    .map_err(|p| p.join("\n"))?;
    let s = &config.source;
    assert_eq!(s.kind(), SourceKind::Otlp);
    assert!(s.api_url().is_none() && s.common.admin_key.is_none());
    let KindConfig::Otlp(o, mapping, rows) = &s.of_kind else {
        return Err("not otlp".into());
    };
    assert_eq!(o.listen.to_string(), "0.0.0.0:14318");
    assert_eq!(o.token.as_ref().map(|t| t.expose()), Some("tok-123"));
    assert_eq!(
        mapping.fallback,
        SessionFallback::Attr(AttrRef::Resource("service.instance.id".into()))
    );
    assert_eq!(mapping.input_tokens, InputTokens::Uncached);
    assert!(mapping.resource_labels);
    assert_eq!(
        mapping.labels.get("team"),
        Some(&AttrRef::Span("app.team".into()))
    );
    assert_eq!(
        mapping.labels.get("region"),
        Some(&AttrRef::Resource("cloud.region".into()))
    );
    assert!(rows.labels.is_empty(), "attributes are not row fields");
    assert_eq!(o.max_request_bytes, 1_048_576);
    assert_eq!(o.max_requests_per_second, 50);
    assert_eq!(o.retention, Duration::from_secs(3 * 86_400));

    let defaults = load_source("  kind: otlp\n", &[])?.map_err(|p| p.join("\n"))?;
    let KindConfig::Otlp(o, mapping, _) = &defaults.source.of_kind else {
        return Err("not otlp".into());
    };
    assert_eq!(
        o.listen.to_string(),
        "127.0.0.1:4318",
        "loopback by default"
    );
    assert!(o.token.is_none());
    assert_eq!(mapping.fallback, SessionFallback::Trace);
    Ok(())
}

#[test]
fn otlp_files_take_a_folder_or_a_glob_below_one() -> TestResult {
    for path in [".", "traces-*.json*", "**/*.jsonl"] {
        let cfg = load_source(&format!("  kind: otlp_files\n  path: \"{path}\"\n"), &[])?
            .map_err(|p| p.join("\n"))?;
        let KindConfig::OtlpFiles(files, ..) = &cfg.source.of_kind else {
            return Err("not otlp_files".into());
        };
        assert!(files.path.to_string_lossy().ends_with(path), "{path}");
    }
    Ok(())
}

#[test]
fn otlp_settings_are_checked_and_refused_where_not_read() -> TestResult {
    let cases: &[(&str, Files<'_>, &str)] = &[
        ("  kind: otlp_files\n", &[], "source.path: missing"),
        (
            "  kind: otlp_files\n  path: nowhere\n",
            &[],
            "source.path: ",
        ),
        (
            "  kind: otlp_files\n  path: nowhere/traces-*.json\n",
            &[],
            "source.path: ",
        ),
        (
            "  kind: otlp\n  api_url: http://h\n",
            &[],
            "source.api_url: only read with kind: reference, litellm or langfuse (this source is otlp)",
        ),
        (
            "  kind: otlp\n  listen: localhost\n",
            &[],
            "source.listen: must be an ip address and port",
        ),
        (
            "  kind: otlp\n  session_fallback: user\n",
            &[],
            "source.session_fallback: ",
        ),
        (
            "  kind: otlp\n  input_tokens: some\n",
            &[],
            "source.input_tokens: ",
        ),
        (
            "  kind: otlp\n  labels: {team: metadata.team}\n",
            &[],
            "source.labels.team: ",
        ),
        (
            "  kind: otlp\n  session_key: trace\n",
            &[],
            "source.session_key: only read with kind: litellm or langfuse (this source is otlp)",
        ),
        (
            "  kind: otlp\n  retention: 1h\n",
            &[],
            "source.retention: must be at least windows.size + windows.settle_lag + source.session_lookback",
        ),
        (
            "  kind: otlp\n  retention: 4000d\n",
            &[],
            "source.retention: must be at most 3650d",
        ),
        (
            "  kind: otlp\nstate: {url: 'sqlite::memory:'}\n",
            &[],
            "state.url: kind otlp keeps received calls in the state database",
        ),
        (
            "  kind: otlp_files\n  path: .\n  listen: 127.0.0.1:4318\n",
            &[],
            "source.listen: only read with kind: otlp",
        ),
        (
            "  api_url: http://h\n  session_fallback: trace\n",
            &[],
            "source.session_fallback: only read with kind: otlp or otlp_files",
        ),
        (
            "  kind: litellm\n  api_url: http://h\n  path: .\n",
            &[],
            "source.path: only read with kind: otlp_files",
        ),
    ];
    for (source, files, want) in cases {
        let problems = load_source(source, files)?.err().unwrap_or_default();
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{source:?}: want {want:?} in {problems:#?}"
        );
    }
    let files = load_source("  kind: otlp_files\n  path: .\n", &[])?.map_err(|p| p.join("\n"))?;
    let KindConfig::OtlpFiles(f, ..) = &files.source.of_kind else {
        return Err("not otlp_files".into());
    };
    assert!(f.path.is_absolute(), "resolved against the config's folder");
    Ok(())
}

#[test]
fn a_key_every_check_reads_is_reported_once() -> TestResult {
    // `page_limit` has a range that depends on the kind: one problem, not
    // one from the schema and one from the kind.
    let problems = load_source("  api_url: http://h\n  page_limit: 0\n", &[])?
        .err()
        .unwrap_or_default();
    assert_eq!(
        problems,
        ["costwatch.yaml:3:15: source.page_limit: must be between 1 and 50, got 0"]
    );
    Ok(())
}

#[test]
fn a_file_without_a_source_section_is_told_what_is_missing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("costwatch.yaml");
    fs::write(&path, "rules: []\n")?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded without source.api_url")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "costwatch.yaml: source.api_url: missing; set it in the file or with COSTWATCH_SOURCE__API_URL"
        ]
    );
    let env = env_of(&[("COSTWATCH_SOURCE__API_URL", "http://127.0.0.1:8080/v1")]);
    assert!(load_with_env(&path, &env).is_ok());
    Ok(())
}
