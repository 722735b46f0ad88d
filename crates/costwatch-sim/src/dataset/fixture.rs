//! Loading a fixture such as `data/seed-window.json`: a window of the
//! reference gateway's answers (gateway-api.md section 1: the `data` rows of
//! `GET /v1/sessions`, the request rows of `GET /v1/requests`, the
//! catalogue of `GET /v1/models`) plus `expect`, the labelled truth.
//!
//! Session rows are served verbatim once all their calls are visible.

use super::rows::{SimModel, SimRequest, SimSession};
use super::{Dataset, Truth};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Why a fixture could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The fixture path.
        path: String,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The file is not a fixture's JSON.
    #[error("{context}: {source}")]
    Parse {
        /// The fixture path (or `fixture` for in-memory text).
        context: String,
        /// The JSON failure.
        source: serde_json::Error,
    },
    /// The fixture is well-formed JSON but inconsistent.
    #[error("{0}")]
    Invalid(String),
}

/// The fixture file's top level (`window` and `note` are ignored).
#[derive(Deserialize)]
struct FixtureFile {
    data: Vec<Value>,
    requests: Vec<SimRequest>,
    models: Vec<SimModel>,
    #[serde(default)]
    expect: BTreeMap<String, Vec<String>>,
}

impl Dataset {
    /// Loads a fixture such as `seed-window.json` (`data`, `requests`,
    /// `models`, `expect`).
    pub fn from_fixture(path: impl AsRef<Path>) -> Result<Dataset, DatasetError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse_fixture(&text, &path.display().to_string())
    }

    /// Loads a fixture from its JSON text.
    pub fn from_fixture_str(text: &str) -> Result<Dataset, DatasetError> {
        Self::parse_fixture(text, "fixture")
    }

    fn parse_fixture(text: &str, context: &str) -> Result<Dataset, DatasetError> {
        let file: FixtureFile =
            serde_json::from_str(text).map_err(|source| DatasetError::Parse {
                context: context.to_string(),
                source,
            })?;
        let sessions = fixture_sessions(file.data, file.requests)
            .map_err(|m| DatasetError::Invalid(format!("{context}: {m}")))?;
        let mut truth = Truth::default();
        for (kind, ids) in &file.expect {
            for id in ids {
                if !sessions.iter().any(|s| &s.session_id == id) {
                    return Err(DatasetError::Invalid(format!(
                        "{context}: expect.{kind}: unknown session `{id}`"
                    )));
                }
                truth.insert(kind, id);
            }
        }
        Ok(Dataset::new(file.models, sessions, truth))
    }
}

/// Groups the fixture's calls under its session rows.
fn fixture_sessions(
    rows: Vec<Value>,
    requests: Vec<SimRequest>,
) -> Result<Vec<SimSession>, String> {
    let mut calls: BTreeMap<String, Vec<SimRequest>> = BTreeMap::new();
    for r in requests {
        calls.entry(r.session_id.clone()).or_default().push(r);
    }
    let mut sessions = Vec::with_capacity(rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        let id = row
            .get("session_id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("data[{i}]: missing session_id"))?
            .to_string();
        let requests = calls
            .remove(&id)
            .ok_or_else(|| format!("data[{i}]: session `{id}` has no requests"))?;
        let labels = row_labels(&row);
        sessions.push(SimSession {
            session_id: id,
            labels,
            requests,
            fixed_row: Some(row),
        });
    }
    for (id, requests) in calls {
        let labels = requests
            .first()
            .map(|r| r.labels.clone())
            .unwrap_or_default();
        sessions.push(SimSession {
            session_id: id,
            labels,
            requests,
            fixed_row: None,
        });
    }
    Ok(sessions)
}

/// The string labels of a session row.
fn row_labels(row: &Value) -> BTreeMap<String, String> {
    row.get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
