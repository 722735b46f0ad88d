//! The `state` section: where state lives.

use crate::settings::{Issue, Settings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where state lives.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<StateConfig>)]
pub struct StateConfig {
    /// `sqlite://path` or `postgres://...`; a relative SQLite path is read
    /// from the configuration file's folder.
    pub url: String,
    /// Largest number of open database connections.
    #[schemars(range(min = 1, max = 100))]
    pub max_connections: u32,
    /// How long a replica holds the detection job without renewing it; when
    /// the holder dies, another replica takes over after this long.
    #[serde(with = "crate::settings::units::positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub lease_ttl: Duration,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            url: "sqlite://costwatch.db".to_owned(),
            max_connections: 4,
            lease_ttl: Duration::from_secs(60),
        }
    }
}

impl Settings for StateConfig {
    fn problems(&self) -> Vec<Issue> {
        let known = ["sqlite:", "postgres://", "postgresql://"];
        // The URL may hold a password, so the message does not repeat it.
        Issue::when(
            !known.iter().any(|p| self.url.starts_with(p)),
            "url",
            || "must start with `sqlite:`, `postgres://` or `postgresql://`".to_owned(),
        )
        .into_iter()
        .collect()
    }
}

/// A SQLite URL with a relative path made relative to `folder` (the
/// configuration's), like every other path in the configuration, so the
/// state does not depend on the working directory. Other URLs, absolute
/// paths and in-memory databases are returned as they are.
pub fn sqlite_url_from(folder: &std::path::Path, url: &str) -> String {
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
