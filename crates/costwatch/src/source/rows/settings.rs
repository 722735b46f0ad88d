//! What groups a row source's calls into sessions and which of their fields
//! become labels (`source.session_key`, `source.labels`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// What groups calls into a session (`source.session_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKey {
    /// The system's own session id (`session_id`): LiteLLM's `session_id`
    /// column, Langfuse's `sessionId`. Written `session_id`.
    Session,
    /// The value of one metadata key. Written `metadata.<key>`.
    Metadata(String),
    /// The end user (LiteLLM's `end_user`, Langfuse's `userId`). Written `user`.
    User,
    /// The trace (LiteLLM's trace id, Langfuse's `traceId`). Written `trace`.
    Trace,
    /// The value of a `<prefix>:<value>` tag. Written `tag:<prefix>`.
    Tag(String),
}

impl SessionKey {
    /// Parses the config spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<SessionKey> {
        match s {
            "session_id" => Some(SessionKey::Session),
            "user" => Some(SessionKey::User),
            "trace" => Some(SessionKey::Trace),
            _ => {
                if let Some(k) = s.strip_prefix("metadata.") {
                    (!k.is_empty()).then(|| SessionKey::Metadata(k.to_owned()))
                } else if let Some(p) = s.strip_prefix("tag:") {
                    (!p.is_empty()).then(|| SessionKey::Tag(p.to_owned()))
                } else {
                    None
                }
            }
        }
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionKey::Session => f.write_str("session_id"),
            SessionKey::Metadata(k) => write!(f, "metadata.{k}"),
            SessionKey::User => f.write_str("user"),
            SessionKey::Trace => f.write_str("trace"),
            SessionKey::Tag(p) => write!(f, "tag:{p}"),
        }
    }
}

/// Where one label's value comes from (a value of `source.labels`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelField {
    /// A metadata key: `metadata.<key>`.
    Metadata(String),
    /// The value of a `<prefix>:<value>` tag: `tag:<prefix>`.
    Tag(String),
    /// A named field of the row, one of the source kind's
    /// [`label_fields`](crate::source::SourceKind::label_fields) (`team_id`,
    /// `user`, `trace_name`, ...).
    Field(String),
}

impl LabelField {
    /// Parses the config spelling for a source whose row fields are
    /// `fields`; the error says what is accepted.
    pub fn parse(s: &str, fields: &[&str]) -> Result<LabelField, String> {
        if let Some(k) = s.strip_prefix("metadata.") {
            if !k.is_empty() {
                return Ok(LabelField::Metadata(k.to_owned()));
            }
        } else if let Some(p) = s.strip_prefix("tag:") {
            if !p.is_empty() {
                return Ok(LabelField::Tag(p.to_owned()));
            }
        } else if fields.contains(&s) {
            return Ok(LabelField::Field(s.to_owned()));
        }
        Err(format!(
            "`{s}` is not a field: use metadata.<key>, tag:<prefix> or one of {}",
            fields.join(", ")
        ))
    }
}

/// How a row source maps its rows, from the `source` section.
#[derive(Debug, Clone, PartialEq)]
pub struct RowSettings {
    /// What groups calls into sessions.
    pub session_key: SessionKey,
    /// Label name -> where its value comes from, on top of the defaults.
    pub labels: BTreeMap<String, LabelField>,
    /// Only calls carrying all these labels (after mapping) are read.
    pub filter: BTreeMap<String, String>,
    /// Rows asked for per page.
    pub page_limit: u32,
    /// Most pages read in one listing; a listing that goes on longer fails
    /// the read.
    pub max_pages: u64,
    /// How far before a window calls are read so that a session that began
    /// earlier is counted whole (`source.session_lookback`).
    pub session_lookback: Duration,
    /// Most open sessions held while a window is read; more fails the read
    /// with an error that says to shorten the window.
    pub max_open_sessions: usize,
    /// Most request rows kept in memory for drill-downs after a read;
    /// sessions beyond it are read again when drilled into.
    pub max_kept_rows: usize,
}
