//! Escalation of flagged incidents to a capped LLM investigation: a model
//! calls the gateway's read-only log tools over MCP, and the transcript and
//! its cost are attached to the alert.
//!
//! Only this module knows MCP and the model API. The two halves meet at
//! [`ToolProvider`]: the MCP client implements it, and tests implement it in
//! process. The daily budget is kept in the state database behind
//! [`BudgetLedger`], so it survives restarts and is shared by replicas.

pub mod budget;
pub mod digest;
pub mod mcp;
pub mod model;
pub mod results;
pub mod run;
pub mod settings;
pub mod tokens;
pub mod toolset;
pub mod transcript;

pub use settings::{DEFAULT_MODEL, EscalateConfig, InvestigationConfig, LogToolsChoice};
pub use transcript::InvestigationReport;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::future::Future;

/// A tool as the MCP server lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (`inputSchema`).
    pub input_schema: serde_json::Value,
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The text content, joined.
    pub text: String,
    /// Whether the server reported the call as failed (`isError`).
    pub is_error: bool,
}

/// Why an investigation step failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvestigateError {
    /// Worth retrying: network trouble, timeouts, 429, 5xx.
    #[error("temporarily unavailable: {0}")]
    Transient(String),
    /// Retrying will not help: 4xx, bad key, a tool outside the allowlist.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The peer broke the protocol (malformed JSON-RPC, bad SSE, bad model answer).
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// The read-only log tools an investigation may call.
pub trait ToolProvider: Send + Sync {
    /// Every tool the server offers (all pages), before any allowlist.
    fn list_tools(&self) -> impl Future<Output = Result<Vec<ToolSpec>, InvestigateError>> + Send;

    /// Calls one tool.
    fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> impl Future<Output = Result<ToolOutput, InvestigateError>> + Send;
}

/// A future a [`Tools`] method returns.
pub type ToolFuture<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = Result<T, InvestigateError>> + Send + 'a>>;

/// A [`ToolProvider`] behind a pointer, so one escalation can hold either
/// the MCP client or costwatch's built-in log tools
/// (`investigation.log_tools`), chosen at start.
pub trait DynTools: Send + Sync {
    /// [`ToolProvider::list_tools`].
    fn list(&self) -> ToolFuture<'_, Vec<ToolSpec>>;
    /// [`ToolProvider::call_tool`].
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: serde_json::Value,
    ) -> ToolFuture<'a, ToolOutput>;
}

impl<T: ToolProvider> DynTools for T {
    fn list(&self) -> ToolFuture<'_, Vec<ToolSpec>> {
        Box::pin(self.list_tools())
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: serde_json::Value,
    ) -> ToolFuture<'a, ToolOutput> {
        Box::pin(self.call_tool(name, arguments))
    }
}

/// The log tools an escalation's investigations call.
#[derive(Clone)]
pub struct Tools(pub std::sync::Arc<dyn DynTools>);

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tools")
    }
}

impl Tools {
    /// `provider` behind a pointer.
    pub fn new<T: ToolProvider + 'static>(provider: T) -> Tools {
        Tools(std::sync::Arc::new(provider))
    }
}

impl ToolProvider for Tools {
    async fn list_tools(&self) -> Result<Vec<ToolSpec>, InvestigateError> {
        self.0.list().await
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<ToolOutput, InvestigateError> {
        self.0.call(name, arguments).await
    }
}

/// Why the budget ledger (or the token calibration) could not be read or
/// written. The message is the store's own, so a stop detail reads `the
/// budget ledger cannot be read: <why>`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    /// The ledger could not be reached or answered with an error.
    #[error("{0}")]
    Unavailable(String),
    /// A stored amount could not be read back.
    #[error("{0}")]
    Corrupt(String),
}

/// The daily investigation budget, kept where every replica sees it.
pub trait BudgetLedger: Send + Sync {
    /// Atomically reserves `usd` of `day`'s budget if the day's spent plus
    /// reserved amount stays within `cap`; returns whether it did.
    fn reserve(
        &self,
        day: NaiveDate,
        usd: f64,
        cap: f64,
    ) -> impl Future<Output = Result<bool, LedgerError>> + Send;

    /// Replaces a reservation of `reserved` by the `actual` cost (actual <= reserved).
    fn settle(
        &self,
        day: NaiveDate,
        reserved: f64,
        actual: f64,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// What `day` has spent and reserved so far.
    fn spent(&self, day: NaiveDate) -> impl Future<Output = Result<f64, LedgerError>> + Send;
}

/// What prompt-token estimators learned, kept where every process and
/// replica sees it (`token_calibration`), per model and counting method.
pub trait CalibrationStore: Send + Sync {
    /// The samples stored for `model` counted by `method`, oldest first
    /// (none when nothing was stored).
    fn load_calibration(
        &self,
        model: &str,
        method: &str,
    ) -> impl Future<Output = Result<Vec<tokens::Sample>, LedgerError>> + Send;

    /// Replaces the samples stored for `model` and `method` by `samples`
    /// (at most [`tokens::CALIBRATION_WINDOW`]), at `now_ms`.
    fn save_calibration(
        &self,
        model: &str,
        method: &str,
        samples: &[tokens::Sample],
        now_ms: i64,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;
}
