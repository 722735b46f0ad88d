//! The sections of the running service: `group_by`, `state`, `detection`
//! and `server`.

use super::document::Doc;
use super::fields::http_url;
use super::to_usize;
use crate::config::locate::item;
use crate::config::raw::{RawDetection, RawServer, RawState};
use crate::config::{DetectionConfig, ServerConfig, StateConfig};

pub(super) fn check_group_by(doc: &mut Doc, group_by: &[String]) {
    for (i, label) in group_by.iter().enumerate() {
        let path = item("group_by", i);
        if doc.check(!label.is_empty(), &path, || "must not be empty".to_owned()) {
            doc.check(!group_by[..i].contains(label), &path, || {
                format!("duplicate label `{label}`")
            });
        }
    }
}

pub(super) fn state_config(doc: &mut Doc, raw: RawState) -> StateConfig {
    let known = ["sqlite:", "postgres://", "postgresql://"];
    // The URL may hold a password, so the message does not repeat it.
    doc.check(
        known.iter().any(|p| raw.url.starts_with(p)),
        "state.url",
        || "must start with `sqlite:`, `postgres://` or `postgresql://`".to_owned(),
    );
    doc.between_u64("state.max_connections", raw.max_connections, 1, 100);
    doc.positive_duration("state.lease_ttl", raw.lease_ttl.0);
    let folder = doc.file.parent().unwrap_or(std::path::Path::new(""));
    StateConfig {
        url: sqlite_url_from(folder, &raw.url),
        max_connections: to_usize(raw.max_connections).max(1) as u32,
        lease_ttl: raw.lease_ttl.0,
    }
}

pub(super) fn detection_config(doc: &mut Doc, raw: RawDetection) -> DetectionConfig {
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
    raw.into()
}

impl From<RawDetection> for DetectionConfig {
    fn from(raw: RawDetection) -> DetectionConfig {
        DetectionConfig {
            baseline_samples: to_usize(raw.baseline_samples),
            max_candidates: to_usize(raw.max_candidates),
            drilldown_concurrency: to_usize(raw.drilldown_concurrency),
        }
    }
}

impl Default for DetectionConfig {
    /// The defaults of `detection`.
    fn default() -> Self {
        RawDetection::default().into()
    }
}

pub(super) fn server_config(doc: &mut Doc, raw: RawServer) -> Option<ServerConfig> {
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
    let public_url = match raw.public_url.as_deref() {
        None => None,
        Some(raw_url) => {
            let url = http_url(doc, "server.public_url", raw_url)?;
            let plain = url.query().is_none()
                && url.fragment().is_none()
                && url.username().is_empty()
                && url.password().is_none();
            let ok = doc.check(plain, "server.public_url", || {
                "must be a plain http(s) url without credentials, query or fragment, such as `https://costwatch.example.com/`".to_owned()
            }) && doc.check(listen.is_some(), "server.public_url", || {
                "needs server.listen: the charts it links to are served there".to_owned()
            });
            if !ok {
                return None;
            }
            Some(with_trailing_slash(url))
        }
    };
    Some(ServerConfig { listen, public_url })
}

/// `url` with its path ending in `/`, so paths join below it.
fn with_trailing_slash(mut url: url::Url) -> url::Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}

/// A SQLite URL with a relative path made relative to `folder` (the
/// configuration's), like every other path in the configuration, so the
/// state does not depend on the working directory. Other URLs, absolute
/// paths and in-memory databases are returned as they are.
pub(super) fn sqlite_url_from(folder: &std::path::Path, url: &str) -> String {
    let Some(rest) = url.strip_prefix("sqlite:") else {
        return url.to_owned();
    };
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() || path == ":memory:" || path.starts_with('/') {
        return url.to_owned();
    }
    let joined = folder.join(path);
    let absolute = if joined.is_absolute() {
        joined
    } else {
        std::env::current_dir()
            .map(|d| d.join(&joined))
            .unwrap_or(joined)
    };
    match query {
        Some(q) => format!("sqlite://{}?{q}", absolute.display()),
        None => format!("sqlite://{}", absolute.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite_url_from;
    use std::path::Path;

    #[test]
    fn relative_sqlite_paths_follow_the_configuration_folder() {
        let etc = Path::new("/etc/costwatch");
        let cases = [
            (
                "sqlite://costwatch.db",
                "sqlite:///etc/costwatch/costwatch.db",
            ),
            (
                "sqlite:costwatch.db",
                "sqlite:///etc/costwatch/costwatch.db",
            ),
            (
                "sqlite://state/cw.db?mode=rwc",
                "sqlite:///etc/costwatch/state/cw.db?mode=rwc",
            ),
            (
                "sqlite:///var/lib/costwatch/cw.db",
                "sqlite:///var/lib/costwatch/cw.db",
            ),
            ("sqlite::memory:", "sqlite::memory:"),
            ("postgres://cw@db/costwatch", "postgres://cw@db/costwatch"),
        ];
        for (given, want) in cases {
            assert_eq!(sqlite_url_from(etc, given), want, "{given}");
        }
    }
}
