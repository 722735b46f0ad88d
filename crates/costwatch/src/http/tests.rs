//! The shared plumbing against real servers on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::clock::RecordingSleeper;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

/// One scripted answer: status, `Retry-After`, body.
type Answer = (u16, Option<&'static str>, String);

/// Answers from a script, 200 `ok` once it is used up; counts requests.
#[derive(Clone, Default)]
struct Server {
    script: Arc<Mutex<VecDeque<Answer>>>,
    hits: Arc<Mutex<u32>>,
}

impl Server {
    async fn start(script: Vec<Answer>) -> (Server, SocketAddr) {
        let server = Server {
            script: Arc::new(Mutex::new(script.into())),
            ..Server::default()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(answer).with_state(server.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (server, addr)
    }

    fn hits(&self) -> u32 {
        *self.hits.lock().unwrap()
    }
}

async fn answer(State(s): State<Server>) -> (StatusCode, HeaderMap, String) {
    *s.hits.lock().unwrap() += 1;
    let (code, after, body) =
        s.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((200, None, "ok".into()));
    let mut headers = HeaderMap::new();
    if let Some(after) = after {
        headers.insert("retry-after", after.parse().unwrap());
    }
    (StatusCode::from_u16(code).unwrap(), headers, body)
}

fn client() -> HttpClient {
    HttpClient::new(ClientSettings::with_timeouts(
        Duration::from_secs(10),
        Duration::from_secs(2),
    ))
    .unwrap()
}

fn policy() -> RetryPolicy {
    RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(5))
}

/// GETs `/v1/things?token=…` from `addr` under `policy`, capped at `cap`.
async fn get(
    addr: SocketAddr,
    policy: &RetryPolicy,
    cap: usize,
) -> (
    Result<Retried<Vec<u8>>, GaveUp<HttpError>>,
    RecordingSleeper,
) {
    let http = client();
    let url = Url::parse(&format!("http://{addr}/v1/things?token=s3cret")).unwrap();
    let target = Target::path("GET", &url);
    let sleeper = RecordingSleeper::default();
    let out = http
        .fetch_with_retries(policy, &sleeper, &target, cap, || {
            http.reqwest().get(url.clone())
        })
        .await;
    (out, sleeper)
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    let (server, addr) = Server::start(vec![
        (429, Some("2"), "slow down".into()),
        (429, Some("3600"), "slow down".into()),
    ])
    .await;
    let (out, sleeper) = get(addr, &policy(), 1 << 10).await;
    let done = out.unwrap();
    assert_eq!((done.value.as_slice(), done.retries), (&b"ok"[..], 2));
    assert_eq!(
        sleeper.delays(),
        [Duration::from_secs(2), Duration::from_secs(5)]
    );
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn server_errors_are_retried_then_given_up_with_the_attempt_count() {
    let busy = || {
        (
            503,
            None,
            r#"{"error": {"message": "upstream down"}}"#.to_owned(),
        )
    };
    let (server, addr) = Server::start(vec![busy(), busy(), busy(), busy(), busy()]).await;
    let (out, sleeper) = get(addr, &policy(), 1 << 10).await;
    let gave_up = out.unwrap_err();
    assert_eq!(gave_up.attempts, 4);
    assert_eq!(server.hits(), 4);
    assert_eq!(sleeper.delays(), [100, 200, 400].map(Duration::from_millis));
    assert!(policy().is_transient(&gave_up.error));
    assert_eq!(
        gave_up.to_string(),
        "GET /v1/things: status 503 service unavailable: upstream down \
         (gave up after 4 attempts)"
    );
    assert!(!gave_up.to_string().contains("s3cret"));
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let (server, addr) = Server::start(vec![(404, None, "no such thing\n".into())]).await;
    let (out, sleeper) = get(addr, &policy(), 1 << 10).await;
    let gave_up = out.unwrap_err();
    assert_eq!(gave_up.attempts, 1);
    assert_eq!(gave_up.error.status(), Some(404));
    assert!(!policy().is_transient(&gave_up.error));
    assert_eq!(
        gave_up.to_string(),
        "GET /v1/things: status 404 not found: no such thing"
    );
    assert_eq!(server.hits(), 1);
    assert!(sleeper.delays().is_empty());
}

#[tokio::test]
async fn a_body_over_the_cap_fails_clearly_and_is_not_retried() {
    let big = "x".repeat(10_000);
    let (server, addr) = Server::start(vec![(200, None, big.clone())]).await;
    let (out, sleeper) = get(addr, &policy(), 4_096).await;
    let gave_up = out.unwrap_err();
    assert_eq!(
        gave_up.error,
        HttpError::TooLarge {
            target: "GET /v1/things".into(),
            cap: 4_096
        }
    );
    assert_eq!(
        gave_up.to_string(),
        "GET /v1/things: the answer is larger than max_body_bytes (4096)"
    );
    assert_eq!(server.hits(), 1);
    assert!(sleeper.delays().is_empty());

    // Exactly at the cap passes.
    let (_, addr) = Server::start(vec![(200, None, big)]).await;
    let (out, _) = get(addr, &policy(), 10_000).await;
    assert_eq!(out.unwrap().value.len(), 10_000);
}

/// A server that announces `Content-Length: 1000`, sends 10 bytes and
/// closes, `times` times; then answers whole.
async fn truncating_server(times: usize) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut served = 0;
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await.unwrap();
            if served < times {
                let head = "HTTP/1.1 200 OK\r\ncontent-length: 1000\r\nconnection: close\r\n\r\n";
                sock.write_all(head.as_bytes()).await.unwrap();
                sock.write_all(b"0123456789").await.unwrap();
            } else {
                let whole = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                sock.write_all(whole.as_bytes()).await.unwrap();
            }
            sock.shutdown().await.unwrap();
            served += 1;
        }
    });
    addr
}

#[tokio::test]
async fn a_truncated_body_is_an_error_not_a_short_success() {
    let addr = truncating_server(usize::MAX).await;
    let one = RetryPolicy {
        max_retries: 1,
        ..policy()
    };
    let (out, sleeper) = get(addr, &one, 1 << 20).await;
    let gave_up = out.unwrap_err();
    assert!(
        matches!(&gave_up.error, HttpError::CutOff { target, .. } if target == "GET /v1/things"),
        "{gave_up:?}"
    );
    assert!(gave_up.to_string().contains("body cut off"), "{gave_up}");
    assert_eq!(gave_up.attempts, 2);
    assert_eq!(sleeper.delays(), [Duration::from_millis(100)]);

    // A cut-off answer is sent again only when the request may be repeated.
    let addr = truncating_server(1).await;
    let (out, _) = get(addr, &policy(), 1 << 20).await;
    assert_eq!(out.unwrap().value, b"ok");
    let addr = truncating_server(1).await;
    let billed = policy().with_resend(Resend::OnlyUnprocessed);
    let (out, sleeper) = get(addr, &billed, 1 << 20).await;
    let gave_up = out.unwrap_err();
    assert_eq!(gave_up.attempts, 1);
    assert!(gave_up.error.maybe_processed());
    assert!(sleeper.delays().is_empty());
}

#[tokio::test]
async fn a_refused_connection_is_transient_and_never_reached_the_server() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let billed = RetryPolicy {
        max_retries: 1,
        ..policy().with_resend(Resend::OnlyUnprocessed)
    };
    let (out, sleeper) = get(addr, &billed, 1 << 10).await;
    let gave_up = out.unwrap_err();
    assert!(
        matches!(gave_up.error, HttpError::Send { connect: true, .. }),
        "{gave_up:?}"
    );
    assert!(!gave_up.error.maybe_processed());
    assert_eq!(gave_up.attempts, 2);
    assert_eq!(sleeper.delays().len(), 1);
    assert!(!gave_up.to_string().contains("s3cret"));
}
