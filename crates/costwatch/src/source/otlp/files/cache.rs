//! The parsed calls of the blocks read last, so that consecutive windows
//! do not parse a block again: a block wholly before the start of a read
//! is dropped by it (windows move forward), and at most a number of calls
//! are held, the least recently used block dropped first.

use super::blocks::BlockCalls;
use super::list::Stamp;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One block's calls, as of one version of its file.
struct Entry {
    stamp: Stamp,
    calls: Arc<BlockCalls>,
    /// When its last call started.
    last: DateTime<Utc>,
    used: u64,
}

/// Blocks' calls by file and block.
pub(super) struct Cache {
    entries: HashMap<(PathBuf, usize), Entry>,
    /// Calls held, over every entry.
    held: usize,
    /// Most calls held.
    max: usize,
    /// Counts uses, to tell the least recently used.
    clock: u64,
}

impl Cache {
    /// An empty cache of at most `max` calls.
    pub(super) fn new(max: usize) -> Cache {
        Cache {
            entries: HashMap::new(),
            held: 0,
            max,
            clock: 0,
        }
    }

    /// The calls of block `block` of `path` as of `stamp`, if held.
    pub(super) fn get(
        &mut self,
        path: &Path,
        block: usize,
        stamp: Stamp,
    ) -> Option<Arc<BlockCalls>> {
        self.clock += 1;
        let entry = self
            .entries
            .get_mut(&(path.to_owned(), block))
            .filter(|e| e.stamp == stamp)?;
        entry.used = self.clock;
        Some(entry.calls.clone())
    }

    /// Holds the calls of block `block` of `path` as of `stamp`, the last
    /// of them started at `last`, dropping the least recently used blocks
    /// to make room; a block with more calls than the cache holds is not
    /// kept.
    pub(super) fn put(
        &mut self,
        path: &Path,
        block: usize,
        stamp: Stamp,
        last: DateTime<Utc>,
        calls: Arc<BlockCalls>,
    ) {
        let key = (path.to_owned(), block);
        self.take(&key);
        let size = calls.calls.len();
        if size > self.max {
            return;
        }
        while self.held + size > self.max {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.take(&oldest);
        }
        self.clock += 1;
        self.held += size;
        self.entries.insert(
            key,
            Entry {
                stamp,
                calls,
                last,
                used: self.clock,
            },
        );
    }

    /// Drops the blocks of `path`.
    pub(super) fn remove(&mut self, path: &Path) {
        let keys: Vec<(PathBuf, usize)> = self
            .entries
            .keys()
            .filter(|(p, _)| p == path)
            .cloned()
            .collect();
        for key in keys {
            self.take(&key);
        }
    }

    /// Drops every block whose calls all started before `start`.
    pub(super) fn drop_before(&mut self, start: DateTime<Utc>) {
        let behind: Vec<(PathBuf, usize)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.last < start)
            .map(|(k, _)| k.clone())
            .collect();
        for key in behind {
            self.take(&key);
        }
    }

    fn take(&mut self, key: &(PathBuf, usize)) {
        if let Some(e) = self.entries.remove(key) {
            self.held -= e.calls.calls.len();
        }
    }
}
