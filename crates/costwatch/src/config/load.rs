//! Loading: read a YAML file, apply environment overrides, deserialize the
//! raw structs, check them and build the typed configuration and rules.
//!
//! Every problem is collected. serde stops at the first error of a value, so
//! deserialization runs in a loop: each error is reported, the offending
//! value is taken out of the document (it then gets its default) and the
//! document is deserialized again. Paths that were taken out are "tainted":
//! later checks skip them, so one mistake is reported once.

use super::env::{self, ADMIN_KEY_VAR, SMTP_PASSWORD_VAR, webhook_secret_var};
use super::locate::{Index, Pos, Seg, child, is_within, item, path_string};
use super::raw::{
    RawAlerts, RawConfig, RawDetection, RawEmail, RawInvestigation, RawNoCacheRule, RawNotify,
    RawOversizedModelRule, RawRetryLoopRule, RawRuleFile, RawSchedule, RawServer, RawSource,
    RawState, RawWebhook, RawWindows,
};
use super::rules::{NoCacheRule, OversizedModelRule, RetryLoopRule, RuleMeta, Selector};
use super::schedule::parse_cron;
use super::{
    AlertsConfig, Config, ConfigError, DetectionConfig, EmailConfig, InvestigationConfig,
    NotifyConfig, Problem, Rules, ScheduleConfig, ServerConfig, SmtpSecurity, SourceConfig,
    StateConfig, WebhookConfig, WindowConfig,
};
use crate::secret::Secret;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;
use url::Url;

/// Most serde errors reported for one value before giving up on it.
const MAX_REPAIRS: usize = 200;

const DAY: Duration = Duration::from_secs(24 * 3600);

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
    let rules = rule_paths.map(|paths| (load_rules_into(&paths, &mut problems), paths));
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
    let rules = load_rules_into(paths, &mut problems);
    if problems.is_empty() {
        Ok(rules)
    } else {
        Err(ConfigError { problems })
    }
}

/// The JSON Schema of a rule file, with the doc comments of the raw rule
/// structs as descriptions. `rules/rules.schema.json` is this, pretty-printed.
pub fn rules_schema() -> Value {
    schemars::schema_for!(RawRuleFile).to_value()
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

/// The message of a YAML syntax error, without location or source snippet.
pub(crate) fn yaml_message(e: &serde_saphyr::Error) -> String {
    use serde_saphyr::MessageFormatter;
    let raw = serde_saphyr::DefaultMessageFormatter
        .format_message(e.without_snippet())
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>();
    let message = if raw.starts_with("duplicate mapping key") {
        raw.split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(&raw)
            .to_owned()
    } else if raw.starts_with("multiple YAML documents") {
        "more than one yaml document".to_owned()
    } else {
        raw
    };
    lower_first(&message)
}

/// A serde error message in the words of a configuration file.
fn tidy(message: &str) -> String {
    let message = match message.find("expected struct ") {
        Some(at) => format!("{}expected a mapping", &message[..at]),
        None => message.to_owned(),
    };
    [
        ("expected u16", "expected a port number"),
        ("expected u32", "expected a non-negative 32-bit integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected f64", "expected a number"),
        ("expected string or map", "expected a string"),
    ]
    .iter()
    .fold(message, |m, (from, to)| {
        if m.ends_with(from) {
            format!("{}{to}", &m[..m.len() - from.len()])
        } else {
            m
        }
    })
}

/// The field named by serde's `missing field `x`` message.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_owned())
}

/// Which part of a field a problem points at.
#[derive(Debug, Clone, Copy)]
enum Anchor {
    /// The value (type errors, checks).
    Value,
    /// The key (unknown fields).
    Key,
}

/// One YAML file being loaded, and the problems found in it so far.
struct Doc {
    /// The file, as named in problems.
    file: PathBuf,
    /// The document; repairs change it.
    value: Value,
    /// Where each path is written.
    index: Index,
    /// Field paths set by environment overrides, with the variable.
    env: Vec<(String, String)>,
    /// Paths already reported and taken out of the document.
    tainted: Vec<String>,
    problems: Vec<Problem>,
}

impl Doc {
    /// Reads and parses `file`. An empty document is an empty mapping.
    fn read(file: &Path) -> Result<Doc, Problem> {
        let text = fs::read_to_string(file)
            .map_err(|e| file_problem(file, format!("cannot read: {}", io_message(&e))))?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let value: Value = serde_saphyr::from_str(text).map_err(|e| {
            let pos = e.location().filter(|l| l.line() > 0);
            Problem {
                line: pos.map(|l| l.line() as usize),
                column: pos.map(|l| l.column() as usize),
                ..file_problem(file, yaml_message(&e))
            }
        })?;
        Ok(Doc {
            file: file.to_path_buf(),
            value: if value.is_null() {
                Value::Object(Map::new())
            } else {
                value
            },
            index: Index::build(text),
            env: Vec::new(),
            tainted: Vec::new(),
            problems: Vec::new(),
        })
    }

    /// The problems, those with a position in file order first, then those
    /// without, then those caused by environment overrides.
    fn into_problems(mut self) -> Vec<Problem> {
        let file = self.file;
        self.problems.sort_by_key(|p| {
            (
                p.file != file,
                p.line.unwrap_or(usize::MAX),
                p.column.unwrap_or(usize::MAX),
            )
        });
        self.problems
    }

    /// Deserializes the value at `prefix`, reporting every serde error on
    /// the way. `None` when the value cannot be repaired.
    fn deserialize_at<T: DeserializeOwned>(&mut self, prefix: &[Seg]) -> Option<T> {
        for _ in 0..MAX_REPAIRS {
            let sub = value_at(&self.value, prefix)?;
            let err = match serde_path_to_error::deserialize::<_, T>(sub) {
                Ok(t) => return Some(t),
                Err(err) => err,
            };
            let mut at = prefix.to_vec();
            at.extend(err.path().iter().map(|s| match s {
                serde_path_to_error::Segment::Seq { index } => Seg::Index(*index),
                serde_path_to_error::Segment::Map { key } => Seg::Key(key.clone()),
                serde_path_to_error::Segment::Enum { variant } => Seg::Key(variant.clone()),
                serde_path_to_error::Segment::Unknown => Seg::Key("?".to_owned()),
            }));
            if !self.repair(prefix, at, tidy(&err.inner().to_string())) {
                return None;
            }
        }
        None
    }

    /// Reports the serde error `message` at `at` and changes the document so
    /// the next attempt gets past it. `false` when it cannot.
    fn repair(&mut self, prefix: &[Seg], mut at: Vec<Seg>, message: String) -> bool {
        if let Some(field) = missing_field(&message) {
            // A required field: report it on its mapping, then fill it with a
            // placeholder that the checks will not look at.
            let mapping = path_string(&at);
            at.push(Seg::Key(field));
            let field_path = path_string(&at);
            if self.is_tainted(&field_path) {
                return false;
            }
            self.report(&mapping, Anchor::Value, message);
            self.tainted.push(field_path);
            return insert(&mut self.value, &at, Value::String(String::new()));
        }
        let path = path_string(&at);
        if self.is_tainted(&path) {
            return false;
        }
        let anchor = if message.starts_with("unknown field") {
            Anchor::Key
        } else {
            Anchor::Value
        };
        self.report(&path, anchor, message);
        // Removing one element would renumber the rest, so a bad element
        // takes its whole sequence out.
        if matches!(at.last(), Some(Seg::Index(_))) {
            at.pop();
        }
        if at.len() <= prefix.len() {
            self.tainted.push(path_string(prefix));
            return false;
        }
        self.tainted.push(path_string(&at));
        remove(&mut self.value, &at)
    }

    /// Whether `path` or one of its ancestors was already reported.
    fn is_tainted(&self, path: &str) -> bool {
        self.tainted.iter().any(|t| is_within(path, t))
    }

    /// The environment variable that set `path`, or set something below it
    /// that the file does not write.
    fn env_var(&self, path: &str) -> Option<&str> {
        let set_above = self.env.iter().find(|(o, _)| is_within(path, o));
        let set_below = || {
            self.env
                .iter()
                .find(|(o, _)| is_within(o, path) && !self.index.contains(path))
        };
        set_above.or_else(set_below).map(|(_, var)| var.as_str())
    }

    fn report(&mut self, path: &str, anchor: Anchor, message: String) {
        let problem = match self.env_var(path) {
            Some(var) => Problem {
                file: env::env_file(var),
                line: None,
                column: None,
                path: path.to_owned(),
                message,
            },
            None => {
                let pos = match anchor {
                    Anchor::Key => self.index.key(path).or_else(|| self.index.locate(path)),
                    Anchor::Value => self.index.locate(path),
                };
                Problem {
                    file: self.file.clone(),
                    line: pos.map(|p| p.line),
                    column: pos.map(|p| p.column),
                    path: path.to_owned(),
                    message,
                }
            }
        };
        self.problems.push(problem);
    }

    /// Reports `message` at `path` unless `ok`, or `path` was already reported.
    fn check(&mut self, ok: bool, path: &str, message: impl FnOnce() -> String) -> bool {
        if !ok && !self.is_tainted(path) {
            self.report(path, Anchor::Value, message());
        }
        ok
    }

    fn between_u64(&mut self, path: &str, v: u64, lo: u64, hi: u64) -> bool {
        self.check((lo..=hi).contains(&v), path, || {
            format!("must be between {lo} and {hi}, got {v}")
        })
    }

    fn at_least_u64(&mut self, path: &str, v: u64, lo: u64) -> bool {
        self.check(v >= lo, path, || format!("must be at least {lo}, got {v}"))
    }

    fn share(&mut self, path: &str, v: f64) -> bool {
        self.check((0.0..=1.0).contains(&v), path, || {
            format!("must be between 0 and 1, got {v}")
        })
    }

    fn at_least_f64(&mut self, path: &str, v: f64, lo: f64) -> bool {
        self.check(v >= lo && v.is_finite(), path, || {
            format!("must be at least {lo}, got {v}")
        })
    }

    fn positive_duration(&mut self, path: &str, d: Duration) -> bool {
        self.check(!d.is_zero(), path, || "must be greater than 0".to_owned())
    }

    /// `file:line:column` of `path`, for messages that point elsewhere.
    fn place(&self, path: &str) -> String {
        match self.index.locate(path) {
            Some(Pos { line, column }) => format!("{}:{line}:{column}", self.file.display()),
            None => self.file.display().to_string(),
        }
    }
}

fn value_at<'v>(value: &'v Value, segs: &[Seg]) -> Option<&'v Value> {
    segs.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get(k.as_str()),
        Seg::Index(i) => v.get(*i),
    })
}

fn value_at_mut<'v>(value: &'v mut Value, segs: &[Seg]) -> Option<&'v mut Value> {
    segs.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// Takes the mapping entry at `segs` out of `value`.
fn remove(value: &mut Value, segs: &[Seg]) -> bool {
    let Some((Seg::Key(key), parent)) = segs.split_last() else {
        return false;
    };
    value_at_mut(value, parent)
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove(key))
        .is_some()
}

/// Sets the mapping entry at `segs` in `value`.
fn insert(value: &mut Value, segs: &[Seg], new: Value) -> bool {
    let Some((Seg::Key(key), parent)) = segs.split_last() else {
        return false;
    };
    match value_at_mut(value, parent).and_then(Value::as_object_mut) {
        Some(m) => {
            m.insert(key.clone(), new);
            true
        }
        None => false,
    }
}

/// The folder relative paths in `file` are resolved against.
fn folder_of(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new(""))
}

/// The rule paths, resolved; `None` when they are not usable.
fn rule_paths(doc: &mut Doc, raw: &[String]) -> Option<Vec<PathBuf>> {
    if doc.is_tainted("rules") {
        return None;
    }
    let folder = folder_of(&doc.file).to_path_buf();
    let mut ok = true;
    for (i, p) in raw.iter().enumerate() {
        ok &= doc.check(!p.is_empty(), &item("rules", i), || {
            "must not be empty".to_owned()
        });
    }
    ok.then(|| raw.iter().map(|p| folder.join(p)).collect())
}

/// Checks the raw configuration and builds it, without its rules.
fn build_config(doc: &mut Doc, raw: RawConfig, env: &BTreeMap<String, String>) -> Option<Config> {
    let source = source_config(doc, raw.source, env);
    let windows = window_config(doc, raw.windows);
    check_group_by(doc, &raw.group_by);
    let state = state_config(doc, raw.state);
    let detection = detection_config(doc, raw.detection);
    let schedule = schedule_config(doc, raw.schedule);
    let alerts = alerts_config(doc, raw.alerts);
    let notify = notify_config(doc, raw.notify, env);
    let server = server_config(doc, raw.server);
    let investigation = investigation_config(doc, raw.investigation, env);
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

/// The variable holding the inference key.
const INFERENCE_KEY_VAR: &str = "COSTWATCH_INFERENCE_KEY";

fn investigation_config(
    doc: &mut Doc,
    raw: RawInvestigation,
    env: &BTreeMap<String, String>,
) -> Option<InvestigationConfig> {
    let mcp_url = http_url(doc, "investigation.mcp_url", &raw.mcp_url);
    let llm_url = http_url(doc, "investigation.llm_url", &raw.llm_url);
    doc.check(!raw.model.trim().is_empty(), "investigation.model", || {
        "must not be empty".to_owned()
    });
    doc.check(!raw.tools.is_empty(), "investigation.tools", || {
        "name at least one tool".to_owned()
    });
    let c = &raw.caps;
    doc.at_least_u64("investigation.caps.max_rounds", c.max_rounds, 1);
    doc.at_least_u64("investigation.caps.max_input_tokens", c.max_input_tokens, 1);
    doc.at_least_u64(
        "investigation.caps.max_output_tokens",
        c.max_output_tokens,
        1,
    );
    doc.at_least_u64(
        "investigation.caps.max_tool_result_bytes",
        c.max_tool_result_bytes,
        64,
    );
    doc.at_least_f64("investigation.caps.max_usd_per_run", c.max_usd_per_run, 0.0);
    doc.at_least_f64("investigation.caps.max_usd_per_day", c.max_usd_per_day, 0.0);
    doc.positive_duration("investigation.caps.wall_timeout", c.wall_timeout.0);
    if let Some(p) = &raw.prices {
        for (field, v) in [
            ("input_usd_per_mtok", p.input_usd_per_mtok),
            ("cached_input_usd_per_mtok", p.cached_input_usd_per_mtok),
            ("output_usd_per_mtok", p.output_usd_per_mtok),
        ] {
            doc.at_least_f64(&format!("investigation.prices.{field}"), v, 0.0);
        }
    }
    let inference_key = secret(
        doc,
        env.get(INFERENCE_KEY_VAR),
        raw.inference_key_file.as_deref(),
        "investigation.inference_key_file",
    );
    if raw.enabled {
        doc.check(inference_key.is_some(), "investigation.enabled", || {
            format!("needs an inference key: set {INFERENCE_KEY_VAR} or investigation.inference_key_file")
        });
    }
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Some(InvestigationConfig {
        enabled: raw.enabled,
        mcp_url: mcp_url?,
        llm_url: llm_url?,
        model: raw.model,
        inference_key,
        tools: raw.tools,
        prices: raw.prices.map(|p| {
            (
                p.input_usd_per_mtok,
                p.cached_input_usd_per_mtok,
                p.output_usd_per_mtok,
            )
        }),
        kinds: raw.escalate.kinds,
        min_severity: raw.escalate.min_severity,
        max_per_hour: raw.escalate.max_per_hour,
        max_rounds: clamp(raw.caps.max_rounds),
        max_tool_calls: clamp(raw.caps.max_tool_calls),
        max_input_tokens: raw.caps.max_input_tokens,
        max_output_tokens: raw.caps.max_output_tokens,
        max_usd_per_run: raw.caps.max_usd_per_run,
        max_usd_per_day: raw.caps.max_usd_per_day,
        max_tool_result_bytes: to_usize(raw.caps.max_tool_result_bytes),
        wall_timeout: raw.caps.wall_timeout.0,
    })
}

fn source_config(
    doc: &mut Doc,
    raw: RawSource,
    env: &BTreeMap<String, String>,
) -> Option<SourceConfig> {
    let api_url = api_url(doc, raw.api_url.as_deref());
    let admin_key = admin_key(doc, raw.admin_key_file.as_deref(), env);
    doc.between_u64("source.page_limit", raw.page_limit.into(), 1, 50);
    doc.positive_duration("source.timeout", raw.timeout.0);
    doc.positive_duration("source.connect_timeout", raw.connect_timeout.0);
    if !doc.is_tainted("source.retry_base") {
        doc.check(
            raw.retry_max.0 >= raw.retry_base.0,
            "source.retry_max",
            || {
                format!(
                    "must be at least retry_base ({}), got {}",
                    humantime::format_duration(raw.retry_base.0),
                    humantime::format_duration(raw.retry_max.0)
                )
            },
        );
    }
    let max_body_bytes = usize::try_from(raw.max_body_bytes).unwrap_or(usize::MAX);
    doc.at_least_u64("source.max_body_bytes", raw.max_body_bytes, 1);
    doc.check(
        raw.labels.keys().all(|k| !k.is_empty()),
        "source.labels",
        || "label names must not be empty".to_owned(),
    );
    Some(SourceConfig {
        api_url: api_url?,
        admin_key,
        page_limit: raw.page_limit,
        timeout: raw.timeout.0,
        connect_timeout: raw.connect_timeout.0,
        max_retries: raw.max_retries,
        retry_base: raw.retry_base.0,
        retry_max: raw.retry_max.0,
        max_body_bytes,
        labels: raw.labels,
    })
}

fn api_url(doc: &mut Doc, raw: Option<&str>) -> Option<Url> {
    const PATH: &str = "source.api_url";
    let Some(raw) = raw else {
        doc.check(false, PATH, || {
            "missing; set it in the file or with COSTWATCH_SOURCE__API_URL".to_owned()
        });
        return None;
    };
    http_url(doc, PATH, raw)
}

/// `raw` as an http or https URL. Messages never repeat the URL, which may
/// hold a credential (a webhook token in its path, a password before `@`).
fn http_url(doc: &mut Doc, path: &str, raw: &str) -> Option<Url> {
    let url = match Url::parse(raw) {
        Ok(url) => url,
        Err(e) => {
            doc.check(false, path, || format!("invalid url: {e}"));
            return None;
        }
    };
    let scheme = url.scheme().to_owned();
    doc.check(matches!(scheme.as_str(), "http" | "https"), path, || {
        format!("must be an http or https url, got scheme `{scheme}`")
    })
    .then_some(url)
}

/// The admin key: `COSTWATCH_ADMIN_KEY` when set and not empty, else the
/// content of `admin_key_file`, else none.
fn admin_key(doc: &mut Doc, file: Option<&str>, env: &BTreeMap<String, String>) -> Option<Secret> {
    secret(doc, env.get(ADMIN_KEY_VAR), file, "source.admin_key_file")
}

/// A credential: `from_env` when set and not empty, else the content of
/// `file` (reported at `path` when it cannot be read or is empty), else
/// none. Messages name the file, never its content.
fn secret(
    doc: &mut Doc,
    from_env: Option<&String>,
    file: Option<&str>,
    path: &str,
) -> Option<Secret> {
    if let Some(key) = from_env.map(Secret::new).filter(|k| !k.is_empty()) {
        return Some(key);
    }
    let file = file?;
    if !doc.check(!file.is_empty(), path, || "must not be empty".to_owned()) {
        return None;
    }
    let resolved = folder_of(&doc.file).join(file);
    match fs::read_to_string(&resolved) {
        Ok(text) => {
            let key = Secret::new(text);
            doc.check(!key.is_empty(), path, || {
                format!("{} is empty", resolved.display())
            })
            .then_some(key)
        }
        Err(e) => {
            doc.check(false, path, || {
                format!("cannot read {}: {}", resolved.display(), io_message(&e))
            });
            None
        }
    }
}

fn window_config(doc: &mut Doc, raw: RawWindows) -> Option<WindowConfig> {
    let size = raw.size.0;
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    let size_ok = if size < Duration::from_secs(60) {
        doc.check(false, "windows.size", || {
            format!("must be at least 1m, got {}", fmt(size))
        })
    } else if size > DAY {
        doc.check(false, "windows.size", || {
            format!("must be at most 24h, got {}", fmt(size))
        })
    } else {
        doc.check(
            DAY.as_nanos().is_multiple_of(size.as_nanos()),
            "windows.size",
            || format!("must divide 24h evenly, got {}", fmt(size)),
        )
    };
    doc.check(raw.settle_lag.0 < DAY, "windows.settle_lag", || {
        format!("must be less than 24h, got {}", fmt(raw.settle_lag.0))
    });
    if size_ok && !doc.is_tainted("windows.size") {
        doc.check(raw.max_backfill.0 >= size, "windows.max_backfill", || {
            format!(
                "must be at least windows.size ({}), got {}",
                fmt(size),
                fmt(raw.max_backfill.0)
            )
        });
    }
    let start = match raw.start.as_deref().map(DateTime::parse_from_rfc3339) {
        None => None,
        Some(Ok(t)) => Some(t.with_timezone(&Utc)),
        Some(Err(_)) => {
            let got = raw.start.unwrap_or_default();
            doc.check(false, "windows.start", || {
                format!("must be an rfc 3339 timestamp such as 2026-10-11T00:00:00Z, got `{got}`")
            });
            return None;
        }
    };
    Some(WindowConfig {
        size,
        settle_lag: raw.settle_lag.0,
        start,
        max_backfill: raw.max_backfill.0,
    })
}

fn check_group_by(doc: &mut Doc, group_by: &[String]) {
    for (i, label) in group_by.iter().enumerate() {
        let path = item("group_by", i);
        if doc.check(!label.is_empty(), &path, || "must not be empty".to_owned()) {
            doc.check(!group_by[..i].contains(label), &path, || {
                format!("duplicate label `{label}`")
            });
        }
    }
}

fn state_config(doc: &mut Doc, raw: RawState) -> StateConfig {
    let known = ["sqlite:", "postgres://", "postgresql://"];
    // The URL may hold a password, so the message does not repeat it.
    doc.check(
        known.iter().any(|p| raw.url.starts_with(p)),
        "state.url",
        || "must start with `sqlite:`, `postgres://` or `postgresql://`".to_owned(),
    );
    doc.between_u64("state.max_connections", raw.max_connections, 1, 100);
    doc.positive_duration("state.lease_ttl", raw.lease_ttl.0);
    StateConfig {
        url: raw.url,
        max_connections: to_usize(raw.max_connections).max(1) as u32,
        lease_ttl: raw.lease_ttl.0,
    }
}

fn detection_config(doc: &mut Doc, raw: RawDetection) -> DetectionConfig {
    doc.between_u64(
        "detection.baseline_samples",
        raw.baseline_samples,
        16,
        65_536,
    );
    doc.at_least_u64("detection.max_candidates", raw.max_candidates, 1);
    doc.between_u64(
        "detection.drilldown_concurrency",
        raw.drilldown_concurrency,
        1,
        64,
    );
    DetectionConfig {
        baseline_samples: to_usize(raw.baseline_samples),
        max_candidates: to_usize(raw.max_candidates),
        drilldown_concurrency: to_usize(raw.drilldown_concurrency),
    }
}

fn schedule_config(doc: &mut Doc, raw: RawSchedule) -> Option<ScheduleConfig> {
    let cron = match parse_cron(&raw.cron) {
        Ok(cron) => Some(cron),
        Err(message) => {
            doc.check(false, "schedule.cron", || message);
            None
        }
    };
    let timezone = match raw.timezone.parse::<chrono_tz::Tz>() {
        Ok(tz) => Some(tz),
        Err(_) => {
            let got = &raw.timezone;
            doc.check(false, "schedule.timezone", || {
                format!("unknown time zone `{got}`; expected an iana name such as `UTC` or `Europe/Berlin`")
            });
            None
        }
    };
    doc.at_least_u64("schedule.max_catch_up_windows", raw.max_catch_up_windows, 1);
    Some(ScheduleConfig {
        cron_text: raw.cron,
        cron: cron?,
        timezone: timezone?,
        max_catch_up_windows: to_usize(raw.max_catch_up_windows),
    })
}

fn alerts_config(doc: &mut Doc, raw: RawAlerts) -> Option<AlertsConfig> {
    doc.at_least_f64("alerts.realert_growth", raw.realert_growth, 1.0);
    doc.positive_duration("alerts.resolve_after", raw.resolve_after.0);
    doc.between_u64("alerts.top_sessions", raw.top_sessions, 1, 50);
    doc.at_least_u64("alerts.summary_after_windows", raw.summary_after_windows, 1);
    doc.positive_duration("alerts.delivery_deadline", raw.delivery_deadline.0);
    let base_ok = doc.positive_duration("alerts.retry_base", raw.retry_base.0);
    if base_ok && !doc.is_tainted("alerts.retry_base") {
        doc.check(
            raw.retry_max.0 >= raw.retry_base.0,
            "alerts.retry_max",
            || {
                format!(
                    "must be at least retry_base ({}), got {}",
                    humantime::format_duration(raw.retry_base.0),
                    humantime::format_duration(raw.retry_max.0)
                )
            },
        );
    }
    let gateway_ui_url = match raw.gateway_ui_url.as_deref() {
        None => None,
        Some(url) => Some(http_url(doc, "alerts.gateway_ui_url", url)?),
    };
    Some(AlertsConfig {
        cooldown: raw.cooldown.0,
        realert_growth: raw.realert_growth,
        resolve_after: raw.resolve_after.0,
        send_resolved: raw.send_resolved,
        top_sessions: to_usize(raw.top_sessions),
        summary_after_windows: to_usize(raw.summary_after_windows),
        delivery_deadline: raw.delivery_deadline.0,
        retry_base: raw.retry_base.0,
        retry_max: raw.retry_max.0,
        gateway_ui_url,
    })
}

fn notify_config(
    doc: &mut Doc,
    raw: RawNotify,
    env: &BTreeMap<String, String>,
) -> Option<NotifyConfig> {
    let email = raw.email.map(|email| email_config(doc, email, env));
    let webhooks = webhook_configs(doc, raw.webhooks.len(), env);
    Some(NotifyConfig {
        email,
        webhooks: webhooks?,
    })
}

fn email_config(doc: &mut Doc, raw: RawEmail, env: &BTreeMap<String, String>) -> EmailConfig {
    let host_ok = doc.check(
        !raw.host.is_empty() && !raw.host.contains(|c: char| c.is_whitespace() || c == '/'),
        "notify.email.host",
        || format!("must be a host name or ip address, got `{}`", raw.host),
    ) && !doc.is_tainted("notify.email.host");
    if host_ok && raw.security == SmtpSecurity::None {
        doc.check(is_loopback(&raw.host), "notify.email.security", || {
            format!(
                "plain smtp (`none`) is only allowed to a loopback host, got `{}`; use `starttls` or `tls`",
                raw.host
            )
        });
    }
    let port = raw.port.unwrap_or(match raw.security {
        SmtpSecurity::None => 25,
        SmtpSecurity::StartTls => 587,
        SmtpSecurity::Tls => 465,
    });
    doc.check(port != 0, "notify.email.port", || {
        "must be between 1 and 65535, got 0".to_owned()
    });
    let ca_file = raw
        .ca_file
        .as_deref()
        .and_then(|file| existing_file(doc, "notify.email.ca_file", file));
    if let Some(user) = &raw.username {
        doc.check(!user.is_empty(), "notify.email.username", || {
            "must not be empty".to_owned()
        });
    }
    let password = secret(
        doc,
        env.get(SMTP_PASSWORD_VAR),
        raw.password_file.as_deref(),
        "notify.email.password_file",
    );
    check_mailbox(doc, "notify.email.from", &raw.from);
    let written = value_at(&doc.value, &email_segs("to")).is_some();
    let recipients_ok = if doc.is_tainted("notify.email.to") {
        false
    } else if written {
        doc.check(!raw.to.is_empty(), "notify.email.to", || {
            "must list at least one recipient".to_owned()
        })
    } else {
        // Reported like serde's own missing fields, on the mapping.
        doc.check(false, "notify.email", || "missing field `to`".to_owned())
    };
    if recipients_ok {
        for (i, to) in raw.to.iter().enumerate() {
            check_mailbox(doc, &item("notify.email.to", i), to);
        }
    }
    doc.positive_duration("notify.email.timeout", raw.timeout.0);
    EmailConfig {
        host: raw.host,
        port,
        security: raw.security,
        ca_file,
        username: raw.username,
        password,
        from: raw.from,
        to: raw.to,
        timeout: raw.timeout.0,
    }
}

/// The path of `notify.email.<key>`.
fn email_segs(key: &str) -> [Seg; 3] {
    [
        Seg::Key("notify".to_owned()),
        Seg::Key("email".to_owned()),
        Seg::Key(key.to_owned()),
    ]
}

/// Whether an SMTP host is on this machine: `localhost`, 127.0.0.0/8 or ::1.
fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A minimal mailbox check: `user@domain`, optionally as `Name <user@domain>`.
fn check_mailbox(doc: &mut Doc, path: &str, mailbox: &str) -> bool {
    doc.check(mailbox.contains('@'), path, || {
        format!("must be a mailbox such as `costwatch <costwatch@example.com>`, got `{mailbox}`")
    })
}

/// `file` resolved against the configuration's folder, if it is a file.
fn existing_file(doc: &mut Doc, path: &str, file: &str) -> Option<PathBuf> {
    if !doc.check(!file.is_empty(), path, || "must not be empty".to_owned()) {
        return None;
    }
    let resolved = folder_of(&doc.file).join(file);
    let found = fs::metadata(&resolved);
    let ok = match &found {
        Ok(meta) => meta.is_file(),
        Err(_) => false,
    };
    doc.check(ok, path, || match &found {
        Ok(_) => format!("{} is not a file", resolved.display()),
        Err(e) => format!("cannot read {}: {}", resolved.display(), io_message(e)),
    })
    .then_some(resolved)
}

/// The webhooks, each deserialized on its own so that one bad entry does
/// not hide the problems of the others.
fn webhook_configs(
    doc: &mut Doc,
    count: usize,
    env: &BTreeMap<String, String>,
) -> Option<Vec<WebhookConfig>> {
    let mut webhooks = Vec::new();
    let mut ok = true;
    // Names, and the secret variables they map to, with where they were set.
    let mut names: HashMap<String, String> = HashMap::new();
    let mut vars: HashMap<String, (String, String)> = HashMap::new();
    for i in 0..count {
        let segs = [
            Seg::Key("notify".to_owned()),
            Seg::Key("webhooks".to_owned()),
            Seg::Index(i),
        ];
        let Some(raw) = doc.deserialize_at::<RawWebhook>(&segs) else {
            ok = false;
            continue;
        };
        let path = path_string(&segs);
        let name_path = child(&path, "name");
        let name_ok = !doc.is_tainted(&name_path)
            && doc.check(valid_webhook_name(&raw.name), &name_path, || {
                format!(
                    "must be lower-case letters, digits, `_` and `-`, got `{}`",
                    raw.name
                )
            })
            && match names.get(&raw.name) {
                Some(first) => {
                    let message = format!(
                        "duplicate webhook name `{}`, first defined at {first}",
                        raw.name
                    );
                    doc.check(false, &name_path, || message)
                }
                None => {
                    names.insert(raw.name.clone(), doc.place(&name_path));
                    true
                }
            };
        let var = webhook_secret_var(&raw.name);
        let name_ok = name_ok
            && match vars.get(&var) {
                Some((other, first)) => {
                    let message = format!(
                        "webhooks `{other}` and `{}` would share the secret variable {var}; rename one (first defined at {first})",
                        raw.name
                    );
                    doc.check(false, &name_path, || message)
                }
                None => {
                    vars.insert(var.clone(), (raw.name.clone(), doc.place(&name_path)));
                    true
                }
            };
        let url = if doc.is_tainted(&child(&path, "url")) {
            None
        } else {
            http_url(doc, &child(&path, "url"), &raw.url)
        };
        let secret = secret(
            doc,
            env.get(&var).filter(|_| name_ok),
            raw.secret_file.as_deref(),
            &child(&path, "secret_file"),
        );
        let timeout_ok = doc.positive_duration(&child(&path, "timeout"), raw.timeout.0);
        match url {
            Some(url) if name_ok && timeout_ok => webhooks.push(WebhookConfig {
                name: raw.name,
                url,
                shape: raw.shape,
                secret,
                timeout: raw.timeout.0,
            }),
            _ => ok = false,
        }
    }
    ok.then_some(webhooks)
}

fn valid_webhook_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn server_config(doc: &mut Doc, raw: RawServer) -> Option<ServerConfig> {
    let listen = match raw.listen.as_deref() {
        None => None,
        Some(addr) => match addr.parse::<std::net::SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                doc.check(false, "server.listen", || {
                    format!("must be an ip address and port such as `127.0.0.1:9464`, or null to disable, got `{addr}`")
                });
                return None;
            }
        },
    };
    Some(ServerConfig { listen })
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The rule lists of one file, before each rule is deserialized on its own
/// (so one bad rule does not hide the problems of the others). The keys are
/// those of [`RawRuleFile`].
#[derive(Deserialize)]
#[cfg_attr(test, derive(Default, serde::Serialize))]
#[serde(deny_unknown_fields)]
struct RuleLists {
    #[serde(default)]
    no_cache: Vec<Value>,
    #[serde(default)]
    oversized_model: Vec<Value>,
    #[serde(default)]
    retry_loop: Vec<Value>,
}

/// Loads every rule file under `paths`, adding their problems to `problems`
/// in the order of the paths.
fn load_rules_into(paths: &[PathBuf], problems: &mut Vec<Problem>) -> Rules {
    let mut rules = Rules::default();
    let mut names = Names::default();
    for file in rule_files(paths) {
        match file.and_then(|file| Doc::read(&file)) {
            Ok(mut doc) => {
                load_rule_file(&mut doc, &mut rules, &mut names);
                problems.append(&mut doc.into_problems());
            }
            Err(p) => problems.push(p),
        }
    }
    rules
}

/// The files named by `paths`: files as they are, directories as their
/// visible `*.yaml` and `*.yml` files, sorted by file name. A path that
/// cannot be read is a problem in its place.
fn rule_files(paths: &[PathBuf]) -> Vec<Result<PathBuf, Problem>> {
    let mut files = Vec::new();
    for path in paths {
        let listed = match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => yaml_files_in(path),
            Ok(_) => Ok(vec![path.clone()]),
            Err(e) => Err(e),
        };
        match listed {
            Ok(found) => files.extend(found.into_iter().map(Ok)),
            Err(e) => files.push(Err(file_problem(
                path,
                format!("cannot read: {}", io_message(&e)),
            ))),
        }
    }
    files
}

fn yaml_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        if yaml && !name.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

fn load_rule_file(doc: &mut Doc, rules: &mut Rules, names: &mut Names) {
    let Some(lists) = doc.deserialize_at::<RuleLists>(&[]) else {
        return;
    };
    load_kind::<RawNoCacheRule>(doc, lists.no_cache.len(), rules, names);
    load_kind::<RawOversizedModelRule>(doc, lists.oversized_model.len(), rules, names);
    load_kind::<RawRetryLoopRule>(doc, lists.retry_loop.len(), rules, names);
}

/// The rule names seen so far, per kind, with where they were defined.
#[derive(Default)]
struct Names(HashMap<(&'static str, String), String>);

impl Names {
    /// Reports `name` at `path` if a rule of the same kind already has it.
    fn check(&mut self, doc: &mut Doc, kind: &'static str, path: &str, name: &str) {
        let name_path = child(path, "name");
        if name.is_empty() || doc.is_tainted(&name_path) {
            return;
        }
        match self.0.get(&(kind, name.to_owned())) {
            Some(first) => {
                let message = format!("duplicate rule name `{name}`, first defined at {first}");
                doc.check(false, &name_path, || message);
            }
            None => {
                self.0
                    .insert((kind, name.to_owned()), doc.place(&name_path));
            }
        }
    }
}

/// A raw rule struct and how it becomes its typed rule.
trait RawRule: DeserializeOwned {
    /// The top-level key of the kind.
    const KIND: &'static str;
    /// The typed rule.
    type Rule;
    /// Checks the parameters (not the meta fields) and builds the rule.
    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> Self::Rule;
    /// The name, severity, selector and enabled flag.
    fn meta(&self) -> RawMeta<'_>;
    /// The typed rule's meta fields.
    fn rule_meta(rule: &Self::Rule) -> &RuleMeta;
    /// Where the kind's rules go.
    fn list(rules: &mut Rules) -> &mut Vec<Self::Rule>;
}

/// The fields every raw rule has.
struct RawMeta<'a> {
    name: &'a str,
    severity: super::Severity,
    selector: &'a BTreeMap<String, String>,
    enabled: bool,
}

fn load_kind<R: RawRule>(doc: &mut Doc, count: usize, rules: &mut Rules, names: &mut Names) {
    for i in 0..count {
        let segs = [Seg::Key(R::KIND.to_owned()), Seg::Index(i)];
        let Some(raw) = doc.deserialize_at::<R>(&segs) else {
            continue;
        };
        let path = path_string(&segs);
        let meta = rule_meta(doc, &path, raw.meta());
        let rule = raw.build(doc, &path, meta);
        names.check(doc, R::KIND, &path, &R::rule_meta(&rule).name);
        R::list(rules).push(rule);
    }
}

fn rule_meta(doc: &mut Doc, path: &str, raw: RawMeta<'_>) -> RuleMeta {
    doc.check(!raw.name.trim().is_empty(), &child(path, "name"), || {
        "must not be empty".to_owned()
    });
    RuleMeta {
        name: raw.name.to_owned(),
        severity: raw.severity,
        selector: Selector(raw.selector.clone()),
        enabled: raw.enabled,
        file: doc.file.clone(),
    }
}

/// Checks shared by several kinds.
impl Doc {
    fn min_peers(&mut self, path: &str, v: u64) -> usize {
        self.at_least_u64(&child(path, "min_peers"), v, 1);
        to_usize(v)
    }

    fn min_impact_usd(&mut self, path: &str, v: f64) -> f64 {
        self.at_least_f64(&child(path, "min_impact_usd"), v, 0.0);
        v
    }
}

impl RawRule for RawNoCacheRule {
    const KIND: &'static str = "no_cache";
    type Rule = NoCacheRule;

    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> NoCacheRule {
        doc.at_least_u64(&child(path, "min_requests"), self.min_requests, 2);
        doc.share(&child(path, "max_cached_share"), self.max_cached_share);
        doc.share(
            &child(path, "min_peer_cached_share"),
            self.min_peer_cached_share,
        );
        NoCacheRule {
            meta,
            min_requests: self.min_requests,
            min_avg_input_tokens: self.min_avg_input_tokens,
            max_cached_share: self.max_cached_share,
            min_peer_cached_share: self.min_peer_cached_share,
            min_peers: doc.min_peers(path, self.min_peers),
            min_impact_usd: doc.min_impact_usd(path, self.min_impact_usd),
        }
    }

    fn meta(&self) -> RawMeta<'_> {
        RawMeta {
            name: &self.name,
            severity: self.severity,
            selector: &self.selector,
            enabled: self.enabled,
        }
    }

    fn rule_meta(rule: &NoCacheRule) -> &RuleMeta {
        &rule.meta
    }

    fn list(rules: &mut Rules) -> &mut Vec<NoCacheRule> {
        &mut rules.no_cache
    }
}

impl RawRule for RawOversizedModelRule {
    const KIND: &'static str = "oversized_model";
    type Rule = OversizedModelRule;

    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> OversizedModelRule {
        doc.at_least_f64(
            &child(path, "premium_price_ratio"),
            self.premium_price_ratio,
            1.0,
        );
        doc.share(
            &child(path, "min_premium_cost_share"),
            self.min_premium_cost_share,
        );
        doc.share(&child(path, "max_group_share"), self.max_group_share);
        OversizedModelRule {
            meta,
            premium_price_ratio: self.premium_price_ratio,
            max_avg_input_tokens: self.max_avg_input_tokens,
            max_avg_output_tokens: self.max_avg_output_tokens,
            min_premium_cost_share: self.min_premium_cost_share,
            min_peers: doc.min_peers(path, self.min_peers),
            max_group_share: self.max_group_share,
            min_impact_usd: doc.min_impact_usd(path, self.min_impact_usd),
        }
    }

    fn meta(&self) -> RawMeta<'_> {
        RawMeta {
            name: &self.name,
            severity: self.severity,
            selector: &self.selector,
            enabled: self.enabled,
        }
    }

    fn rule_meta(rule: &OversizedModelRule) -> &RuleMeta {
        &rule.meta
    }

    fn list(rules: &mut Rules) -> &mut Vec<OversizedModelRule> {
        &mut rules.oversized_model
    }
}

impl RawRule for RawRetryLoopRule {
    const KIND: &'static str = "retry_loop";
    type Rule = RetryLoopRule;

    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> RetryLoopRule {
        doc.at_least_u64(&child(path, "min_requests"), self.min_requests, 2);
        doc.at_least_f64(
            &child(path, "min_ratio_to_median"),
            self.min_ratio_to_median,
            1.0,
        );
        let z = self.min_robust_z;
        doc.check(
            z > 0.0 && z.is_finite(),
            &child(path, "min_robust_z"),
            || format!("must be greater than 0, got {z}"),
        );
        doc.at_least_u64(&child(path, "min_identical_run"), self.min_identical_run, 2);
        doc.share(
            &child(path, "input_tolerance_ratio"),
            self.input_tolerance_ratio,
        );
        RetryLoopRule {
            meta,
            min_requests: self.min_requests,
            min_ratio_to_median: self.min_ratio_to_median,
            min_robust_z: self.min_robust_z,
            min_peers: doc.min_peers(path, self.min_peers),
            cold_start_min_requests: self.cold_start_min_requests,
            min_identical_run: self.min_identical_run,
            input_tolerance_tokens: self.input_tolerance_tokens,
            input_tolerance_ratio: self.input_tolerance_ratio,
            min_error_burst: self.min_error_burst,
        }
    }

    fn meta(&self) -> RawMeta<'_> {
        RawMeta {
            name: &self.name,
            severity: self.severity,
            selector: &self.selector,
            enabled: self.enabled,
        }
    }

    fn rule_meta(rule: &RetryLoopRule) -> &RuleMeta {
        &rule.meta
    }

    fn list(rules: &mut Rules) -> &mut Vec<RetryLoopRule> {
        &mut rules.retry_loop
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Severity;
    use std::error::Error;

    type TestResult = Result<(), Box<dyn Error>>;

    fn root() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    fn fixtures() -> PathBuf {
        root().join("tests/fixtures/config")
    }

    fn env_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The problems as `Display` shows them, with `dir` cut off the paths.
    fn shown(err: &ConfigError, dir: &Path) -> Vec<String> {
        let prefix = format!("{}/", dir.display());
        err.problems
            .iter()
            .map(|p| p.to_string().replace(&prefix, ""))
            .collect()
    }

    fn fixture_problems(name: &str, env: &[(&str, &str)]) -> Result<Vec<String>, Box<dyn Error>> {
        let err = load_with_env(&fixtures().join(name), &env_of(env))
            .err()
            .ok_or_else(|| format!("{name} loaded without problems"))?;
        Ok(shown(&err, &fixtures()))
    }

    const TOP_KEYS: &str = "expected one of `source`, `windows`, `group_by`, `state`, \
        `detection`, `schedule`, `alerts`, `notify`, `server`, `investigation`, `rules`";

    const SOURCE_KEYS: &str = "expected one of `api_url`, `admin_key_file`, `page_limit`, \
        `timeout`, `connect_timeout`, `max_retries`, `retry_base`, `retry_max`, \
        `max_body_bytes`, `labels`";

    #[test]
    fn shipped_example_config_and_rules_load_with_the_defaults() -> TestResult {
        let path = root().join("config/costwatch.example.yaml");
        let config = load_with_env(&path, &BTreeMap::new())?;
        assert_eq!(config.path, path);
        let s = &config.source;
        assert_eq!(s.api_url.as_str(), "http://127.0.0.1:8080/v1");
        assert!(s.admin_key.is_none());
        assert_eq!(
            (s.page_limit, s.max_retries, s.max_body_bytes),
            (50, 5, 8_388_608)
        );
        assert_eq!(
            [s.timeout, s.connect_timeout, s.retry_base, s.retry_max],
            [
                Duration::from_secs(30),
                Duration::from_secs(5),
                Duration::from_millis(500),
                Duration::from_secs(60)
            ]
        );
        assert!(s.labels.is_empty());
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
        assert_eq!(config.state.url, "sqlite://costwatch.db");
        let d = &config.detection;
        assert_eq!(
            (
                d.baseline_samples,
                d.max_candidates,
                d.drilldown_concurrency
            ),
            (512, 10_000, 4)
        );
        assert_eq!(config.rule_paths, [root().join("config/../rules")]);
        assert_eq!(config.rules, default_rules(&root().join("config/../rules")));
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
        assert_eq!(s.cron_text, "*/5 * * * *");
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
        assert_eq!(a.realert_growth, 2.0);
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
        let parts = |c: &Config| {
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

    /// The rules of `rules/`, with the parameter defaults of the spec.
    fn default_rules(dir: &Path) -> Rules {
        let meta = |name: &str, file: &str| RuleMeta {
            name: name.to_owned(),
            severity: Severity::Warning,
            selector: Selector::default(),
            enabled: true,
            file: dir.join(file),
        };
        Rules {
            no_cache: vec![NoCacheRule {
                meta: meta("no-cache-conversation", "no_cache.yaml"),
                min_requests: 3,
                min_avg_input_tokens: 1024,
                max_cached_share: 0.05,
                min_peer_cached_share: 0.15,
                min_peers: 5,
                min_impact_usd: 0.0,
            }],
            oversized_model: vec![OversizedModelRule {
                meta: meta("premium-model-on-tiny-calls", "oversized_model.yaml"),
                premium_price_ratio: 5.0,
                max_avg_input_tokens: 1000,
                max_avg_output_tokens: 500,
                min_premium_cost_share: 0.5,
                min_peers: 2,
                max_group_share: 0.5,
                min_impact_usd: 0.0,
            }],
            retry_loop: vec![RetryLoopRule {
                meta: meta("retry-loop", "retry_loop.yaml"),
                min_requests: 6,
                min_ratio_to_median: 2.5,
                min_robust_z: 3.0,
                min_peers: 20,
                cold_start_min_requests: 8,
                min_identical_run: 5,
                input_tolerance_tokens: 32,
                input_tolerance_ratio: 0.005,
                min_error_burst: 4,
            }],
        }
    }

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
                &["no_such_rules: cannot read: no such file or directory (os error 2)"],
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
                    "bad_types.yaml:4:5: no_cache[0].min_request: unknown field `min_request`, expected one of `name`, `severity`, `match`, `enabled`, `min_requests`, `min_avg_input_tokens`, `max_cached_share`, `min_peer_cached_share`, `min_peers`, `min_impact_usd`",
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
        assert_eq!(config.source.api_url.as_str(), "http://127.0.0.1:9/v1");
        assert_eq!(config.windows.size, Duration::from_secs(300));
        assert_eq!(config.state.url, "postgres://costwatch@db/costwatch");
        assert_eq!(config.group_by, ["feature", "team"]);
        assert_eq!(config.rule_paths, [fixtures().join("rules/dup_a.yaml")]);
        assert_eq!(
            (config.rules.no_cache.len(), config.rules.retry_loop.len()),
            (1, 1)
        );
        // Values the environment does not touch keep the file's or the default.
        assert_eq!(config.source.page_limit, 50);
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
                "no_such_rules: cannot read: no such file or directory (os error 2)",
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
        assert_eq!(config.source.api_url.as_str(), "https://gateway.example/v1");
        // The default rule folder is `rules` next to the file.
        assert_eq!(config.rule_paths, [dir.path().join("rules")]);
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
            let key = config.source.admin_key.as_ref().map(Secret::expose);
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
    fn problems_of_the_alerting_sections_have_positions() -> TestResult {
        let email_keys = "expected one of `host`, `port`, `security`, `ca_file`, \
            `username`, `password_file`, `from`, `to`, `timeout`";
        let mailbox = "must be a mailbox such as `costwatch <costwatch@example.com>`";
        let cases: &[(&str, &[&str])] = &[
            (
                "alerting_errors.yaml",
                &[
                    "alerting_errors.yaml:5:9: schedule.cron: cannot parse \"61 * * * *\": minute field `61`: number out of bounds",
                    "alerting_errors.yaml:6:13: schedule.timezone: unknown time zone `Mars/Olympus_Mons`; expected an iana name such as `UTC` or `Europe/Berlin`",
                    "alerting_errors.yaml:7:25: schedule.max_catch_up_windows: must be at least 1, got 0",
                    "alerting_errors.yaml:9:13: alerts.cooldown: invalid duration `soon`: expected number at 0",
                    "alerting_errors.yaml:10:19: alerts.realert_growth: must be at least 1, got 0.5",
                    "alerting_errors.yaml:11:18: alerts.resolve_after: must be greater than 0",
                    "alerting_errors.yaml:12:17: alerts.top_sessions: must be between 1 and 50, got 51",
                    "alerting_errors.yaml:13:26: alerts.summary_after_windows: must be at least 1, got 0",
                    "alerting_errors.yaml:14:22: alerts.delivery_deadline: must be greater than 0",
                    "alerting_errors.yaml:16:14: alerts.retry_max: must be at least retry_base (1m), got 30s",
                    "alerting_errors.yaml:17:19: alerts.gateway_ui_url: must be an http or https url, got scheme `ftp`",
                    "alerting_errors.yaml:21:15: notify.email.security: plain smtp (`none`) is only allowed to a loopback host, got `smtp.example.com`; use `starttls` or `tls`",
                    "alerting_errors.yaml:22:11: notify.email.port: invalid value: integer `70000`, expected a port number",
                    "alerting_errors.yaml:23:14: notify.email.ca_file: cannot read no_such_ca.pem: no such file or directory (os error 2)",
                    "alerting_errors.yaml:24:15: notify.email.username: must not be empty",
                    "alerting_errors.yaml:25:20: notify.email.password_file: cannot read no_such_password.txt: no such file or directory (os error 2)",
                    &format!(
                        "alerting_errors.yaml:26:11: notify.email.from: {mailbox}, got `costwatch`"
                    ),
                    &format!(
                        "alerting_errors.yaml:27:30: notify.email.to[1]: {mailbox}, got `nobody`"
                    ),
                    "alerting_errors.yaml:28:14: notify.email.timeout: must be greater than 0",
                    &format!(
                        "alerting_errors.yaml:29:5: notify.email.tls: unknown field `tls`, {email_keys}"
                    ),
                    "alerting_errors.yaml:31:11: server.listen: must be an ip address and port such as `127.0.0.1:9464`, or null to disable, got `localhost:9464`",
                ],
            ),
            (
                "webhook_errors.yaml",
                &[
                    "webhook_errors.yaml:8:13: notify.webhooks[1].name: duplicate webhook name `chat`, first defined at webhook_errors.yaml:6:13",
                    "webhook_errors.yaml:10:14: notify.webhooks[1].shape: unknown variant `teams`, expected one of `generic`, `slack`, `alertmanager`",
                    "webhook_errors.yaml:11:13: notify.webhooks[2].name: must be lower-case letters, digits, `_` and `-`, got `Chat Ops`",
                    "webhook_errors.yaml:12:12: notify.webhooks[2].url: must be an http or https url, got scheme `ftp`",
                    "webhook_errors.yaml:13:7: notify.webhooks[3]: missing field `name`",
                    "webhook_errors.yaml:14:20: notify.webhooks[3].secret_file: cannot read no_such_secret.txt: no such file or directory (os error 2)",
                    "webhook_errors.yaml:15:16: notify.webhooks[3].timeout: must be greater than 0",
                    "webhook_errors.yaml:18:13: notify.webhooks[5].name: webhooks `pager-1` and `pager_1` would share the secret variable COSTWATCH_WEBHOOK_PAGER_1_SECRET; rename one (first defined at webhook_errors.yaml:16:13)",
                    "webhook_errors.yaml:20:7: notify.webhooks[6]: invalid type: string \"not a mapping\", expected a mapping",
                    "webhook_errors.yaml:21:7: notify.webhooks[7]: missing field `url`",
                ],
            ),
        ];
        for (name, want) in cases {
            assert_eq!(fixture_problems(name, &[])?, *want, "{name}");
        }
        Ok(())
    }

    /// Writes `text` as `costwatch.yaml` (with `source.api_url` and no
    /// rules prepended) and the `files` beside it in a new folder.
    fn config_in_tempdir(
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

    #[test]
    fn an_email_section_needs_host_sender_and_recipients() -> TestResult {
        let (dir, path) = config_in_tempdir("notify:\n  email:\n    security: tls\n", &[])?;
        let err = load_with_env(&path, &BTreeMap::new())
            .err()
            .ok_or("loaded without host, from and to")?;
        assert_eq!(
            shown(&err, dir.path()),
            [
                "costwatch.yaml:5:5: notify.email: missing field `host`",
                "costwatch.yaml:5:5: notify.email: missing field `from`",
                "costwatch.yaml:5:5: notify.email: missing field `to`",
            ]
        );
        let text = "notify:\n  email:\n    host: smtp.example.com\n    \
            from: costwatch@example.com\n    to: []\n";
        let (dir, path) = config_in_tempdir(text, &[])?;
        let err = load_with_env(&path, &BTreeMap::new())
            .err()
            .ok_or("loaded without recipients")?;
        assert_eq!(
            shown(&err, dir.path()),
            ["costwatch.yaml:7:9: notify.email.to: must list at least one recipient"]
        );
        // A recipient list of the wrong type is reported once.
        let text = "notify:\n  email:\n    host: smtp.example.com\n    security: 3\n    \
            from: costwatch@example.com\n    to: oncall@example.com\n";
        let (dir, path) = config_in_tempdir(text, &[])?;
        let err = load_with_env(&path, &BTreeMap::new())
            .err()
            .ok_or("loaded with a bare recipient")?;
        assert_eq!(
            shown(&err, dir.path()),
            [
                "costwatch.yaml:6:15: notify.email.security: invalid type: integer `3`, expected a string",
                "costwatch.yaml:8:9: notify.email.to: invalid type: string \"oncall@example.com\", expected a sequence",
            ]
        );
        // `email:` with nothing under it is no email channel.
        let (_dir, path) = config_in_tempdir("notify:\n  email:\n  webhooks: []\n", &[])?;
        assert!(
            load_with_env(&path, &BTreeMap::new())?
                .notify
                .email
                .is_none()
        );
        Ok(())
    }

    #[test]
    fn plain_smtp_is_only_allowed_to_a_loopback_host() -> TestResult {
        // Host, security, whether it loads, and the port it gets.
        let cases: &[(&str, &str, Option<u16>)] = &[
            ("localhost", "none", Some(25)),
            ("LocalHost", "none", Some(25)),
            ("127.0.0.1", "none", Some(25)),
            ("127.8.9.10", "none", Some(25)),
            ("'::1'", "none", Some(25)),
            ("'[::1]'", "none", Some(25)),
            ("smtp.example.com", "none", None),
            ("10.0.0.1", "none", None),
            ("'::2'", "none", None),
            ("localhost.example.com", "none", None),
            ("smtp.example.com", "starttls", Some(587)),
            ("smtp.example.com", "tls", Some(465)),
        ];
        for (host, security, want) in cases {
            let text = format!(
                "notify:\n  email:\n    host: {host}\n    security: {security}\n    \
                 from: costwatch@example.com\n    to: [oncall@example.com]\n"
            );
            let (dir, path) = config_in_tempdir(&text, &[])?;
            let got = load_with_env(&path, &BTreeMap::new());
            match (got, want) {
                (Ok(config), Some(port)) => {
                    let email = config.notify.email.ok_or("no email channel")?;
                    assert_eq!(email.port, *port, "{host} {security}");
                }
                (Err(err), None) => {
                    let shown = shown(&err, dir.path());
                    assert_eq!(shown.len(), 1, "{host}: {shown:?}");
                    assert!(
                        shown[0].starts_with(
                            "costwatch.yaml:6:15: notify.email.security: plain smtp (`none`) is only allowed to a loopback host"
                        ),
                        "{host}: {shown:?}"
                    );
                }
                (got, _) => return Err(format!("{host} {security}: got {got:?}").into()),
            }
        }
        Ok(())
    }

    #[test]
    fn every_channel_loads_with_its_settings() -> TestResult {
        let config = load_with_env(&fixtures().join("notify.yaml"), &BTreeMap::new())?;
        let email = config.notify.email.as_ref().ok_or("no email channel")?;
        assert_eq!(
            (email.host.as_str(), email.port, email.security),
            ("127.0.0.1", 25, SmtpSecurity::None)
        );
        assert_eq!(email.ca_file, Some(fixtures().join("ca.pem")));
        assert_eq!(email.username.as_deref(), Some("costwatch"));
        assert_eq!(email.from, "costwatch <costwatch@example.com>");
        assert_eq!(email.to, ["oncall@example.com", "Team <team@example.com>"]);
        assert_eq!(email.timeout, Duration::from_secs(30));
        let hooks: Vec<_> = config
            .notify
            .webhooks
            .iter()
            .map(|w| (w.name.as_str(), w.url.as_str(), w.shape, w.timeout))
            .collect();
        assert_eq!(
            hooks,
            [
                (
                    "chat-ops",
                    "https://hooks.example.com/services/T0/B0/X",
                    super::super::WebhookShape::Slack,
                    Duration::from_secs(10)
                ),
                (
                    "am",
                    "http://127.0.0.1:9093/api/v2/alerts",
                    super::super::WebhookShape::Alertmanager,
                    Duration::from_secs(3)
                ),
            ]
        );
        assert!(config.notify.webhooks[1].secret.is_none());
        assert_eq!(
            config.alerts.gateway_ui_url.as_ref().map(Url::as_str),
            Some("https://gateway.example/ui/")
        );
        assert_eq!(config.server.listen, None);
        Ok(())
    }

    /// An environment and the secret expected with it.
    type SecretCase<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);

    #[test]
    fn smtp_password_comes_from_env_or_file_and_never_shows() -> TestResult {
        const FROM_FILE: &str = "smtp-pass-from-file-42";
        const FROM_ENV: &str = "smtp-pass-from-env-17";
        let cases: &[SecretCase<'_>] = &[
            (&[(SMTP_PASSWORD_VAR, FROM_ENV)], Some(FROM_ENV)),
            (&[(SMTP_PASSWORD_VAR, "")], Some(FROM_FILE)),
            (&[], Some(FROM_FILE)),
        ];
        for (env, want) in cases {
            let config = load_with_env(&fixtures().join("notify.yaml"), &env_of(env))?;
            let email = config.notify.email.as_ref().ok_or("no email channel")?;
            assert_eq!(
                email.password.as_ref().map(Secret::expose),
                *want,
                "{env:?}"
            );
            let debug = format!("{config:?}");
            assert!(
                !debug.contains(FROM_FILE) && !debug.contains(FROM_ENV),
                "{debug}"
            );
        }
        // Without password_file only the environment gives one.
        let text = "notify:\n  email:\n    host: smtp.example.com\n    \
            from: costwatch@example.com\n    to: [oncall@example.com]\n";
        let (_dir, path) = config_in_tempdir(text, &[])?;
        let email = |env: &[(&str, &str)]| -> Result<Option<String>, Box<dyn Error>> {
            let config = load_with_env(&path, &env_of(env))?;
            Ok(config
                .notify
                .email
                .and_then(|e| e.password)
                .map(|p| p.expose().to_owned()))
        };
        assert_eq!(email(&[])?, None);
        assert_eq!(
            email(&[(SMTP_PASSWORD_VAR, FROM_ENV)])?.as_deref(),
            Some(FROM_ENV)
        );
        // An empty password file is a problem that names the file only.
        let text = "notify:\n  email:\n    host: smtp.example.com\n    \
            password_file: pw.txt\n    from: costwatch\n    to: [oncall@example.com]\n";
        let (dir, path) = config_in_tempdir(text, &[("pw.txt", "\n")])?;
        let err = load_with_env(&path, &BTreeMap::new())
            .err()
            .ok_or("loaded with an empty password file")?;
        assert_eq!(
            shown(&err, dir.path()),
            [
                "costwatch.yaml:6:20: notify.email.password_file: pw.txt is empty",
                "costwatch.yaml:7:11: notify.email.from: must be a mailbox such as `costwatch <costwatch@example.com>`, got `costwatch`",
            ]
        );
        // A readable password never appears in the problems of its section.
        let (dir, path) = config_in_tempdir(text, &[("pw.txt", FROM_FILE)])?;
        let err = load_with_env(&path, &env_of(&[]))
            .err()
            .ok_or("loaded with a bad sender")?;
        let shown = shown(&err, dir.path());
        assert_eq!(shown.len(), 1);
        assert!(!err.to_string().contains(FROM_FILE));
        Ok(())
    }

    #[test]
    fn webhook_secret_comes_from_its_variable_or_file_and_never_shows() -> TestResult {
        const FROM_FILE: &str = "hook-secret-from-file-7";
        const FROM_ENV: &str = "hook-secret-from-env-3";
        // `chat-ops` maps to COSTWATCH_WEBHOOK_CHAT_OPS_SECRET.
        let cases: &[SecretCase<'_>] = &[
            (
                &[("COSTWATCH_WEBHOOK_CHAT_OPS_SECRET", FROM_ENV)],
                Some(FROM_ENV),
            ),
            (
                &[("COSTWATCH_WEBHOOK_CHAT_OPS_SECRET", "")],
                Some(FROM_FILE),
            ),
            (
                &[("COSTWATCH_WEBHOOK_CHAT-OPS_SECRET", FROM_ENV)],
                Some(FROM_FILE),
            ),
            (&[], Some(FROM_FILE)),
        ];
        for (env, want) in cases {
            let config = load_with_env(&fixtures().join("notify.yaml"), &env_of(env))?;
            let hook = &config.notify.webhooks[0];
            assert_eq!(hook.name, "chat-ops");
            assert_eq!(hook.secret.as_ref().map(Secret::expose), *want, "{env:?}");
            let debug = format!("{config:?}");
            assert!(
                !debug.contains(FROM_FILE) && !debug.contains(FROM_ENV),
                "{debug}"
            );
        }
        // A webhook without secret_file gets one from the environment only,
        // and the variable of one webhook does not reach another.
        let config = load_with_env(
            &fixtures().join("notify.yaml"),
            &env_of(&[("COSTWATCH_WEBHOOK_AM_SECRET", FROM_ENV)]),
        )?;
        let secrets: Vec<Option<&str>> = config
            .notify
            .webhooks
            .iter()
            .map(|w| w.secret.as_ref().map(Secret::expose))
            .collect();
        assert_eq!(secrets, [Some(FROM_FILE), Some(FROM_ENV)]);
        Ok(())
    }

    #[test]
    fn env_overrides_reach_the_alerting_sections() -> TestResult {
        let config = load_with_env(
            &fixtures().join("minimal.yaml"),
            &env_of(&[
                // Unquoted: not valid YAML, so taken as the text itself.
                ("COSTWATCH_SCHEDULE__CRON", "*/10 * * * *"),
                ("COSTWATCH_SCHEDULE__TIMEZONE", "Europe/Berlin"),
                ("COSTWATCH_ALERTS__COOLDOWN", "1h"),
                ("COSTWATCH_ALERTS__SEND_RESOLVED", "false"),
                ("COSTWATCH_SERVER__LISTEN", "null"),
                ("COSTWATCH_NOTIFY__EMAIL__HOST", "smtp.example.com"),
                ("COSTWATCH_NOTIFY__EMAIL__SECURITY", "tls"),
                ("COSTWATCH_NOTIFY__EMAIL__FROM", "costwatch@example.com"),
                (
                    "COSTWATCH_NOTIFY__EMAIL__TO",
                    "[a@example.com, b@example.com]",
                ),
            ]),
        )?;
        assert_eq!(config.schedule.cron_text, "*/10 * * * *");
        assert_eq!(config.schedule.timezone, chrono_tz::Tz::Europe__Berlin);
        let t = DateTime::parse_from_rfc3339("2026-05-04T12:03:10Z")?.with_timezone(&Utc);
        assert_eq!(
            config.schedule.next_after(t),
            Some(DateTime::parse_from_rfc3339("2026-05-04T12:10:00Z")?.with_timezone(&Utc))
        );
        assert_eq!(config.alerts.cooldown, Duration::from_secs(3600));
        assert!(!config.alerts.send_resolved);
        assert_eq!(config.server.listen, None);
        let email = config.notify.email.ok_or("no email channel")?;
        assert_eq!((email.host.as_str(), email.port), ("smtp.example.com", 465));
        assert_eq!(email.to, ["a@example.com", "b@example.com"]);
        // The 6-field form and a quoted value work too.
        let config = load_with_env(
            &fixtures().join("minimal.yaml"),
            &env_of(&[("COSTWATCH_SCHEDULE__CRON", "'0 */10 * * * *'")]),
        )?;
        assert_eq!(config.schedule.cron_text, "0 */10 * * * *");
        Ok(())
    }

    #[test]
    fn bad_env_overrides_of_the_alerting_sections_name_the_variable() -> TestResult {
        let cases: &[(&str, &str, &str)] = &[
            (
                "COSTWATCH_SCHEDULE__CRON",
                "0 0 30 2 *",
                "env COSTWATCH_SCHEDULE__CRON: schedule.cron: \"0 0 30 2 *\" never fires",
            ),
            (
                "COSTWATCH_SCHEDULE__CRON",
                "*/5 * * *",
                "env COSTWATCH_SCHEDULE__CRON: schedule.cron: cannot parse \"*/5 * * *\": expected 5 fields, or 6 with seconds first, got 4",
            ),
            (
                "COSTWATCH_SCHEDULE__TIMEZONE",
                "Europe/Berlln",
                "env COSTWATCH_SCHEDULE__TIMEZONE: schedule.timezone: unknown time zone `Europe/Berlln`; expected an iana name such as `UTC` or `Europe/Berlin`",
            ),
            (
                "COSTWATCH_SERVER__LISTEN",
                "9464",
                "env COSTWATCH_SERVER__LISTEN: server.listen: invalid type: integer `9464`, expected a string",
            ),
        ];
        for (var, value, want) in cases {
            let got = fixture_problems("minimal.yaml", &[(var, value)])?;
            assert_eq!(got, [*want], "{var}={value}");
        }
        // A section built from the environment alone reports all it lacks
        // against the variables.
        let got = fixture_problems(
            "minimal.yaml",
            &[("COSTWATCH_NOTIFY__EMAIL__HOST", "smtp.example.com")],
        )?;
        assert_eq!(
            got,
            [
                "env COSTWATCH_NOTIFY__EMAIL__HOST: notify.email: missing field `from`",
                "env COSTWATCH_NOTIFY__EMAIL__HOST: notify.email: missing field `to`",
            ]
        );
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
}
