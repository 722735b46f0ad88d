//! Environment overrides.
//!
//! `COSTWATCH_<SECTION>__<KEY>` (double underscore) sets `section.key`, and
//! deeper paths add one `__<KEY>` per level (`COSTWATCH_NOTIFY__EMAIL__HOST`
//! sets `notify.email.host`). `COSTWATCH_GROUP_BY` / `COSTWATCH_RULES` set
//! the two top-level lists. Names are lower-cased, so a key with upper-case
//! letters (a label name) cannot be set this way, and neither can one element
//! of a list: set the whole list instead (`COSTWATCH_NOTIFY__WEBHOOKS` as a
//! flow sequence).
//!
//! Values are parsed as YAML scalars or flow collections (`5m`, `null`,
//! `[feature, team]`). A value that is not valid YAML and does not start a
//! flow collection is taken as a plain string, so `*/5 * * * *` (an alias to
//! YAML) and `@daily` need no quotes. A bare scalar for a top-level list
//! becomes a one-element list.
//!
//! Other `COSTWATCH_*` variables without `__`, such as `COSTWATCH_ADMIN_KEY`,
//! are not overrides, and neither is any `COSTWATCH_WEBHOOK_*` variable (they
//! hold webhook secrets, and a webhook name may contain `__`).
//!
//! Overrides are set on the document before it is deserialized, so unknown
//! sections or keys and wrong types are caught by the same serde pass as the
//! file itself, and reported against the variable.

use super::Problem;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Variable holding the gateway admin key itself.
pub(crate) const ADMIN_KEY_VAR: &str = "COSTWATCH_ADMIN_KEY";

/// Variable holding the bearer token OTLP exporters must send.
pub(crate) const OTLP_TOKEN_VAR: &str = "COSTWATCH_OTLP_TOKEN";

/// Variable holding the inference key itself.
pub(crate) const INFERENCE_KEY_VAR: &str = "COSTWATCH_INFERENCE_KEY";

/// Variable holding the bearer token MCP clients must send.
pub(crate) const MCP_TOKEN_VAR: &str = "COSTWATCH_MCP_TOKEN";

/// Variable holding the SMTP password itself.
pub(crate) const SMTP_PASSWORD_VAR: &str = "COSTWATCH_SMTP_PASSWORD";

/// Start of the variables holding webhook secrets.
const WEBHOOK_SECRET_PREFIX: &str = "COSTWATCH_WEBHOOK_";

/// The variable holding the secret of the webhook `name`:
/// `COSTWATCH_WEBHOOK_<NAME>_SECRET`, the name upper-cased with `-` as `_`.
pub(crate) fn webhook_secret_var(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect();
    format!("{WEBHOOK_SECRET_PREFIX}{name}_SECRET")
}

const PREFIX: &str = "COSTWATCH_";

/// Top-level keys that may be overridden without a section, by the variable
/// suffix that names them.
const TOP_LEVEL: [(&str, &str); 2] = [("GROUP_BY", "group_by"), ("RULES", "rules")];

/// One environment override.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Override {
    /// The variable, e.g. `COSTWATCH_WINDOWS__SIZE`.
    pub var: String,
    /// Keys from the root, e.g. `["windows", "size"]`.
    pub keys: Vec<String>,
    /// The parsed value.
    pub value: Value,
}

impl Override {
    /// The dotted field path this override sets.
    pub fn path(&self) -> String {
        self.keys.join(".")
    }

    fn problem(&self, message: impl Into<String>) -> Problem {
        env_problem(&self.var, &self.path(), message)
    }
}

/// The pseudo file name of an environment variable in problems.
pub(crate) fn env_file(var: &str) -> PathBuf {
    PathBuf::from(format!("env {var}"))
}

fn env_problem(var: &str, path: &str, message: impl Into<String>) -> Problem {
    Problem {
        file: env_file(var),
        line: None,
        column: None,
        path: path.to_owned(),
        message: message.into(),
    }
}

/// The overrides in `env`, in variable order, and the problems of those that
/// cannot be understood.
pub(crate) fn overrides(env: &BTreeMap<String, String>) -> (Vec<Override>, Vec<Problem>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (var, raw) in env {
        let Some(keys) = override_keys(var) else {
            continue;
        };
        match keys.and_then(|keys| parse_value(var, keys, raw)) {
            Ok(o) => found.push(o),
            Err(p) => problems.push(p),
        }
    }
    (found, problems)
}

/// The keys `var` overrides; `None` when it is not an override at all.
fn override_keys(var: &str) -> Option<Result<Vec<String>, Problem>> {
    let rest = var.strip_prefix(PREFIX)?;
    if var.starts_with(WEBHOOK_SECRET_PREFIX) {
        return None;
    }
    if let Some((_, key)) = TOP_LEVEL.iter().find(|(suffix, _)| *suffix == rest) {
        return Some(Ok(vec![(*key).to_owned()]));
    }
    if !rest.contains("__") {
        return None;
    }
    let parts: Vec<&str> = rest.split("__").collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Some(Err(env_problem(
            var,
            "",
            "expected a name of the form COSTWATCH_<SECTION>__<KEY>, with `__` before each deeper key",
        )));
    }
    Some(Ok(parts.iter().map(|p| p.to_lowercase()).collect()))
}

/// Parses the value of `var` as YAML.
fn parse_value(var: &str, keys: Vec<String>, raw: &str) -> Result<Override, Problem> {
    let path = keys.join(".");
    if raw.trim().is_empty() {
        return Err(env_problem(var, &path, "empty value"));
    }
    let value: Value = match serde_saphyr::from_str(raw) {
        Ok(value) => value,
        // Not YAML, and not meant as a collection: the text itself.
        Err(_) if !raw.trim_start().starts_with(['[', '{']) => Value::String(raw.to_owned()),
        Err(e) => {
            return Err(env_problem(
                var,
                &path,
                format!("invalid yaml value: {}", super::load::yaml_message(&e)),
            ));
        }
    };
    let value = match value {
        Value::Array(_) => value,
        other if keys.len() == 1 => Value::Array(vec![other]),
        other => other,
    };
    Ok(Override {
        var: var.to_owned(),
        keys,
        value,
    })
}

/// Sets every override in `doc`, the configuration file as a JSON value.
/// Returns the overrides that could not be set.
pub(crate) fn apply(doc: &mut Value, overrides: &[Override]) -> Vec<Problem> {
    if doc.is_null() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(root) = doc else {
        // The file is not a mapping; deserializing it reports that.
        return Vec::new();
    };
    overrides
        .iter()
        .filter_map(|o| set(root, o).err())
        .collect()
}

fn set(root: &mut Map<String, Value>, o: &Override) -> Result<(), Problem> {
    let mut map = root;
    let Some((last, sections)) = o.keys.split_last() else {
        return Ok(());
    };
    for section in sections {
        let slot = map
            .entry(section.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if slot.is_null() {
            *slot = Value::Object(Map::new());
        }
        map = match slot {
            Value::Object(m) => m,
            _ => {
                return Err(o.problem(format!(
                    "cannot set `{last}`: `{section}` in the file is not a mapping"
                )));
            }
        };
    }
    map.insert(last.clone(), o.value.clone());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_and_values_are_parsed() {
        let (found, problems) = overrides(&env(&[
            ("COSTWATCH_SOURCE__API_URL", "http://127.0.0.1:9/v1"),
            ("COSTWATCH_WINDOWS__SIZE", "5m"),
            ("COSTWATCH_SOURCE__PAGE_LIMIT", "20"),
            ("COSTWATCH_GROUP_BY", "[feature, team]"),
            ("COSTWATCH_RULES", "/etc/costwatch/rules"),
            ("COSTWATCH_ADMIN_KEY", "sk-secret"),
            ("COSTWATCH_SMTP_PASSWORD", "hunter2"),
            ("COSTWATCH_WEBHOOK_CHAT__OPS_SECRET", "s3cret"),
            ("COSTWATCH_LOG", "debug"),
            ("COSTWATCH_SCHEDULE__CRON", "*/10 * * * *"),
            ("COSTWATCH_SCHEDULE__TIMEZONE", "Europe/Berlin"),
            ("COSTWATCH_NOTIFY__EMAIL__HOST", "smtp.example.com"),
            ("COSTWATCH_NOTIFY__EMAIL__TO", "[a@example.com]"),
            ("COSTWATCH_SERVER__LISTEN", "null"),
            ("HOME", "/root"),
        ]));
        assert_eq!(problems, vec![]);
        let got: Vec<(String, Value)> = found.iter().map(|o| (o.path(), o.value.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("group_by".to_string(), json!(["feature", "team"])),
                ("notify.email.host".to_string(), json!("smtp.example.com")),
                ("notify.email.to".to_string(), json!(["a@example.com"])),
                ("rules".to_string(), json!(["/etc/costwatch/rules"])),
                ("schedule.cron".to_string(), json!("*/10 * * * *")),
                ("schedule.timezone".to_string(), json!("Europe/Berlin")),
                ("server.listen".to_string(), Value::Null),
                ("source.api_url".to_string(), json!("http://127.0.0.1:9/v1")),
                ("source.page_limit".to_string(), json!(20)),
                ("windows.size".to_string(), json!("5m")),
            ]
        );
    }

    #[test]
    fn malformed_overrides_are_problems_naming_the_variable() {
        let cases = [
            (
                "COSTWATCH_NOTIFY____HOST",
                "a",
                "",
                "expected a name of the form",
            ),
            ("COSTWATCH___SIZE", "5m", "", "expected a name of the form"),
            (
                "COSTWATCH_WINDOWS__",
                "5m",
                "",
                "expected a name of the form",
            ),
            (
                "COSTWATCH_WINDOWS__SIZE",
                "  ",
                "windows.size",
                "empty value",
            ),
            (
                "COSTWATCH_SOURCE__LABELS",
                "{team: [",
                "source.labels",
                "invalid yaml value",
            ),
        ];
        for (var, value, path, message) in cases {
            let (found, problems) = overrides(&env(&[(var, value)]));
            assert!(found.is_empty(), "{var}");
            assert_eq!(problems.len(), 1, "{var}");
            assert_eq!(problems[0].file, PathBuf::from(format!("env {var}")));
            assert_eq!(problems[0].path, path, "{var}");
            assert!(
                problems[0].message.starts_with(message),
                "{var}: {}",
                problems[0].message
            );
            assert_eq!(problems[0].line, None);
        }
    }

    #[test]
    fn webhook_secret_variables_are_named_after_the_webhook() {
        assert_eq!(
            webhook_secret_var("chat-ops"),
            "COSTWATCH_WEBHOOK_CHAT_OPS_SECRET"
        );
        assert_eq!(
            webhook_secret_var("pager_2"),
            "COSTWATCH_WEBHOOK_PAGER_2_SECRET"
        );
    }

    #[test]
    fn apply_creates_nested_mappings() {
        let (found, _) = overrides(&env(&[
            ("COSTWATCH_NOTIFY__EMAIL__HOST", "smtp.example.com"),
            ("COSTWATCH_NOTIFY__EMAIL__PORT", "2525"),
        ]));
        let mut doc = json!({"notify": {"email": null, "webhooks": []}});
        assert_eq!(apply(&mut doc, &found), vec![]);
        assert_eq!(
            doc,
            json!({"notify": {
                "email": {"host": "smtp.example.com", "port": 2525},
                "webhooks": [],
            }})
        );
    }

    #[test]
    fn apply_creates_sections_and_replaces_values() {
        let (found, _) = overrides(&env(&[
            ("COSTWATCH_SOURCE__API_URL", "http://b/v1"),
            ("COSTWATCH_WINDOWS__SIZE", "5m"),
            ("COSTWATCH_STATE__URL", "postgres://db/costwatch"),
        ]));
        let mut doc =
            json!({"source": {"api_url": "http://a/v1", "page_limit": 10}, "state": null});
        assert_eq!(apply(&mut doc, &found), vec![]);
        assert_eq!(
            doc,
            json!({
                "source": {"api_url": "http://b/v1", "page_limit": 10},
                "windows": {"size": "5m"},
                "state": {"url": "postgres://db/costwatch"},
            })
        );
    }

    #[test]
    fn apply_reports_a_section_that_is_not_a_mapping() {
        let (found, _) = overrides(&env(&[("COSTWATCH_WINDOWS__SIZE", "5m")]));
        let mut doc = json!({"windows": 3});
        let problems = apply(&mut doc, &found);
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "env COSTWATCH_WINDOWS__SIZE: windows.size: cannot set `size`: `windows` in the file is not a mapping"
        );
    }
}
