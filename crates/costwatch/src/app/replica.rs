//! This process's replica name: the holder it writes into leases and outbox
//! claims.
//!
//! A restart of the same instance must take its own lease over at once, so
//! the name has to survive the restart; two live processes must never share
//! one, or both would believe they hold the job. On SQLite the name is kept
//! in a file beside the database (`<database>.replica`) and is used only by
//! the process that holds an exclusive lock (`flock`) on that file. The
//! kernel releases the lock when the process ends, however it ends (a
//! SIGKILL included), and gives it to one process at a time, so:
//!
//! - the next process on the same database finds the file unlocked and runs
//!   under the same name: the lease in the database is already its own;
//! - a second process started while the first runs cannot lock the file and
//!   runs under a name of its own (host, pid, start time), waiting for the
//!   lease like any other replica.
//!
//! PostgreSQL replicas share no local file, so each process has a name of
//! its own and a restarted replica waits out `state.lease_ttl` (another
//! replica takes over meanwhile). An in-memory database has no file either.

use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A replica name, and the lock that keeps it this process's own.
#[derive(Debug)]
pub struct Replica {
    name: String,
    /// Held for the life of the process; the kernel drops it with the process.
    lock: Option<File>,
}

impl Replica {
    /// The name written into leases and claims.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the name survives a restart (it is held through its file).
    pub fn is_stable(&self) -> bool {
        self.lock.is_some()
    }

    /// The name of the instance whose state is `state_url`: kept beside a
    /// SQLite file, else one for this process alone. Never fails: when the
    /// file cannot be used the process runs under a name of its own.
    pub fn for_state(state_url: &str) -> Replica {
        let Some(path) = identity_file(state_url) else {
            return Replica::of_process();
        };
        match Replica::claim(&path) {
            Ok(Some(r)) => {
                tracing::info!(replica = %r.name, file = %path.display(), "replica name held for this instance");
                r
            }
            Ok(None) => {
                let r = Replica::of_process();
                tracing::warn!(replica = %r.name, file = %path.display(), "another live process holds this instance's replica name; running under a name of its own");
                r
            }
            Err(e) => {
                let r = Replica::of_process();
                tracing::warn!(replica = %r.name, file = %path.display(), error = %e, "cannot keep the replica name beside the database; a restart waits out the job lease");
                r
            }
        }
    }

    /// A name for this process alone: host, process id and start time.
    pub fn of_process() -> Replica {
        Replica {
            name: crate::daemon::replica_name(),
            lock: None,
        }
    }

    /// The name in `path`, if no live process holds it; written there first
    /// when the file is new. `Ok(None)` when another process holds it.
    pub fn claim(path: &Path) -> std::io::Result<Option<Replica>> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let kept = text.trim();
        let name = if is_instance_name(kept) {
            kept.to_owned()
        } else {
            // New (or damaged): only the lock holder writes it.
            let name = instance_name();
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(format!("{name}\n").as_bytes())?;
            file.sync_all()?;
            name
        };
        Ok(Some(Replica {
            name,
            lock: Some(file),
        }))
    }
}

/// Where the replica name of the instance whose state is `state_url` is
/// kept: beside a SQLite database file; `None` for PostgreSQL and memory.
pub fn identity_file(state_url: &str) -> Option<PathBuf> {
    let rest = state_url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or("");
    if path.is_empty() || path.contains(":memory:") {
        return None;
    }
    Some(PathBuf::from(format!("{path}.replica")))
}

/// Host and 32 hexadecimal digits: a shape no per-process name has (those
/// end in 8 digits), so the two kinds never collide.
fn instance_name() -> String {
    format!("{}-{}", host(), hex::encode(random_bytes()))
}

fn is_instance_name(s: &str) -> bool {
    s.rsplit_once('-').is_some_and(|(host, tail)| {
        !host.is_empty() && tail.len() == 32 && tail.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

/// 16 bytes from the kernel's random source; a hash of the host, process
/// and clock where it cannot be read.
fn random_bytes() -> [u8; 16] {
    let mut buf = [0u8; 16];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok()
    {
        return buf;
    }
    let seed = format!(
        "{}:{}:{}",
        host(),
        std::process::id(),
        crate::clock::Clock::now(&crate::clock::SystemClock)
            .timestamp_nanos_opt()
            .unwrap_or(0)
    );
    let digest = Sha256::digest(seed.as_bytes());
    buf.copy_from_slice(&digest[..16]);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_survives_the_process_and_is_never_shared_by_two_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db.replica");
        let first = Replica::claim(&path).unwrap().unwrap();
        assert!(first.is_stable() && is_instance_name(first.name()));
        // While the first lives, a second cannot have the name.
        assert!(Replica::claim(&path).unwrap().is_none());
        let name = first.name().to_owned();
        drop(first);
        // The next one after it (a restart) runs under the same name.
        let again = Replica::claim(&path).unwrap().unwrap();
        assert_eq!(again.name(), name);
        assert!(Replica::claim(&path).unwrap().is_none());
        // A per-process name never looks like an instance's.
        assert!(!is_instance_name(Replica::of_process().name()));
    }

    #[test]
    fn the_name_is_kept_beside_a_sqlite_file_only() {
        assert_eq!(
            identity_file("sqlite:///var/lib/costwatch/costwatch.db?mode=rwc"),
            Some(PathBuf::from("/var/lib/costwatch/costwatch.db.replica"))
        );
        assert_eq!(
            identity_file("sqlite:state.db"),
            Some(PathBuf::from("state.db.replica"))
        );
        assert_eq!(identity_file("sqlite::memory:"), None);
        assert_eq!(identity_file("postgres://cw@db/costwatch"), None);
    }
}
