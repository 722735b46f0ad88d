//! What can go wrong on the simulated proxy's routes, and how it damages
//! an answer: the proxy's own errors (a 429 with `retry-after`, a 5xx),
//! bodies cut off or replaced by a load balancer's HTML page, rows whose
//! fields are missing or impossible, an envelope without `data`, and the
//! paging hazards of a spend log read while it grows (rows written behind
//! the read position, a page answered twice by a cache in front, an order
//! ignored as LiteLLM before `sort_order` did, rows of one millisecond in
//! another order than the previous query gave them).
//!
//! Queueing, persistence and counting are the shared `crate::faults`
//! machinery.

use super::errors::LiteLlmError;
use crate::faults::FaultQueue;
use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// Which routes a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LiteLlmRoute {
    /// `GET /spend/logs/v2`.
    SpendLogs,
    /// `GET /model/info`.
    ModelInfo,
    /// Both.
    Any,
}

impl LiteLlmRoute {
    /// Whether a fault for `self` applies to a request on `route`.
    pub fn matches(self, route: LiteLlmRoute) -> bool {
        self == LiteLlmRoute::Any || self == route
    }
}

/// What goes wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum LiteLlmFaultKind {
    /// 429 with `retry-after`.
    RateLimit {
        /// Seconds announced.
        retry_after_secs: u64,
    },
    /// An error status (5xx expected); an invalid one becomes 500.
    ServerError {
        /// The status.
        status: u16,
    },
    /// A 200 whose JSON is cut in the middle.
    Truncated,
    /// A 200 whose body is an HTML error page.
    Malformed,
    /// A 200 whose rows of `data` all lack this field.
    DropRowField {
        /// The field removed.
        field: String,
    },
    /// A 200 with one field of one row of `data` set; `path` is dotted for
    /// nested fields (`metadata.additional_usage_values.cache_read_input_tokens`).
    SetRowField {
        /// Position of the row in `data`.
        row: usize,
        /// The field, dotted.
        path: String,
        /// Its new value.
        value: Value,
    },
    /// A 200 whose envelope lacks this field (`data`).
    DropEnvelopeField {
        /// The field removed.
        field: String,
    },
    /// The page starts `rows` rows early, as when that many rows were
    /// written before the read position since the listing's first page.
    /// Rows stay written: to model them, give every later page of the
    /// listing a shift at least as large ([`LiteLlmFault::on_page`]).
    RowsWrittenBehind {
        /// How many rows were written behind the read position so far.
        rows: u64,
    },
    /// The answer to the previous page is served again, envelope and all,
    /// as a cache in front of the proxy would.
    RepeatPreviousPage,
    /// Rows come newest first whatever `sort_order` says, as before LiteLLM
    /// honoured it.
    IgnoreSortOrder,
    /// Rows sharing a `startTime` come in the reverse of their usual order:
    /// LiteLLM orders by `startTime` alone, and PostgreSQL promises no order
    /// among ties, so two queries may differ.
    TiesReversed,
}

/// A fault and the requests it applies to.
#[derive(Debug, Clone, PartialEq)]
pub struct LiteLlmFault {
    /// Routes it applies to.
    pub route: LiteLlmRoute,
    /// Only requests for this `page` of `/spend/logs/v2` (`None`: any).
    pub page: Option<u64>,
    /// What goes wrong.
    pub kind: LiteLlmFaultKind,
}

impl LiteLlmFault {
    /// A fault on the next `/spend/logs/v2` request.
    pub fn spend_logs(kind: LiteLlmFaultKind) -> LiteLlmFault {
        LiteLlmFault {
            route: LiteLlmRoute::SpendLogs,
            page: None,
            kind,
        }
    }

    /// A fault on the next `/model/info` request.
    pub fn model_info(kind: LiteLlmFaultKind) -> LiteLlmFault {
        LiteLlmFault {
            route: LiteLlmRoute::ModelInfo,
            page: None,
            kind,
        }
    }

    /// The same fault, on the next request for page `page` only.
    pub fn on_page(mut self, page: u64) -> LiteLlmFault {
        self.page = Some(page);
        self
    }
}

/// Injects faults into the simulated proxy; cheap to clone. Queued
/// faults are taken one per matching request, in order; a persistent one
/// applies to every matching request until cleared.
#[derive(Debug, Clone, Default)]
pub struct LiteLlmFaults {
    queue: FaultQueue<LiteLlmFault>,
}

impl LiteLlmFaults {
    /// Queues a fault for the next matching request.
    pub fn push(&self, fault: LiteLlmFault) {
        self.queue.push(fault);
    }

    /// Makes every matching request fail until set to `None`.
    pub fn set_persistent(&self, fault: Option<LiteLlmFault>) {
        self.queue.set_persistent(fault);
    }

    /// Drops the queued and persistent faults.
    pub fn clear(&self) {
        self.queue.clear();
    }

    /// Queued faults not served yet.
    pub fn pending(&self) -> usize {
        self.queue.pending()
    }

    /// Faults served so far.
    pub fn served(&self) -> u64 {
        self.queue.served()
    }

    /// The fault for a request on `route` (for `page`, when it names a
    /// valid one), if any, counted as served.
    pub(super) fn take(&self, route: LiteLlmRoute, page: Option<u64>) -> Option<LiteLlmFaultKind> {
        self.queue
            .take(|f| f.route.matches(route) && f.page.is_none_or(|p| Some(p) == page))
            .map(|f| f.kind)
    }
}

/// The answer, damaged as `fault` says (paging faults are applied before,
/// by the route).
pub(super) fn respond(
    answer: Result<Value, LiteLlmError>,
    fault: Option<&LiteLlmFaultKind>,
) -> Response {
    let mut body = match answer {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    match fault {
        Some(LiteLlmFaultKind::RateLimit { retry_after_secs }) => {
            return LiteLlmError::rate_limited(*retry_after_secs).into_response();
        }
        Some(LiteLlmFaultKind::ServerError { status }) => {
            return LiteLlmError::server_error(*status).into_response();
        }
        Some(LiteLlmFaultKind::Truncated) => return truncated(&body),
        Some(LiteLlmFaultKind::Malformed) => return malformed(),
        Some(LiteLlmFaultKind::DropRowField { field }) => {
            for row in rows(&mut body).into_iter().flatten() {
                if let Some(row) = row.as_object_mut() {
                    row.remove(field);
                }
            }
        }
        Some(LiteLlmFaultKind::SetRowField { row, path, value }) => {
            if let Some(row) = rows(&mut body).and_then(|r| r.get_mut(*row)) {
                set(row, path, value.clone());
            }
        }
        Some(LiteLlmFaultKind::DropEnvelopeField { field }) => {
            if let Some(envelope) = body.as_object_mut() {
                envelope.remove(field);
            }
        }
        _ => {}
    }
    (StatusCode::OK, Json(body)).into_response()
}

/// The rows of `data`.
fn rows(body: &mut Value) -> Option<&mut Vec<Value>> {
    body.get_mut("data").and_then(Value::as_array_mut)
}

/// Sets the dotted `path` below `row`, making the objects on the way.
fn set(row: &mut Value, path: &str, value: Value) {
    let mut at = row;
    let mut steps = path.split('.').peekable();
    while let Some(step) = steps.next() {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        let Some(object) = at.as_object_mut() else {
            return;
        };
        if steps.peek().is_none() {
            object.insert(step.to_owned(), value);
            return;
        }
        at = object.entry(step.to_owned()).or_insert(Value::Null);
    }
}

fn truncated(body: &Value) -> Response {
    match serde_json::to_vec(body) {
        Ok(mut bytes) => {
            bytes.truncate(bytes.len() / 2);
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                bytes,
            )
                .into_response()
        }
        Err(_) => LiteLlmError::server_error(500).into_response(),
    }
}

fn malformed() -> Response {
    let page = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n";
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/html")], page).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_dotted_path_is_set_and_made_on_the_way() {
        let mut row = json!({"metadata": {"a": 1}});
        set(
            &mut row,
            "metadata.usage_object.cache_read_input_tokens",
            json!(5),
        );
        set(&mut row, "spend", json!(-1));
        assert_eq!(
            row,
            json!({"metadata": {"a": 1, "usage_object": {"cache_read_input_tokens": 5}},
                   "spend": -1})
        );
    }

    #[test]
    fn faults_are_taken_by_route_and_page() {
        let f = LiteLlmFaults::default();
        f.push(LiteLlmFault::model_info(LiteLlmFaultKind::Truncated));
        f.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::TiesReversed).on_page(2));
        f.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::Malformed));
        let spend = LiteLlmRoute::SpendLogs;
        assert_eq!(f.take(spend, Some(1)), Some(LiteLlmFaultKind::Malformed));
        assert_eq!(f.take(spend, Some(1)), None);
        assert_eq!(f.take(spend, Some(2)), Some(LiteLlmFaultKind::TiesReversed));
        assert_eq!(
            f.take(LiteLlmRoute::ModelInfo, None),
            Some(LiteLlmFaultKind::Truncated)
        );
        assert_eq!((f.pending(), f.served()), (0, 3));
    }
}
