//! Loading: read a YAML file, apply environment overrides, deserialize the
//! raw structs, check them and build the typed configuration and rules.
//!
//! Every problem is collected. serde stops at the first error of a value, so
//! deserialization runs in a loop: each error is reported, the offending
//! value is taken out of the document (it then gets its default) and the
//! document is deserialized again. Paths that were taken out are "tainted":
//! later checks skip them, so one mistake is reported once.

mod alerts;
mod document;
mod fields;
mod investigation;
mod notify;
mod rules;

pub use rules::{BUILTIN_RULES, rules_schema};
mod service;
mod source;
mod windows;

#[cfg(test)]
mod tests_alerting;
#[cfg(test)]
mod tests_config;
#[cfg(test)]
mod tests_rules;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests_source;
#[cfg(test)]
mod tests_support;

pub(crate) use document::yaml_message;

use super::env;
use super::locate::item;
use super::raw::RawConfig;
use super::{Config, ConfigError, Problem, Rules};
use document::Doc;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Loads and validates a configuration file and the rules it names, with
/// overrides from the process environment (see [`load_with_env`]).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    load_with_env(path, &env)
}

/// Loads and validates a configuration file and the rules it names, taking
/// overrides and secrets (`COSTWATCH_ADMIN_KEY`, `COSTWATCH_SMTP_PASSWORD`,
/// `COSTWATCH_WEBHOOK_<NAME>_SECRET`) from `env` instead of the process
/// environment.
///
/// `COSTWATCH_<SECTION>__<KEY>` sets `section.key` (and
/// `COSTWATCH_<SECTION>__<KEY>__<KEY>` a key one level deeper);
/// `COSTWATCH_GROUP_BY` and `COSTWATCH_RULES` set those top-level lists.
/// Relative paths (rules, secret and CA files) are resolved against the
/// configuration file's folder.
pub fn load_with_env(path: &Path, env: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
    let mut doc = Doc::read(path).map_err(|p| ConfigError { problems: vec![p] })?;
    empty_sections(&mut doc.value);
    let (overrides, mut env_problems) = env::overrides(env);
    env_problems.extend(env::apply(&mut doc.value, &overrides));
    doc.env = overrides
        .iter()
        .map(|o| (o.path(), o.var.clone()))
        .collect();

    let raw = doc.deserialize_at::<RawConfig>(&[]);
    let rule_paths = raw
        .as_ref()
        .and_then(|raw| rule_paths(&mut doc, &raw.rules));
    let config = raw.and_then(|raw| build_config(&mut doc, raw, env));

    let mut problems = doc.into_problems();
    problems.append(&mut env_problems);
    let rules = rule_paths.map(|paths| {
        let loaded = if paths.is_empty() {
            rules::load_builtin_into(&mut problems)
        } else {
            rules::load_rules_into(&paths, &mut problems)
        };
        (loaded, paths)
    });
    match (config, rules) {
        (Some(mut config), Some((rules, paths))) if problems.is_empty() => {
            config.rules = rules;
            config.rule_paths = paths;
            Ok(config)
        }
        _ => Err(nonempty(problems, path)),
    }
}

/// Loads and validates rule files and directories. A directory contributes
/// its `*.yaml` and `*.yml` files (not hidden ones, not subdirectories), in
/// file name order.
pub fn load_rules(paths: &[PathBuf]) -> Result<Rules, ConfigError> {
    let mut problems = Vec::new();
    let rules = rules::load_rules_into(paths, &mut problems);
    if problems.is_empty() {
        Ok(rules)
    } else {
        Err(ConfigError { problems })
    }
}

/// The rules built into the binary (the shipped `rules/*.yaml`).
pub fn builtin_rules() -> Result<Rules, ConfigError> {
    let mut problems = Vec::new();
    let rules = rules::load_builtin_into(&mut problems);
    if problems.is_empty() {
        Ok(rules)
    } else {
        Err(ConfigError { problems })
    }
}

/// Turns sections written with nothing under them (`windows:` with every
/// key commented out) into empty mappings, so they take their defaults.
fn empty_sections(doc: &mut Value) {
    const SECTIONS: [&str; 8] = [
        "source",
        "windows",
        "state",
        "detection",
        "schedule",
        "alerts",
        "notify",
        "server",
    ];
    if let Value::Object(root) = doc {
        for (key, value) in root.iter_mut() {
            if value.is_null() && SECTIONS.contains(&key.as_str()) {
                *value = Value::Object(Map::new());
            }
        }
    }
}

/// Guards against an empty error: every path that fails reports a problem,
/// but a caller must never see "failed" without a reason.
fn nonempty(mut problems: Vec<Problem>, file: &Path) -> ConfigError {
    if problems.is_empty() {
        problems.push(file_problem(file, "the configuration could not be built"));
    }
    ConfigError { problems }
}

fn file_problem(file: &Path, message: impl Into<String>) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: None,
        column: None,
        path: String::new(),
        message: message.into(),
    }
}

/// An I/O error as a lower-case fragment.
fn io_message(e: &std::io::Error) -> String {
    lower_first(&e.to_string())
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The folder relative paths in `file` are resolved against.
fn folder_of(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new(""))
}

/// The rule paths, resolved against the configuration's folder; empty for
/// the built-in rules; `None` when they are not usable. A path that cannot
/// be read is reported at its place in the configuration, with the path it
/// resolved to, and left out so the others are still checked.
fn rule_paths(doc: &mut Doc, raw: &[String]) -> Option<Vec<PathBuf>> {
    if doc.is_tainted("rules") {
        return None;
    }
    let folder = folder_of(&doc.file).to_path_buf();
    let mut ok = true;
    let mut paths = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        if !doc.check(!p.is_empty(), &item("rules", i), || {
            "must not be empty".to_owned()
        }) {
            ok = false;
            continue;
        }
        let resolved = folder.join(p);
        match std::fs::metadata(&resolved) {
            Ok(_) => paths.push(resolved),
            Err(e) => {
                doc.check(false, &item("rules", i), || {
                    format!("cannot read {}: {}", resolved.display(), io_message(&e))
                });
                ok = false;
            }
        }
    }
    // Only unreadable paths went missing: load the others for their problems.
    (ok || !paths.is_empty()).then_some(paths)
}

/// Checks the raw configuration and builds it, without its rules.
fn build_config(doc: &mut Doc, raw: RawConfig, env: &BTreeMap<String, String>) -> Option<Config> {
    let source = source::source_config(doc, raw.source, env);
    let windows = windows::window_config(doc, raw.windows);
    service::check_group_by(doc, &raw.group_by);
    let state = service::state_config(doc, raw.state);
    let detection = service::detection_config(doc, raw.detection);
    let schedule = windows::schedule_config(doc, raw.schedule);
    let alerts = alerts::alerts_config(doc, raw.alerts);
    let notify = notify::notify_config(doc, raw.notify, env);
    let server = service::server_config(doc, raw.server);
    let investigation = investigation::investigation_config(doc, raw.investigation, env);
    if let (Some(s), Some(w)) = (&source, &windows) {
        source::otlp::check_with_windows_and_state(doc, s, w, &state);
    }
    Some(Config {
        path: doc.file.clone(),
        source: source?,
        windows: windows?,
        group_by: raw.group_by,
        state,
        detection,
        rule_paths: Vec::new(),
        rules: Rules::default(),
        schedule: schedule?,
        alerts: alerts?,
        notify: notify?,
        server: server?,
        investigation: investigation?,
    })
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}
