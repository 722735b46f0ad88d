//! Measured, not claimed: the detection-quality report and the whole-process
//! performance benchmark behind `costwatch-bench` and `BENCHMARKS.md`.
//!
//! - [`quality`]: the simulator's labelled scenarios, read by costwatch
//!   through [`costwatch::backtest::replay`] (the daemon's pipeline) and by the
//!   static-threshold [`baseline`], scored per kind, with [`alerts`] per
//!   incident; [`family`] names the scenario families and their tuning and
//!   held-out seeds, and [`heldout`] reports both families on the held-out
//!   seeds.
//! - [`perf`]: `costwatch backtest` over a million sessions in one window
//!   from a [`compact`] dataset served by the simulator in another process,
//!   the Python reference script over the same data, and the idle daemon,
//!   each measured from outside with [`measure`].
//! - [`sources`]: each source costwatch reads (the LiteLLM proxy's spend
//!   logs, Langfuse's observations) beside the script a user would write
//!   for it, and the Collector files' memory as the folder grows.

pub mod alerts;
pub mod baseline;
pub mod causes;
pub mod compact;
pub mod family;
pub mod heldout;
pub mod measure;
pub mod misses;
pub mod perf;
pub mod quality;
pub mod sources;

use costwatch::config::ConfigError;
use costwatch::pipeline::PipelineError;
use costwatch::source::SourceError;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The rules could not be loaded.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The replay failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The simulator could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A process, file or server needed by the benchmark failed.
    #[error("{0}")]
    Setup(String),
}

impl BenchError {
    /// A setup failure with context.
    pub fn setup(context: &str, e: impl std::fmt::Display) -> Self {
        BenchError::Setup(format!("{context}: {e}"))
    }
}
