//! The `costwatch` binary: parse the command line, set up logging, run.

mod cli;

use clap::Parser;
use cli::{Cli, Command, Exit};
use costwatch::printable::printable;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_tracing(cli.log_format, cli.verbose, cli.command.quiet_by_default());
    // A backtest is one sequential read of the gateway: on one thread it
    // spends no CPU handing every page between threads.
    let mut builder = match cli.command {
        Command::Backtest(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
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
