//! The `source` section: `source.kind` first, then each part its kind
//! reads, on its own; a key of another kind is refused, naming the kinds
//! that read it. What the parts name is resolved here: the admin key and
//! the receiver's token, the price table, the folder of files, the labels.

use super::document::{Doc, value_at};
use super::fields::{existing_file, secret};
use super::folder_of;
use super::settings;
use crate::config::env::{ADMIN_KEY_VAR, OTLP_TOKEN_VAR};
use crate::config::locate::{Seg, child};
use crate::config::{StateConfig, WindowConfig};
use crate::pricing::table;
use crate::printable::printable;
use crate::settings::Settings;
use crate::source::otlp::{Files, Receiver, SpanMapping};
use crate::source::rows::{LabelField, RowKeys, RowSettings, Rows};
use crate::source::settings::{
    Api, Common, KindConfig, LangfuseKeys, ReferenceLabels, SourceConfig,
};
use crate::source::{HttpLimits, SourceKind};
use serde_json::Value;
use std::collections::BTreeMap;

const SOURCE: &str = "source";

pub(super) fn source_config(doc: &mut Doc, env: &BTreeMap<String, String>) -> Option<SourceConfig> {
    // A file without the section reads as one with nothing in it.
    if let Value::Object(root) = &mut doc.value {
        root.entry(SOURCE)
            .or_insert_with(|| Value::Object(Default::default()));
    }
    let kind = kind(doc)?;
    refuse_other_keys(doc, kind);
    let mut common = part::<Common>(doc);
    let http = part::<HttpLimits>(doc);
    if let Some(c) = common.as_mut() {
        let limit = c.page_limit.unwrap_or(kind.default_page_limit());
        doc.between_u64(
            "source.page_limit",
            limit.into(),
            1,
            kind.max_page_limit().into(),
        );
        c.page_limit = Some(limit);
        c.admin_key = secret(
            doc,
            env.get(ADMIN_KEY_VAR),
            c.admin_key_file.as_ref(),
            "source.admin_key_file",
        );
    }
    let (common, http) = (common?, http?);
    let mut models_file = None;
    let mut rows = |doc: &mut Doc, keys: RowKeys| -> Option<RowSettings> {
        let r = part::<Rows>(doc)?;
        models_file = r.models_file.clone();
        Some(RowSettings {
            session_key: keys.session_key,
            labels: label_fields(doc, kind, keys.labels),
            filter: common.filter.clone(),
            page_limit: common.page_limit.unwrap_or(kind.default_page_limit()),
            max_pages: common.max_pages,
            session_lookback: r.session_lookback,
            max_open_sessions: r.max_open_sessions,
            max_kept_rows: r.max_kept_rows,
        })
    };
    let of_kind = match kind {
        SourceKind::Reference => {
            let (api, labels) = (part::<Api>(doc), part::<ReferenceLabels>(doc));
            let labels = labels?.labels;
            doc.check(
                labels.is_empty() || common.filter.is_empty(),
                "source.labels",
                || "set source.filter or source.labels (its old spelling), not both".to_owned(),
            );
            return Some(SourceConfig {
                common: Common {
                    filter: if labels.is_empty() {
                        common.filter.clone()
                    } else {
                        labels
                    },
                    ..common.clone()
                },
                http,
                of_kind: KindConfig::Reference(api?),
                models: Vec::new(),
            });
        }
        SourceKind::Litellm => {
            let api = part::<Api>(doc);
            let keys = part::<RowKeys>(doc);
            let r = rows(doc, keys?);
            KindConfig::Litellm(api?, r?)
        }
        SourceKind::Langfuse => {
            let api = part::<Api>(doc);
            let pair = part::<LangfuseKeys>(doc);
            let keys = part::<RowKeys>(doc);
            let r = rows(doc, keys?);
            KindConfig::Langfuse(api?, pair?, r?)
        }
        SourceKind::Otlp => {
            let receiver = part::<Receiver>(doc).map(|mut r| {
                r.token = secret(
                    doc,
                    env.get(OTLP_TOKEN_VAR),
                    r.token_file.as_ref(),
                    "source.token_file",
                );
                r
            });
            let mapping = part::<SpanMapping>(doc);
            let r = rows(doc, RowKeys::default());
            KindConfig::Otlp(receiver?, mapping?, r?)
        }
        SourceKind::OtlpFiles => {
            let files = part::<Files>(doc).and_then(|f| {
                let resolved = folder_of(&doc.file).join(&f.path);
                // A glob's root must be a folder, as a folder must.
                let root = crate::source::otlp::files_root(&resolved);
                doc.check(root.is_dir(), "source.path", || {
                    format!("{} is not a folder", root.display())
                })
                .then_some(Files { path: resolved })
            });
            let mapping = part::<SpanMapping>(doc);
            let r = rows(doc, RowKeys::default());
            KindConfig::OtlpFiles(files?, mapping?, r?)
        }
    };
    let models = match models_file {
        None => Vec::new(),
        Some(f) => {
            let path = existing_file(doc, "source.models_file", f)?;
            match table::load_file(&path) {
                Ok(models) => models,
                Err(e) => {
                    doc.check(false, "source.models_file", || e);
                    return None;
                }
            }
        }
    };
    Some(SourceConfig {
        common,
        http,
        of_kind,
        models,
    })
}

/// `source.kind`, reference when left out; `None` (reported) when it names
/// no kind.
fn kind(doc: &mut Doc) -> Option<SourceKind> {
    let written = value_at(&doc.value, &[Seg::Key(SOURCE.to_owned())]).and_then(|s| s.get("kind"));
    let text = match written {
        None => return Some(SourceKind::Reference),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let kind = SourceKind::parse(&text);
    doc.check(kind.is_some(), "source.kind", || {
        format!(
            "unknown source kind `{}`; expected one of {}",
            printable(&text),
            SourceKind::ALL.map(SourceKind::as_str).join(", ")
        )
    });
    kind
}

/// Reports every key of the section `kind` does not read: one another
/// kind reads names those kinds, any other is unknown.
///
/// A key of another kind set to `null` is a key not written, so
/// `COSTWATCH_SOURCE__API_URL=null` beside `COSTWATCH_SOURCE__KIND=otlp`
/// switches a configuration to the receiver.
fn refuse_other_keys(doc: &mut Doc, kind: SourceKind) {
    let own = kind.keys();
    let Some(Value::Object(section)) = doc.value.get_mut(SOURCE) else {
        return;
    };
    let others: Vec<String> = SourceKind::ALL
        .into_iter()
        .flat_map(SourceKind::keys)
        .collect();
    section.retain(|key, value| !value.is_null() || own.contains(key) || !others.contains(key));
    let written: Vec<String> = section.keys().cloned().collect();
    for key in written.iter().filter(|k| !own.contains(k)) {
        let path = child(SOURCE, key);
        let readers: Vec<&str> = SourceKind::ALL
            .into_iter()
            .filter(|k| k.keys().contains(key))
            .map(SourceKind::as_str)
            .collect();
        if readers.is_empty() {
            let expected: Vec<String> = own.iter().map(|k| format!("`{k}`")).collect();
            doc.unknown_key(
                &path,
                format!(
                    "unknown field `{key}`, expected one of {}",
                    expected.join(", ")
                ),
            );
        } else {
            doc.check(false, &path, || {
                format!(
                    "only read with kind: {} (this source is {kind})",
                    either(&readers)
                )
            });
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
fn either(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The part `P` of the section: its keys deserialized, its ranges and
/// problems checked. A key `P` requires and the file leaves out is
/// reported with the variable that can set it.
fn part<P: Settings>(doc: &mut Doc) -> Option<P> {
    let segs = [Seg::Key(SOURCE.to_owned())];
    let keys = crate::settings::declared_keys::<P>();
    let schema = schemars::schema_for!(P).to_value();
    let required = schema.get("required").and_then(Value::as_array);
    let section = value_at(&doc.value, &segs);
    let missing: Vec<String> = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|k| section.is_none_or(|s| s.get(*k).is_none()))
        .map(str::to_owned)
        .collect();
    for key in &missing {
        doc.check(false, &child(SOURCE, key), || {
            format!(
                "missing; set it in the file or with COSTWATCH_SOURCE__{}",
                key.to_uppercase()
            )
        });
    }
    if !missing.is_empty() {
        return None;
    }
    let part = doc.deserialize_keys_at::<P>(&segs, |k| keys.iter().any(|own| own == k), &[])?;
    settings::check(doc, &segs, &part);
    Some(part)
}

/// `source.labels` of LiteLLM and Langfuse: label name -> the row field
/// its value comes from; each one that names no field is reported.
fn label_fields(
    doc: &mut Doc,
    kind: SourceKind,
    labels: BTreeMap<String, String>,
) -> BTreeMap<String, LabelField> {
    let mut out = BTreeMap::new();
    for (name, field) in labels {
        match LabelField::parse(&field, kind.label_fields()) {
            Ok(f) => {
                out.insert(name, f);
            }
            Err(e) => {
                doc.check(false, &format!("source.labels.{name}"), || e);
            }
        }
    }
    out
}

/// What the receiver needs of the other sections: a retention that keeps
/// every call a window still reads (a span delayed by an exporter's retry
/// queue is refused once older than it), and a state database the
/// receiver and the detection job share (an in-memory SQLite is one per
/// connection pool: the job would never see what was received).
pub(super) fn check_with_windows_and_state(
    doc: &mut Doc,
    source: &SourceConfig,
    windows: &WindowConfig,
    state: &StateConfig,
) {
    let KindConfig::Otlp(receiver, _, rows) = &source.of_kind else {
        return;
    };
    let needed = windows.size + windows.settle_lag + rows.session_lookback;
    let retention = receiver.retention;
    doc.check(retention >= needed, "source.retention", || {
        format!(
            "must be at least windows.size + windows.settle_lag + source.session_lookback ({}), \
             got {}",
            humantime::format_duration(needed),
            humantime::format_duration(retention)
        )
    });
    doc.check(!state.url.contains(":memory:"), "state.url", || {
        "kind otlp keeps received calls in the state database: an in-memory one is not \
         shared between the receiver and the detection job; use a file or PostgreSQL"
            .to_owned()
    });
}
