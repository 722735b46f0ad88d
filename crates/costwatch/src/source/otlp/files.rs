//! OTLP/JSON lines files as a row source (`source.kind: otlp_files`): the
//! OpenTelemetry Collector's file exporter writes one `TracesData` object
//! per line, into files it rotates (and may gzip), lines not in time order
//! and a span again when an exporter retried.
//!
//! Every regular file of the folder whose name ends in `.json` or `.jsonl`
//! (also `.json.gz`, `.jsonl.gz`) is read, or every file a glob names
//! (`select.rs`). The first read scans each file
//! once, line by line, reading only span ids, start times and traces
//! (`skim.rs`), and remembers for each block of about a megabyte of lines
//! where it lies and when its first and last span started (`blocks.rs`),
//! so a window fully decodes only the blocks that can hold its calls, and
//! nothing of the folder is held but these few numbers per block. The parsed calls of the blocks read last are kept until a read
//! starts after them (up to [`DEFAULT_MAX_CACHED_CALLS`]), so consecutive
//! windows do not parse a block again: memory follows the window and its
//! lookback, not the folder. A file is scanned again when its size or
//! modification time changes; the listing is read on every call, so new
//! and rotated files are seen at once.
//!
//! A line that is not OTLP/JSON traces fails the read with the file and
//! line number (`SourceError::Invalid`: the window stays due, and a line
//! being written is whole by the next try); the scan catches what is not
//! JSON, the decoding of a block what the spans' own fields get wrong.
//! Model-call spans the mapping rejects are skipped, counted and logged
//! once per file, when the first block holding some is decoded.

mod blocks;
mod cache;
mod lines;
mod list;
mod select;
mod skim;

use self::blocks::{BlockCalls, FileCall, Scanned};
use self::cache::Cache;
use self::list::Stamp;
use self::select::Selection;
use self::skim::trace_hash;
use super::settings::SpanMapping;
use crate::printable::printable;
use crate::source::rows::{CallRow, RowReader};
use crate::source::{ModelPrice, ReadStats, SourceError};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Most parsed calls kept between reads unless set otherwise (about a
/// few hundred megabytes at most); blocks before the latest read's start
/// are dropped well before.
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
        index.read(&self.files, &self.mapping, start, end)
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
    scanned: Arc<Scanned>,
}

/// The folder's files as last scanned, and the calls of the blocks read
/// last.
struct Index {
    files: BTreeMap<PathBuf, Known>,
    cache: Cache,
    /// Where each trace's conversation id is first named, built when a
    /// call needs one and forgotten when the listing changes.
    traces: Option<Traces>,
    /// The files whose skipped spans, and whose calls without token
    /// counts, were logged: once per file while it is listed.
    warned: HashMap<PathBuf, Warned>,
}

/// What was logged of a file's blocks.
#[derive(Debug, Default, Clone, Copy)]
struct Warned {
    rejected: bool,
    without_usage: bool,
}

/// The first block, in name order then line order, naming a conversation
/// for each trace hash.
struct Traces {
    /// The files, in name order.
    files: Vec<PathBuf>,
    /// By trace hash: the file's place in `files`, and the block.
    first: HashMap<u64, (usize, usize)>,
}

impl Traces {
    fn of(files: &BTreeMap<PathBuf, Known>) -> Traces {
        let mut first = HashMap::new();
        for (f, known) in files.values().enumerate() {
            for (b, block) in known.scanned.blocks.iter().enumerate() {
                for h in &block.conversations {
                    first.entry(*h).or_insert((f, b));
                }
            }
        }
        Traces {
            files: files.keys().cloned().collect(),
            first,
        }
    }
}

impl Index {
    fn new(max_cached_calls: usize) -> Index {
        Index {
            files: BTreeMap::new(),
            cache: Cache::new(max_cached_calls),
            traces: None,
            warned: HashMap::new(),
        }
    }

    /// The calls that started in `[start, end)`, each span once, in start
    /// order; and how many files were read.
    fn read(
        &mut self,
        files: &Selection,
        mapping: &SpanMapping,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<(Vec<CallRow>, u64), SourceError> {
        // Windows move forward: what ended before this read is not needed.
        self.cache.drop_before(start);
        self.refresh(files)?;
        let wanted: Vec<(PathBuf, Vec<usize>)> = self
            .files
            .iter()
            .filter_map(|(path, known)| {
                let blocks: Vec<usize> = (0..known.scanned.blocks.len())
                    .filter(|&b| known.scanned.blocks[b].overlaps(start, end))
                    .collect();
                (!blocks.is_empty()).then(|| (path.clone(), blocks))
            })
            .collect();
        let mut seen = HashSet::new();
        let mut found = Vec::new();
        for (path, blocks) in &wanted {
            for &b in blocks {
                let block = self.block(path, b, mapping)?;
                // A block's calls are in start order.
                let calls = &block.calls;
                let from = calls.partition_point(|c| c.row.created_at < start);
                let to = calls.partition_point(|c| c.row.created_at < end);
                for c in calls.get(from..to).unwrap_or_default() {
                    if seen.insert(c.row.request_id.clone()) {
                        found.push(c.clone());
                    }
                }
            }
        }
        let mut named = HashMap::new();
        let mut out = Vec::with_capacity(found.len());
        for c in found {
            out.push(self.with_conversation(c, mapping, &mut named)?);
        }
        out.sort_by(|a, b| (a.created_at, &a.request_id).cmp(&(b.created_at, &b.request_id)));
        Ok((out, wanted.len() as u64))
    }

    /// Lists the folder again: forgets files that are gone, scans those
    /// that are new or changed.
    fn refresh(&mut self, files: &Selection) -> Result<(), SourceError> {
        let listing = list::list(files)?;
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
            self.warned.remove(&path);
        }
        for (path, stamp) in &listing {
            if self.files.get(path).is_some_and(|k| k.stamp == *stamp) {
                continue;
            }
            changed = true;
            self.cache.remove(path);
            let scanned = blocks::scan(path)?;
            self.files.insert(
                path.clone(),
                Known {
                    stamp: *stamp,
                    scanned: Arc::new(scanned),
                },
            );
        }
        if changed {
            self.traces = None;
        }
        Ok(())
    }

    /// The calls of block `b` of a listed file: held, else parsed again
    /// and held.
    fn block(
        &mut self,
        path: &Path,
        b: usize,
        mapping: &SpanMapping,
    ) -> Result<Arc<BlockCalls>, SourceError> {
        let known = self.files.get(path).cloned().ok_or_else(|| {
            SourceError::Transient(format!(
                "{} is no longer listed",
                printable(&path.display().to_string())
            ))
        })?;
        if let Some(calls) = self.cache.get(path, b, known.stamp) {
            return Ok(calls);
        }
        let Some(block) = known.scanned.blocks.get(b) else {
            return Ok(Arc::default());
        };
        let calls = Arc::new(blocks::read(path, block, mapping)?);
        self.warn_skipped(path, block.first_line, &calls);
        let last = block
            .range
            .map_or(DateTime::<Utc>::MIN_UTC, |(_, last)| last);
        self.cache.put(path, b, known.stamp, last, calls.clone());
        Ok(calls)
    }

    /// A file's call with its session: the span's own, else a
    /// conversation id seen on another span of its trace in any file of
    /// the folder (the first in name order, then line order), else the
    /// fallback's. `named` remembers the traces looked up in this read.
    fn with_conversation(
        &mut self,
        c: FileCall,
        mapping: &SpanMapping,
        named: &mut HashMap<String, Option<String>>,
    ) -> Result<CallRow, SourceError> {
        let mut row = c.row;
        let Some(trace) = c.trace else {
            return Ok(row);
        };
        let id = match named.get(&trace) {
            Some(id) => id.clone(),
            None => {
                let id = self.conversation(&trace, mapping)?;
                named.insert(trace, id.clone());
                id
            }
        };
        if let Some(id) = id {
            row.session_id = Some(id);
        }
        Ok(row)
    }

    /// Logs the spans a block of `path` (from line `first_line`) skipped
    /// and its calls without token counts, the first time a block of the
    /// file has any.
    fn warn_skipped(&mut self, path: &Path, first_line: u64, calls: &BlockCalls) {
        let warned = self.warned.entry(path.to_owned()).or_default();
        if calls.rejected > 0 && !warned.rejected {
            warned.rejected = true;
            tracing::warn!(
                file = %printable(&path.display().to_string()),
                first_line,
                rejected = calls.rejected,
                first_reason = %printable(calls.first_rejection.as_deref().unwrap_or_default()),
                "model-call spans in an OTLP file could not be used and are skipped"
            );
        }
        if calls.without_usage > 0 && !warned.without_usage {
            warned.without_usage = true;
            tracing::warn!(
                file = %printable(&path.display().to_string()),
                first_line,
                calls = calls.without_usage,
                "model calls in an OTLP file carry no token counts and are counted as 0 tokens"
            );
        }
    }

    /// The conversation id the folder's spans first name for `trace`.
    fn conversation(
        &mut self,
        trace: &str,
        mapping: &SpanMapping,
    ) -> Result<Option<String>, SourceError> {
        let h = trace_hash(trace);
        let files = &self.files;
        let traces = self.traces.get_or_insert_with(|| Traces::of(files));
        let Some(&(first_file, first_block)) = traces.first.get(&h) else {
            return Ok(None);
        };
        // The blocks that may name it, in order: the first, then (when two
        // traces share a hash) every later one whose hashes hold it.
        let mut candidates = Vec::new();
        for (f, path) in traces.files.iter().enumerate().skip(first_file) {
            let Some(known) = self.files.get(path) else {
                continue;
            };
            for (b, block) in known.scanned.blocks.iter().enumerate() {
                if (f, b) >= (first_file, first_block)
                    && block.conversations.binary_search(&h).is_ok()
                {
                    candidates.push((path.clone(), b));
                }
            }
        }
        for (path, b) in candidates {
            if let Some(id) = self.block(&path, b, mapping)?.conversations.get(trace) {
                return Ok(Some(id.clone()));
            }
        }
        Ok(None)
    }
}
