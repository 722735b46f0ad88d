//! The `source` section.

use super::document::Doc;
use super::fields::{http_url, secret};
use crate::config::SourceConfig;
use crate::config::env::ADMIN_KEY_VAR;
use crate::config::raw::RawSource;
use crate::secret::Secret;
use std::collections::BTreeMap;
use url::Url;

pub(super) fn source_config(
    doc: &mut Doc,
    raw: RawSource,
    env: &BTreeMap<String, String>,
) -> Option<SourceConfig> {
    let api_url = api_url(doc, raw.api_url.as_deref());
    let admin_key = admin_key(doc, raw.admin_key_file.as_deref(), env);
    doc.between_u64("source.page_limit", raw.page_limit.into(), 1, 50);
    doc.at_least_u64("source.max_pages", raw.max_pages, 1);
    doc.positive_duration("source.timeout", raw.timeout.0);
    doc.positive_duration("source.connect_timeout", raw.connect_timeout.0);
    if !doc.is_tainted("source.retry_base") {
        doc.check(
            raw.retry_max.0 >= raw.retry_base.0,
            "source.retry_max",
            || {
                format!(
                    "must be at least retry_base ({}), got {}",
                    humantime::format_duration(raw.retry_base.0),
                    humantime::format_duration(raw.retry_max.0)
                )
            },
        );
    }
    let max_body_bytes = usize::try_from(raw.max_body_bytes).unwrap_or(usize::MAX);
    doc.at_least_u64("source.max_body_bytes", raw.max_body_bytes, 1);
    doc.check(
        raw.labels.keys().all(|k| !k.is_empty()),
        "source.labels",
        || "label names must not be empty".to_owned(),
    );
    Some(SourceConfig {
        api_url: api_url?,
        admin_key,
        page_limit: raw.page_limit,
        max_pages: raw.max_pages,
        timeout: raw.timeout.0,
        connect_timeout: raw.connect_timeout.0,
        max_retries: raw.max_retries,
        retry_base: raw.retry_base.0,
        retry_max: raw.retry_max.0,
        max_body_bytes,
        labels: raw.labels,
    })
}

pub(super) fn api_url(doc: &mut Doc, raw: Option<&str>) -> Option<Url> {
    const PATH: &str = "source.api_url";
    let Some(raw) = raw else {
        doc.check(false, PATH, || {
            "missing; set it in the file or with COSTWATCH_SOURCE__API_URL".to_owned()
        });
        return None;
    };
    http_url(doc, PATH, raw)
}

/// The admin key: `COSTWATCH_ADMIN_KEY` when set and not empty, else the
/// content of `admin_key_file`, else none.
pub(super) fn admin_key(
    doc: &mut Doc,
    file: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Option<Secret> {
    secret(doc, env.get(ADMIN_KEY_VAR), file, "source.admin_key_file")
}
