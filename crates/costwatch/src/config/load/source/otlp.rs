//! The `source` keys only the OpenTelemetry kinds read (`otlp`,
//! `otlp_files`); set for another kind, they are refused rather than
//! silently ignored.

use super::super::document::Doc;
use super::super::fields::secret;
use super::super::folder_of;
use crate::config::OtlpConfig;
use crate::config::env::OTLP_TOKEN_VAR;
use crate::config::raw::RawSource;
use crate::printable::printable;
use crate::source::SourceKind;
use crate::source::otlp::{AttrRef, InputTokens, SessionFallback, SpanMapping};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Where the receiver listens when `source.listen` is not set: OTLP/HTTP's
/// usual port, on loopback.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:4318";
/// Largest request body by default (8 MiB), as sent.
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: u64 = 8 * 1024 * 1024;
/// Requests a second by default.
pub(crate) const DEFAULT_MAX_REQUESTS_PER_SECOND: u32 = 200;
/// How long received calls are kept by default.
pub(crate) const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

pub(super) fn otlp_config(
    doc: &mut Doc,
    kind: SourceKind,
    raw: &mut RawSource,
    env: &BTreeMap<String, String>,
) -> Option<OtlpConfig> {
    refuse_elsewhere(doc, kind, raw);
    let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen = match listen_text.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            doc.check(false, "source.listen", || {
                format!(
                    "must be an ip address and port such as `{DEFAULT_LISTEN}`, got `{}`",
                    printable(listen_text)
                )
            });
            return None;
        }
    };
    let token = secret(
        doc,
        env.get(OTLP_TOKEN_VAR),
        raw.token_file.as_deref(),
        "source.token_file",
    );
    let path = match (kind, raw.path.as_deref()) {
        (SourceKind::OtlpFiles, None) => {
            doc.check(false, "source.path", || {
                "missing; kind otlp_files reads the OTLP/JSON files of this folder".to_owned()
            });
            None
        }
        (_, Some(p)) => {
            let resolved = folder_of(&doc.file).join(p);
            doc.check(resolved.is_dir(), "source.path", || {
                format!("{} is not a folder", resolved.display())
            });
            Some(resolved)
        }
        (_, None) => None,
    };
    let fallback = match raw.session_fallback.as_deref() {
        None => SessionFallback::Trace,
        Some(s) => SessionFallback::parse(s).unwrap_or_else(|e| {
            doc.check(false, "source.session_fallback", || e);
            SessionFallback::Trace
        }),
    };
    let input_tokens = match raw.input_tokens.as_deref() {
        None => InputTokens::Auto,
        Some(s) => InputTokens::parse(s).unwrap_or_else(|e| {
            doc.check(false, "source.input_tokens", || e);
            InputTokens::Auto
        }),
    };
    let max_request_bytes = raw.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES);
    doc.at_least_u64("source.max_request_bytes", max_request_bytes, 1024);
    let max_requests_per_second = raw
        .max_requests_per_second
        .unwrap_or(DEFAULT_MAX_REQUESTS_PER_SECOND);
    doc.at_least_u64(
        "source.max_requests_per_second",
        max_requests_per_second.into(),
        1,
    );
    let retention = raw.retention.map_or(DEFAULT_RETENTION, |d| d.0);
    doc.check(retention <= MAX_RETENTION, "source.retention", || {
        format!(
            "must be at most 3650d, got {}",
            humantime::format_duration(retention)
        )
    });
    let retention = retention.min(MAX_RETENTION);
    Some(OtlpConfig {
        listen,
        token,
        path,
        mapping: SpanMapping {
            fallback,
            labels: BTreeMap::new(),
            resource_labels: raw.resource_labels.unwrap_or(true),
            input_tokens,
        },
        max_request_bytes: usize::try_from(max_request_bytes).unwrap_or(usize::MAX),
        max_requests_per_second,
        retention,
    })
}

/// Longest `source.retention`: ten years.
const MAX_RETENTION: Duration = Duration::from_secs(3650 * 24 * 3600);

/// What the receiver needs of the other sections: a retention that keeps
/// every call a window still reads (a span delayed by an exporter's retry
/// queue is refused once older than it), and a state database the
/// receiver and the detection job share (an in-memory SQLite is one per
/// connection pool: the job would never see what was received).
pub(in crate::config::load) fn check_with_windows_and_state(
    doc: &mut Doc,
    source: &crate::config::SourceConfig,
    windows: &crate::config::WindowConfig,
    state: &crate::config::StateConfig,
) {
    if source.kind != SourceKind::Otlp {
        return;
    }
    let needed = windows.size + windows.settle_lag + source.rows.session_lookback;
    let retention = source.otlp.retention;
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

/// `source.labels` of the OpenTelemetry kinds: label name ->
/// `span.<key>` or `resource.<key>`.
pub(super) fn attribute_labels(
    doc: &mut Doc,
    kind: SourceKind,
    labels: BTreeMap<String, String>,
) -> BTreeMap<String, AttrRef> {
    let mut out = BTreeMap::new();
    if !kind.is_otlp() {
        return out;
    }
    for (name, attr) in labels {
        if !doc.check(!name.is_empty(), "source.labels", || {
            "label names must not be empty".to_owned()
        }) {
            continue;
        }
        match AttrRef::parse(&attr) {
            Ok(a) => {
                out.insert(name, a);
            }
            Err(e) => {
                doc.check(false, &format!("source.labels.{name}"), || e);
            }
        }
    }
    out
}

fn refuse_elsewhere(doc: &mut Doc, kind: SourceKind, raw: &RawSource) {
    let receiver_only = [
        (raw.listen.is_some(), "source.listen"),
        (raw.token_file.is_some(), "source.token_file"),
        (raw.max_request_bytes.is_some(), "source.max_request_bytes"),
        (
            raw.max_requests_per_second.is_some(),
            "source.max_requests_per_second",
        ),
        (raw.retention.is_some(), "source.retention"),
    ];
    let spans_only = [
        (raw.session_fallback.is_some(), "source.session_fallback"),
        (raw.input_tokens.is_some(), "source.input_tokens"),
        (raw.resource_labels.is_some(), "source.resource_labels"),
    ];
    let files_only = [(raw.path.is_some(), "source.path")];
    for (set, path) in receiver_only {
        doc.check(!set || kind == SourceKind::Otlp, path, || {
            format!("only read with kind: otlp (this source is {kind})")
        });
    }
    for (set, path) in spans_only {
        doc.check(!set || kind.is_otlp(), path, || {
            format!("only read with kind: otlp or otlp_files (this source is {kind})")
        });
    }
    for (set, path) in files_only {
        doc.check(!set || kind == SourceKind::OtlpFiles, path, || {
            format!("only read with kind: otlp_files (this source is {kind})")
        });
    }
}
