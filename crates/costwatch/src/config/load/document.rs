//! One YAML document being loaded: its value, where each path is written,
//! and the problems found in it so far; serde errors are repaired so that
//! deserialization gets past them.

use super::{file_problem, io_message, lower_first};
use crate::config::Problem;
use crate::config::env;
use crate::config::locate::{Index, Pos, Seg, is_within, path_string};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::fs;
use std::path::{Path, PathBuf};

/// Most serde errors reported for one value before giving up on it.
const MAX_REPAIRS: usize = 200;

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
pub(super) fn tidy(message: &str) -> String {
    let message = match message.find("expected struct ") {
        Some(at) => format!("{}expected a mapping", &message[..at]),
        None => message.to_owned(),
    };
    [
        ("expected u16", "expected a port number"),
        ("expected u32", "expected a non-negative 32-bit integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected usize", "expected a non-negative integer"),
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
pub(super) fn missing_field(message: &str) -> Option<String> {
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
pub(super) struct Doc {
    /// The file, as named in problems.
    pub(super) file: PathBuf,
    /// The document; repairs change it.
    pub(super) value: Value,
    /// Where each path is written.
    pub(super) index: Index,
    /// Field paths set by environment overrides, with the variable.
    pub(super) env: Vec<(String, String)>,
    /// Paths already reported and taken out of the document.
    pub(super) tainted: Vec<String>,
    pub(super) problems: Vec<Problem>,
}

impl Doc {
    /// Reads and parses `file`. An empty document is an empty mapping.
    pub(super) fn read(file: &Path) -> Result<Doc, Problem> {
        let text = fs::read_to_string(file)
            .map_err(|e| file_problem(file, format!("cannot read: {}", io_message(&e))))?;
        Doc::parse(file, &text)
    }

    /// Parses `text` as if read from `file` (which names it in problems).
    pub(super) fn parse(file: &Path, text: &str) -> Result<Doc, Problem> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
    pub(super) fn into_problems(mut self) -> Vec<Problem> {
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
    pub(super) fn deserialize_at<T: DeserializeOwned>(&mut self, prefix: &[Seg]) -> Option<T> {
        self.deserialize_keys_at(prefix, |_| true, &[])
    }

    /// As [`Doc::deserialize_at`], reading only the keys `keep` accepts
    /// when the value at `prefix` is a mapping (a rule's keys every rule
    /// has, or its kind's settings); an unknown key of that mapping is told
    /// the keys `T` expects after `also_expected`, the keys read apart.
    pub(super) fn deserialize_keys_at<T: DeserializeOwned>(
        &mut self,
        prefix: &[Seg],
        keep: impl Fn(&str) -> bool,
        also_expected: &[&str],
    ) -> Option<T> {
        for _ in 0..MAX_REPAIRS {
            let sub = match value_at(&self.value, prefix)? {
                Value::Object(map) => Value::Object(
                    map.iter()
                        .filter(|(k, _)| keep(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                other => other.clone(),
            };
            let err = match serde_path_to_error::deserialize::<_, T>(&sub) {
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
            let mut message = tidy(&err.inner().to_string());
            let own_key = at.len() == prefix.len() + 1;
            if message.starts_with("unknown field") && own_key && !also_expected.is_empty() {
                let listed: Vec<String> = also_expected.iter().map(|k| format!("`{k}`")).collect();
                let listed = listed.join(", ");
                message = message.replacen(
                    "expected one of ",
                    &format!("expected one of {listed}, "),
                    1,
                );
            }
            if !self.repair(prefix, at, message) {
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
    pub(super) fn is_tainted(&self, path: &str) -> bool {
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
    pub(super) fn check(&mut self, ok: bool, path: &str, message: impl FnOnce() -> String) -> bool {
        if !ok && !self.is_tainted(path) {
            self.report(path, Anchor::Value, message());
        }
        ok
    }

    pub(super) fn between_u64(&mut self, path: &str, v: u64, lo: u64, hi: u64) -> bool {
        self.check((lo..=hi).contains(&v), path, || {
            format!("must be between {lo} and {hi}, got {v}")
        })
    }

    /// Reports the key at `path` as unknown, at the key.
    pub(super) fn unknown_key(&mut self, path: &str, message: String) {
        if !self.is_tainted(path) {
            self.report(path, Anchor::Key, message);
        }
    }

    /// `file:line:column` of `path`, for messages that point elsewhere.
    pub(super) fn place(&self, path: &str) -> String {
        match self.index.locate(path) {
            Some(Pos { line, column }) => format!("{}:{line}:{column}", self.file.display()),
            None => self.file.display().to_string(),
        }
    }
}

pub(super) fn value_at<'v>(value: &'v Value, segs: &[Seg]) -> Option<&'v Value> {
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
