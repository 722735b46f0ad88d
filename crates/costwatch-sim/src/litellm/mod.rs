//! A stand-in for the LiteLLM proxy's spend-log and model APIs, serving
//! the same [`Dataset`] as the reference routes, so the same labelled
//! traffic can be read in both forms.
//!
//! It follows LiteLLM 1.110.2 (the PyPI wheel), files under
//! `litellm/proxy/`: `spend_tracking/spend_management_endpoints.py`
//! (`ui_view_spend_logs`: the query, its checks and errors, the raw query's
//! order and offset paging, the envelope `{data, total, page, page_size,
//! total_pages, total_is_capped}` with `total` capped at 10,000),
//! `spend_tracking/spend_tracking_utils.py` (`get_logging_payload`: what a
//! row holds, the session-id fallback, the usage normalisation),
//! `_types.py` (`SpendLogsPayload`, `SpendLogsMetadata`,
//! `ProxyException`), `schema.prisma` (`LiteLLM_SpendLogs`),
//! `proxy_server.py` (`model_info_v1`, the error handlers) and
//! `auth/user_api_key_auth.py` (the 401s). Routes, at the server's root
//! (the proxy's base URL):
//!
//! - `GET /spend/logs/v2?start_date&end_date&page&page_size&sort_by&sort_order&session_id&status_filter&span_type`
//! - `GET /model/info` (and `/v1/model/info`)
//!
//! Both need `Authorization: Bearer <admin key>`. Each call of the dataset
//! is one row (`rows`): its labels become both request tags `key:value`
//! and `metadata.spend_logs_metadata`; its cached and cache-write tokens
//! are in `metadata.additional_usage_values` and `metadata.usage_object`,
//! spelled as [`UsageSpelling`] says; a failure has `status: "failure"`
//! and `metadata.error_information`; `spend` is its cost. Calls after the
//! horizon do not exist yet, as on the reference routes. The sessions
//! named in [`LiteLlmOptions::without_session_id`] were sent without a
//! session id, and their rows carry what the proxy writes then
//! ([`MissingSessionId`]). Faults ([`LiteLlmFaults`]) damage answers as a
//! proxy, a load balancer or a growing table would.
//!
//! It never uses costwatch's types: it is the outside world.
//!
//! Layout: `options` (the proxy's setup), `rows` (a call as a row, a
//! model as a `/model/info` entry), `query` (the query and its checks),
//! `errors` (the error answers), `faults`, `routes`.

mod errors;
mod faults;
mod options;
mod query;
mod routes;
mod rows;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::faults::{LiteLlmFault, LiteLlmFaultKind, LiteLlmFaults, LiteLlmRoute};
pub use self::options::{LiteLlmOptions, MissingSessionId, UsageSpelling};
pub use self::query::MAX_PAGE_SIZE;

use crate::dataset::{Dataset, SimRequest};
use axum::Router;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

/// Up to when calls exist (`None`: all of them), read on every request.
pub(crate) type Horizon = Arc<dyn Fn() -> Option<DateTime<Utc>> + Send + Sync>;

/// The simulated proxy: its setup and faults. Cheap to clone; clones
/// share state.
#[derive(Clone)]
pub struct LiteLlmSim {
    inner: Arc<Inner>,
}

struct Inner {
    dataset: Arc<Dataset>,
    admin_key: String,
    now: Horizon,
    options: RwLock<LiteLlmOptions>,
    faults: LiteLlmFaults,
}

impl fmt::Debug for LiteLlmSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiteLlmSim")
            .field("options", &self.options())
            .field("faults", &self.inner.faults)
            .finish_non_exhaustive()
    }
}

impl LiteLlmSim {
    /// A proxy serving `dataset` to `admin_key`, with calls up to `now`.
    pub(crate) fn new(dataset: Arc<Dataset>, admin_key: String, now: Horizon) -> LiteLlmSim {
        LiteLlmSim {
            inner: Arc::new(Inner {
                dataset,
                admin_key,
                now,
                options: RwLock::new(LiteLlmOptions::default()),
                faults: LiteLlmFaults::default(),
            }),
        }
    }

    /// The routes, to merge into a server's router.
    pub(crate) fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        routes::routes(self.clone())
    }

    /// The setup in force.
    pub fn options(&self) -> LiteLlmOptions {
        self.inner
            .options
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes the setup (takes effect on the next request).
    pub fn set_options(&self, options: LiteLlmOptions) {
        *self
            .inner
            .options
            .write()
            .unwrap_or_else(PoisonError::into_inner) = options;
    }

    /// The handle to inject faults with.
    pub fn faults(&self) -> LiteLlmFaults {
        self.inner.faults.clone()
    }

    /// The spend-log row a call is served as, under the current setup.
    pub fn row(&self, call: &SimRequest) -> Value {
        rows::spend_log_row(call, &self.options())
    }
}
