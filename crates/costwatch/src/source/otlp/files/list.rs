//! The files a selection names, each with what tells one version of it
//! from another.

use super::select::Selection;
use crate::printable::printable;
use crate::source::SourceError;
use std::io::ErrorKind;
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
pub(super) fn file_error(path: &Path, e: &std::io::Error) -> SourceError {
    SourceError::Transient(format!(
        "cannot read {}: {e}",
        printable(&path.display().to_string())
    ))
}
