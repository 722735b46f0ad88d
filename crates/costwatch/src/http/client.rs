//! Building the HTTP client and making one exchange with it.

use super::body::{CappedBody, error_message};
use super::error::{HttpError, Target, describe};
use super::retry::{GaveUp, Retried, RetryPolicy, retry_after};
use crate::clock::Sleeper;
use crate::secret::Secret;
use reqwest::header::HeaderValue;
use std::time::Duration;
use url::Url;

/// The `User-Agent` of every request costwatch makes.
pub const USER_AGENT: &str = concat!("costwatch/", env!("CARGO_PKG_VERSION"));

/// How an [`HttpClient`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSettings {
    /// Timeout of one request, connection and whole body included; `None`
    /// when the caller bounds each attempt itself.
    pub timeout: Option<Duration>,
    /// Timeout of opening the connection.
    pub connect_timeout: Option<Duration>,
    /// Whether redirects are followed (at most 10) or answered as an error
    /// status.
    pub follow_redirects: bool,
}

impl ClientSettings {
    /// A whole-request and a connect timeout; redirects followed.
    pub fn with_timeouts(timeout: Duration, connect_timeout: Duration) -> ClientSettings {
        ClientSettings {
            timeout: Some(timeout),
            connect_timeout: Some(connect_timeout),
            follow_redirects: true,
        }
    }
}

/// A reqwest client (rustls) with costwatch's user agent and timeouts.
/// Cloning shares the connection pool.
#[derive(Debug, Clone)]
pub struct HttpClient {
    inner: reqwest::Client,
    timeout: Option<Duration>,
}

impl HttpClient {
    /// Builds the client.
    pub fn new(settings: ClientSettings) -> Result<HttpClient, HttpError> {
        // The system's root certificates are read on the first HTTPS
        // connection of the process, not for every client built.
        let tls = super::tls::client_config(super::tls::shared_roots()).map_err(|e| {
            HttpError::Setup {
                detail: format!("TLS: {e}"),
            }
        })?;
        let mut builder = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .tls_backend_preconfigured(tls);
        if let Some(t) = settings.timeout {
            builder = builder.timeout(t);
        }
        if let Some(t) = settings.connect_timeout {
            builder = builder.connect_timeout(t);
        }
        if !settings.follow_redirects {
            builder = builder.redirect(reqwest::redirect::Policy::none());
        }
        let inner = builder.build().map_err(|e| HttpError::Setup {
            detail: describe(e, None),
        })?;
        Ok(HttpClient {
            inner,
            timeout: settings.timeout,
        })
    }

    /// The reqwest client, to build requests with.
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.inner
    }

    /// Sends `request`. A 2xx answer is returned unread; any other status
    /// is read (its message, at most [`super::ERROR_BODY_LIMIT`] bytes) into
    /// [`HttpError::Status`].
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        target: &Target,
    ) -> Result<reqwest::Response, HttpError> {
        let response = request.send().await.map_err(|e| {
            // A connection that never opened names where it was going.
            let to = e
                .url()
                .filter(|_| e.is_connect())
                .and_then(|u| Some((u.host_str()?.to_owned(), u.port_or_known_default()?)));
            let connect = e.is_connect();
            let timed_out = e.is_timeout();
            let detail = describe(e, self.timeout);
            HttpError::Send {
                target: target.to_string(),
                connect,
                timed_out,
                detail: match to {
                    Some((host, port)) => format!("cannot connect to {host}:{port}: {detail}"),
                    None => detail,
                },
            }
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let message = error_message(response).await;
        Err(HttpError::Status {
            target: target.to_string(),
            status: status.as_u16(),
            message,
            retry_after,
        })
    }

    /// The body of `response`, read chunk by chunk under `cap` bytes.
    pub fn body(
        &self,
        response: reqwest::Response,
        cap: usize,
        target: &Target,
    ) -> Result<CappedBody, HttpError> {
        CappedBody::new(response, cap, target.to_string(), self.timeout)
    }

    /// One exchange: sends `request` and reads the whole answer under `cap`
    /// bytes.
    pub async fn fetch(
        &self,
        request: reqwest::RequestBuilder,
        target: &Target,
        cap: usize,
    ) -> Result<Vec<u8>, HttpError> {
        let response = self.send(request, target).await?;
        self.body(response, cap, target)?.read_to_end().await
    }

    /// [`HttpClient::fetch`] with retries under `policy`; `request` builds
    /// each attempt's request.
    pub async fn fetch_with_retries<F>(
        &self,
        policy: &RetryPolicy,
        sleeper: &dyn Sleeper,
        target: &Target,
        cap: usize,
        request: F,
    ) -> Result<Retried<Vec<u8>>, GaveUp<HttpError>>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let call = target.to_string();
        policy
            .run(sleeper, &call, || async {
                self.fetch(request(), target, cap)
                    .await
                    .map_err(|e| policy.attempt(e))
            })
            .await
    }
}

/// `Bearer <key>` as a sensitive header value (never logged); `None` when
/// the key holds characters a header cannot carry.
pub fn bearer(key: &Secret) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose())).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// `url` with a trailing `/` on its path, so relative paths join below it.
pub fn as_directory(mut url: Url) -> Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}
