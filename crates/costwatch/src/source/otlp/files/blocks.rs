//! A file cut into blocks of lines: its first scan streams every line
//! once, reading only span ids, start times and traces (`skim.rs`), and
//! keeps, per block, where it lies in the file and when its first and last
//! span started, so a window parses only the blocks that can hold its
//! calls, and a block is parsed alone when one is needed.

use super::super::map::map_spans;
use super::super::settings::SpanMapping;
use super::lines::Lines;
use super::skim::{SpanKey, keys, skim};
use crate::source::SourceError;
use crate::source::rows::CallRow;
use chrono::{DateTime, Utc};
use foldhash::fast::FixedState;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Text per block: a block is closed at the first line end past it.
pub(super) const BLOCK_BYTES: u64 = 1 << 20;

/// A call as a file holds it.
#[derive(Debug, Clone)]
pub(super) struct FileCall {
    /// The call, its session as the span itself or the fallback gave it.
    pub row: CallRow,
    /// The trace, when the session came from the fallback: a conversation
    /// id seen on another span of the trace (in any file) replaces it.
    pub trace: Option<String>,
}

/// Some consecutive lines of a file.
#[derive(Debug, Clone)]
pub(super) struct Block {
    /// Where its first line starts, and where the line after its last does.
    pub start: u64,
    pub end: u64,
    /// Its first line's number.
    pub first_line: u64,
    /// When its first and last span started (model call or not: a
    /// superset of its calls'); `None` without spans.
    pub range: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Span ids it holds again after an earlier block of the file: the
    /// first copy is the file's.
    pub repeats: Vec<String>,
    /// The traces its spans name a conversation for, hashed
    /// ([`trace_hash`]) and sorted.
    pub conversations: Vec<u64>,
}

impl Block {
    /// Whether it may hold a call started in `[start, end)`.
    pub(super) fn overlaps(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> bool {
        self.range
            .is_some_and(|(first, last)| first < end && last >= start)
    }
}

/// A block's calls and conversations, and the spans the mapping could
/// not use.
#[derive(Debug, Default)]
pub(super) struct BlockCalls {
    /// Its model calls, each span once (the first copy kept), by start
    /// time then span id.
    pub calls: Vec<FileCall>,
    /// Conversation ids seen on its spans, by trace (the first per trace).
    pub conversations: HashMap<String, String>,
    /// Model-call spans the mapping could not use.
    pub rejected: u64,
    /// Why the first of them was rejected.
    pub first_rejection: Option<String>,
    /// Calls without token counts that did not fail.
    pub without_usage: u64,
}

/// What the first scan of one version of a file learnt.
#[derive(Debug, Default)]
pub(super) struct Scanned {
    pub blocks: Vec<Block>,
}

/// Scans `path` whole, line by line, reading of each line only what tells
/// the blocks apart (`skim.rs`): span ids, start times, the traces that
/// name a conversation. A line that is not OTLP/JSON traces fails the scan
/// with the file and line number.
pub(super) fn scan(path: &Path) -> Result<Scanned, SourceError> {
    let mut lines = Lines::open(path, 0, 1)?;
    let mut scanned = Scanned::default();
    // Every span id of the file so far, with the block of its first copy:
    // a copy in a later block is a repeat.
    let mut seen: HashMap<u64, usize, FixedState> = HashMap::default();
    let mut block = Open::new(0, 1);
    while let Some(line) = lines.next_line()? {
        let (end, next_number) = (line.end(), line.number + 1);
        let keys = match skim(line.text) {
            Some(keys) => keys,
            None => line.request(path)?.map(|r| keys(&r)).unwrap_or_default(),
        };
        let here = scanned.blocks.len();
        for key in keys {
            if let Some(id) = key.span {
                // An exporter that retried wrote the span again.
                match seen.entry(id) {
                    Entry::Occupied(first) => {
                        if *first.get() != here {
                            block.block.repeats.push(format!("{id:016x}"));
                        }
                        continue;
                    }
                    Entry::Vacant(v) => {
                        v.insert(here);
                    }
                }
            }
            block.add(key);
        }
        block.block.end = end;
        if block.block.end - block.block.start >= BLOCK_BYTES {
            scanned.blocks.push(block.close());
            block = Open::new(end, next_number);
        }
    }
    if block.block.end > block.block.start {
        scanned.blocks.push(block.close());
    }
    Ok(scanned)
}

/// The block being scanned.
struct Open {
    block: Block,
    /// The earliest and latest start, in nanoseconds.
    starts: Option<(u64, u64)>,
}

impl Open {
    fn new(start: u64, first_line: u64) -> Open {
        Open {
            block: Block {
                start,
                end: start,
                first_line,
                range: None,
                repeats: Vec::new(),
                conversations: Vec::new(),
            },
            starts: None,
        }
    }

    fn add(&mut self, key: SpanKey) {
        if let Some(t) = key.start {
            self.starts = Some(self.starts.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
        if let Some(h) = key.conversation_trace {
            self.block.conversations.push(h);
        }
    }

    /// The block, its range and traces noted.
    fn close(mut self) -> Block {
        let at = |n: u64| DateTime::from_timestamp_nanos(i64::try_from(n).unwrap_or(i64::MAX));
        self.block.range = self.starts.map(|(a, b)| (at(a), at(b)));
        self.block.conversations.sort_unstable();
        self.block.conversations.dedup();
        self.block
    }
}

/// Parses one block of `path` again, as its scan did.
pub(super) fn read(
    path: &Path,
    block: &Block,
    mapping: &SpanMapping,
) -> Result<BlockCalls, SourceError> {
    let mut lines = Lines::open(path, block.start, block.first_line)?;
    let mut out = BlockCalls::default();
    let mut seen: HashSet<String> = block.repeats.iter().cloned().collect();
    while let Some(line) = lines.next_line()? {
        // A line past the block, or one cut off at the scan and written
        // since, is not the block's.
        if line.end() > block.end {
            break;
        }
        let Some(req) = line.request(path)? else {
            continue;
        };
        let mapped = map_spans(
            &req,
            mapping,
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        );
        out.rejected += mapped.rejected;
        if out.first_rejection.is_none() {
            out.first_rejection = mapped.first_rejection;
        }
        out.without_usage += mapped.without_usage;
        for call in mapped.calls {
            if seen.insert(call.row.request_id.clone()) {
                out.calls.push(FileCall {
                    trace: (!call.conversation).then_some(call.trace_id),
                    row: call.row,
                });
            }
        }
        for (trace, conversation) in mapped.conversations {
            out.conversations.entry(trace).or_insert(conversation);
        }
    }
    sort(&mut out.calls);
    Ok(out)
}

/// Orders calls by start time then span id.
fn sort(calls: &mut [FileCall]) {
    calls.sort_by(|a, b| {
        (a.row.created_at, &a.row.request_id).cmp(&(b.row.created_at, &b.row.request_id))
    });
}
