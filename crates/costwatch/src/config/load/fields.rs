//! Checks of single fields shared by several sections: urls, secrets, files.

use super::document::Doc;
use super::{folder_of, io_message};
use crate::secret::Secret;
use std::fs;
use std::path::PathBuf;
use url::Url;

/// `raw` as an http or https URL. Messages never repeat the URL, which may
/// hold a credential (a webhook token in its path, a password before `@`).
pub(super) fn http_url(doc: &mut Doc, path: &str, raw: &str) -> Option<Url> {
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

/// A credential: `from_env` when set and not empty, else the content of
/// `file` (reported at `path` when it cannot be read or is empty), else
/// none. Messages name the file, never its content.
pub(super) fn secret(
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

/// `file` resolved against the configuration's folder, if it is a file.
pub(super) fn existing_file(doc: &mut Doc, path: &str, file: &str) -> Option<PathBuf> {
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
