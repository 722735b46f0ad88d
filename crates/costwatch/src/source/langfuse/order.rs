//! The order of a listing's rows across its pages: newest first.
//!
//! Langfuse orders observations by `startTime` descending (then by a hash
//! of the trace id and the observation id, which the client cannot
//! check), and its cursor resumes strictly after the last row handed out
//! (`packages/shared/src/server/repositories/events.ts`,
//! `orderByForObservationsQuery` and `applyObservationsCursorFilter`). So a
//! row listed twice, on one page or on two, either breaks that order or
//! shares its `startTime` with the rows around it. Only the ids of the rows
//! sharing the oldest `startTime` so far are remembered (at most
//! [`MAX_TIED`]), so memory stays bounded however long the listing.
//!
//! Nothing else depends on the order: each row is kept or left by its own
//! `startTime`, and the listing is read to its end.

use super::limits::MAX_TIED;
use crate::printable::printable;
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::HashSet;

/// The rows of one listing so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Order {
    /// The `startTime` of the latest row.
    last: Option<DateTime<Utc>>,
    /// That row's id, until a second row shares its time.
    last_id: String,
    /// Ids of the rows sharing `last`, once two do.
    tied: HashSet<String>,
}

impl Order {
    /// Checks that the row `id` started at `at` may follow the rows so far.
    pub(super) fn follow(&mut self, at: DateTime<Utc>, id: &str) -> Result<(), String> {
        match self.last {
            Some(last) if at > last => Err(format!(
                "startTime: {} is after {} of an earlier row; Langfuse lists observations newest first",
                time(at),
                time(last)
            )),
            Some(last) if at == last => {
                if self.tied.is_empty() {
                    self.tied.insert(std::mem::take(&mut self.last_id));
                }
                if self.tied.contains(id) {
                    return Err(format!("id: \"{}\" is listed before", printable(id)));
                }
                if self.tied.len() < MAX_TIED {
                    self.tied.insert(id.to_owned());
                }
                Ok(())
            }
            _ => {
                self.last = Some(at);
                self.tied.clear();
                self.last_id.clear();
                self.last_id.push_str(id);
                Ok(())
            }
        }
    }
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}
