//! A tool's arguments checked as the server's zod schemas check them:
//! every problem becomes an issue `path: message` in zod 4's wording, keys
//! the schema does not name are dropped, and a failed check is
//! [`Failure::Validation`] (a -32602). Langfuse's own request errors are
//! [`Failure::Request`] (a -32600).

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Map, Value};

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// zod issues, each `path: message`.
    Validation(Vec<String>),
    /// An `InvalidRequestError` or `LangfuseNotFoundError` message.
    Request(String),
}

/// What zod says it received.
pub(super) fn received(v: Option<&Value>) -> &'static str {
    match v {
        None => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
    }
}

/// `Invalid input: expected <what>, received <kind>`.
pub(super) fn expected(what: &str, v: Option<&Value>) -> String {
    format!("Invalid input: expected {what}, received {}", received(v))
}

/// `Invalid option: expected one of "a"|"b"`.
pub(super) fn one_of(options: &[&str]) -> String {
    let quoted: Vec<String> = options.iter().map(|o| format!("\"{o}\"")).collect();
    format!("Invalid option: expected one of {}", quoted.join("|"))
}

/// JavaScript's `Number(value)`, for `z.coerce.number()`.
fn to_number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Null => 0.0,
        Value::String(s) if s.trim().is_empty() => 0.0,
        Value::String(s) => s.trim().parse().unwrap_or(f64::NAN),
        Value::Array(_) | Value::Object(_) => f64::NAN,
    }
}

/// An ISO 8601 time with a zone (`z.iso.datetime({offset: true})`).
pub(super) fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `new Date(value)` as `z.coerce.date()` reads it (RFC 3339, a plain
/// date, milliseconds since the epoch, `null` as 0).
pub(super) fn coerce_date(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::String(s) => parse_time(s).or_else(|| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        }),
        Value::Number(n) => n
            .as_f64()
            .and_then(|ms| DateTime::from_timestamp_millis(ms as i64)),
        Value::Null => DateTime::from_timestamp_millis(0),
        Value::Bool(b) => DateTime::from_timestamp_millis(i64::from(*b)),
        _ => None,
    }
}

/// The arguments of one call and the issues found so far.
pub(super) struct Args<'a> {
    obj: Option<&'a Map<String, Value>>,
    issues: Vec<String>,
}

impl<'a> Args<'a> {
    /// The arguments as sent (`None`: absent); anything but an object is
    /// an issue at the root.
    pub(super) fn new(arguments: Option<&'a Value>) -> Args<'a> {
        match arguments {
            Some(Value::Object(obj)) => Args {
                obj: Some(obj),
                issues: Vec::new(),
            },
            other => Args {
                obj: None,
                issues: vec![format!(": {}", expected("object", other))],
            },
        }
    }

    /// Records an issue at `path`.
    pub(super) fn issue(&mut self, path: &str, message: impl Into<String>) {
        self.issues.push(format!("{path}: {}", message.into()));
    }

    /// How many issues were found so far.
    pub(super) fn count(&self) -> usize {
        self.issues.len()
    }

    /// The value under `key`, if any.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.and_then(|o| o.get(key))
    }

    /// `z.string().optional()`.
    pub(super) fn opt_string(&mut self, key: &str) -> Option<String> {
        match self.get(key) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            other => {
                self.issue(key, expected("string", other));
                None
            }
        }
    }

    /// `z.string().min(1)`.
    pub(super) fn string_min1(&mut self, key: &str) -> Option<String> {
        match self.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::String(_)) => {
                self.issue(key, "Too small: expected string to have >=1 characters");
                None
            }
            other => {
                self.issue(key, expected("string", other));
                None
            }
        }
    }

    /// `z.boolean().optional()`.
    pub(super) fn opt_bool(&mut self, key: &str) -> Option<bool> {
        match self.get(key) {
            None => None,
            Some(Value::Bool(b)) => Some(*b),
            other => {
                self.issue(key, expected("boolean", other));
                None
            }
        }
    }

    /// `z.enum(options)`, optional or not.
    pub(super) fn enumerated(
        &mut self,
        key: &str,
        options: &[&str],
        required: bool,
    ) -> Option<String> {
        match self.get(key) {
            None if !required => None,
            Some(Value::String(s)) if options.contains(&s.as_str()) => Some(s.clone()),
            _ => {
                self.issue(key, one_of(options));
                None
            }
        }
    }

    /// `z.iso.datetime({offset: true}).optional()`.
    pub(super) fn opt_time(&mut self, key: &str) -> Option<DateTime<Utc>> {
        match self.get(key) {
            None => None,
            Some(Value::String(s)) => {
                let t = parse_time(s);
                if t.is_none() {
                    self.issue(key, "Invalid ISO datetime");
                }
                t
            }
            other => {
                self.issue(key, expected("string", other));
                None
            }
        }
    }

    /// `z.array(z.string()).optional()`.
    pub(super) fn opt_strings(&mut self, key: &str) -> Option<Vec<String>> {
        let items = match self.get(key) {
            None => return None,
            Some(Value::Array(items)) => items,
            other => {
                self.issue(key, expected("array", other));
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                other => {
                    self.issue(&format!("{key}.{i}"), expected("string", Some(other)));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// `z.coerce.number().int().min(1).max(100).default(50)`.
    pub(super) fn limit(&mut self, key: &str) -> usize {
        let Some(v) = self.get(key) else {
            return 50;
        };
        let n = to_number(v);
        if n.is_nan() {
            self.issue(key, "Invalid input: expected number, received NaN");
            return 50;
        }
        let before = self.issues.len();
        if n.fract() != 0.0 || n.is_infinite() {
            self.issue(key, "Invalid input: expected int, received number");
        }
        if n < 1.0 {
            self.issue(key, "Too small: expected number to be >=1");
        }
        if n > 100.0 {
            self.issue(key, "Too big: expected number to be <=100");
        }
        if self.issues.len() > before {
            return 50;
        }
        n as usize
    }

    /// The issues, if any, as a [`Failure::Validation`].
    pub(super) fn finish(self) -> Result<(), Failure> {
        if self.issues.is_empty() {
            Ok(())
        } else {
            Err(Failure::Validation(self.issues))
        }
    }
}
