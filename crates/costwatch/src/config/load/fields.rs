//! What several sections name: secrets and files, resolved against the
//! configuration's folder.

use super::document::Doc;
use super::{folder_of, io_message};
use crate::secret::Secret;
use std::fs;
use std::path::{Path, PathBuf};

/// A credential: `from_env` when set and not empty, else the content of
/// `file` (reported at `path` when it cannot be read or is empty), else
/// none. Messages name the file, never its content.
pub(super) fn secret(
    doc: &mut Doc,
    from_env: Option<&String>,
    file: Option<impl AsRef<Path>>,
    path: &str,
) -> Option<Secret> {
    if let Some(key) = from_env.map(Secret::new).filter(|k| !k.is_empty()) {
        return Some(key);
    }
    let file = file?;
    let file = file.as_ref();
    if !doc.check(!file.as_os_str().is_empty(), path, || {
        "must not be empty".to_owned()
    }) {
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

/// `file` resolved against the configuration's folder, if it is a file.
pub(super) fn existing_file(doc: &mut Doc, path: &str, file: impl AsRef<Path>) -> Option<PathBuf> {
    let file = file.as_ref();
    if !doc.check(!file.as_os_str().is_empty(), path, || {
        "must not be empty".to_owned()
    }) {
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
