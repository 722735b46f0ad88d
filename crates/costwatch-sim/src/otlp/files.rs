//! Export requests as the Collector's file exporter writes them with
//! `format: json` and rotation: one OTLP/JSON object per line, the newest
//! file at the configured path (`traces.json`) and each rotated file
//! renamed with the time of its rotation before the extension
//! (`traces-2022-09-14T05-02-14.173.json`, UTC).

use super::spans::end_nanos;
use chrono::{DateTime, Duration, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The exporter's `path` inside the directory.
pub const CURRENT_FILE: &str = "traces.json";

/// How a rotated file's timestamp is written (lumberjack's
/// `2006-01-02T15-04-05.000`).
const BACKUP_TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// The name of the file rotated at `at`.
pub fn rotated_name(at: DateTime<Utc>) -> String {
    format!("traces-{}.json", at.format(BACKUP_TIME_FORMAT))
}

/// Writes `requests` into `dir` (created if missing), one JSON object per
/// line and `lines_per_file` lines (at least one) per file. Every file but
/// the last is named after the moment it was rotated: the latest end of
/// its spans, and always after the file before it. Returns the paths,
/// oldest first; `traces.json` (the last, perhaps empty) is always there.
pub fn write_json_lines(
    dir: &Path,
    requests: &[ExportTraceServiceRequest],
    lines_per_file: usize,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let chunks: Vec<&[ExportTraceServiceRequest]> =
        requests.chunks(lines_per_file.max(1)).collect();
    let mut paths = Vec::with_capacity(chunks.len().max(1));
    let mut last_rotation: Option<DateTime<Utc>> = None;
    for (i, chunk) in chunks.iter().enumerate() {
        let name = if i + 1 == chunks.len() {
            CURRENT_FILE.to_owned()
        } else {
            let at = rotation_time(chunk, last_rotation);
            last_rotation = Some(at);
            rotated_name(at)
        };
        let path = dir.join(name);
        write_lines(&path, chunk)?;
        paths.push(path);
    }
    if chunks.is_empty() {
        let path = dir.join(CURRENT_FILE);
        write_lines(&path, &[])?;
        paths.push(path);
    }
    Ok(paths)
}

/// When a file holding `chunk` was rotated: at the latest end of its
/// spans, and at least a millisecond after the previous rotation.
fn rotation_time(
    chunk: &[ExportTraceServiceRequest],
    previous: Option<DateTime<Utc>>,
) -> DateTime<Utc> {
    let latest = chunk
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .map(end_nanos)
        .max()
        .map_or(DateTime::UNIX_EPOCH, |ns| {
            DateTime::from_timestamp_nanos(ns)
        });
    // The name keeps milliseconds: round up so it is not before the span.
    let latest = ceil_millis(latest);
    match previous {
        Some(p) if latest <= p => p + Duration::milliseconds(1),
        _ => latest,
    }
}

fn ceil_millis(t: DateTime<Utc>) -> DateTime<Utc> {
    let sub = i64::from(t.timestamp_subsec_nanos() % 1_000_000);
    if sub == 0 {
        t
    } else {
        t + Duration::nanoseconds(1_000_000 - sub)
    }
}

fn write_lines(path: &Path, lines: &[ExportTraceServiceRequest]) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    for request in lines {
        serde_json::to_writer(&mut out, request)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
