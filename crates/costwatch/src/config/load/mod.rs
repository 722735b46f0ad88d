//! Loading: read a YAML file, apply environment overrides, deserialize the
//! raw structs, check them and build the typed configuration and rules.
//!
//! Every problem is collected. serde stops at the first error of a value, so
//! deserialization runs in a loop: each error is reported, the offending
//! value is taken out of the document (it then gets its default) and the
//! document is deserialized again. Paths that were taken out are "tainted":
//! later checks skip them, so one mistake is reported once.

mod document;
mod fields;
mod notify;
mod rules;
mod service;
mod settings;
mod source;

pub use rules::{BUILTIN_RULES, rules_schema};
pub use service::config_schema;

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
use super::locate::{Seg, item};
use super::{Config, ConfigError, Problem, Rules, Sections};
use crate::source::links::SessionLinks;
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

    let webhooks = notify::set_webhooks_aside(&mut doc);
    let sections = doc.deserialize_keys_at::<Sections>(&[], |k| k != "source", &["source"]);
    let rule_paths = sections
        .as_ref()
        .and_then(|s| rule_paths(&mut doc, &s.rule_paths));
    let config = sections.and_then(|s| build_config(&mut doc, s, webhooks, env));

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
            config.sections.rule_paths = paths;
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
/// key commented out) into empty mappings, so they take their defaults:
/// `source` and every key whose schema is a mapping.
fn empty_sections(doc: &mut Value) {
    let schema = schemars::schema_for!(Sections).to_value();
    let mapping = |key: &str| {
        key == "source"
            || schema
                .get("properties")
                .and_then(|p| p.get(key))
                .is_some_and(|p| p.get("$ref").is_some())
    };
    if let Value::Object(root) = doc {
        for (key, value) in root.iter_mut() {
            if value.is_null() && mapping(key) {
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
fn rule_paths(doc: &mut Doc, written: &[PathBuf]) -> Option<Vec<PathBuf>> {
    if doc.is_tainted("rules") {
        return None;
    }
    let folder = folder_of(&doc.file).to_path_buf();
    let mut ok = true;
    let mut paths = Vec::new();
    for (i, p) in written.iter().enumerate() {
        if !doc.check(!p.as_os_str().is_empty(), &item("rules", i), || {
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

/// Each session's link: `source.ui_url` (a base or a template) or the
/// kind's own page, then `alerts.gateway_ui_url`, which it replaces, as the
/// base of `/sessions/{session_id}`.
fn session_links(
    source: &crate::source::settings::SourceConfig,
    alerts: &crate::incidents::AlertPolicy,
) -> Option<SessionLinks> {
    let ui = source.common.ui_url.as_deref();
    if ui.is_none()
        && let Some(old) = &alerts.gateway_ui_url
    {
        tracing::warn!(
            "alerts.gateway_ui_url is replaced by source.ui_url; it is read as source.ui_url until then"
        );
        return Some(SessionLinks::below(old.as_str(), "sessions/{session_id}"));
    }
    SessionLinks::new(source.kind(), source.api_url(), ui)
}

/// Checks the sections and resolves what they name, reads the source, and
/// builds the configuration without its rules.
fn build_config(
    doc: &mut Doc,
    mut sections: Sections,
    webhooks: Option<Value>,
    env: &BTreeMap<String, String>,
) -> Option<Config> {
    let key = |k: &str| [Seg::Key(k.to_owned())];
    settings::check(doc, &key("windows"), &sections.windows);
    settings::check(doc, &key("state"), &sections.state);
    settings::check(doc, &key("detection"), &sections.detection);
    settings::check(doc, &key("schedule"), &sections.schedule);
    settings::check(doc, &key("alerts"), &sections.alerts);
    settings::check(doc, &key("server"), &sections.server);
    settings::check(doc, &key("investigation"), &sections.investigation);
    service::check_group_by(doc, &sections.group_by);
    service::resolve(doc, &mut sections, env);
    let notify_ok = notify::resolve(doc, &mut sections.notify, webhooks, env);
    let source = source::source_config(doc, env);
    if let Some(s) = &source {
        source::check_with_windows_and_state(doc, s, &sections.windows, &sections.state);
        service::check_log_tools(doc, s.kind(), &sections.investigation);
    }
    notify_ok.then_some(())?;
    let source = source?;
    sections.alerts.session_links = session_links(&source, &sections.alerts);
    Some(Config {
        path: doc.file.clone(),
        source,
        rules: Rules::default(),
        sections,
    })
}
