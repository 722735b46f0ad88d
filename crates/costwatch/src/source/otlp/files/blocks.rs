//! A file cut into blocks of lines: its first scan streams every line
//! once and keeps, per block, where it lies in the file and when its first
//! and last call started, so a window parses only the blocks that can hold
//! its calls, and a block is parsed alone when one is needed.

use super::super::map::map_spans;
use super::super::settings::SpanMapping;
use super::lines::Lines;
use crate::source::SourceError;
use crate::source::rows::CallRow;
use chrono::{DateTime, Utc};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
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
    /// When its first and last call started; `None` without calls.
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

/// A block's calls and conversations.
#[derive(Debug, Default)]
pub(super) struct BlockCalls {
    /// Its model calls, each span once (the first copy kept), by start
    /// time then span id.
    pub calls: Vec<FileCall>,
    /// Conversation ids seen on its spans, by trace (the first per trace).
    pub conversations: HashMap<String, String>,
}

/// What the first scan of one version of a file learnt.
#[derive(Debug, Default)]
pub(super) struct Scanned {
    pub blocks: Vec<Block>,
    /// Model-call spans the mapping could not use.
    pub rejected: u64,
    /// Why the first of them was rejected.
    pub first_rejection: Option<String>,
    /// Calls without token counts that did not fail.
    pub without_usage: u64,
}

/// Scans `path` whole, handing each block's calls to `visit` as the block
/// is closed, and keeps only what tells the blocks apart. A line that is
/// not OTLP/JSON traces fails the scan with the file and line number.
pub(super) fn scan(
    path: &Path,
    mapping: &SpanMapping,
    mut visit: impl FnMut(usize, &Block, BlockCalls),
) -> Result<Scanned, SourceError> {
    let mut lines = Lines::open(path, 0, 1)?;
    let mut scanned = Scanned::default();
    // Every span id of the file so far, with the block of its first copy:
    // a copy in a later block is a repeat.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut block = open_block(0, 1);
    let mut calls = BlockCalls::default();
    while let Some(line) = lines.next_line()? {
        let (end, next_number) = (line.end(), line.number + 1);
        if let Some(req) = line.request(path)? {
            let mapped = map_spans(
                &req,
                mapping,
                DateTime::<Utc>::MIN_UTC,
                DateTime::<Utc>::MAX_UTC,
            );
            scanned.rejected += mapped.rejected;
            if scanned.first_rejection.is_none() {
                scanned.first_rejection = mapped.first_rejection;
            }
            scanned.without_usage += mapped.without_usage;
            for call in mapped.calls {
                // An exporter that retried wrote the span again.
                let here = scanned.blocks.len();
                match seen.entry(call.row.request_id.clone()) {
                    Entry::Occupied(first) => {
                        if *first.get() != here {
                            block.repeats.push(call.row.request_id);
                        }
                        continue;
                    }
                    Entry::Vacant(v) => {
                        v.insert(here);
                    }
                }
                calls.calls.push(FileCall {
                    trace: (!call.conversation).then_some(call.trace_id),
                    row: call.row,
                });
            }
            for (trace, conversation) in mapped.conversations {
                calls.conversations.entry(trace).or_insert(conversation);
            }
        }
        block.end = end;
        if block.end - block.start >= BLOCK_BYTES {
            close(&mut block, &mut calls, &mut scanned, &mut visit);
            block = open_block(end, next_number);
        }
    }
    if block.end > block.start {
        close(&mut block, &mut calls, &mut scanned, &mut visit);
    }
    Ok(scanned)
}

fn open_block(start: u64, first_line: u64) -> Block {
    Block {
        start,
        end: start,
        first_line,
        range: None,
        repeats: Vec::new(),
        conversations: Vec::new(),
    }
}

/// Ends the block being scanned: its calls sorted, its range and traces
/// noted, its calls handed to `visit`.
fn close(
    block: &mut Block,
    calls: &mut BlockCalls,
    scanned: &mut Scanned,
    visit: &mut impl FnMut(usize, &Block, BlockCalls),
) {
    let mut taken = std::mem::take(calls);
    sort(&mut taken.calls);
    block.range = range(&taken.calls);
    block.conversations = taken.conversations.keys().map(|t| trace_hash(t)).collect();
    block.conversations.sort_unstable();
    block.conversations.dedup();
    visit(scanned.blocks.len(), block, taken);
    scanned.blocks.push(block.clone());
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

/// When the first and last of sorted calls started.
fn range(calls: &[FileCall]) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    Some((calls.first()?.row.created_at, calls.last()?.row.created_at))
}

/// A trace id's hash, the same for the life of the process (a block's
/// list of traces is compared with the traces of calls read later).
pub(super) fn trace_hash(trace: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(trace)
}
