//! Fault injection on the REST routes: what can go wrong
//! ([`FaultKind`]), on which route ([`FaultPath`]), the handle tests use
//! ([`FaultHandle`]), and how each fault damages an answer of the gateway's
//! REST contract (gateway-api.md section 1, "Errors": 429 with
//! `Retry-After`, 5xx, bodies cut off or malformed, rows missing a
//! required field; paging that breaks the contract's "`next_cursor` is
//! `null` on the last page": cursors that cycle, or a listing that never
//! ends), and pages that break the contract's values (an impossible figure,
//! an id twice on a page, more rows than `limit`).
//!
//! Queueing, persistence and counting are the shared `crate::faults`
//! machinery; a fault matches a route through [`FaultPath::matches`].
//! Besides queued and persistent faults, a handle can draw faults at random
//! ([`RandomFaults`]) from its own seeded generator.

use super::routes::ApiError;
use crate::faults::{self, FaultQueue};
use crate::rng::SimRng;
use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::{Arc, Mutex, PoisonError};

/// Which routes a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPath {
    /// `GET /v1/sessions`.
    Sessions,
    /// `GET /v1/requests`.
    Requests,
    /// `GET /v1/models`.
    Models,
    /// Every route.
    Any,
}

impl FaultPath {
    /// Whether a fault for `self` applies to a request on `route`.
    pub fn matches(self, route: FaultPath) -> bool {
        self == FaultPath::Any || self == route
    }
}

/// What goes wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// 429 with a `Retry-After` header and a JSON error.
    RateLimit {
        /// Seconds announced in `Retry-After`.
        retry_after_secs: u64,
    },
    /// An error status (5xx expected) with a JSON error.
    ServerError {
        /// The HTTP status; an invalid one becomes 500.
        status: u16,
    },
    /// A 200 whose JSON body is cut in the middle.
    Truncated,
    /// A 200 whose body is not JSON (an HTML error page).
    Malformed,
    /// A 200 whose rows all lack this field (e.g. `cost_usd`).
    DropField {
        /// The field removed from every row of `data`.
        field: String,
    },
    /// A 200 with one field of one row set to a value no gateway sends
    /// (tokens at `u64::MAX`, more cached than prompt tokens, ...).
    SetField {
        /// Position of the row in `data`.
        row: usize,
        /// The field set.
        field: String,
        /// Its new value.
        value: Value,
    },
    /// A 200 where one row of `data` is replaced by a copy of another, so
    /// one id appears twice on the page.
    CopyRow {
        /// Position of the row copied.
        from: usize,
        /// Position of the row replaced.
        to: usize,
    },
    /// A 200 with one row more than the `limit` asked for (a copy of the
    /// last row appended).
    ExtraRow,
    /// A pause before the normal answer.
    Delay {
        /// How long to wait.
        millis: u64,
    },
    /// A listing that never ends because its cursors cycle: pages 1 to
    /// `pages` are served in order, then page `pages` leads back to page 2.
    /// With `pages: 3` the cursors run A, B, A, B, ... (pages past the last
    /// row are empty). `pages` below 2 counts as 2: page 2 leads to itself.
    CursorCycle {
        /// The page whose `next_cursor` leads back to page 2.
        pages: u32,
    },
    /// A listing that never ends: past the last row, every page is empty
    /// and has a `next_cursor` never seen before.
    EndlessPages,
}

/// A fault and the routes it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Routes the fault applies to.
    pub path: FaultPath,
    /// What goes wrong.
    pub kind: FaultKind,
}

impl Fault {
    /// A fault on one route (or [`FaultPath::Any`]).
    pub fn on(path: FaultPath, kind: FaultKind) -> Fault {
        Fault { path, kind }
    }

    /// A fault on whichever route is called next.
    pub fn any(kind: FaultKind) -> Fault {
        Fault {
            path: FaultPath::Any,
            kind,
        }
    }
}

/// Faults drawn at random: each request on `path` that no queued or
/// persistent fault applies to gets, with probability `rate`, one of
/// `kinds` (each as likely), drawn from a generator seeded with `seed`.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomFaults {
    /// Routes the faults apply to.
    pub path: FaultPath,
    /// Share of requests that get a fault, from 0 to 1.
    pub rate: f64,
    /// What can go wrong; empty means nothing does.
    pub kinds: Vec<FaultKind>,
    /// Seed of the draws.
    pub seed: u64,
}

/// The random faults in force, their generator, and how many were served.
#[derive(Debug, Default)]
struct RandomState {
    faults: Option<(RandomFaults, SimRng)>,
    served: u64,
}

/// Injects faults into a running simulator; cheap to clone, shareable
/// across threads.
///
/// Queued faults are consumed one per matching request, in order. A
/// persistent fault applies to every matching request (and takes precedence
/// over the queue) until it is cleared. Random faults apply to requests
/// that neither gives a fault.
#[derive(Debug, Clone, Default)]
pub struct FaultHandle {
    queue: FaultQueue<Fault>,
    random: Arc<Mutex<RandomState>>,
}

impl FaultHandle {
    /// A handle with no faults.
    pub fn new() -> FaultHandle {
        FaultHandle::default()
    }

    /// Queues a fault for the next matching request.
    pub fn push(&self, fault: Fault) {
        self.queue.push(fault);
    }

    /// Makes every matching request fail (an outage) until set to `None`.
    pub fn set_persistent(&self, fault: Option<Fault>) {
        self.queue.set_persistent(fault);
    }

    /// Draws faults at random for the requests nothing else applies to,
    /// until set to `None`.
    pub fn set_random(&self, faults: Option<RandomFaults>) {
        self.with_random(|r| {
            r.faults = faults.map(|f| {
                let rng = SimRng::seed_from_u64(f.seed);
                (f, rng)
            });
        });
    }

    /// Drops the queued, the persistent and the random faults.
    pub fn clear(&self) {
        self.with_random(|r| r.faults = None);
        self.queue.clear();
    }

    /// How many queued faults have not been served yet.
    pub fn pending(&self) -> usize {
        self.queue.pending()
    }

    /// How many faults have been served so far, random ones included.
    pub fn served(&self) -> u64 {
        self.queue.served() + self.with_random(|r| r.served)
    }

    /// The fault to apply to a request on `route`, if any, counted as served.
    fn take(&self, route: FaultPath) -> Option<FaultKind> {
        if let Some(f) = self.queue.take(|f| f.path.matches(route)) {
            return Some(f.kind);
        }
        self.with_random(|r| {
            let (faults, rng) = r.faults.as_mut()?;
            if !faults.path.matches(route) || faults.kinds.is_empty() {
                return None;
            }
            if !rng.random_bool(faults.rate) {
                return None;
            }
            let kind = faults.kinds[rng.random_range(0..faults.kinds.len())].clone();
            r.served += 1;
            Some(kind)
        })
    }

    fn with_random<R>(&self, f: impl FnOnce(&mut RandomState) -> R) -> R {
        let mut state = self.random.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }
}

/// Far past any position a dataset has: where the pages of a listing that
/// never ends go once the rows are used up.
const PAST_THE_END: usize = 1 << 40;

/// Where the page after the one at `from` starts, once `fault` has had its
/// say about paging. `next_of(p)` is the real next position of the page at
/// `p` (`None` on the last page), and the real answer for `from` is `next`.
pub(super) fn next_position(
    fault: Option<&FaultKind>,
    from: usize,
    next: Option<usize>,
    next_of: impl Fn(usize) -> Option<usize>,
) -> Option<usize> {
    // Past the last row the listing goes on with fresh, empty pages.
    let onwards = |p: usize, n: Option<usize>| n.unwrap_or(p.max(PAST_THE_END) + 1);
    match fault {
        Some(FaultKind::EndlessPages) => Some(onwards(from, next)),
        Some(FaultKind::CursorCycle { pages }) => {
            let pages = usize::try_from(*pages).unwrap_or(usize::MAX).max(2);
            // The start positions of pages 1 to `pages`.
            let mut chain = vec![0];
            while chain.len() < pages {
                let last = chain[chain.len() - 1];
                chain.push(onwards(last, next_of(last)));
            }
            match chain.iter().position(|&p| p == from) {
                Some(i) if i + 1 < pages => Some(chain[i + 1]),
                Some(_) => Some(chain[1]),
                None => next,
            }
        }
        _ => next,
    }
}

/// Applies the route's next fault (if any) around the normal answer, which
/// sees the fault so that paging faults can change its cursor.
pub(super) async fn serve(
    faults: &FaultHandle,
    route: FaultPath,
    answer: impl FnOnce(Option<&FaultKind>) -> Result<Value, ApiError>,
) -> Response {
    let fault = faults.take(route);
    match &fault {
        Some(FaultKind::RateLimit { retry_after_secs }) => return rate_limited(*retry_after_secs),
        Some(FaultKind::ServerError { status }) => return server_error(*status),
        Some(FaultKind::Delay { millis }) => {
            tokio::time::sleep(std::time::Duration::from_millis(*millis)).await;
        }
        _ => {}
    }
    respond(answer(fault.as_ref()), fault.as_ref())
}

/// The answer, damaged as `fault` says.
fn respond(answer: Result<Value, ApiError>, fault: Option<&FaultKind>) -> Response {
    let (status, mut body) = match answer {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (e.status, e.body()),
    };
    match fault {
        Some(FaultKind::Truncated) => return truncated(status, &body),
        Some(FaultKind::Malformed) => return malformed(),
        Some(f) => faults::damage_rows(&mut body, f),
        None => {}
    }
    (status, Json(body)).into_response()
}

fn truncated(status: StatusCode, body: &Value) -> Response {
    match serde_json::to_vec(body) {
        Ok(mut bytes) => {
            bytes.truncate(bytes.len() / 2);
            (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
        }
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            .into_response(),
    }
}

fn malformed() -> Response {
    let page = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n";
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

fn rate_limited(retry_after_secs: u64) -> Response {
    let err = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "too many requests, retry later",
    );
    faults::retry_after(err.into_response(), retry_after_secs)
}

fn server_error(status: u16) -> Response {
    let status = faults::status(status);
    let code = match status {
        StatusCode::BAD_GATEWAY => "bad_gateway",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        StatusCode::GATEWAY_TIMEOUT => "gateway_timeout",
        _ => "internal",
    };
    ApiError::new(status, code, "simulated server error").into_response()
}
