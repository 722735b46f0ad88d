//! The simulator's traffic as OpenTelemetry GenAI spans, for `demo
//! --source otlp|otlp_files` and `backtest --simulate --source ...`: the
//! spans are posted over real OTLP/HTTP to a receiver on loopback, or
//! written as the Collector's file exporter writes them, and read back by
//! the same readers `costwatch run` and `once` use.

use super::AppError;
use crate::app::any::AnySource;
use crate::clock::SystemClock;
use crate::ingest::StoredCalls;
use crate::ingest::{self as receiver, ReceiverSettings};
use crate::ops::metrics::Metrics;
use crate::pricing::table::PriceTable;
use crate::source::SourceKind;
use crate::source::otlp::{OtlpFilesReader, Receiver, SpanMapping};
use crate::source::rows::RowSource;
use crate::store::SqlStore;
use costwatch_sim::otlp::{export_requests, post_protobuf, write_json_lines};
use costwatch_sim::server::SimServer;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Spans per export request, as a batch span processor sends them.
const SPANS_PER_REQUEST: usize = 512;
/// Lines per file before the file exporter rotates.
const LINES_PER_FILE: usize = 40;

/// The simulator's calls, every one of them, as export requests.
fn requests(
    sim: &SimServer,
) -> Vec<opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest> {
    let dataset = sim.dataset();
    match dataset.time_range() {
        Some((first, last)) => export_requests(
            dataset,
            first,
            last + chrono::TimeDelta::seconds(1),
            SPANS_PER_REQUEST,
        ),
        None => Vec::new(),
    }
}

/// The simulator's traffic read through `kind` (`otlp` or `otlp_files`),
/// priced from `prices`.
pub(super) async fn source(
    sim: &SimServer,
    kind: SourceKind,
    prices: PriceTable,
) -> Result<AnySource, AppError> {
    let settings = crate::source::rows::RowSettings::defaults(kind);
    let requests = requests(sim);
    if kind == SourceKind::OtlpFiles {
        let dir = tempfile::Builder::new()
            .prefix("costwatch-sim-otlp")
            .tempdir()
            .map_err(|e| AppError::failed("cannot make a folder for the simulated spans", e))?;
        write_json_lines(dir.path(), &requests, LINES_PER_FILE)
            .map_err(|e| AppError::failed("cannot write the simulated spans", e))?;
        let reader =
            OtlpFilesReader::new(dir.path().to_owned(), SpanMapping::default()).owning(dir);
        return Ok(AnySource::OtlpFiles(RowSource::new(
            reader, settings, prices,
        )));
    }
    // A receiver on loopback over an in-memory state, fed over OTLP/HTTP,
    // then stopped: the reader reads what it stored.
    let store = SqlStore::open("sqlite::memory:")
        .await
        .map_err(|e| AppError::failed("in-memory state", e))?;
    let (stop, stop_rx) = watch::channel(false);
    let receiver_settings = ReceiverSettings {
        receiver: Receiver {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            max_request_bytes: 16 << 20,
            max_requests_per_second: 10_000,
            // Simulated traffic is history: every start time is accepted.
            retention: Duration::from_secs(100 * 365 * 86_400),
            ..Receiver::default()
        },
        mapping: SpanMapping::default(),
        max_in_flight: 4,
        accept_future: Duration::from_secs(100 * 365 * 86_400),
        store_timeout: Duration::from_secs(60),
        job: "main".to_owned(),
        // Every span is stored before any window is read.
        settle_lag: Duration::from_secs(100 * 365 * 86_400),
    };
    let (addr, task) = receiver::serve(
        receiver_settings,
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
        stop_rx,
    )
    .await
    .map_err(|e| AppError::failed("cannot start the OTLP receiver", e))?;
    let posted = post_protobuf(&format!("http://{addr}/v1/traces"), None, &requests).await;
    let _ = stop.send(true);
    let _ = task.await;
    let stats = posted.map_err(|e| AppError::failed("posting the simulated spans", e))?;
    if stats.rejected_spans > 0 {
        return Err(AppError::failed(
            "posting the simulated spans",
            std::io::Error::other(format!("{} spans rejected", stats.rejected_spans)),
        ));
    }
    Ok(AnySource::Otlp(RowSource::new(
        StoredCalls::new(store, settings.page_limit),
        settings,
        prices,
    )))
}
