//! The parsed calls of the files read last, up to a number of calls, so
//! that consecutive windows do not parse a file again.

use super::scan::FileCall;
use super::scan::Stamp;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One file's calls, as of one version of it.
struct Entry {
    stamp: Stamp,
    calls: Arc<Vec<FileCall>>,
    used: u64,
}

/// Files' calls, the least recently used dropped first.
pub(super) struct Cache {
    entries: HashMap<PathBuf, Entry>,
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

    /// The calls of `path` as of `stamp`, if held.
    pub(super) fn get(&mut self, path: &Path, stamp: Stamp) -> Option<Arc<Vec<FileCall>>> {
        self.clock += 1;
        let entry = self.entries.get_mut(path).filter(|e| e.stamp == stamp)?;
        entry.used = self.clock;
        Some(entry.calls.clone())
    }

    /// Holds the calls of `path` as of `stamp`, dropping the least
    /// recently used files to make room; a file with more calls than the
    /// cache holds is not kept.
    pub(super) fn put(&mut self, path: &Path, stamp: Stamp, calls: Arc<Vec<FileCall>>) {
        self.remove(path);
        if calls.len() > self.max {
            return;
        }
        while self.held + calls.len() > self.max {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            self.remove(&oldest);
        }
        self.clock += 1;
        self.held += calls.len();
        self.entries.insert(
            path.to_owned(),
            Entry {
                stamp,
                calls,
                used: self.clock,
            },
        );
    }

    /// Drops the calls of `path`.
    pub(super) fn remove(&mut self, path: &Path) {
        if let Some(e) = self.entries.remove(path) {
            self.held -= e.calls.len();
        }
    }
}
