//! The systemd notify protocol, for `Type=notify` and `WatchdogSec=`.
//!
//! Every function is a no-op outside systemd: without `NOTIFY_SOCKET` the
//! notifications return `Ok(())` and [`watchdog_interval`] returns `None`.
//! None of them changes the environment, so they are safe to call from any
//! thread at any time.

use sd_notify::NotifyState;
use std::io;
use std::time::Duration;

/// Tells systemd that start-up is finished (`READY=1`); with `Type=notify`
/// the unit counts as started only from here.
pub fn notify_ready() -> io::Result<()> {
    sd_notify::notify(&[NotifyState::Ready])
}

/// Tells systemd that the daemon is shutting down (`STOPPING=1`).
pub fn notify_stopping() -> io::Result<()> {
    sd_notify::notify(&[NotifyState::Stopping])
}

/// Tells systemd that the daemon is reloading its configuration
/// (`RELOADING=1` with `MONOTONIC_USEC=`, which systemd 253 and later
/// require); send [`notify_ready`] when the reload is done.
pub fn notify_reloading() -> io::Result<()> {
    sd_notify::notify(&[NotifyState::Reloading, NotifyState::monotonic_usec_now()?])
}

/// Sets the one-line status `systemctl status` shows (`STATUS=...`).
///
/// Line feeds would start new assignments in the protocol (a status could
/// otherwise say `READY=1`), so they are replaced by spaces.
pub fn notify_status(status: &str) -> io::Result<()> {
    let line = status.replace(['\n', '\r'], " ");
    sd_notify::notify(&[NotifyState::Status(&line)])
}

/// Pets the watchdog (`WATCHDOG=1`); call it every [`watchdog_interval`].
pub fn notify_watchdog() -> io::Result<()> {
    sd_notify::notify(&[NotifyState::Watchdog])
}

/// How often to call [`notify_watchdog`]: half of `WATCHDOG_USEC`, as
/// sd_watchdog_enabled(3) advises, or `None` when no watchdog is set for
/// this process (unset or zero `WATCHDOG_USEC`, or a `WATCHDOG_PID` naming
/// another process).
///
/// This uses sd-notify 0.5's `watchdog_enabled()`, which leaves the
/// variables in place, never the `_and_unset_env` variant: removing them
/// would be unsound once the runtime's threads run.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled()
        .filter(|d| !d.is_zero())
        .map(|d| d / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    /// The next datagram on `socket`, as text.
    fn received(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = socket.recv(&mut buf).expect("a notification");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    fn nothing_waiting(socket: &UnixDatagram) -> bool {
        socket.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let empty = matches!(
            socket.recv(&mut buf),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        );
        socket.set_nonblocking(false).unwrap();
        empty
    }

    /// All assertions that need `NOTIFY_SOCKET`, `WATCHDOG_USEC` or
    /// `WATCHDOG_PID` live in this one test, because the environment is
    /// global to the process.
    #[test]
    fn notifications_reach_the_socket_and_the_watchdog_interval_is_half() {
        // SAFETY (for every `set_var`/`remove_var` below): the environment
        // is process-global and unit tests run on parallel threads. This is
        // the only test in the crate that writes the environment or reads
        // NOTIFY_SOCKET and WATCHDOG_*, so no other test depends on these
        // values, and every Rust read of the environment (`std::env`, used by
        // sd-notify and the config loader) takes the same lock as these
        // writes. The lock does not cover C code calling getenv(3) on another
        // thread at the same instant (SQLite looks up TMPDIR for temporary
        // files). glibc never frees the strings, only, when a new name is
        // added, an array an earlier addition allocated; so the test adds
        // its three names once and afterwards only replaces values.
        unsafe {
            std::env::remove_var("NOTIFY_SOCKET");
            std::env::remove_var("WATCHDOG_USEC");
            std::env::remove_var("WATCHDOG_PID");
        }

        // Outside systemd every call is a successful no-op.
        notify_ready().unwrap();
        notify_watchdog().unwrap();
        notify_status("idle").unwrap();
        notify_stopping().unwrap();
        assert_eq!(watchdog_interval(), None);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // SAFETY: see the top of this test; these are the only additions.
        unsafe {
            std::env::set_var("NOTIFY_SOCKET", &path);
            std::env::set_var("WATCHDOG_USEC", "0");
            std::env::set_var("WATCHDOG_PID", std::process::id().to_string());
        }
        assert_eq!(watchdog_interval(), None, "a zero watchdog is off");

        notify_ready().unwrap();
        assert_eq!(received(&socket), "READY=1\n");
        notify_watchdog().unwrap();
        assert_eq!(received(&socket), "WATCHDOG=1\n");
        notify_status("caught up to 2026-11-02T12:00:00Z").unwrap();
        assert_eq!(
            received(&socket),
            "STATUS=caught up to 2026-11-02T12:00:00Z\n"
        );
        notify_status("line one\nREADY=1").unwrap();
        assert_eq!(received(&socket), "STATUS=line one READY=1\n");
        notify_reloading().unwrap();
        let reload = received(&socket);
        let mut lines = reload.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"));
        let usec = lines
            .next()
            .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
            .expect("MONOTONIC_USEC line");
        assert!(usec.parse::<u64>().unwrap() > 0, "{reload}");
        assert_eq!(lines.next(), None);
        notify_stopping().unwrap();
        assert_eq!(received(&socket), "STOPPING=1\n");
        assert!(nothing_waiting(&socket));

        // A socket that is gone is an error, not silence.
        drop(socket);
        std::fs::remove_file(&path).unwrap();
        assert!(notify_ready().is_err());

        // The watchdog interval is half of WATCHDOG_USEC for this process.
        // SAFETY: see the top of this test.
        unsafe { std::env::set_var("WATCHDOG_USEC", "120000000") };
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(60)));
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(60)));
        assert_eq!(
            std::env::var("WATCHDOG_USEC").as_deref(),
            Ok("120000000"),
            "the variables must stay in place"
        );
        // SAFETY: see the top of this test.
        unsafe { std::env::set_var("WATCHDOG_PID", (std::process::id() + 1).to_string()) };
        assert_eq!(watchdog_interval(), None, "another process's watchdog");
        // SAFETY: see the top of this test.
        unsafe {
            std::env::remove_var("NOTIFY_SOCKET");
            std::env::remove_var("WATCHDOG_USEC");
            std::env::remove_var("WATCHDOG_PID");
        }
    }
}
