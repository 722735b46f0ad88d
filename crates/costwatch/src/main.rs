//! The `costwatch` binary: parse the command line, set up logging, run.

mod cli;

use clap::Parser;
use cli::{Cli, Command, Exit};
use costwatch::printable::printable;
use std::process::ExitCode;

/// jemalloc rather than glibc's allocator: after a big window glibc kept
/// the freed heap (it returns only the top of its heap, and `malloc_trim`
/// needs unsafe code), so a daemon that read a million sessions stayed near
/// its peak; jemalloc gives freed pages back as they decay. It also costs less per allocation on the per-session
/// path (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_tracing(cli.log_format, cli.verbose, cli.command.quiet_by_default());
    // A backtest is one sequential read of the gateway: on one thread it
    // spends no CPU handing every page between threads.
    let mut builder = match cli.command {
        Command::Backtest(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    if matches!(cli.command, Command::Run(_)) {
        // jemalloc purges decayed pages only when the program allocates; a
        // daemon idle between ticks would keep them. Its background thread
        // purges them on time.
        if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
            tracing::warn!(error = %e, "the allocator's background purge is off; freed memory returns to the system only at the next tick");
        }
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("costwatch: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Exit::Config(e)) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Err(Exit::Failed(e)) => {
            // Errors can quote what a gateway or a receiver answered.
            eprintln!("costwatch: {}", printable(&format!("{e:#}")));
            ExitCode::from(1)
        }
    }
}
