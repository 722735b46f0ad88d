//! Helpers shared by the loader tests.

use super::*;
use crate::config::{ConfigError, Severity};
use crate::detect::rules::{NoCache, OversizedModel, RetryLoop, Rule, RuleMeta, Selector};
use std::collections::BTreeMap;
use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};

pub(super) type TestResult = Result<(), Box<dyn Error>>;

pub(super) fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

pub(super) fn fixtures() -> PathBuf {
    root().join("tests/fixtures/config")
}

pub(super) fn env_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The problems as `Display` shows them, with `dir` cut off the paths.
pub(super) fn shown(err: &ConfigError, dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    err.problems
        .iter()
        .map(|p| p.to_string().replace(&prefix, ""))
        .collect()
}

pub(super) fn fixture_problems(
    name: &str,
    env: &[(&str, &str)],
) -> Result<Vec<String>, Box<dyn Error>> {
    let err = load_with_env(&fixtures().join(name), &env_of(env))
        .err()
        .ok_or_else(|| format!("{name} loaded without problems"))?;
    Ok(shown(&err, &fixtures()))
}

pub(super) const TOP_KEYS: &str = "expected one of `source`, `windows`, `group_by`, `state`, \
    `detection`, `schedule`, `alerts`, `notify`, `server`, `investigation`, `rules`";

/// The keys of a reference gateway's `source` section: `kind`, those
/// every kind reads, then its own, as their structs declare them.
pub(super) const SOURCE_KEYS: &str = "expected one of `kind`, `admin_key_file`, `page_limit`, \
    `max_pages`, `filter`, `ui_url`, `timeout`, `connect_timeout`, `max_retries`, `retry_base`, \
    `retry_max`, `max_body_bytes`, `api_url`, `labels`";

/// The rules of `rules/`: one rule of each kind with its settings'
/// defaults. The shipped rule files write every setting out, so comparing
/// them with these checks the defaults against them.
pub(super) fn default_rules(dir: &Path) -> Rules {
    let meta = |name: &str, file: &str| RuleMeta {
        name: name.to_owned(),
        severity: Severity::Warning,
        selector: Selector::default(),
        enabled: true,
        file: dir.join(file),
    };
    Rules {
        no_cache: vec![Rule {
            meta: meta("no-cache-conversation", "no_cache.yaml"),
            settings: NoCache::default(),
        }],
        oversized_model: vec![Rule {
            meta: meta("premium-model-on-tiny-calls", "oversized_model.yaml"),
            settings: OversizedModel::default(),
        }],
        retry_loop: vec![Rule {
            meta: meta("retry-loop", "retry_loop.yaml"),
            settings: RetryLoop::default(),
        }],
    }
}

/// Writes `text` as `costwatch.yaml` (with `source.api_url` and no
/// rules prepended) and the `files` beside it in a new folder.
pub(super) fn config_in_tempdir(
    text: &str,
    files: &[(&str, &str)],
) -> Result<(tempfile::TempDir, PathBuf), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("costwatch.yaml");
    let head = "source: {api_url: 'http://127.0.0.1:8080/v1'}\nrules: []\n";
    fs::write(&path, format!("{head}{text}"))?;
    for (name, content) in files {
        fs::write(dir.path().join(name), content)?;
    }
    Ok((dir, path))
}
