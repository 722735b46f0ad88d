//! Each source costwatch reads, beside the script a user would write for
//! it: the simulator serves days of its scenario in that source's wire
//! format from its own process, `costwatch backtest` reads them through
//! the source, the script reads the same pages, and both are measured from
//! outside ([`measure`](crate::measure)), with where costwatch's CPU goes
//! ([`profile`]).

pub mod litellm;
pub mod profile;
pub mod receiver;
