//! One OTLP/JSON lines file read whole: the folder's listing, and each
//! file's calls.

use super::super::decode::decode_json_line;
use super::super::map::map_spans;
use super::super::settings::SpanMapping;
use super::select::Selection;
use crate::printable::printable;
use crate::source::SourceError;
use crate::source::rows::CallRow;
use chrono::{DateTime, Utc};
use flate2::read::MultiGzDecoder;
use std::collections::HashMap;
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What tells one version of a file from another: its size and when it
/// was last written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

/// Every file `selection` names, with its stamp, by path: in a folder,
/// those holding OTLP/JSON lines (`.json`, `.jsonl`, and the same
/// gzipped); with a glob, those it matches, in the folders below its root
/// it may match in (symbolic links to folders are not followed).
pub(super) fn list(selection: &Selection) -> Result<Vec<(PathBuf, Stamp)>, SourceError> {
    let mut out = Vec::new();
    let mut folders: Vec<(PathBuf, Vec<String>)> = vec![(selection.root.clone(), Vec::new())];
    while let Some((dir, at)) = folders.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| folder_error(&dir, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| folder_error(&dir, &e))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let mut relative: Vec<&str> = at.iter().map(String::as_str).collect();
            relative.push(&name);
            let is_folder = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_folder {
                if selection.descends() && selection.may_hold(&relative) {
                    let mut below = at.clone();
                    below.push(name.clone());
                    folders.push((path, below));
                }
                continue;
            }
            let named = match selection.pattern {
                None => is_otlp_file(&path),
                Some(_) => selection.matches(&relative),
            };
            if !named {
                continue;
            }
            // Follows symbolic links: a rotated file may be a link.
            let meta = match std::fs::metadata(&path) {
                Ok(m) => m,
                // Removed since the listing (rotation): not there.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(file_error(&path, &e)),
            };
            if !meta.is_file() {
                continue;
            }
            let stamp = Stamp {
                len: meta.len(),
                modified: meta.modified().ok(),
            };
            out.push((path, stamp));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether the file's name says it holds OTLP/JSON lines.
fn is_otlp_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let name = name.strip_suffix(".gz").unwrap_or(name);
    name.ends_with(".json") || name.ends_with(".jsonl")
}

/// A call as a file holds it.
#[derive(Debug, Clone)]
pub(super) struct FileCall {
    /// The call, its session as the span itself or the fallback gave it.
    pub row: CallRow,
    /// The trace, when the session came from the fallback: a conversation
    /// id seen on another span of the trace (in any file) replaces it.
    pub trace: Option<String>,
}

/// One file's calls.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    /// Its model calls, each span once (the first copy kept), by start
    /// time then span id.
    pub calls: Vec<FileCall>,
    /// Conversation ids seen on its spans, by trace (the first per trace).
    pub conversations: HashMap<String, String>,
    /// Model-call spans the mapping could not use.
    pub rejected: u64,
    /// Why the first of them was rejected.
    pub first_rejection: Option<String>,
    /// Calls without token counts that did not fail.
    pub without_usage: u64,
}

impl Parsed {
    /// When its first and last call started; `None` without calls.
    pub(super) fn range(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        Some((
            self.calls.first()?.row.created_at,
            self.calls.last()?.row.created_at,
        ))
    }
}

/// Reads every line of `path` (gunzipped when its name ends in `.gz`) as
/// a `TracesData` and maps its spans. A line that is not one fails the
/// read with the file and line number.
pub(super) fn parse(path: &Path, mapping: &SpanMapping) -> Result<Parsed, SourceError> {
    let file = File::open(path).map_err(|e| file_error(path, &e))?;
    let gzipped = path.extension().is_some_and(|e| e == "gz");
    let reader: Box<dyn Read> = if gzipped {
        Box::new(MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut reader = BufReader::new(reader);
    let mut parsed = Parsed::default();
    let mut seen = HashSet::new();
    let mut line = String::new();
    let mut number = 0u64;
    loop {
        line.clear();
        number += 1;
        match reader.read_line(&mut line) {
            Ok(0) => {
                parsed.calls.sort_by(|a, b| {
                    (a.row.created_at, &a.row.request_id)
                        .cmp(&(b.row.created_at, &b.row.request_id))
                });
                return Ok(parsed);
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::InvalidData => {
                return Err(line_error(path, number, &e.to_string()));
            }
            Err(e) => return Err(file_error(path, &e)),
        }
        if line.trim().is_empty() {
            continue;
        }
        let req = match decode_json_line(&line) {
            Ok(req) => req,
            // The last line, without its newline yet, is being written:
            // the next read finds it whole.
            Err(_) if !line.ends_with('\n') => continue,
            Err(e) => return Err(line_error(path, number, &e.to_string())),
        };
        let mapped = map_spans(
            &req,
            mapping,
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        );
        parsed.rejected += mapped.rejected;
        if parsed.first_rejection.is_none() {
            parsed.first_rejection = mapped.first_rejection;
        }
        parsed.without_usage += mapped.without_usage;
        for (trace, conversation) in mapped.conversations {
            parsed.conversations.entry(trace).or_insert(conversation);
        }
        for call in mapped.calls {
            // An exporter that retried wrote the span again.
            if seen.insert(call.row.request_id.clone()) {
                parsed.calls.push(FileCall {
                    trace: (!call.conversation).then_some(call.trace_id),
                    row: call.row,
                });
            }
        }
    }
}

/// The folder cannot be listed: missing or unreadable is the
/// configuration's to fix; anything else may pass.
fn folder_error(dir: &Path, e: &std::io::Error) -> SourceError {
    let text = format!(
        "cannot list the OTLP files folder {}: {e}",
        printable(&dir.display().to_string())
    );
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::PermissionDenied | ErrorKind::NotADirectory => {
            SourceError::Rejected(text)
        }
        _ => SourceError::Transient(text),
    }
}

/// A file could not be read (removed while rotated, cut off while being
/// written, ...): a later read may succeed.
fn file_error(path: &Path, e: &std::io::Error) -> SourceError {
    SourceError::Transient(format!(
        "cannot read {}: {e}",
        printable(&path.display().to_string())
    ))
}

/// A line that is not OTLP/JSON traces.
fn line_error(path: &Path, number: u64, error: &str) -> SourceError {
    SourceError::Invalid(format!(
        "{}:{number}: {error}",
        printable(&path.display().to_string())
    ))
}
