use super::*;
use crate::source::SourceError;
use crate::source::otlp::{OtlpFilesReader, SpanMapping};
use crate::source::rows::{CallRow, RowReader};
use chrono::{DateTime, TimeDelta, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use std::path::Path;

/// One file exporter line: the request as OTLP/JSON.
fn line(spans: Vec<Span>) -> String {
    serde_json::to_string(&request(vec![text("service.name", "chat-api")], spans)).unwrap()
}

fn write(dir: &Path, name: &str, lines: &[String]) {
    std::fs::write(dir.join(name), lines.join("\n") + "\n").unwrap();
}

/// `at` seconds after [`T0`].
fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(T0 as i64) + TimeDelta::seconds(secs)
}

async fn read(reader: &OtlpFilesReader, from: i64, to: i64) -> Result<Vec<CallRow>, SourceError> {
    let mut rows = Vec::new();
    reader
        .calls(at(from), at(to), |row| {
            rows.push(row);
            Ok(())
        })
        .await?;
    Ok(rows)
}

/// The span ids' last bytes, in the order read.
fn ids(rows: &[CallRow]) -> Vec<String> {
    rows.iter().map(|r| r.request_id[14..].to_owned()).collect()
}

#[tokio::test]
async fn rotated_files_give_every_call_once_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    // The current file: batches out of time order.
    write(
        dir.path(),
        "traces.jsonl",
        &[
            line(vec![
                chat(1, 0x30, 30, "m", 1, 1),
                chat(1, 0x10, 10, "m", 1, 1),
            ]),
            line(vec![chat(2, 0x20, 20, "m", 1, 1)]),
        ],
    );
    // The rotated one holds a span the exporter sent again.
    write(
        dir.path(),
        "traces-2024-05-01T12-00-00.000.json",
        &[
            line(vec![
                chat(2, 0x20, 20, "m", 1, 1),
                chat(1, 0x40, 40, "m", 1, 1),
            ]),
            line(vec![
                chat(3, 0x05, 5, "m", 1, 1),
                chat(3, 0x05, 5, "m", 1, 1),
            ]),
        ],
    );
    // Neither is read.
    write(dir.path(), "notes.txt", &["not json".to_owned()]);
    std::fs::create_dir(dir.path().join("old.jsonl")).unwrap();
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(reader.name(), "OTLP files");
    assert!(reader.models().await.unwrap().is_empty());

    let rows = read(&reader, 0, 100).await.unwrap();
    assert_eq!(ids(&rows), ["05", "10", "20", "30", "40"]);
    assert_eq!(rows[2].session_id.as_deref(), Some(trace_hex(2).as_str()));
    assert_eq!(
        rows[0].labels.get("service.name").map(String::as_str),
        Some("chat-api")
    );
    // The range is [start, end), read again from what was kept.
    assert_eq!(ids(&read(&reader, 10, 30).await.unwrap()), ["10", "20"]);
    assert_eq!(
        ids(&read(&reader, 41, 100).await.unwrap()),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_range_that_touches_one_file_reads_only_that_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.jsonl",
        &[line(vec![
            chat(1, 1, 0, "m", 1, 1),
            chat(1, 2, 10, "m", 1, 1),
        ])],
    );
    write(
        dir.path(),
        "b.jsonl",
        &[line(vec![
            chat(2, 3, 100, "m", 1, 1),
            chat(2, 4, 110, "m", 1, 1),
        ])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    let mut rows = Vec::new();
    let stats = reader
        .calls(at(100), at(200), |row| {
            rows.push(row);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(ids(&rows), ["03", "04"]);
    assert_eq!((stats.pages, stats.rows), (1, 2));
    // A range between the files reads none.
    let stats = reader.calls(at(11), at(100), |_| Ok(())).await.unwrap();
    assert_eq!((stats.pages, stats.rows), (0, 0));
    let stats = reader.calls(at(10), at(101), |_| Ok(())).await.unwrap();
    assert_eq!((stats.pages, stats.rows), (2, 2));
}

#[tokio::test]
async fn a_malformed_line_fails_the_read_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "good.jsonl",
        &[line(vec![chat(1, 1, 0, "m", 1, 1)])],
    );
    write(
        dir.path(),
        "bad.jsonl",
        &[
            line(vec![chat(1, 2, 0, "m", 1, 1)]),
            String::new(),
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"zz"}]}]}]}"#.to_owned(),
        ],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    let err = read(&reader, 0, 100).await.unwrap_err();
    let SourceError::Invalid(msg) = &err else {
        panic!("{err:?}");
    };
    assert!(msg.contains("bad.jsonl:3: not OTLP/JSON traces: "), "{msg}");
    assert!(err.is_retryable());
    // Once the line is whole, the read succeeds.
    write(
        dir.path(),
        "bad.jsonl",
        &[line(vec![chat(1, 2, 0, "m", 1, 1)])],
    );
    assert_eq!(ids(&read(&reader, 0, 100).await.unwrap()), ["01", "02"]);
}

#[tokio::test]
async fn gzipped_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    for l in [
        line(vec![chat(1, 2, 20, "m", 1, 1)]),
        line(vec![chat(1, 1, 10, "m", 1, 1)]),
    ] {
        writeln!(gz, "{l}").unwrap();
    }
    std::fs::write(dir.path().join("traces-1.jsonl.gz"), gz.finish().unwrap()).unwrap();
    write(
        dir.path(),
        "traces.json",
        &[line(vec![chat(1, 3, 30, "m", 1, 1)])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(
        ids(&read(&reader, 0, 100).await.unwrap()),
        ["01", "02", "03"]
    );
}

#[tokio::test]
async fn new_changed_and_removed_files_are_seen_at_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "traces.jsonl",
        &[line(vec![chat(1, 1, 10, "m", 1, 1)])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(ids(&read(&reader, 0, 100).await.unwrap()), ["01"]);
    // The exporter appends; then rotates into a new file.
    write(
        dir.path(),
        "traces.jsonl",
        &[
            line(vec![chat(1, 1, 10, "m", 1, 1)]),
            line(vec![chat(1, 2, 50, "m", 1, 1)]),
        ],
    );
    assert_eq!(ids(&read(&reader, 0, 100).await.unwrap()), ["01", "02"]);
    std::fs::rename(
        dir.path().join("traces.jsonl"),
        dir.path().join("traces-1.jsonl"),
    )
    .unwrap();
    write(
        dir.path(),
        "traces.jsonl",
        &[line(vec![chat(1, 3, 60, "m", 1, 1)])],
    );
    assert_eq!(
        ids(&read(&reader, 0, 100).await.unwrap()),
        ["01", "02", "03"]
    );
    std::fs::remove_file(dir.path().join("traces-1.jsonl")).unwrap();
    assert_eq!(ids(&read(&reader, 0, 100).await.unwrap()), ["03"]);
}

#[tokio::test]
async fn a_small_cache_still_reads_every_window_whole() {
    let dir = tempfile::tempdir().unwrap();
    for f in 0u8..4 {
        let spans = (0u8..5)
            .map(|i| {
                chat(
                    f,
                    f * 10 + i,
                    u64::from(f) * 100 + u64::from(i) * 10,
                    "m",
                    1,
                    1,
                )
            })
            .collect();
        write(dir.path(), &format!("t{f}.jsonl"), &[line(spans)]);
    }
    // Room for one file's calls at a time, or none.
    for max in [5, 0] {
        let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default())
            .with_max_cached_calls(max);
        for round in 0..2 {
            let mut all = Vec::new();
            for w in 0..8 {
                all.extend(ids(&read(&reader, w * 50, w * 50 + 50).await.unwrap()));
            }
            let want: Vec<String> = (0u8..4)
                .flat_map(|f| (0u8..5).map(move |i| format!("{:02x}", f * 10 + i)))
                .collect();
            assert_eq!(all, want, "max {max}, round {round}");
        }
    }
}

#[tokio::test]
async fn rejected_and_other_spans_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let no_model = span(1, 2, 5, vec![text("gen_ai.operation.name", "chat")]);
    let tool = span(1, 3, 6, vec![text("gen_ai.operation.name", "execute_tool")]);
    write(
        dir.path(),
        "traces.jsonl",
        &[line(vec![
            chat(1, 1, 4, "m", 1, 1),
            no_model,
            tool,
            chat(1, 4, 7, "m", 1, 1),
        ])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(ids(&read(&reader, 0, 100).await.unwrap()), ["01", "04"]);
}

#[tokio::test]
async fn the_sink_stops_the_read() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "traces.jsonl",
        &[line(vec![
            chat(1, 1, 1, "m", 1, 1),
            chat(1, 2, 2, "m", 1, 1),
        ])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    let mut seen = 0;
    let err = reader
        .calls(at(0), at(100), |_| {
            seen += 1;
            Err(SourceError::Invalid("too many open sessions".into()))
        })
        .await
        .unwrap_err();
    assert_eq!(
        (seen, err.to_string()),
        (
            1,
            "gateway sent an invalid page: too many open sessions".to_owned()
        )
    );
}

#[tokio::test]
async fn a_missing_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reader = OtlpFilesReader::new(dir.path().join("nope"), SpanMapping::default());
    let err = read(&reader, 0, 100).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Rejected(m) if m.contains("cannot list the OTLP files folder")),
        "{err:?}"
    );
}

/// What the official OpenAI instrumentation really wrote
/// (`tests/fixtures/otlp/openai-v2.jsonl`, made by `tests/peers/otel_agent.py`).
#[tokio::test]
async fn the_official_openai_instrumentations_spans_read_as_the_scenario_made_them() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/otlp/openai-v2.jsonl");
    std::fs::copy(&fixture, dir.path().join("traces.json")).unwrap();
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    let mut rows = Vec::new();
    reader
        .calls(DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC, |row| {
            rows.push(row);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 8, "8 chat calls; the agent spans are not calls");
    let per_session = |id: &str| {
        rows.iter()
            .filter(|r| r.session_id.as_deref() == Some(id))
            .count()
    };
    // s1 and s3 ran inside invoke_agent spans carrying their conversation
    // id; s2 inside a plain span, so its trace names it.
    assert_eq!((per_session("s1"), per_session("s3")), (3, 3));
    let s2: Vec<&CallRow> = rows
        .iter()
        .filter(|r| !matches!(r.session_id.as_deref(), Some("s1" | "s3")))
        .collect();
    assert_eq!(s2.len(), 2);
    assert_eq!(
        s2[0].session_id.as_deref().map(str::len),
        Some(32),
        "a trace id"
    );
    let mut failed: Vec<(Option<u16>, Option<&str>)> = rows
        .iter()
        .filter(|r| r.status == crate::source::RequestStatus::Error)
        .map(|r| (r.http_status, r.error_type.as_deref()))
        .collect();
    failed.sort();
    assert_eq!(
        failed,
        [
            (Some(429), Some("openai.RateLimitError")),
            (Some(500), Some("openai.InternalServerError"))
        ]
    );
    assert!(
        rows.iter()
            .all(|r| !r.cache_reported && r.cached_tokens == 0),
        "2.4b0 writes no cache count on chat spans, even for the calls that read 3968 tokens"
    );
    assert!(rows.iter().all(|r| r.labels.contains_key("service.name")));
}

#[tokio::test]
async fn a_last_line_still_being_written_is_left_for_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let whole = line(vec![chat(1, 1, 10, "gpt-4o", 100, 10)]);
    let half = &line(vec![chat(1, 2, 20, "gpt-4o", 100, 10)])[..40];
    std::fs::write(dir.path().join("traces.json"), format!("{whole}\n{half}")).unwrap();
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(ids(&read(&reader, 0, 60).await.unwrap()), ["01"]);
    // The same half line ended by a newline is damage, not a write in progress.
    std::fs::write(dir.path().join("traces.json"), format!("{whole}\n{half}\n")).unwrap();
    let err = read(&reader, 0, 60).await.unwrap_err().to_string();
    assert!(err.contains("traces.json:2"), "{err}");
}

#[tokio::test]
async fn a_glob_reads_the_files_it_names_and_leaves_the_folder_s_others() {
    let dir = tempfile::tempdir().unwrap();
    // The Collector's traces, rotated, one of them gzipped.
    write(
        dir.path(),
        "traces-1.json",
        &[line(vec![chat(1, 0x10, 10, "m", 1, 1)])],
    );
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all((line(vec![chat(2, 0x20, 20, "m", 1, 1)]) + "\n").as_bytes())
        .unwrap();
    std::fs::write(dir.path().join("traces-2.json.gz"), gz.finish().unwrap()).unwrap();
    // Another exporter's file in the same folder, valid OTLP/JSON too: a
    // folder would read it, the glob does not.
    write(
        dir.path(),
        "metrics-1.json",
        &[line(vec![chat(3, 0x30, 30, "m", 1, 1)])],
    );
    // Days in folders, read with `**`.
    std::fs::create_dir_all(dir.path().join("archive/2026-12-04")).unwrap();
    write(
        &dir.path().join("archive/2026-12-04"),
        "traces-0.json",
        &[line(vec![chat(4, 0x05, 5, "m", 1, 1)])],
    );

    let glob = OtlpFilesReader::new(dir.path().join("traces-*.json*"), SpanMapping::default());
    assert_eq!(ids(&read(&glob, 0, 100).await.unwrap()), ["10", "20"]);

    let deep = OtlpFilesReader::new(dir.path().join("**/traces-*"), SpanMapping::default());
    assert_eq!(ids(&read(&deep, 0, 100).await.unwrap()), ["05", "10", "20"]);

    let folder = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(
        ids(&read(&folder, 0, 100).await.unwrap()),
        ["10", "20", "30"]
    );
}

/// Writes garbage over `name`, keeping its size and modification time:
/// a reader that trusts what it learnt of the file does not see the
/// change, one that parses the file again fails.
fn damage_keeping_stamp(dir: &Path, name: &str) {
    let path = dir.join(name);
    let meta = std::fs::metadata(&path).unwrap();
    let garbage = "x".repeat(meta.len() as usize - 1) + "\n";
    std::fs::write(&path, garbage).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(meta.modified().unwrap()).unwrap();
}

#[tokio::test]
async fn a_window_far_from_a_file_s_calls_does_not_parse_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.jsonl",
        &[line(vec![
            chat(1, 1, 0, "m", 1, 1),
            chat(1, 2, 10, "m", 1, 1),
        ])],
    );
    write(
        dir.path(),
        "b.jsonl",
        &[line(vec![chat(2, 3, 1000, "m", 1, 1)])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(ids(&read(&reader, 1000, 1100).await.unwrap()), ["03"]);
    damage_keeping_stamp(dir.path(), "a.jsonl");
    // Windows after a.jsonl's calls, and between its calls and b.jsonl's,
    // leave it alone.
    assert_eq!(ids(&read(&reader, 1000, 1100).await.unwrap()), ["03"]);
    assert_eq!(
        ids(&read(&reader, 11, 1000).await.unwrap()),
        Vec::<String>::new()
    );
    // A window over its calls parses it, and finds the damage.
    let err = read(&reader, 0, 20).await.unwrap_err().to_string();
    assert!(err.contains("a.jsonl:1"), "{err}");
}

#[tokio::test]
async fn the_calls_kept_are_dropped_once_a_read_starts_after_them() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.jsonl",
        &[line(vec![
            chat(1, 1, 0, "m", 1, 1),
            chat(1, 2, 10, "m", 1, 1),
        ])],
    );
    write(
        dir.path(),
        "b.jsonl",
        &[line(vec![chat(2, 3, 1000, "m", 1, 1)])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(ids(&read(&reader, 0, 20).await.unwrap()), ["01", "02"]);
    damage_keeping_stamp(dir.path(), "a.jsonl");
    // Kept: the same window again, or one that starts within its calls,
    // is served without parsing the file again.
    assert_eq!(ids(&read(&reader, 0, 20).await.unwrap()), ["01", "02"]);
    assert_eq!(ids(&read(&reader, 10, 1100).await.unwrap()), ["02", "03"]);
    // A read that starts after them drops them: reading them again parses
    // the file.
    assert_eq!(ids(&read(&reader, 11, 1100).await.unwrap()), ["03"]);
    let err = read(&reader, 0, 20).await.unwrap_err().to_string();
    assert!(err.contains("a.jsonl:1"), "{err}");
}

#[tokio::test]
async fn a_file_without_calls_still_names_the_conversation_of_another_file_s_calls() {
    let dir = tempfile::tempdir().unwrap();
    // The agent span naming the conversation, alone in the first file in
    // name order: it holds no call, so no window's range covers it.
    let agent = span(
        7,
        0x70,
        5,
        vec![
            text("gen_ai.operation.name", "invoke_agent"),
            text("gen_ai.conversation.id", "conv-7"),
        ],
    );
    write(dir.path(), "a.jsonl", &[line(vec![agent])]);
    // The calls of its trace, without a conversation id, far later.
    write(
        dir.path(),
        "b.jsonl",
        &[line(vec![
            chat(7, 0x71, 5000, "m", 1, 1),
            chat(8, 0x81, 5001, "m", 1, 1),
        ])],
    );
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    let rows = read(&reader, 4000, 6000).await.unwrap();
    assert_eq!(ids(&rows), ["71", "81"]);
    assert_eq!(rows[0].session_id.as_deref(), Some("conv-7"));
    assert_eq!(
        rows[1].session_id.as_deref(),
        Some(trace_hex(8).as_str()),
        "a trace no span names keeps the fallback"
    );
}

/// The first scan reads only span ids, start times and traces: a span
/// whose other fields are broken fails only the windows that decode it.
#[tokio::test]
async fn a_span_broken_past_its_start_time_fails_only_the_windows_over_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.jsonl",
        &[line(vec![chat(1, 1, 0, "m", 1, 1)])],
    );
    let mut broken: serde_json::Value =
        serde_json::from_str(&line(vec![chat(2, 3, 1000, "m", 1, 1)])).unwrap();
    broken["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["endTimeUnixNano"] = "soon".into();
    write(dir.path(), "b.jsonl", &[broken.to_string()]);
    let reader = OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default());
    assert_eq!(ids(&read(&reader, 0, 20).await.unwrap()), ["01"]);
    let err = read(&reader, 900, 1100).await.unwrap_err().to_string();
    assert!(err.contains("b.jsonl:1: not OTLP/JSON traces"), "{err}");
}
