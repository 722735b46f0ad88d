//! The `server` section (the local HTTP endpoint) and `group_by`.

use crate::secret::Secret;
use crate::settings::units::{opt_http_url, opt_listen};
use crate::settings::{Issue, Settings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use url::Url;

/// The local HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<ServerConfig>)]
pub struct ServerConfig {
    /// Socket address for `/metrics`, `/healthz` and the status page at
    /// `/`; `null` disables the endpoint.
    #[serde(with = "opt_listen")]
    #[schemars(with = "Option<String>")]
    pub listen: Option<SocketAddr>,
    /// The URL at which people and Slack reach that endpoint from outside
    /// (a reverse proxy's, say), without credentials, query or fragment;
    /// alert charts are linked from it
    /// (`incidents/{fingerprint}/chart.png`). Unset, Slack messages carry
    /// no chart.
    #[serde(with = "opt_http_url")]
    #[schemars(with = "Option<String>")]
    #[schemars(example = "https://costwatch.example.com/")]
    pub public_url: Option<Url>,
    /// Serve MCP at `/mcp` on `listen` (Streamable HTTP): the log tools over
    /// the source and costwatch's own findings, incidents and baselines, all
    /// read-only. A bearer token is required when `listen` is not loopback.
    pub mcp: bool,
    /// File holding the bearer token MCP clients must send, relative to the
    /// configuration's folder; `COSTWATCH_MCP_TOKEN` wins.
    #[schemars(example = "/run/credentials/costwatch.service/mcp_token")]
    pub mcp_token_file: Option<PathBuf>,
    /// The token, from `COSTWATCH_MCP_TOKEN` or `mcp_token_file`.
    #[serde(skip)]
    pub mcp_token: Option<Secret>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            public_url: None,
            mcp: false,
            mcp_token_file: None,
            mcp_token: None,
        }
    }
}

impl Settings for ServerConfig {
    fn problems(&self) -> Vec<Issue> {
        let mcp = (self.mcp && self.listen.is_none()).then(|| {
            Issue::reading(
                "mcp",
                &["listen"],
                "needs server.listen: MCP is served there (or use `costwatch mcp` over stdio)"
                    .to_owned(),
            )
        });
        mcp.into_iter().chain(self.public_url_problem()).collect()
    }
}

impl ServerConfig {
    fn public_url_problem(&self) -> Option<Issue> {
        let url = self.public_url.as_ref()?;
        let plain = url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none();
        let problem = if !plain {
            "must be a plain http(s) url without credentials, query or fragment, such as \
             `https://costwatch.example.com/`"
        } else if self.listen.is_none() {
            "needs server.listen: the charts it links to are served there"
        } else {
            return None;
        };
        Some(Issue::reading(
            "public_url",
            &["listen"],
            problem.to_owned(),
        ))
    }
}

/// Labels whose values form a session's peer group when `group_by` is not
/// set.
pub fn default_group_by() -> Vec<String> {
    vec!["feature".to_owned()]
}
