//! Where a process spends its CPU: `perf record` over one run, and the
//! functions with the most samples of their own (`perf report
//! --no-children`).

use crate::BenchError;
use crate::quality::render;
use std::path::Path;
use std::process::{Command, Stdio};

/// One function of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct HotSpot {
    /// Its share of the samples, in percent (its own, not its callees').
    pub percent: f64,
    /// The library or binary it is in (`costwatch`, `libc.so.6`,
    /// `[kernel.kallsyms]`).
    pub object: String,
    /// The function, demangled, without its hash.
    pub symbol: String,
}

/// Whether `perf` can be run here.
pub fn available() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `program args` with `env` under `perf record` (its output in
/// `dir`) and returns the `top` functions by their own samples.
pub fn hot_spots(
    program: &Path,
    args: &[String],
    env: &[(&str, &str)],
    dir: &Path,
    top: usize,
) -> Result<Vec<HotSpot>, BenchError> {
    let data = dir.join("perf.data");
    let status = Command::new("perf")
        .args(["record", "-q", "-F", "1999", "-o"])
        .arg(&data)
        .arg("--")
        .arg(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| BenchError::setup("cannot run perf record", e))?;
    if !status.success() {
        return Err(BenchError::Setup(format!(
            "perf record {} exited with {status}",
            program.display()
        )));
    }
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "dso,symbol",
            "--percent-limit",
            "0.5",
            "-i",
        ])
        .arg(&data)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| BenchError::setup("cannot run perf report", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(parse_report(&text).into_iter().take(top).collect())
}

/// The hot spots as a table under a sentence saying where they come from;
/// nothing when there are none.
pub fn render_hot_spots(spots: &[HotSpot], markdown: bool) -> String {
    if spots.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = spots
        .iter()
        .map(|h| {
            vec![
                format!("{:.1}%", h.percent),
                h.object.clone(),
                if markdown {
                    format!("`{}`", h.symbol)
                } else {
                    h.symbol.clone()
                },
            ]
        })
        .collect();
    format!(
        "\nWhere costwatch's CPU goes (`perf record` of one more backtest; each function's own samples, top {}):\n\n{}",
        spots.len(),
        render(&["self", "object", "function"], &rows, markdown)
    )
}

/// The rows of `perf report --stdio --sort dso,symbol`
/// (`    12.34%  costwatch  [.] serde_json::de::...`).
pub fn parse_report(text: &str) -> Vec<HotSpot> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let percent = parts.next()?.strip_suffix('%')?.parse().ok()?;
            let object = parts.next()?.to_owned();
            let _kind = parts
                .next()
                .filter(|k| k.starts_with('[') && k.ends_with(']'))?;
            // Samples without IPC data end in `-  -` (the IPC columns).
            let mut words: Vec<&str> = parts.collect();
            while words.last() == Some(&"-") {
                words.pop();
            }
            let symbol = words.join(" ");
            Some(HotSpot {
                percent,
                object,
                symbol: without_hash(&symbol).to_owned(),
            })
        })
        .collect()
}

/// `serde_json::de::from_trait::h0123456789abcdef` without `::h...`.
fn without_hash(symbol: &str) -> &str {
    match symbol.rsplit_once("::h") {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => symbol,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn a_report_gives_each_function_its_share() {
        let text = "\
# Samples: 10K of event 'cpu-clock:ppp'
#
# Overhead  Shared Object      Symbol
# ........  .................  ......
#
    21.50%  costwatch          [.] serde_json::de::Deserializer<R>::ignore_value::h0123456789abcdef  -      -
     4.25%  [kernel.kallsyms]  [k] copy_user_generic_string
     1.00%  libc.so.6          [.] __memmove_avx_unaligned_erms

";
        let spots = parse_report(text);
        assert_eq!(spots.len(), 3);
        assert_eq!(spots[0].percent, 21.5);
        assert_eq!(spots[0].object, "costwatch");
        assert_eq!(
            spots[0].symbol,
            "serde_json::de::Deserializer<R>::ignore_value"
        );
        assert_eq!(spots[1].symbol, "copy_user_generic_string");
        assert_eq!(spots[2].object, "libc.so.6");
    }
}
