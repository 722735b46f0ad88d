//! Each source costwatch reads, beside the script a user would write for
//! it: the simulator serves days of its scenario in that source's wire
//! format from its own process (or writes them as files), `costwatch
//! backtest` reads them through the source, the script reads the same
//! pages, and both are measured from outside
//! ([`measure`](crate::measure)), with where costwatch's CPU goes
//! ([`profile`]).
//!
//! - [`compare`]: a source served over HTTP beside its script, for
//!   [`litellm`] and [`langfuse`];
//! - [`otlp_files`]: the Collector file exporter's folder, its peak RSS as
//!   the folder grows.

pub mod compare;
pub mod langfuse;
pub mod litellm;
pub mod otlp_files;
pub mod profile;
pub mod receiver;
