//! OTLP/JSON lines files as a row source (`source.kind: otlp_files`): the
//! OpenTelemetry Collector's file exporter writes one `TracesData` object
//! per line, into files it rotates (and may gzip), lines not in time order
//! and a span again when an exporter retried.
//!
//! Every regular file of the folder whose name ends in `.json` or `.jsonl`
//! (also `.json.gz`, `.jsonl.gz`) is read, or every file a glob names
//! (`select.rs`). The first read scans each file
//! once and remembers when its first and last call started, so a window
//! reads only the files that can hold its calls; the parsed calls of the
//! files read last are kept (up to [`DEFAULT_MAX_CACHED_CALLS`]) so that
//! consecutive windows do not parse a file again. A file is scanned again
//! when its size or modification time changes; the listing is read on
//! every call, so new and rotated files are seen at once.
//!
//! A line that is not OTLP/JSON traces fails the read with the file and
//! line number (`SourceError::Invalid`: the window stays due, and a line
//! being written is whole by the next try). Model-call spans the mapping
//! rejects are skipped, counted and logged once per scanned file.

mod cache;
mod scan;
mod select;

use self::cache::Cache;
use self::scan::{FileCall, Parsed, Stamp};
use self::select::Selection;
use super::settings::SpanMapping;
use crate::printable::printable;
use crate::source::rows::{CallRow, RowReader};
use crate::source::{ModelPrice, ReadStats, SourceError};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Most parsed calls kept between reads unless set otherwise (about a
/// few hundred megabytes at most).
pub const DEFAULT_MAX_CACHED_CALLS: usize = 1_000_000;

/// The folder `path` lists: itself, or a glob's root.
pub fn files_root(path: &Path) -> PathBuf {
    Selection::of(path).root
}

/// Reads model calls from a folder of OTLP/JSON lines files, or the files
/// a glob names.
#[derive(Clone)]
pub struct OtlpFilesReader {
    files: Arc<Selection>,
    mapping: Arc<SpanMapping>,
    index: Arc<Mutex<Index>>,
    /// A temporary folder the reader owns, removed when the last clone goes.
    _owned: Option<Arc<tempfile::TempDir>>,
}

impl std::fmt::Debug for OtlpFilesReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpFilesReader")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl OtlpFilesReader {
    /// A reader of the files `path` names (a folder, or a glob: see
    /// `select.rs`), spans mapped as `mapping` says.
    pub fn new(path: PathBuf, mapping: SpanMapping) -> Self {
        OtlpFilesReader {
            files: Arc::new(Selection::of(&path)),
            mapping: Arc::new(mapping),
            index: Arc::new(Mutex::new(Index::new(DEFAULT_MAX_CACHED_CALLS))),
            _owned: None,
        }
    }

    /// Takes `dir` (the reader's folder) over: it is removed when the
    /// reader and its clones are gone.
    pub fn owning(mut self, dir: tempfile::TempDir) -> Self {
        self._owned = Some(Arc::new(dir));
        self
    }

    /// Keeps at most `max` parsed calls between reads instead of
    /// [`DEFAULT_MAX_CACHED_CALLS`].
    pub fn with_max_cached_calls(self, max: usize) -> Self {
        *self.index.lock().unwrap_or_else(PoisonError::into_inner) = Index::new(max);
        self
    }

    /// The calls that started in `[start, end)`, each span once, in
    /// start order; and how many files were read. Blocks on the files.
    fn read(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<(Vec<CallRow>, u64), SourceError> {
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        index.refresh(&self.files, &self.mapping)?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut files = 0;
        for (path, stamp) in index.overlapping(start, end) {
            files += 1;
            let calls = index.calls(&path, stamp, &self.mapping)?;
            // Each file's calls are in start order.
            let from = calls.partition_point(|c| c.row.created_at < start);
            let to = calls.partition_point(|c| c.row.created_at < end);
            for c in calls.get(from..to).unwrap_or_default() {
                if seen.insert(c.row.request_id.clone()) {
                    out.push(index.with_conversation(c));
                }
            }
        }
        out.sort_by(|a, b| (a.created_at, &a.request_id).cmp(&(b.created_at, &b.request_id)));
        Ok((out, files))
    }
}

impl RowReader for OtlpFilesReader {
    fn name(&self) -> &'static str {
        "OTLP files"
    }

    /// None: calls are priced from the price table.
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        Ok(Vec::new())
    }

    async fn calls<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        mut sink: F,
    ) -> Result<ReadStats, SourceError>
    where
        F: FnMut(CallRow) -> Result<(), SourceError> + Send,
    {
        if start >= end {
            return Ok(ReadStats::default());
        }
        let reader = self.clone();
        let (calls, files) = tokio::task::spawn_blocking(move || reader.read(start, end))
            .await
            .map_err(|e| {
                SourceError::Transient(format!("reading the OTLP files stopped: {e}"))
            })??;
        let stats = ReadStats {
            pages: files,
            rows: calls.len() as u64,
            ..ReadStats::default()
        };
        for call in calls {
            sink(call)?;
        }
        Ok(stats)
    }
}

/// What a first scan learnt about one version of a file.
#[derive(Debug, Clone)]
struct Known {
    stamp: Stamp,
    /// When its first and last call started; `None` without calls.
    range: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Model-call spans it skipped.
    rejected: u64,
    /// Calls without token counts.
    without_usage: u64,
    /// Conversation ids seen on its spans, by trace.
    conversations: Arc<HashMap<String, String>>,
}

/// The folder's files as last scanned, and the calls of those read last.
struct Index {
    files: BTreeMap<PathBuf, Known>,
    cache: Cache,
    /// Every file's conversation ids by trace (the first file's, in name
    /// order, when two disagree), merged when the listing changes.
    conversations: HashMap<String, String>,
}

impl Index {
    fn new(max_cached_calls: usize) -> Index {
        Index {
            files: BTreeMap::new(),
            cache: Cache::new(max_cached_calls),
            conversations: HashMap::new(),
        }
    }

    /// Lists the folder again: forgets files that are gone, scans those
    /// that are new or changed.
    fn refresh(&mut self, files: &Selection, mapping: &SpanMapping) -> Result<(), SourceError> {
        let listing = scan::list(files)?;
        let present: HashSet<&PathBuf> = listing.iter().map(|(p, _)| p).collect();
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        let mut changed = !gone.is_empty();
        for path in gone {
            self.files.remove(&path);
            self.cache.remove(&path);
        }
        for (path, stamp) in &listing {
            if self.files.get(path).is_some_and(|k| k.stamp == *stamp) {
                continue;
            }
            changed = true;
            let mut parsed = scan::parse(path, mapping)?;
            // A file being appended to is scanned again and again: only
            // what is new is worth a warning.
            let before = self.files.get(path);
            let known = Known {
                stamp: *stamp,
                range: parsed.range(),
                rejected: parsed.rejected,
                without_usage: parsed.without_usage,
                conversations: Arc::new(std::mem::take(&mut parsed.conversations)),
            };
            warn_skipped(path, &parsed, before);
            self.cache.put(path, *stamp, Arc::new(parsed.calls));
            self.files.insert(path.clone(), known);
        }
        if changed {
            self.conversations.clear();
            for known in self.files.values() {
                for (trace, id) in known.conversations.iter() {
                    self.conversations
                        .entry(trace.clone())
                        .or_insert_with(|| id.clone());
                }
            }
        }
        Ok(())
    }

    /// A file's call with its session: the span's own, else a
    /// conversation id seen on another span of its trace in any file of
    /// the folder, else the fallback's.
    fn with_conversation(&self, c: &FileCall) -> CallRow {
        let mut row = c.row.clone();
        if let Some(trace) = &c.trace
            && let Some(id) = self.conversations.get(trace)
        {
            row.session_id = Some(id.clone());
        }
        row
    }

    /// The files that may hold a call started in `[start, end)`.
    fn overlapping(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> Vec<(PathBuf, Stamp)> {
        self.files
            .iter()
            .filter(|(_, k)| {
                k.range
                    .is_some_and(|(first, last)| first < end && last >= start)
            })
            .map(|(p, k)| (p.clone(), k.stamp))
            .collect()
    }

    /// The calls of one file: held, else parsed again and held.
    fn calls(
        &mut self,
        path: &Path,
        stamp: Stamp,
        mapping: &SpanMapping,
    ) -> Result<Arc<Vec<FileCall>>, SourceError> {
        if let Some(calls) = self.cache.get(path, stamp) {
            return Ok(calls);
        }
        let calls = Arc::new(scan::parse(path, mapping)?.calls);
        self.cache.put(path, stamp, calls.clone());
        Ok(calls)
    }
}

/// Logs the spans a scanned file skipped and the calls without token
/// counts, when there are more than its last scan found.
fn warn_skipped(path: &Path, parsed: &Parsed, before: Option<&Known>) {
    let (rejected, without_usage) = before.map_or((0, 0), |k| (k.rejected, k.without_usage));
    if parsed.rejected > rejected {
        tracing::warn!(
            file = %printable(&path.display().to_string()),
            rejected = parsed.rejected,
            first_reason = %printable(parsed.first_rejection.as_deref().unwrap_or_default()),
            "model-call spans in an OTLP file could not be used and are skipped"
        );
    }
    if parsed.without_usage > without_usage {
        tracing::warn!(
            file = %printable(&path.display().to_string()),
            calls = parsed.without_usage,
            "model calls in an OTLP file carry no token counts and are counted as 0 tokens"
        );
    }
}
