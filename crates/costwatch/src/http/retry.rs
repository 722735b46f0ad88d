//! When to try a call again, and how long to wait first.

use super::error::HttpError;
use crate::clock::Sleeper;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// Which error statuses are worth another attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransientStatuses {
    /// 429 and every 5xx.
    RateLimitAndServerErrors,
    /// 408, 429 and every 5xx: for receivers that answer 408 when they
    /// timed out reading the request.
    WithRequestTimeout,
}

impl TransientStatuses {
    /// Whether `status` is in the set.
    pub fn contains(self, status: StatusCode) -> bool {
        status == StatusCode::TOO_MANY_REQUESTS
            || status.is_server_error()
            || (self == TransientStatuses::WithRequestTimeout
                && status == StatusCode::REQUEST_TIMEOUT)
    }
}

/// Which transient failures may be sent again at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resend {
    /// Any: repeating the request is harmless (reads, idempotent messages).
    AnyTransient,
    /// Only those where the server certainly did not process the request:
    /// a connection never opened, or a transient status. A timeout after
    /// sending or an answer cut off may have been processed (and billed),
    /// so it is final.
    OnlyUnprocessed,
}

/// How a client retries: which failures, how often, how long it waits.
///
/// The wait before retry `n` (from 0) is `base * 2^n`, at most `max_delay`;
/// a `Retry-After` from the server replaces it, also at most `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub max_retries: u32,
    /// First backoff delay; doubles per attempt.
    pub base: Duration,
    /// Longest backoff, and longest `Retry-After` honoured.
    pub max_delay: Duration,
    /// Which error statuses are transient.
    pub statuses: TransientStatuses,
    /// Which transient failures are sent again.
    pub resend: Resend,
}

impl RetryPolicy {
    /// Exponential backoff from `base` up to `max_delay`, `max_retries`
    /// times, for 429, 5xx and any transient failure.
    pub fn exponential(max_retries: u32, base: Duration, max_delay: Duration) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            base,
            max_delay,
            statuses: TransientStatuses::RateLimitAndServerErrors,
            resend: Resend::AnyTransient,
        }
    }

    /// One attempt only; [`RetryPolicy::is_transient`] still tells the
    /// caller whether a later delivery may succeed.
    pub const fn single(statuses: TransientStatuses) -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            base: Duration::ZERO,
            max_delay: Duration::ZERO,
            statuses,
            resend: Resend::AnyTransient,
        }
    }

    /// The same policy with another set of transient statuses.
    pub fn with_statuses(self, statuses: TransientStatuses) -> RetryPolicy {
        RetryPolicy { statuses, ..self }
    }

    /// The same policy with another resend rule.
    pub fn with_resend(self, resend: Resend) -> RetryPolicy {
        RetryPolicy { resend, ..self }
    }

    /// Whether a later attempt may succeed: network failures, timeouts,
    /// bodies cut off and transient statuses. Oversized answers and other
    /// statuses are not.
    pub fn is_transient(&self, error: &HttpError) -> bool {
        match error {
            HttpError::Send { .. } | HttpError::CutOff { .. } => true,
            HttpError::Status { status, .. } => {
                StatusCode::from_u16(*status).is_ok_and(|s| self.statuses.contains(s))
            }
            HttpError::Setup { .. } | HttpError::TooLarge { .. } => false,
        }
    }

    /// Whether `error` may be retried at once under this policy.
    pub fn should_retry(&self, error: &HttpError) -> bool {
        self.is_transient(error)
            && (self.resend == Resend::AnyTransient || !error.maybe_processed())
    }

    /// `error` as the end of one attempt: retried or final.
    pub fn attempt(&self, error: HttpError) -> Attempt<HttpError> {
        if self.should_retry(&error) {
            Attempt::Retry {
                retry_after: error.retry_after(),
                error,
            }
        } else {
            Attempt::Stop(error)
        }
    }

    /// The wait before retry `retry` (from 0).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self
            .base
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.max_delay);
        retry_after.map_or(backoff, |a| a.min(self.max_delay))
    }

    /// Runs `attempt` until it succeeds, stops, or the retries are used up,
    /// waiting on `sleeper` in between. `call` names the call in logs.
    pub async fn run<T, E, F, Fut>(
        &self,
        sleeper: &dyn Sleeper,
        call: &str,
        mut attempt: F,
    ) -> Result<Retried<T>, GaveUp<E>>
    where
        E: fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Attempt<E>>>,
    {
        let mut retries: u32 = 0;
        loop {
            let (error, retry_after) = match attempt().await {
                Ok(value) => return Ok(Retried { value, retries }),
                Err(Attempt::Stop(error)) => {
                    return Err(GaveUp {
                        error,
                        attempts: retries + 1,
                    });
                }
                Err(Attempt::Retry { error, retry_after }) => (error, retry_after),
            };
            if retries >= self.max_retries {
                return Err(GaveUp {
                    error,
                    attempts: retries + 1,
                });
            }
            let wait = self.delay(retries, retry_after);
            let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            // One warning a failing call; its further attempts are details.
            if retries == 0 {
                tracing::warn!(
                    call,
                    retries = self.max_retries,
                    wait_ms,
                    error = %error,
                    "http call failed; retrying quietly"
                );
            } else {
                tracing::debug!(call, attempt = retries + 1, wait_ms, error = %error, "http call failed again; retrying");
            }
            retries += 1;
            sleeper.sleep(wait).await;
        }
    }
}

/// How one failed attempt ended.
#[derive(Debug)]
pub enum Attempt<E> {
    /// Worth another attempt, after the server's `Retry-After` if it gave one.
    Retry {
        /// What went wrong.
        error: E,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// Final.
    Stop(E),
}

/// A success, and the retries it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retried<T> {
    /// What the successful attempt returned.
    pub value: T,
    /// Attempts before it that failed.
    pub retries: u32,
}

/// The last error of a call, and how many attempts were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaveUp<E> {
    /// The last attempt's error.
    pub error: E,
    /// Attempts made, the first included.
    pub attempts: u32,
}

impl<E: fmt::Display> fmt::Display for GaveUp<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.attempts > 1 {
            write!(
                f,
                "{} (gave up after {} attempts)",
                self.error, self.attempts
            )
        } else {
            write!(f, "{}", self.error)
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for GaveUp<E> {}

/// The `Retry-After` header in seconds (the date form is not honoured).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn status(code: u16) -> HttpError {
        HttpError::Status {
            target: "GET /x".into(),
            status: code,
            message: String::new(),
            retry_after: None,
        }
    }

    fn send(connect: bool) -> HttpError {
        HttpError::Send {
            target: "POST /x".into(),
            detail: "d".into(),
            connect,
            timed_out: !connect,
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_retry_after_is_capped() {
        let p = RetryPolicy::exponential(5, Duration::from_millis(100), Duration::from_secs(1));
        let waits: Vec<_> = (0..5).map(|n| p.delay(n, None)).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000].map(Duration::from_millis));
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(7))),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.delay(3, Some(Duration::from_millis(5))),
            Duration::from_millis(5)
        );
        assert_eq!(p.delay(u32::MAX, None), Duration::from_secs(1));
    }

    #[test]
    fn statuses_and_resend_rules_decide_retries() {
        let p = RetryPolicy::exponential(2, Duration::ZERO, Duration::ZERO);
        for code in [429, 500, 502, 503, 504] {
            assert!(p.should_retry(&status(code)), "{code}");
        }
        for code in [400, 401, 403, 404, 408, 302] {
            assert!(!p.is_transient(&status(code)), "{code}");
        }
        let webhook = p.with_statuses(TransientStatuses::WithRequestTimeout);
        assert!(webhook.is_transient(&status(408)));
        assert!(p.should_retry(&send(false)));

        let billed = p.with_resend(Resend::OnlyUnprocessed);
        assert!(billed.should_retry(&send(true)));
        assert!(!billed.should_retry(&send(false)));
        assert!(billed.is_transient(&send(false)));
        assert!(billed.should_retry(&status(503)));
        let cut = HttpError::CutOff {
            target: "POST /x".into(),
            detail: "d".into(),
            timed_out: false,
        };
        assert!(!billed.should_retry(&cut) && p.should_retry(&cut));
        let big = HttpError::TooLarge {
            target: "GET /x".into(),
            cap: 1,
        };
        assert!(!p.is_transient(&big));
    }

    #[test]
    fn gave_up_names_the_attempts() {
        let g = GaveUp {
            error: "boom",
            attempts: 3,
        };
        assert_eq!(g.to_string(), "boom (gave up after 3 attempts)");
        let once = GaveUp {
            error: "boom",
            attempts: 1,
        };
        assert_eq!(once.to_string(), "boom");
    }
}
