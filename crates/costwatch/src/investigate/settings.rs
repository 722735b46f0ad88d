//! The `investigation` section: which incidents are escalated to a capped
//! LLM investigation, the model that runs it and the tools it may call.

use super::budget::{Caps, Prices};
use super::tokens::TokenizerChoice;
use crate::domain::{Kind, Severity};
use crate::secret::Secret;
use crate::settings::units::{http_url, opt_http_url};
use crate::settings::{Issue, Settings};
use crate::source::SourceKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use url::Url;

/// The investigating model when `investigation.model` is not set.
pub const DEFAULT_MODEL: &str = "gpt-6-luna";

/// Escalation of flagged incidents to a capped LLM investigation.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<InvestigationConfig>)]
pub struct InvestigationConfig {
    /// Whether flagged incidents are escalated at all.
    pub enabled: bool,
    /// Where the investigation's read-only log tools come from: `builtin`,
    /// costwatch's own over the configured source (every kind); `mcp`, the
    /// MCP server at `mcp_url`. Not set: `mcp` for `source.kind:
    /// reference`, whose gateway serves them, `builtin` for every other
    /// kind.
    #[schemars(example = &"builtin")]
    pub log_tools: Option<LogToolsChoice>,
    /// The MCP endpoint serving the log tools, read with the admin key;
    /// required with `log_tools: mcp`.
    #[serde(with = "opt_http_url")]
    #[schemars(with = "Option<String>")]
    #[schemars(example = "http://127.0.0.1:8080/v1/mcp")]
    pub mcp_url: Option<Url>,
    /// Base URL of an OpenAI-compatible API (`{llm_url}/chat/completions`).
    #[serde(with = "http_url")]
    #[schemars(with = "String")]
    pub llm_url: Url,
    /// The investigating model.
    #[schemars(length(min = 1))]
    pub model: String,
    /// File holding the inference key, relative to the configuration's
    /// folder; `COSTWATCH_INFERENCE_KEY` wins.
    #[schemars(example = "/run/credentials/costwatch.service/inference_key")]
    pub inference_key_file: Option<PathBuf>,
    /// The inference key, from `COSTWATCH_INFERENCE_KEY` or
    /// `inference_key_file`.
    #[serde(skip)]
    pub inference_key: Option<Secret>,
    /// Tools offered to the model, in this order: the allowlist.
    pub tools: Vec<String>,
    /// How prompts are counted before a call (`investigate::tokens`).
    pub tokenizer: TokenizerChoice,
    /// The model server's tokenize endpoint, read with `tokenizer: server`
    /// (by default llama-cpp-python's, below the `llm_url`'s origin).
    #[serde(with = "opt_http_url")]
    #[schemars(with = "Option<String>")]
    #[schemars(example = "http://127.0.0.1:8080/extras/tokenize")]
    pub tokenize_url: Option<Url>,
    /// With `tokenizer: server`: whether the server's chat template
    /// HTML-escapes message text (llama-cpp-python's
    /// `chatml-function-calling` does), so it is counted escaped.
    pub template_escapes_html: bool,
    /// The model's prices per million tokens; without them the gateway's
    /// catalogue is read.
    pub prices: Option<Prices>,
    /// Which incidents are escalated.
    pub escalate: EscalateConfig,
    /// Hard caps per run and per day.
    pub caps: Caps,
}

impl Default for InvestigationConfig {
    fn default() -> Self {
        InvestigationConfig {
            enabled: false,
            log_tools: None,
            mcp_url: None,
            llm_url: local("http://127.0.0.1:8080/v1"),
            model: DEFAULT_MODEL.to_owned(),
            inference_key_file: None,
            inference_key: None,
            tools: ["search_requests", "get_request", "list_sessions"]
                .map(str::to_owned)
                .to_vec(),
            tokenizer: TokenizerChoice::Auto,
            tokenize_url: None,
            template_escapes_html: false,
            prices: None,
            escalate: EscalateConfig::default(),
            caps: Caps::default(),
        }
    }
}

/// A URL written in this file, which parses.
fn local(url: &str) -> Url {
    Url::parse(url).unwrap_or_else(|_| unreachable!("{url} is a URL"))
}

impl Settings for InvestigationConfig {
    fn problems(&self) -> Vec<Issue> {
        let server = self.tokenizer == TokenizerChoice::Server;
        let only_server = || "is only read with `tokenizer: server`".to_owned();
        [
            Issue::when(
                !server && self.tokenize_url.is_some(),
                "tokenize_url",
                only_server,
            ),
            Issue::when(
                !server && self.template_escapes_html,
                "template_escapes_html",
                only_server,
            ),
            Issue::when(self.model.trim().is_empty(), "model", || {
                "must not be empty".to_owned()
            }),
            Issue::when(self.tools.is_empty(), "tools", || {
                "name at least one tool".to_owned()
            }),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// Where an investigation's log tools come from (`investigation.log_tools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogToolsChoice {
    /// costwatch's own tools over the configured source (`crate::logtools`).
    Builtin,
    /// The tools of the MCP server at `investigation.mcp_url`.
    Mcp,
}

impl InvestigationConfig {
    /// The log tools a source of `kind` gets: as set, else `mcp` for the
    /// reference gateway and `builtin` for every other kind.
    pub fn log_tools_for(&self, kind: SourceKind) -> LogToolsChoice {
        self.log_tools.unwrap_or(match kind {
            SourceKind::Reference => LogToolsChoice::Mcp,
            _ => LogToolsChoice::Builtin,
        })
    }
}

/// Which incidents are escalated to an investigation.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<EscalateConfig>)]
pub struct EscalateConfig {
    /// Finding kinds escalated.
    pub kinds: Vec<Kind>,
    /// Lowest severity escalated.
    pub min_severity: Severity,
    /// Most investigations started per hour.
    pub max_per_hour: u64,
}

impl Default for EscalateConfig {
    fn default() -> Self {
        EscalateConfig {
            kinds: Kind::ALL.to_vec(),
            min_severity: Severity::Warning,
            max_per_hour: 6,
        }
    }
}
