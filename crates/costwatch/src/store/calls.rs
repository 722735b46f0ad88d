//! Model calls received over OTLP (`source.kind: otlp`), kept in the state
//! database until the windows that read them are done.

use super::StoreError;
use crate::source::otlp::SpanCall;
use crate::source::rows::CallRow;
use chrono::{DateTime, Utc};
use std::future::Future;

/// Where a listing of calls goes on: the last call of the page before, in
/// the listing's `(created_at, request_id)` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCursor {
    /// The last call's start.
    pub created_at: DateTime<Utc>,
    /// The last call's id (the span id).
    pub request_id: String,
}

/// The received calls' part of the state. Every replica may write: a call
/// is stored once, keyed by its start and its span id (a span's start
/// never changes, so a retried export or a replica's copy meets its first
/// copy).
pub trait CallStore: Send + Sync {
    /// Stores `calls` and the conversation ids seen on the spans of their
    /// traces (`(trace id, conversation id)`) in one transaction (all or
    /// none); a call already stored (the same start and span id), or a trace whose
    /// conversation is already known, is left as it is. Returns how many
    /// calls were new.
    ///
    /// A conversation names the trace's calls that carry no session of
    /// their own only if no call of the trace may have been read by a
    /// window yet: none stored before `now` that started before `now -
    /// settle_lag`. Decided once, when it arrives, so a call's session
    /// never changes after a window read it.
    fn insert_calls(
        &self,
        calls: &[SpanCall],
        conversations: &[(String, String)],
        now: DateTime<Utc>,
        settle_lag: std::time::Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Up to `limit` calls that started in `[start, end)`, after `after`,
    /// in `(created_at, request_id)` order. A call's session is its span's
    /// own conversation id, else one seen on another span of its trace,
    /// else its fallback.
    fn calls_page(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        after: Option<&CallCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<CallRow>, StoreError>> + Send;

    /// Every call of one session that started in `[start, end)`, oldest first.
    fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<CallRow>, StoreError>> + Send;

    /// Deletes up to `limit` calls that started before `before`, and the
    /// trace conversations received before it whose trace has no call
    /// left; returns how many calls went.
    fn delete_calls_before(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;
}
