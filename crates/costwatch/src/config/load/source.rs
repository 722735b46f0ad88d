//! The `source` section.

pub(super) mod otlp;

use super::document::Doc;
use super::fields::{existing_file, http_url, secret};
use crate::config::env::ADMIN_KEY_VAR;
use crate::config::raw::RawSource;
use crate::config::{RowConfig, SourceConfig};
use crate::domain::Labels;
use crate::printable::printable;
use crate::secret::Secret;
use crate::source::SourceKind;
use crate::source::rows::{LabelField, SessionKey};
use std::collections::BTreeMap;
use url::Url;

pub(super) fn source_config(
    doc: &mut Doc,
    mut raw: RawSource,
    env: &BTreeMap<String, String>,
) -> Option<SourceConfig> {
    let kind = SourceKind::parse(&raw.kind);
    doc.check(kind.is_some(), "source.kind", || {
        format!(
            "unknown source kind `{}`; expected one of {}",
            printable(&raw.kind),
            SourceKind::ALL.map(SourceKind::as_str).join(", ")
        )
    });
    let kind = kind.unwrap_or(SourceKind::Reference);
    // For the HTTP kinds, `None` here means a problem was reported.
    let api_url = if kind.is_http_api() {
        api_url(doc, raw.api_url.as_deref()).map(Some)
    } else {
        // The admin key stays: the investigation's MCP tools take it.
        doc.check(raw.api_url.is_none(), "source.api_url", || {
            format!("not read with kind: {kind} (costwatch receives or reads the spans itself)")
        });
        Some(None)
    };
    let admin_key = admin_key(doc, raw.admin_key_file.as_deref(), env);
    let otlp = otlp::otlp_config(doc, kind, &mut raw, env);
    let page_limit = raw.page_limit.unwrap_or(kind.default_page_limit());
    doc.between_u64(
        "source.page_limit",
        page_limit.into(),
        1,
        kind.max_page_limit().into(),
    );
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
    let public_key = public_key(doc, kind, raw.public_key.take());
    let mut labels = std::mem::take(&mut raw.labels);
    // The OpenTelemetry kinds name attributes, not row fields.
    let otlp_labels = if kind.is_otlp() {
        std::mem::take(&mut labels)
    } else {
        BTreeMap::new()
    };
    let (filter, label_map) = filter_and_labels(doc, kind, labels, std::mem::take(&mut raw.filter));
    let rows = row_config(doc, kind, &raw.session_key, label_map, &raw)?;
    let mut otlp = otlp?;
    otlp.mapping.labels = otlp::attribute_labels(doc, kind, otlp_labels);
    Some(SourceConfig {
        kind,
        api_url: api_url?,
        admin_key,
        public_key,
        page_limit,
        max_pages: raw.max_pages,
        timeout: raw.timeout.0,
        connect_timeout: raw.connect_timeout.0,
        max_retries: raw.max_retries,
        retry_base: raw.retry_base.0,
        retry_max: raw.retry_max.0,
        max_body_bytes,
        labels: filter,
        rows,
        otlp,
    })
}

/// Langfuse's public key: required there (it is half of the Basic auth),
/// meaningless elsewhere.
fn public_key(doc: &mut Doc, kind: SourceKind, key: Option<String>) -> Option<String> {
    const PATH: &str = "source.public_key";
    let key = key.filter(|k| !k.trim().is_empty());
    if kind == SourceKind::Langfuse {
        doc.check(key.is_some(), PATH, || {
            "missing; Langfuse needs its public key (pk-lf-...) here or in \
             COSTWATCH_SOURCE__PUBLIC_KEY, and its secret key as the admin key"
                .to_owned()
        });
    } else {
        doc.check(key.is_none(), PATH, || {
            format!("only read with kind: langfuse (this source is {kind})")
        });
    }
    key
}

/// The label filter and, for row sources, the label map. `source.labels`
/// is the filter's old spelling for the reference gateway and the label
/// map for row sources; `source.filter` is the filter everywhere.
fn filter_and_labels(
    doc: &mut Doc,
    kind: SourceKind,
    labels: BTreeMap<String, String>,
    filter: BTreeMap<String, String>,
) -> (Labels, BTreeMap<String, LabelField>) {
    doc.check(
        filter.keys().all(|k| !k.is_empty()),
        "source.filter",
        || "label names must not be empty".to_owned(),
    );
    doc.check(
        labels.keys().all(|k| !k.is_empty()),
        "source.labels",
        || "label names must not be empty".to_owned(),
    );
    if !kind.is_row_source() {
        doc.check(
            labels.is_empty() || filter.is_empty(),
            "source.labels",
            || "set source.filter or source.labels (its old spelling), not both".to_owned(),
        );
        let filter = if filter.is_empty() { labels } else { filter };
        return (filter, BTreeMap::new());
    }
    let mut map = BTreeMap::new();
    for (name, field) in labels {
        match LabelField::parse(&field, kind.label_fields()) {
            Ok(f) => {
                map.insert(name, f);
            }
            Err(e) => {
                doc.check(false, &format!("source.labels.{name}"), || e);
            }
        }
    }
    (filter, map)
}

/// The settings only row sources read; set for another kind, they are
/// refused rather than silently ignored.
fn row_config(
    doc: &mut Doc,
    kind: SourceKind,
    session_key: &Option<String>,
    labels: BTreeMap<String, LabelField>,
    raw: &RawSource,
) -> Option<RowConfig> {
    if !kind.is_row_source() {
        for (set, path) in [
            (session_key.is_some(), "source.session_key"),
            (raw.models_file.is_some(), "source.models_file"),
        ] {
            doc.check(!set, path, || {
                format!(
                    "only read by row sources (litellm, langfuse, otlp, otlp_files); \
                     this source is {kind}"
                )
            });
        }
    }
    if kind.is_otlp() {
        doc.check(session_key.is_none(), "source.session_key", || {
            format!(
                "not read with kind: {kind}; spans are grouped by gen_ai.conversation.id, \
                 then source.session_fallback"
            )
        });
    }
    let key = match session_key.as_deref() {
        None => SessionKey::Session,
        Some(s) => {
            let parsed = SessionKey::parse(s);
            doc.check(parsed.is_some(), "source.session_key", || {
                format!(
                    "`{}` is not a session key: use session_id, user, trace, \
                     metadata.<key> or tag:<prefix>",
                    printable(s)
                )
            });
            parsed.unwrap_or(SessionKey::Session)
        }
    };
    let (models_file, models) = match raw.models_file.as_deref() {
        None => (None, Vec::new()),
        Some(f) => match existing_file(doc, "source.models_file", f) {
            None => (None, Vec::new()),
            Some(path) => match crate::source::prices::load_file(&path) {
                Ok(models) => (Some(path), models),
                Err(e) => {
                    doc.check(false, "source.models_file", || e);
                    (None, Vec::new())
                }
            },
        },
    };
    doc.positive_duration("source.session_lookback", raw.session_lookback.0);
    doc.at_least_u64("source.max_open_sessions", raw.max_open_sessions, 1);
    Some(RowConfig {
        session_key: key,
        labels,
        models_file,
        models,
        session_lookback: raw.session_lookback.0,
        max_open_sessions: usize::try_from(raw.max_open_sessions).unwrap_or(usize::MAX),
        max_kept_rows: usize::try_from(raw.max_kept_rows).unwrap_or(usize::MAX),
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
