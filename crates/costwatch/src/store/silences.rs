//! Silences in the state database, shared by every replica, and the
//! notifications they held back.

use super::StoreError;
use crate::silence::{NewSilence, Silence};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::future::Future;

/// A notification an evaluation did not queue because a silence matched
/// its incident. Recorded once per silence, incident episode and status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Silenced {
    /// The silence that held it back.
    pub silence_id: i64,
    /// The incident.
    pub fingerprint: String,
    /// The incident's kind (`no_cache`, ..., `source_unhealthy`).
    pub kind: String,
    /// The start of the incident episode it belonged to.
    pub episode: DateTime<Utc>,
    /// `firing` (a first firing or a re-alert) or `resolved`.
    pub status: String,
    /// The title the notification would have had.
    pub title: String,
    /// When an evaluation first held it back (wall time).
    pub at: DateTime<Utc>,
}

/// Why `silence expire` did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ExpireError {
    /// No silence has this id.
    #[error("no silence with id {0}")]
    NotFound(i64),
    /// It ended already.
    #[error("silence {id} already ended at {}", .ended.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))]
    AlreadyEnded {
        /// The silence.
        id: i64,
        /// When it ended.
        ended: DateTime<Utc>,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A silence whose end an evaluation noticed, with the incidents it held
/// back that are still open (they are notified as usual from then on).
#[derive(Debug, Clone, PartialEq)]
pub struct EndedSilence {
    /// The silence.
    pub silence: Silence,
    /// Open incidents it held a notification back for.
    pub still_open: Vec<String>,
}

/// The silences' part of the state.
pub trait SilenceStore: Send + Sync {
    /// Stores a new silence; returns it with its id.
    fn add_silence(
        &self,
        new: &NewSilence,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Silence, StoreError>> + Send;

    /// Silences by id: those still active at `now`, or every one with `all`.
    fn silences(
        &self,
        all: bool,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Silence>, StoreError>> + Send;

    /// Ends a silence at `now`; returns it as it is now.
    fn expire_silence(
        &self,
        id: i64,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Silence, ExpireError>> + Send;

    /// Records held-back notifications; returns those recorded for the
    /// first time (a notification held back again by the same silence in
    /// the same episode is not recorded twice).
    fn record_silenced(
        &self,
        held: &[Silenced],
    ) -> impl Future<Output = Result<Vec<Silenced>, StoreError>> + Send;

    /// The held-back notifications of an incident, oldest first.
    fn silenced_of(
        &self,
        fingerprint: &str,
    ) -> impl Future<Output = Result<Vec<Silenced>, StoreError>> + Send;

    /// Claims the silences that ended by `now` and whose end nobody has
    /// noticed yet: each is returned to exactly one caller, once.
    fn take_ended_silences(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<EndedSilence>, StoreError>> + Send;
}
