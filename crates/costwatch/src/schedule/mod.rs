//! When the detection job runs and how time is cut: the `schedule`
//! section (a cron expression read in a time zone, its fire times across
//! daylight saving) and the `windows` section.

mod cron;
mod windows;

pub use cron::{CronExpr, ScheduleConfig};
pub use windows::WindowConfig;
