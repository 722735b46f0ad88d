//! The operations endpoint: `GET /metrics` for Prometheus, `GET /healthz`
//! for load balancers and people, and `GET /` for the status page (when
//! the daemon serves one), with `GET /incidents/{fingerprint}/chart.png`,
//! the chart of an incident's newest notification; with `server.mcp`, the
//! MCP endpoint `/mcp` too (`crate::mcp_server::http`, which checks its own
//! token and `Origin`).
//!
//! It serves only these read-only routes, so it needs no authentication;
//! bind it to loopback or a management network. The status page shows
//! incident groups, session ids and silence reasons: no secret, but not
//! for the open internet either.

use super::metrics::{CONTENT_TYPE, Metrics};
use super::status::{StatusPage, html};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What `/healthz` reports, produced afresh for every request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthReport {
    /// Whether the daemon is doing its job; `false` makes `/healthz` a 503.
    pub healthy: bool,
    /// Why the daemon is unhealthy (or a note when it is healthy).
    pub reason: Option<String>,
    /// The end of the last completed window.
    pub watermark: Option<DateTime<Utc>>,
    /// When the scheduler last ticked.
    pub last_tick: Option<DateTime<Utc>>,
}

impl HealthReport {
    /// The JSON body: `status` is `ok` or `unhealthy`; `reason`, `watermark`
    /// and `last_tick` are always present and `null` when unknown; times are
    /// RFC 3339 in UTC.
    pub fn to_json(&self) -> Value {
        let time =
            |t: &Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true));
        json!({
            "status": if self.healthy { "ok" } else { "unhealthy" },
            "reason": self.reason,
            "watermark": time(&self.watermark),
            "last_tick": time(&self.last_tick),
        })
    }
}

/// Produces the current health of the daemon.
pub type HealthFn = Arc<dyn Fn() -> HealthReport + Send + Sync>;

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    health: HealthFn,
    status: Option<StatusPage>,
}

/// The status page's `Content-Security-Policy`: no script, no request to
/// anywhere, only the page's own inline style. Escaping keeps gateway text
/// out of the markup; this keeps a mistake there harmless.
const STATUS_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; \
                          form-action 'none'; frame-ancestors 'none'";

/// Binds `listen` and serves `/metrics`, `/healthz`, with `status` the
/// status page at `/`, and with `mcp` its routes, on a spawned task until `shutdown` becomes
/// `true` (or its sender is dropped), then stops accepting and lets open
/// requests finish.
///
/// Returns the bound address, so `127.0.0.1:0` works, and the task, which
/// ends after the shutdown. Binding errors are returned; the server task
/// logs any later error.
pub async fn serve(
    listen: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<dyn Fn() -> HealthReport + Send + Sync>,
    status: Option<StatusPage>,
    mcp: Option<Router>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let mut app = router(Shared {
        metrics,
        health,
        status,
    });
    if let Some(mcp) = mcp {
        app = app.merge(mcp);
    }
    let task = tokio::spawn(async move {
        let stopped = async move {
            // An error means the sender is gone, which is a shutdown too.
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await;
        match result {
            Ok(()) => tracing::info!(%addr, "operations endpoint stopped"),
            Err(error) => tracing::error!(%addr, %error, "operations endpoint failed"),
        }
    });
    tracing::info!(%addr, "operations endpoint listening");
    Ok((addr, task))
}

fn router(shared: Shared) -> Router {
    let mut router = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz));
    if shared.status.is_some() {
        router = router
            .route("/", get(status))
            .route("/incidents/{fingerprint}/chart.png", get(chart));
    }
    router.with_state(shared)
}

/// The status page's query: `format=html` (the default) or `format=json`.
#[derive(Debug, Default, serde::Deserialize)]
struct StatusQuery {
    format: Option<String>,
}

async fn status(State(shared): State<Shared>, Query(q): Query<StatusQuery>) -> Response {
    let Some(page) = &shared.status else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let json = match q.format.as_deref() {
        None | Some("html") => false,
        Some("json") => true,
        Some(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "format must be html or json\n".to_owned(),
            )
                .into_response();
        }
    };
    let mut response = match page.read().await {
        Ok(s) if json => Json(s).into_response(),
        Ok(s) => {
            let mut r = html::render(&s).into_response();
            let headers = r.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(STATUS_CSP),
            );
            r
        }
        Err(e) => {
            tracing::warn!(error = %e, "status page not served");
            (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
        }
    };
    let headers = for_browsers(&mut response, "no-store");
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Sets what every response meant for a browser carries: its
/// `Cache-Control`, and `X-Content-Type-Options: nosniff`. Returns the
/// headers for more.
fn for_browsers<'r>(response: &'r mut Response, cache_control: &'static str) -> &'r mut HeaderMap {
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers
}

/// The chart of an incident's newest notification, drawn from the alert
/// stored in the outbox (so Slack can show it: see `server.public_url`).
async fn chart(State(shared): State<Shared>, Path(fingerprint): Path<String>) -> Response {
    let Some(page) = &shared.status else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = match page.chart(&fingerprint).await {
        Ok(Some(png)) => {
            let mut r = png.into_response();
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
            r
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no chart for this incident\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "chart not served");
            (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
        }
    };
    // A newer notification of the incident may carry a new chart.
    for_browsers(&mut response, "max-age=300");
    response
}

async fn metrics(State(shared): State<Shared>) -> Response {
    let mut response = shared.metrics.render().into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn healthz(State(shared): State<Shared>) -> Response {
    let report = (shared.health)();
    let status = if report.healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = (status, Json(report.to_json())).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::sync::Mutex;
    use std::time::Duration;

    struct Running {
        base: String,
        addr: SocketAddr,
        stop: watch::Sender<bool>,
        task: JoinHandle<()>,
        metrics: Arc<Metrics>,
        health: Arc<Mutex<HealthReport>>,
    }

    async fn start() -> Running {
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(Mutex::new(HealthReport {
            healthy: true,
            ..HealthReport::default()
        }));
        let h = health.clone();
        let health_fn: HealthFn = Arc::new(move || h.lock().unwrap().clone());
        let (stop, rx) = watch::channel(false);
        let (addr, task) = serve(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics.clone(),
            health_fn,
            None,
            None,
            rx,
        )
        .await
        .unwrap();
        assert_ne!(addr.port(), 0);
        Running {
            base: format!("http://{addr}"),
            addr,
            stop,
            task,
            metrics,
            health,
        }
    }

    /// Waits for the server task, failing the test if it does not end.
    async fn stopped(task: JoinHandle<()>) {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("server did not stop")
            .unwrap();
    }

    #[tokio::test]
    async fn metrics_are_served_as_prometheus_text() {
        let r = start().await;
        r.metrics.windows_processed(7);
        r.metrics.finding("no_cache");
        let res = reqwest::get(format!("{}/metrics", r.base)).await.unwrap();
        assert_eq!(res.status(), 200);
        let ct = res.headers()[header::CONTENT_TYPE].to_str().unwrap();
        assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
        let body = res.text().await.unwrap();
        assert!(
            body.lines()
                .any(|l| l == "costwatch_windows_processed_total 7"),
            "{body}"
        );
        assert!(
            body.lines()
                .any(|l| l == r#"costwatch_findings_total{kind="no_cache"} 1"#),
            "{body}"
        );
        assert_eq!(body, r.metrics.render());
        r.stop.send(true).unwrap();
        stopped(r.task).await;
    }

    #[tokio::test]
    async fn healthz_is_200_when_healthy_and_503_with_the_reason_when_not() {
        let r = start().await;
        let watermark = Utc.with_ymd_and_hms(2026, 11, 2, 12, 0, 0).unwrap();
        let tick = Utc.with_ymd_and_hms(2026, 11, 2, 12, 7, 30).unwrap();
        *r.health.lock().unwrap() = HealthReport {
            healthy: true,
            reason: None,
            watermark: Some(watermark),
            last_tick: Some(tick),
        };
        let client = reqwest::Client::new();
        let res = client
            .get(format!("{}/healthz", r.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(
            res.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            body,
            json!({
                "status": "ok",
                "reason": null,
                "watermark": "2026-11-02T12:00:00Z",
                "last_tick": "2026-11-02T12:07:30Z",
            })
        );

        *r.health.lock().unwrap() = HealthReport {
            healthy: false,
            reason: Some("gateway rejected the admin key".into()),
            watermark: Some(watermark),
            last_tick: None,
        };
        let res = client
            .get(format!("{}/healthz", r.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["status"], "unhealthy");
        assert_eq!(body["reason"], "gateway rejected the admin key");
        assert_eq!(body["watermark"], "2026-11-02T12:00:00Z");
        assert_eq!(body["last_tick"], Value::Null);

        drop(client);
        r.stop.send(true).unwrap();
        stopped(r.task).await;
    }

    #[tokio::test]
    async fn other_paths_and_methods_are_refused() {
        let r = start().await;
        let client = reqwest::Client::new();
        let res = client.get(format!("{}/", r.base)).send().await.unwrap();
        assert_eq!(res.status(), 404);
        let res = client
            .post(format!("{}/metrics", r.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 405);
        drop(client);
        r.stop.send(true).unwrap();
        stopped(r.task).await;
    }

    #[tokio::test]
    async fn flipping_the_watch_stops_the_server_and_frees_the_port() {
        let r = start().await;
        let res = reqwest::get(format!("{}/healthz", r.base)).await.unwrap();
        assert_eq!(res.status(), 200);
        r.stop.send(true).unwrap();
        stopped(r.task).await;
        let err = reqwest::get(format!("{}/healthz", r.base))
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{err}");
        // The port is free again.
        TcpListener::bind(r.addr).await.unwrap();
    }

    #[tokio::test]
    async fn dropping_the_sender_also_stops_the_server() {
        let r = start().await;
        drop(r.stop);
        stopped(r.task).await;
    }

    #[test]
    fn an_unhealthy_report_without_a_reason_still_says_unhealthy() {
        let body = HealthReport::default().to_json();
        assert_eq!(
            body,
            json!({"status": "unhealthy", "reason": null, "watermark": null, "last_tick": null})
        );
    }
}
