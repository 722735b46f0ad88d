//! Writes a scenario's traffic as the Collector's file exporter would, the
//! folder `costwatch backtest --simulate --source otlp_files` reads, to
//! measure the files reader alone:
//!
//! ```text
//! cargo run --release -p costwatch-sim --example otlp_folder -- SEED DAYS DIR [SESSIONS_PER_DAY]
//! ```
//!
//! Spans go 512 to a request and 40 requests to a file, as `backtest
//! --simulate` writes them. A configuration with `source: {kind:
//! otlp_files, path: DIR}` then reads the folder with `costwatch backtest
//! --from 2026-11-02T00:00:00Z --to ...` (the scenario starts that day).

use costwatch_sim::scenario::{ScenarioParams, generate};
use std::path::PathBuf;
use std::process::ExitCode;

const SPANS_PER_REQUEST: usize = 512;
const LINES_PER_FILE: usize = 40;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (seed, days, dir, sessions) = match args.as_slice() {
        [seed, days, dir] => (seed, days, dir, None),
        [seed, days, dir, sessions] => (seed, days, dir, Some(sessions)),
        _ => {
            eprintln!("usage: otlp_folder SEED DAYS DIR [SESSIONS_PER_DAY]");
            return ExitCode::FAILURE;
        }
    };
    let defaults = ScenarioParams::default();
    let sessions = sessions.map_or(Ok(defaults.sessions_per_day), |s| s.parse());
    let (Ok(seed), Ok(days), Ok(sessions_per_day)) = (seed.parse(), days.parse(), sessions) else {
        eprintln!("SEED, DAYS and SESSIONS_PER_DAY are whole numbers");
        return ExitCode::FAILURE;
    };
    let params = ScenarioParams {
        seed,
        days,
        sessions_per_day,
        ..defaults
    };
    let dataset = generate(&params);
    let Some((first, last)) = dataset.time_range() else {
        eprintln!("the scenario made no calls");
        return ExitCode::FAILURE;
    };
    let requests = costwatch_sim::otlp::export_requests(
        &dataset,
        first,
        last + chrono::TimeDelta::seconds(1),
        SPANS_PER_REQUEST,
    );
    let dir = PathBuf::from(dir);
    match costwatch_sim::otlp::write_json_lines(&dir, &requests, LINES_PER_FILE) {
        Ok(paths) => {
            println!(
                "{} calls from {first} to {last} in {} files",
                dataset.request_count(),
                paths.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot write {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
