//! The webhook channel: one JSON `POST` per alert, in costwatch's own shape,
//! Slack's or Alertmanager's (see [`super::render`] for the bodies).
//!
//! Headers: `Content-Type: application/json`, `User-Agent: costwatch/<version>`,
//! `X-Costwatch-Idempotency-Key`, and `X-Costwatch-Signature` (the HMAC of the
//! exact body bytes) when a secret is set. A 2xx answer is success; 408, 429,
//! 5xx, network errors and timeouts are worth retrying; any other answer
//! (redirects included: they are not followed) is a rejection.
//!
//! Webhook URLs often carry a token in their path or query, so error
//! messages name only the scheme, host and port.

use super::render::{WebhookShape, signature, webhook_body_linked};
use super::{Alert, Notifier, NotifyError};
use crate::http::{ClientSettings, HttpClient, HttpError, RetryPolicy, Target, TransientStatuses};
use crate::secret::Secret;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use url::Url;

/// The `User-Agent` of every request.
pub const USER_AGENT: &str = crate::http::USER_AGENT;

/// One attempt per delivery (the outbox retries later); 408 counts as
/// transient because receivers answer it when they timed out reading.
const POLICY: RetryPolicy = RetryPolicy::single(TransientStatuses::WithRequestTimeout);

/// Header carrying the body's HMAC-SHA256 signature.
pub const SIGNATURE_HEADER: &str = "X-Costwatch-Signature";

/// Header carrying [`Alert::idempotency_key`].
pub const IDEMPOTENCY_HEADER: &str = "X-Costwatch-Idempotency-Key";

/// Everything a webhook channel needs: one `notify.webhooks` entry.
pub use super::settings::WebhookConfig as WebhookSettings;

/// Why a webhook channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum WebhookSetupError {
    /// The URL is not http(s).
    #[error("webhook {name}: url must be http or https, not {scheme}")]
    Scheme {
        /// The channel's name.
        name: String,
        /// The URL's scheme.
        scheme: String,
    },
    /// The HTTP client could not be built.
    #[error("webhook {name}: http client: {reason}")]
    Client {
        /// The channel's name.
        name: String,
        /// What went wrong.
        reason: String,
    },
}

/// Sends alerts to one webhook.
pub struct WebhookNotifier {
    name: String,
    url: Url,
    /// The call without path, query or credentials, for messages.
    target: Target,
    shape: WebhookShape,
    secret: Option<Secret>,
    client: HttpClient,
    repost_interval: std::time::Duration,
    /// `server.public_url`, which a Slack body links the chart from.
    public_url: Option<Url>,
}

impl std::fmt::Debug for WebhookNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookNotifier")
            .field("name", &self.name)
            .field("url", &self.target.shown())
            .field("shape", &self.shape)
            .field("signed", &self.secret.is_some())
            .finish_non_exhaustive()
    }
}

impl WebhookNotifier {
    /// Prepares the channel; no request is made.
    pub fn new(settings: WebhookSettings) -> Result<WebhookNotifier, WebhookSetupError> {
        let scheme = settings.url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(WebhookSetupError::Scheme {
                name: settings.name,
                scheme: scheme.to_owned(),
            });
        }
        let client = HttpClient::new(ClientSettings {
            timeout: Some(settings.timeout),
            connect_timeout: Some(settings.timeout),
            follow_redirects: false,
        })
        .map_err(|e| WebhookSetupError::Client {
            name: settings.name.clone(),
            reason: match e {
                HttpError::Setup { detail } => detail,
                other => other.to_string(),
            },
        })?;
        Ok(WebhookNotifier {
            target: Target::origin("POST", &settings.url),
            name: settings.name,
            url: settings.url,
            shape: settings.shape,
            secret: settings.secret,
            client,
            repost_interval: settings.repost_interval,
            public_url: None,
        })
    }

    /// Links alert charts from `public_url` (`server.public_url`): a Slack
    /// body then shows the chart of an alert that has one.
    pub fn with_public_url(mut self, public_url: Option<Url>) -> WebhookNotifier {
        self.public_url = public_url;
        self
    }

    /// The prefix of every error message: `webhook NAME: POST scheme://host/…`.
    fn context(&self) -> String {
        format!("webhook {}: {}", self.name, self.target)
    }

    /// Removes anything secret a message might have picked up.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.replace(self.url.as_str(), self.target.shown());
        let path_and_more = &self.url[url::Position::BeforePath..];
        if path_and_more.len() > 1 {
            text = text.replace(path_and_more, "/…");
        }
        if let Some(secret) = &self.secret
            && secret.expose().len() >= 4
        {
            text = text.replace(secret.expose(), "[redacted]");
        }
        text
    }

    /// A failed delivery: transient or rejected, scrubbed of secrets.
    fn delivery_error(&self, error: &HttpError) -> NotifyError {
        let message = self.scrub(&format!("webhook {}: {error}", self.name));
        if POLICY.is_transient(error) {
            NotifyError::Transient(message)
        } else {
            NotifyError::Rejected(message)
        }
    }
}

impl Notifier for WebhookNotifier {
    fn name(&self) -> &str {
        &self.name
    }

    async fn send(&self, alert: &Alert) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(&webhook_body_linked(
            alert,
            self.shape,
            self.public_url.as_ref(),
        ))
        .map_err(|e| {
            NotifyError::Rejected(format!(
                "{}: body could not be encoded: {e}",
                self.context()
            ))
        })?;
        let mut request = self
            .client
            .reqwest()
            .post(self.url.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(IDEMPOTENCY_HEADER, header_value(&alert.idempotency_key()));
        if let Some(secret) = &self.secret {
            request = request.header(
                SIGNATURE_HEADER,
                header_value(&signature(secret.expose(), &body)),
            );
        }
        // A 2xx answer's body is not read: nothing in it matters.
        self.client
            .send(request.body(body), &self.target)
            .await
            .map(drop)
            .map_err(|e| self.delivery_error(&e))
    }

    /// Alertmanager resolves a firing alert it is not told about again
    /// before its `endsAt`; the other shapes keep what they were told.
    fn repost_interval(&self) -> Option<std::time::Duration> {
        (self.shape == WebhookShape::Alertmanager).then_some(self.repost_interval)
    }
}

/// Whether an answer with `status` is worth retrying: 408, 429 and 5xx.
pub fn is_transient_status(status: StatusCode) -> bool {
    POLICY.statuses.contains(status)
}

/// `scheme://host[:port]/…`: the URL with its path, query, fragment and
/// credentials left out.
pub fn redacted_url(url: &Url) -> String {
    crate::http::origin_only(url)
}

/// A header value from alert data: visible ASCII only.
fn header_value(text: &str) -> HeaderValue {
    let safe: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    HeaderValue::from_str(&safe).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::render::tests::sample_alert;
    use crate::notify::render::{verify_signature, webhook_body};
    use axum::Router;
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, Uri};
    use std::collections::VecDeque;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// One request the receiver got.
    #[derive(Debug, Clone)]
    struct Received {
        uri: String,
        headers: HeaderMap,
        body: Bytes,
    }

    impl Received {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.get(name).and_then(|v| v.to_str().ok())
        }

        fn json(&self) -> serde_json::Value {
            serde_json::from_slice(&self.body).unwrap()
        }
    }

    /// What the receiver answers, in order; 200 once the script is used up.
    #[derive(Clone, Default)]
    struct Receiver {
        received: Arc<Mutex<Vec<Received>>>,
        script: Arc<Mutex<VecDeque<(u16, &'static str)>>>,
        delay: Option<Duration>,
    }

    impl Receiver {
        fn answering(script: &[(u16, &'static str)]) -> Receiver {
            Receiver {
                script: Arc::new(Mutex::new(script.iter().copied().collect())),
                ..Receiver::default()
            }
        }

        /// Serves on 127.0.0.1:0 until the test ends.
        async fn serve(&self) -> SocketAddr {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let app = Router::new().fallback(handle).with_state(self.clone());
            tokio::spawn(async move {
                axum::serve(listener, app).await.unwrap();
            });
            addr
        }

        fn received(&self) -> Vec<Received> {
            self.received.lock().unwrap().clone()
        }
    }

    async fn handle(
        State(rx): State<Receiver>,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> (axum::http::StatusCode, axum::http::HeaderMap, String) {
        rx.received.lock().unwrap().push(Received {
            uri: uri.to_string(),
            headers,
            body,
        });
        if let Some(delay) = rx.delay {
            tokio::time::sleep(delay).await;
        }
        let (code, text) = rx.script.lock().unwrap().pop_front().unwrap_or((200, "ok"));
        let mut out = axum::http::HeaderMap::new();
        if code == 302 {
            out.insert("location", "/elsewhere".parse().unwrap());
        }
        (
            axum::http::StatusCode::from_u16(code).unwrap(),
            out,
            text.to_owned(),
        )
    }

    const TOKEN: &str = "T0KEN-abc123";
    const QUERY_TOKEN: &str = "qs-s3cr3t";

    fn settings(addr: SocketAddr, shape: WebhookShape, secret: Option<&str>) -> WebhookSettings {
        WebhookSettings {
            name: "ops-hook".into(),
            url: Url::parse(&format!("http://{addr}/hooks/{TOKEN}?token={QUERY_TOKEN}")).unwrap(),
            shape,
            secret_file: None,
            secret: secret.map(Secret::new),
            timeout: Duration::from_secs(10),
            repost_interval: Duration::from_secs(60),
        }
    }

    fn assert_no_token(text: &str) {
        assert!(!text.contains(TOKEN), "token leaked: {text}");
        assert!(!text.contains(QUERY_TOKEN), "query token leaked: {text}");
        assert!(!text.contains("/hooks"), "path leaked: {text}");
    }

    #[tokio::test]
    async fn generic_post_is_signed_and_carries_the_headers() {
        let rx = Receiver::default();
        let addr = rx.serve().await;
        let notifier =
            WebhookNotifier::new(settings(addr, WebhookShape::Generic, Some("hook-secret")))
                .unwrap();
        assert_eq!(notifier.name(), "ops-hook");
        let alert = sample_alert();
        notifier.send(&alert).await.unwrap();

        let got = rx.received();
        assert_eq!(got.len(), 1);
        let req = &got[0];
        assert_eq!(req.uri, format!("/hooks/{TOKEN}?token={QUERY_TOKEN}"));
        assert_eq!(req.header("content-type"), Some("application/json"));
        assert_eq!(req.header("user-agent"), Some(USER_AGENT));
        assert!(USER_AGENT.starts_with("costwatch/0."));
        assert_eq!(
            req.header("x-costwatch-idempotency-key"),
            Some("fp-0123456789abcdef:firing:0")
        );
        let sig = req.header("x-costwatch-signature").unwrap();
        assert!(verify_signature("hook-secret", &req.body, sig));
        assert!(!verify_signature("not-the-secret", &req.body, sig));
        let mut tampered = req.body.to_vec();
        tampered.push(b' ');
        assert!(!verify_signature("hook-secret", &tampered, sig));

        assert_eq!(req.json(), webhook_body(&alert, WebhookShape::Generic));
        let back: Alert = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(back, alert);
    }

    #[tokio::test]
    async fn no_secret_means_no_signature() {
        let rx = Receiver::default();
        let addr = rx.serve().await;
        WebhookNotifier::new(settings(addr, WebhookShape::Generic, None))
            .unwrap()
            .send(&sample_alert())
            .await
            .unwrap();
        let got = rx.received();
        assert!(got[0].header("x-costwatch-signature").is_none());
        assert!(got[0].header("x-costwatch-idempotency-key").is_some());
    }

    #[tokio::test]
    async fn server_errors_are_transient_until_the_receiver_recovers() {
        let rx = Receiver::answering(&[(503, "busy"), (503, "busy"), (429, "slow down")]);
        let addr = rx.serve().await;
        let notifier =
            WebhookNotifier::new(settings(addr, WebhookShape::Generic, Some("hook-secret")))
                .unwrap();
        let alert = sample_alert();
        for expected in ["status 503 service unavailable: busy", "503", "status 429"] {
            match notifier.send(&alert).await {
                Err(NotifyError::Transient(m)) => {
                    assert!(m.contains(expected), "{m}");
                    assert!(
                        m.starts_with(&format!("webhook ops-hook: POST http://{addr}/…")),
                        "{m}"
                    );
                    assert_no_token(&m);
                }
                other => panic!("expected Transient, got {other:?}"),
            }
        }
        notifier.send(&alert).await.unwrap();

        // Every attempt was the same notification: same key, same bytes.
        let got = rx.received();
        assert_eq!(got.len(), 4);
        for req in &got {
            assert_eq!(req.body, got[0].body);
            assert_eq!(
                req.header("x-costwatch-idempotency-key"),
                got[0].header("x-costwatch-idempotency-key")
            );
        }
    }

    #[tokio::test]
    async fn client_errors_and_redirects_are_rejected() {
        let rx = Receiver::answering(&[(400, "invalid_payload"), (404, "no_service"), (302, "")]);
        let addr = rx.serve().await;
        let notifier = WebhookNotifier::new(settings(addr, WebhookShape::Slack, None)).unwrap();
        let alert = sample_alert();
        for expected in [
            "status 400 bad request: invalid_payload",
            "status 404 not found: no_service",
            "status 302 found",
        ] {
            match notifier.send(&alert).await {
                Err(NotifyError::Rejected(m)) => {
                    assert!(m.contains(expected), "{m}");
                    assert_no_token(&m);
                }
                other => panic!("expected Rejected, got {other:?}"),
            }
        }
        // The redirect was not followed.
        assert_eq!(rx.received().len(), 3);
    }

    #[tokio::test]
    async fn error_bodies_echoing_the_url_or_secret_are_scrubbed() {
        let echo: &'static str = Box::leak(
            format!("bad token {TOKEN} in /hooks/{TOKEN}?token={QUERY_TOKEN} with hook-secret")
                .into_boxed_str(),
        );
        let rx = Receiver::answering(&[(401, echo)]);
        let addr = rx.serve().await;
        let err = WebhookNotifier::new(settings(addr, WebhookShape::Generic, Some("hook-secret")))
            .unwrap()
            .send(&sample_alert())
            .await
            .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(matches!(err, NotifyError::Rejected(_)), "{text}");
        assert!(text.contains("status 401"), "{text}");
        assert!(!text.contains("hook-secret"), "{text}");
        assert!(!text.contains(QUERY_TOKEN), "{text}");
        assert!(!text.contains(&format!("/hooks/{TOKEN}")), "{text}");
    }

    #[tokio::test]
    async fn slack_shape_is_received() {
        let rx = Receiver::default();
        let addr = rx.serve().await;
        let alert = sample_alert();
        WebhookNotifier::new(settings(addr, WebhookShape::Slack, Some("s3cret")))
            .unwrap()
            .send(&alert)
            .await
            .unwrap();
        let req = &rx.received()[0];
        let body = req.json();
        assert_eq!(body["text"], alert.title.as_str());
        let blocks = body["blocks"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "header");
        assert_eq!(blocks[0]["text"]["text"], alert.title.as_str());
        assert!(blocks.iter().any(|b| {
            b["text"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("*Top sessions*") && t.contains("sess-top-001"))
        }));
        assert!(verify_signature(
            "s3cret",
            &req.body,
            req.header("x-costwatch-signature").unwrap()
        ));
    }

    #[tokio::test]
    async fn alertmanager_shape_is_received() {
        let rx = Receiver::default();
        let addr = rx.serve().await;
        let mut alert = sample_alert();
        alert.status = crate::notify::AlertStatus::Resolved;
        alert.ends_at = Some(alert.created_at);
        WebhookNotifier::new(settings(addr, WebhookShape::Alertmanager, None))
            .unwrap()
            .send(&alert)
            .await
            .unwrap();
        let req = &rx.received()[0];
        assert_eq!(
            req.header("x-costwatch-idempotency-key"),
            Some("fp-0123456789abcdef:resolved:0")
        );
        let body = req.json();
        let list = body.as_array().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["labels"]["alertname"], "costwatch_no_cache");
        assert_eq!(list[0]["labels"]["severity"], "warning");
        assert_eq!(list[0]["labels"]["fingerprint"], "fp-0123456789abcdef");
        assert_eq!(list[0]["labels"]["feature"], "support-agent");
        assert_eq!(list[0]["annotations"]["summary"], alert.title.as_str());
        assert_eq!(list[0]["startsAt"], "2026-03-04T10:00:00Z");
        assert_eq!(list[0]["endsAt"], "2026-03-04T11:00:00Z");
    }

    #[tokio::test]
    async fn unreachable_receiver_is_transient_without_the_token() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let err = WebhookNotifier::new(settings(addr, WebhookShape::Generic, Some("hook-secret")))
            .unwrap()
            .send(&sample_alert())
            .await
            .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(matches!(err, NotifyError::Transient(_)), "{text}");
        assert!(text.contains("error sending request"), "{text}");
        assert_no_token(&text);
    }

    #[tokio::test]
    async fn slow_receiver_times_out_as_transient() {
        let rx = Receiver {
            delay: Some(Duration::from_secs(30)),
            ..Receiver::default()
        };
        let addr = rx.serve().await;
        let mut s = settings(addr, WebhookShape::Generic, None);
        s.timeout = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let err = WebhookNotifier::new(s)
            .unwrap()
            .send(&sample_alert())
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        let text = err.to_string();
        assert!(matches!(err, NotifyError::Transient(_)), "{text}");
        assert!(text.contains("timed out after 300ms"), "{text}");
        assert_no_token(&text);
    }

    #[test]
    fn setup_rejects_other_schemes_and_debug_hides_secrets() {
        let s = WebhookSettings {
            name: "x".into(),
            url: Url::parse("ftp://example.com/x").unwrap(),
            shape: WebhookShape::Generic,
            secret_file: None,
            secret: None,
            timeout: Duration::from_secs(1),
            repost_interval: Duration::from_secs(60),
        };
        let err = WebhookNotifier::new(s).unwrap_err();
        assert_eq!(
            err.to_string(),
            "webhook x: url must be http or https, not ftp"
        );

        let s = WebhookSettings {
            name: "slack".into(),
            url: Url::parse(&format!(
                "https://user:pw@chat.example.com:8443/hooks/{TOKEN}?token={QUERY_TOKEN}"
            ))
            .unwrap(),
            shape: WebhookShape::Slack,
            secret_file: None,
            secret: Some(Secret::new("hook-secret")),
            timeout: Duration::from_secs(1),
            repost_interval: Duration::from_secs(60),
        };
        let notifier = WebhookNotifier::new(s).unwrap();
        let debug = format!("{notifier:?}");
        assert!(debug.contains("https://chat.example.com:8443/…"), "{debug}");
        assert!(
            !debug.contains("hook-secret") && !debug.contains("pw@"),
            "{debug}"
        );
        assert_no_token(&debug);
    }

    #[test]
    fn transient_statuses() {
        for code in [408, 429, 500, 502, 503, 504] {
            assert!(
                is_transient_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
        for code in [300, 301, 400, 401, 403, 404, 410, 422] {
            assert!(
                !is_transient_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
    }
}
