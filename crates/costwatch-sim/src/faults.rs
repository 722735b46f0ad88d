//! Fault injection shared by the simulated servers: a queue of faults that
//! the REST routes ([`crate::server`]), the MCP endpoint ([`crate::mcp`])
//! and the scripted model ([`crate::model`]) consume before answering.
//!
//! This module follows no wire format itself: each server says what its
//! faults do to its own answers (the REST errors and damaged bodies of
//! gateway-api.md section 1, the MCP transport and JSON-RPC errors of
//! section 2, OpenAI-style errors for the chat-completions model). What
//! they share lives here:
//! - queued faults are consumed one per matching call, in order;
//! - persistent faults apply to every matching call (the first matching one
//!   wins, and they take precedence over the queue) until cleared;
//! - which calls a fault matches is a parameter of [`FaultQueue::take`] (a
//!   REST route, an MCP tool, or any model call);
//! - a hanging call waits until the faults are released or for at most a
//!   given time ([`FaultQueue::hang`]);
//! - the HTTP status of a fault, and `Retry-After` on a 429;
//! - what the REST faults that damage rows do to a page's `data`.

use crate::server::FaultKind;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// The queued and persistent faults of one server, and how many were
/// served. Cheap to clone; clones share state.
pub(crate) struct FaultQueue<F> {
    state: Arc<Mutex<State<F>>>,
    release: Arc<Notify>,
}

struct State<F> {
    queue: VecDeque<F>,
    persistent: Vec<F>,
    served: u64,
}

impl<F> Default for FaultQueue<F> {
    fn default() -> Self {
        FaultQueue {
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                persistent: Vec::new(),
                served: 0,
            })),
            release: Arc::new(Notify::new()),
        }
    }
}

impl<F> Clone for FaultQueue<F> {
    fn clone(&self) -> Self {
        FaultQueue {
            state: self.state.clone(),
            release: self.release.clone(),
        }
    }
}

impl<F: fmt::Debug> fmt::Debug for FaultQueue<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with(|s| {
            f.debug_struct("FaultQueue")
                .field("queue", &s.queue)
                .field("persistent", &s.persistent)
                .field("served", &s.served)
                .finish()
        })
    }
}

impl<F: Clone> FaultQueue<F> {
    /// Queues a fault for the next matching call.
    pub(crate) fn push(&self, fault: F) {
        self.with(|s| s.queue.push_back(fault));
    }

    /// Adds a fault that applies to every matching call until cleared.
    pub(crate) fn add_persistent(&self, fault: F) {
        self.with(|s| s.persistent.push(fault));
    }

    /// Replaces the persistent faults by `fault` (`None`: by none).
    pub(crate) fn set_persistent(&self, fault: Option<F>) {
        self.with(|s| s.persistent = fault.into_iter().collect());
    }

    /// Drops the queued and the persistent faults and releases hanging calls.
    pub(crate) fn clear(&self) {
        self.with(|s| {
            s.queue.clear();
            s.persistent.clear();
        });
        self.release();
    }

    /// How many queued faults have not been served yet.
    pub(crate) fn pending(&self) -> usize {
        self.with(|s| s.queue.len())
    }

    /// How many faults have been served so far.
    pub(crate) fn served(&self) -> u64 {
        self.with(|s| s.served)
    }

    /// The fault to apply to a call, if any, counted as served: the first
    /// persistent fault that `matches`, else the first queued one (removed).
    pub(crate) fn take(&self, matches: impl Fn(&F) -> bool) -> Option<F> {
        self.with(|s| {
            let fault = match s.persistent.iter().find(|f| matches(f)) {
                Some(f) => Some(f.clone()),
                None => {
                    let i = s.queue.iter().position(&matches)?;
                    s.queue.remove(i)
                }
            };
            s.served += u64::from(fault.is_some());
            fault
        })
    }
}

impl<F> FaultQueue<F> {
    /// Releases the calls hanging now.
    pub(crate) fn release(&self) {
        self.release.notify_waiters();
    }

    /// Holds a call until [`FaultQueue::release`] (or `clear`) or for
    /// `at_most`, whichever comes first.
    pub(crate) async fn hang(&self, at_most: Duration) {
        let released = self.release.notified();
        tokio::select! {
            () = released => {}
            () = tokio::time::sleep(at_most) => {}
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State<F>) -> R) -> R {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }
}

/// The status a fault asks for; one that is not a valid status becomes 500.
pub(crate) fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Adds `Retry-After: <secs>` to a rate-limit answer.
pub(crate) fn retry_after(mut res: Response, secs: u64) -> Response {
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    res
}

/// Damages the rows of a page's `data` as `fault` says: a field dropped
/// from every row, a field of one row set, a row copied over another, the
/// last row repeated. Any other fault leaves the rows alone.
pub(crate) fn damage_rows(body: &mut Value, fault: &FaultKind) {
    let Some(rows) = body.get_mut("data").and_then(Value::as_array_mut) else {
        return;
    };
    match fault {
        FaultKind::DropField { field } => {
            for row in rows.iter_mut().filter_map(Value::as_object_mut) {
                row.remove(field);
            }
        }
        FaultKind::SetField { row, field, value } => {
            if let Some(row) = rows.get_mut(*row).and_then(Value::as_object_mut) {
                row.insert(field.clone(), value.clone());
            }
        }
        FaultKind::CopyRow { from, to } => {
            if let Some(copy) = rows.get(*from).cloned()
                && let Some(slot) = rows.get_mut(*to)
            {
                *slot = copy;
            }
        }
        FaultKind::ExtraRow => {
            if let Some(last) = rows.last().cloned() {
                rows.push(last);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn queued_faults_are_taken_in_order_by_match_and_persistent_ones_win() {
        let q: FaultQueue<(char, u32)> = FaultQueue::default();
        q.push(('a', 1));
        q.push(('b', 2));
        q.push(('a', 3));
        assert_eq!(q.take(|f| f.0 == 'b'), Some(('b', 2)));
        assert_eq!(q.take(|f| f.0 == 'c'), None);
        q.add_persistent(('a', 9));
        q.add_persistent(('a', 10));
        assert_eq!(q.take(|f| f.0 == 'a'), Some(('a', 9)));
        assert_eq!(q.pending(), 2);
        q.set_persistent(None);
        assert_eq!(q.take(|f| f.0 == 'a'), Some(('a', 1)));
        assert_eq!(q.served(), 3);
        q.clear();
        assert_eq!((q.pending(), q.take(|_| true)), (0, None));
    }

    #[tokio::test]
    async fn a_hanging_call_is_released_by_clear() {
        let q: FaultQueue<u8> = FaultQueue::default();
        let hung = q.clone();
        let task = tokio::spawn(async move { hung.hang(Duration::from_secs(600)).await });
        while !task.is_finished() {
            q.clear();
            tokio::task::yield_now().await;
        }
        task.await.unwrap();
    }

    #[test]
    fn invalid_statuses_become_500_and_429_says_when_to_retry() {
        assert_eq!(status(503), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status(42), StatusCode::INTERNAL_SERVER_ERROR);
        let res = retry_after(Response::default(), 7);
        assert_eq!(res.headers()[header::RETRY_AFTER], "7");
    }
}
