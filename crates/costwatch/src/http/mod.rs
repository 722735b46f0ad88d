//! The HTTP plumbing every outbound client shares: the gateway source, the
//! MCP client, the investigating model and the webhook channel.
//!
//! - [`HttpClient`]: reqwest (rustls) with the `costwatch/<version>` user
//!   agent, timeouts and the redirect rule; one exchange sends a request and
//!   turns any non-2xx answer into [`HttpError::Status`] with the server's
//!   message.
//! - [`CappedBody`]: answers are read chunk by chunk under a size cap; a
//!   body over the cap fails with [`HttpError::TooLarge`], a body cut off
//!   with [`HttpError::CutOff`], never a short success.
//! - [`RetryPolicy`]: which failures are transient, which may be sent again
//!   at once ([`Resend`]), exponential backoff with a cap, `Retry-After`
//!   honoured up to the same cap, and the attempts limit. Waits go through
//!   the injected [`Sleeper`](crate::clock::Sleeper), so tests record them.
//! - [`HttpError`]: what happened, with the call named without secrets
//!   ([`Target`]) and a short snippet of an error body.
//!
//! What differs between clients is a parameter: the transient statuses
//! (webhooks count 408), the resend rule (a billed model call is never sent
//! again once it may have been processed), the body cap and the [`Target`]
//! form. Client-specific meaning (an MCP session that expired, a model
//! error's billing) is built on top, in the client.

mod body;
mod client;
mod error;
mod retry;
mod tls;

#[cfg(test)]
mod tests;

pub use body::{CappedBody, ERROR_BODY_LIMIT, SNIPPET_CHARS, error_text, snippet};
pub use client::{ClientSettings, HttpClient, USER_AGENT, as_directory, bearer};
pub use error::{HttpError, Target, chain, origin_only};
pub use retry::{Attempt, GaveUp, Resend, Retried, RetryPolicy, TransientStatuses, retry_after};
