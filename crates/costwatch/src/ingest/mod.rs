//! The OTLP/HTTP trace receiver (`source.kind: otlp`): `POST /v1/traces`
//! on `source.listen`, protobuf or JSON bodies, gzip or not, as the OTLP
//! specification describes (<https://opentelemetry.io/docs/specs/otlp/#otlphttp>).
//!
//! A request's GenAI model-call spans are mapped to call rows and stored in
//! the state database in one transaction before the answer: `200` means
//! stored (a partial success names spans that could not be used), a
//! retryable `429`/`503` means nothing was stored and the exporter should
//! send the same spans again, so an outage of the database or a full disk
//! loses nothing the exporter still holds. Span ids key the rows, so a
//! resent batch, or the same batch received by several replicas, is
//! stored once.
//!
//! The receiver runs on its own tasks and its own database connections: a
//! slow or flooded exporter never delays the detection tick, and the tick
//! never makes an exporter wait on more than one short transaction.

mod status;
mod stored;
mod throttle;

pub use self::stored::StoredCalls;

use self::status::Refusal;
use self::throttle::Throttle;
use crate::clock::Clock;
use crate::ops::metrics::Metrics;
use crate::secret::BearerToken;
use crate::source::otlp::{
    DecodeError, Encoding, Receiver, SpanMapping, decode_request, encode_response, map_spans,
};
use crate::store::{CallStore, Store};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, TimeDelta, Utc};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// The path OTLP/HTTP exporters post traces to.
pub const TRACES_PATH: &str = "/v1/traces";

/// A gzip body may inflate to this many times `max_request_bytes`.
pub const MAX_INFLATION: usize = 4;

/// How long a request's body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How the receiver listens and what it accepts.
#[derive(Debug, Clone)]
pub struct ReceiverSettings {
    /// `source.listen`, `source.token_file` (read), the request limits and
    /// `source.retention`: spans that started longer ago than it are
    /// rejected, their windows are done and their rows would be deleted
    /// anyway.
    pub receiver: Receiver,
    /// How spans become call rows.
    pub mapping: SpanMapping,
    /// Requests decoded and stored at once; more are told to come back.
    pub max_in_flight: usize,
    /// Spans that start further in the future than this are rejected (a
    /// wrong clock).
    pub accept_future: Duration,
    /// How long storing one request may take before the exporter is told
    /// to retry.
    pub store_timeout: Duration,
    /// The detection job reading the calls (`main`): a call that starts
    /// before its watermark arrived after its window was read.
    pub job: String,
    /// `windows.settle_lag`: a conversation id that arrives for a trace
    /// none of whose calls a window may have read yet names the trace's
    /// calls; one that arrives later does not (see
    /// [`CallStore::insert_calls`]).
    pub settle_lag: Duration,
}

struct Shared<S> {
    settings: ReceiverSettings,
    /// SHA-256 of the token: compared digest to digest, so the time a
    /// comparison takes says nothing about the token.
    token: Option<BearerToken>,
    store: S,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    throttle: Throttle,
    in_flight: Semaphore,
}

/// Binds `settings.receiver.listen` and serves `POST /v1/traces` on a spawned task
/// until `shutdown` becomes `true` (or its sender is dropped); returns the
/// bound address (so port 0 works) and the task.
pub async fn serve<S>(
    settings: ReceiverSettings,
    store: S,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)>
where
    S: CallStore + Store + Clone + 'static,
{
    let listener = TcpListener::bind(settings.receiver.listen).await?;
    let addr = listener.local_addr()?;
    let app = router(Arc::new(Shared {
        token: settings.receiver.token.as_ref().map(BearerToken::new),
        throttle: Throttle::new(settings.receiver.max_requests_per_second),
        in_flight: Semaphore::new(settings.max_in_flight.max(1)),
        settings,
        store,
        clock,
        metrics,
    }));
    let task = tokio::spawn(async move {
        let stopped = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        match axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            Ok(()) => tracing::info!(%addr, "OTLP receiver stopped"),
            Err(error) => tracing::error!(%addr, %error, "OTLP receiver failed"),
        }
    });
    tracing::info!(%addr, path = TRACES_PATH, "OTLP receiver listening");
    Ok((addr, task))
}

fn router<S: CallStore + Store + Clone + 'static>(shared: Arc<Shared<S>>) -> Router {
    Router::new()
        .route(TRACES_PATH, post(export::<S>))
        .with_state(shared)
}

async fn export<S: CallStore + Store + Clone + 'static>(
    State(shared): State<Arc<Shared<S>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let encoding = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(Encoding::from_content_type);
    match accept(&shared, &headers, encoding, body).await {
        Ok(response) => {
            shared.metrics.otlp_request("accepted");
            response
        }
        Err(refusal) => {
            shared.metrics.otlp_request(refusal.outcome());
            if let Refusal::Unavailable(reason) = &refusal {
                tracing::warn!(%reason, "OTLP export refused for now; the exporter will retry");
            }
            refusal.into_response(encoding.unwrap_or(Encoding::Protobuf))
        }
    }
}

async fn accept<S: CallStore + Store + Clone + 'static>(
    shared: &Shared<S>,
    headers: &HeaderMap,
    encoding: Option<Encoding>,
    body: Body,
) -> Result<Response, Refusal> {
    let settings = &shared.settings;
    if let Some(want) = &shared.token
        && !want.admits(headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()))
    {
        return Err(Refusal::Unauthenticated);
    }
    if !shared.throttle.try_take(tokio::time::Instant::now()) {
        return Err(Refusal::Throttled);
    }
    let Ok(_permit) = shared.in_flight.try_acquire() else {
        return Err(Refusal::Unavailable(format!(
            "{} exports are being stored already",
            settings.max_in_flight
        )));
    };
    let Some(encoding) = encoding else {
        let given = headers
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        return Err(Refusal::UnsupportedMediaType(
            crate::printable::printable(&given).to_string(),
        ));
    };
    let limit = settings.receiver.max_request_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(Refusal::TooLarge(limit));
    }
    let bytes = tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, limit))
        .await
        .map_err(|_| Refusal::Unavailable("the body did not arrive in time".to_owned()))?
        .map_err(|_| Refusal::TooLarge(limit))?;
    let content_encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let now = shared.clock.now();
    let from = TimeDelta::from_std(settings.receiver.retention)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let until = TimeDelta::from_std(settings.accept_future)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let mapping = settings.mapping.clone();
    // Decoding and mapping a large export is CPU work: off the runtime's
    // threads, so the tick and the other endpoints keep their time.
    let mapped = tokio::task::spawn_blocking(move || {
        decode_request(
            &bytes,
            encoding,
            content_encoding.as_deref(),
            limit.saturating_mul(MAX_INFLATION),
        )
        .map(|request| map_spans(&request, &mapping, from, until))
    })
    .await
    .map_err(|e| Refusal::Unavailable(format!("decoding stopped: {e}")))?
    .map_err(|e| match e {
        DecodeError::TooLarge { .. } => Refusal::TooLarge(limit),
        other => Refusal::BadData(other.to_string()),
    })?;
    let stored = tokio::time::timeout(
        settings.store_timeout,
        shared.store.insert_calls(
            &mapped.calls,
            &mapped.conversations,
            now,
            settings.settle_lag,
        ),
    )
    .await
    .map_err(|_| Refusal::Unavailable("the state database did not answer in time".to_owned()))?
    .map_err(|e| Refusal::Unavailable(e.to_string()))?;
    let offered = u64::try_from(mapped.calls.len()).unwrap_or(u64::MAX);
    shared.metrics.otlp_spans(
        stored,
        offered.saturating_sub(stored),
        mapped.rejected,
        mapped.other_spans,
        mapped.without_usage,
    );
    if stored > 0
        && let Ok(Some(mark)) = shared.store.watermark(&settings.job).await
    {
        let late = mapped
            .calls
            .iter()
            .filter(|c| c.row.created_at < mark)
            .count();
        let late = u64::try_from(late).unwrap_or(u64::MAX).min(stored);
        if late > 0 {
            shared.metrics.otlp_late(late);
            tracing::warn!(
                late,
                watermark = %mark,
                "spans arrived after their window was read: stored but not judged (raise windows.settle_lag)"
            );
        }
    }
    let message = match (&mapped.first_rejection, mapped.without_usage) {
        (Some(reason), _) => format!(
            "{} GenAI span(s) rejected; the first: {reason}",
            mapped.rejected
        ),
        (None, 0) => String::new(),
        (None, n) => format!(
            "{n} GenAI span(s) carried no token usage and were stored with zero tokens \
             (a streamed call without usage reporting?)"
        ),
    };
    if mapped.rejected > 0 {
        tracing::warn!(rejected = mapped.rejected, %message, "OTLP spans rejected");
    }
    let mut response = (
        StatusCode::OK,
        encode_response(mapped.rejected, &message, encoding),
    )
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    Ok(response)
}
