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
    sd_notify::notify(&[NotifyState::Status(&status_line(status))])
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
/// The variables are only read, never removed: removing them would be
/// unsound once the runtime's threads run.
pub fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    interval_from(usec.as_deref(), pid.as_deref(), std::process::id())
}

/// [`watchdog_interval`] from the variables' values and this process's id.
fn interval_from(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(me)
    {
        return None;
    }
    let usec = usec?.trim().parse::<u64>().ok().filter(|u| *u > 0)?;
    Some(Duration::from_micros(usec) / 2)
}

/// One status line: line feeds would start new assignments in the protocol.
fn status_line(status: &str) -> String {
    status.replace(['\n', '\r'], " ")
}

// The notifications themselves reach a real socket in the integration tests
// (`tests/it/service.rs`), where `costwatch run` is started with
// `NOTIFY_SOCKET` and `WATCHDOG_USEC` set: the environment is the process's,
// so it is set for a child, never changed in a running test binary.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_interval_is_half_of_watchdog_usec_for_this_process() {
        let me = 4242;
        let secs = |s: u64| Some(Duration::from_secs(s));
        assert_eq!(interval_from(None, None, me), None);
        assert_eq!(interval_from(Some("0"), None, me), None, "zero is off");
        assert_eq!(interval_from(Some("junk"), None, me), None);
        assert_eq!(interval_from(Some("120000000"), None, me), secs(60));
        assert_eq!(interval_from(Some("120000000"), Some("4242"), me), secs(60));
        assert_eq!(
            interval_from(Some("120000000"), Some("4243"), me),
            None,
            "another process's watchdog"
        );
        assert_eq!(interval_from(Some("120000000"), Some("x"), me), None);
    }

    #[test]
    fn a_status_stays_one_line() {
        assert_eq!(status_line("line one\nREADY=1"), "line one READY=1");
        assert_eq!(status_line("a\r\nb"), "a  b");
    }
}
