//! Whole-process measurements from outside: `/usr/bin/time -v` for a command
//! that runs to completion, `/proc/<pid>` samples for one that keeps running.

use super::BenchError;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What `/usr/bin/time -v` reports about one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeReport {
    /// User CPU seconds.
    pub user_secs: f64,
    /// System CPU seconds.
    pub sys_secs: f64,
    /// Wall-clock seconds.
    pub wall_secs: f64,
    /// Peak resident set size, in KiB.
    pub max_rss_kib: u64,
    /// The command's exit status.
    pub exit_status: i32,
}

impl TimeReport {
    /// User plus system CPU seconds.
    pub fn cpu_secs(&self) -> f64 {
        self.user_secs + self.sys_secs
    }

    /// `1.23 s CPU, 4.56 s wall, 7.8 MiB peak`, for progress lines.
    pub fn summary(&self) -> String {
        format!(
            "{:.2} s CPU, {:.2} s wall, {:.1} MiB peak",
            self.cpu_secs(),
            self.wall_secs,
            self.max_rss_kib as f64 / 1024.0
        )
    }
}

/// Parses the report `/usr/bin/time -v` writes.
pub fn parse_time_v(text: &str) -> Option<TimeReport> {
    let mut r = TimeReport::default();
    let mut seen = 0;
    for line in text.lines() {
        let Some((key, value)) = line.trim().rsplit_once(": ") else {
            continue;
        };
        let value = value.trim();
        match key {
            "User time (seconds)" => r.user_secs = value.parse().ok()?,
            "System time (seconds)" => r.sys_secs = value.parse().ok()?,
            "Maximum resident set size (kbytes)" => r.max_rss_kib = value.parse().ok()?,
            "Exit status" => r.exit_status = value.parse().ok()?,
            k if k.starts_with("Elapsed (wall clock) time") => r.wall_secs = clock_secs(value)?,
            _ => continue,
        }
        seen += 1;
    }
    (seen == 5).then_some(r)
}

/// `h:mm:ss` or `m:ss.ss` in seconds.
fn clock_secs(v: &str) -> Option<f64> {
    v.split(':').try_fold(0.0, |acc, part| {
        Some(acc * 60.0 + part.parse::<f64>().ok()?)
    })
}

/// Runs `program args` under `/usr/bin/time -v` with `env` added, stdout to
/// `stdout` (a file) and stderr to `stderr` (a file); returns the report.
pub fn timed(
    program: &Path,
    args: &[String],
    env: &[(&str, &str)],
    stdout: &Path,
    stderr: &Path,
) -> Result<TimeReport, BenchError> {
    let report = stderr.with_extension("time");
    let out = std::fs::File::create(stdout).map_err(|e| BenchError::setup("stdout file", e))?;
    let err = std::fs::File::create(stderr).map_err(|e| BenchError::setup("stderr file", e))?;
    let status = Command::new("/usr/bin/time")
        .arg("-v")
        .arg("-o")
        .arg(&report)
        .arg(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| BenchError::setup("cannot run /usr/bin/time (apt-get install time)", e))?;
    let text = std::fs::read_to_string(&report).map_err(|e| BenchError::setup("time report", e))?;
    let r = parse_time_v(&text)
        .ok_or_else(|| BenchError::Setup(format!("cannot read the time report: {text}")))?;
    if !status.success() || r.exit_status != 0 {
        let tail = std::fs::read_to_string(stderr).unwrap_or_default();
        let tail: String = tail.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
        return Err(BenchError::Setup(format!(
            "{} exited with {}: {tail}",
            program.display(),
            r.exit_status
        )));
    }
    Ok(r)
}

/// One look at a running process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// User plus system CPU seconds so far.
    pub cpu_secs: f64,
    /// Resident set size now, in KiB.
    pub rss_kib: u64,
    /// Peak resident set size so far, in KiB.
    pub hwm_kib: u64,
}

/// Clock ticks per second for `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`.
pub fn sample(pid: u32) -> Result<ProcSample, BenchError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| BenchError::setup("process stat", e))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| BenchError::setup("process status", e))?;
    parse_proc(&stat, &status).ok_or_else(|| BenchError::Setup(format!("cannot read /proc/{pid}")))
}

/// Waits up to `grace` for `child` to exit (after it was asked to stop),
/// then kills it; reaps it either way.
pub fn reap_within(child: &mut std::process::Child, grace: Duration) {
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The CPU seconds of every process named `comm` (e.g. a database
/// server's processes), by pid.
pub fn cpu_by_name(comm: &str) -> std::collections::HashMap<u32, f64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return std::collections::HashMap::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .filter_map(|pid| Some((pid, sample(pid).ok()?.cpu_secs)))
        .collect()
}

/// Parses the contents of `/proc/<pid>/stat` and `/proc/<pid>/status`.
pub fn parse_proc(stat: &str, status: &str) -> Option<ProcSample> {
    // The command name is in parentheses and may hold spaces: fields start
    // after the last `)`. utime and stime are fields 14 and 15 (1-based).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let kib = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some(ProcSample {
        cpu_secs: (utime + stime) / USER_HZ,
        rss_kib: kib("VmRSS:")?,
        hwm_kib: kib("VmHWM:")?,
    })
}

/// Samples a running process every `every` for `span`; returns the first and
/// the last sample and the largest RSS seen.
pub fn observe(
    pid: u32,
    span: Duration,
    every: Duration,
) -> Result<(ProcSample, ProcSample, u64), BenchError> {
    let first = sample(pid)?;
    let mut last = first;
    let mut max_rss = first.rss_kib;
    let started = std::time::Instant::now();
    while started.elapsed() < span {
        std::thread::sleep(every.min(span.saturating_sub(started.elapsed())));
        last = sample(pid)?;
        max_rss = max_rss.max(last.rss_kib);
    }
    Ok((first, last, max_rss))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const REPORT: &str = "\tCommand being timed: \"costwatch backtest\"
\tUser time (seconds): 0.65
\tSystem time (seconds): 0.28
\tPercent of CPU this job got: 102%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02.50
\tMaximum resident set size (kbytes): 90828
\tExit status: 0
";

    #[test]
    fn time_v_report_is_read_field_by_field() {
        let r = parse_time_v(REPORT).unwrap();
        assert_eq!(r.user_secs, 0.65);
        assert!((r.cpu_secs() - 0.93).abs() < 1e-9);
        assert_eq!(r.wall_secs, 62.5);
        assert_eq!(r.max_rss_kib, 90_828);
        assert_eq!(r.exit_status, 0);
        assert!(parse_time_v("User time (seconds): 1.0").is_none());
        assert_eq!(clock_secs("1:00:01"), Some(3601.0));
    }

    #[test]
    fn proc_stat_is_read_after_the_command_name() {
        let stat =
            "4242 (cost watch) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        let status = "Name:\tcostwatch\nVmHWM:\t   20480 kB\nVmRSS:\t   12288 kB\n";
        let s = parse_proc(stat, status).unwrap();
        assert!((s.cpu_secs - 3.0).abs() < 1e-9);
        assert_eq!((s.rss_kib, s.hwm_kib), (12_288, 20_480));
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_kib > 0 && s.hwm_kib >= s.rss_kib);
    }
}
