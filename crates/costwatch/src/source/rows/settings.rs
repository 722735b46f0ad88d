//! The `source` keys of the row sources: what groups a system's calls into
//! sessions and which of their fields become labels ([`RowKeys`], LiteLLM
//! and Langfuse), and how far and how much is read ([`Rows`], every kind
//! but the reference gateway); [`RowSettings`], what a reader is given.

use crate::settings::units::positive;
use crate::settings::{Issue, Settings, empty_label_name};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// `source.session_key` and `source.labels` of LiteLLM and Langfuse.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<RowKeys>)]
pub struct RowKeys {
    /// What groups calls into sessions: `session_id` (the system's own),
    /// `user`, `trace`, `metadata.<key>` or `tag:<prefix>`.
    #[schemars(with = "String")]
    pub session_key: SessionKey,
    /// Label name -> the row field its value comes from: `metadata.<key>`,
    /// `tag:<prefix>` or one of the kind's row fields (`team_id`, `user`,
    /// ...).
    pub labels: BTreeMap<String, String>,
}

impl Settings for RowKeys {
    fn problems(&self) -> Vec<Issue> {
        empty_label_name("labels", &self.labels)
            .into_iter()
            .collect()
    }
}

/// The `source` keys every row source reads: how far before a window
/// calls are read, and how much is held.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Rows>)]
pub struct Rows {
    /// A price table in the `GET /models` shape, for models the system
    /// does not price, relative to the configuration's folder.
    #[schemars(example = "models.json")]
    pub models_file: Option<PathBuf>,
    /// How far before a window calls are read, so that a session that began
    /// earlier is counted whole.
    #[serde(with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub session_lookback: Duration,
    /// Most open sessions held while a window is read; more fails the read
    /// with an error that says to shorten the window.
    #[schemars(range(min = 1))]
    pub max_open_sessions: usize,
    /// Most calls kept in memory for drill-downs after a read; sessions
    /// beyond it are read again when drilled into.
    pub max_kept_rows: usize,
}

impl Default for Rows {
    fn default() -> Self {
        Rows {
            models_file: None,
            session_lookback: Duration::from_secs(6 * 3600),
            max_open_sessions: 2_000_000,
            max_kept_rows: 500_000,
        }
    }
}

impl Settings for Rows {}

/// What groups calls into a session (`source.session_key`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub enum SessionKey {
    /// The system's own session id (`session_id`): LiteLLM's `session_id`
    /// column, Langfuse's `sessionId`. Written `session_id`.
    #[default]
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

impl TryFrom<String> for SessionKey {
    type Error = String;

    fn try_from(s: String) -> Result<SessionKey, String> {
        SessionKey::parse(&s).ok_or_else(|| {
            format!(
                "`{}` is not a session key: use session_id, user, trace, metadata.<key> or \
                 tag:<prefix>",
                crate::printable::printable(&s)
            )
        })
    }
}

impl From<SessionKey> for String {
    fn from(k: SessionKey) -> String {
        k.to_string()
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

/// What a row reader is given, from the `source` section: [`RowKeys`],
/// [`Rows`] and the keys every kind reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RowSettings {
    /// `source.session_key`.
    pub session_key: SessionKey,
    /// `source.labels`, parsed for the kind, on top of the defaults.
    pub labels: BTreeMap<String, LabelField>,
    /// `source.filter`.
    pub filter: BTreeMap<String, String>,
    /// `source.page_limit`, or the kind's default.
    pub page_limit: u32,
    /// `source.max_pages`.
    pub max_pages: u64,
    /// `source.session_lookback`.
    pub session_lookback: Duration,
    /// `source.max_open_sessions`.
    pub max_open_sessions: usize,
    /// `source.max_kept_rows`.
    pub max_kept_rows: usize,
}

impl RowSettings {
    /// What a reader of `kind` is given when the `source` section sets
    /// nothing (the simulator's readers, for one).
    pub fn defaults(kind: crate::source::SourceKind) -> RowSettings {
        let rows = Rows::default();
        RowSettings {
            session_key: SessionKey::Session,
            labels: BTreeMap::new(),
            filter: BTreeMap::new(),
            page_limit: kind.default_page_limit(),
            max_pages: crate::source::reference::DEFAULT_MAX_PAGES,
            session_lookback: rows.session_lookback,
            max_open_sessions: rows.max_open_sessions,
            max_kept_rows: rows.max_kept_rows,
        }
    }
}
