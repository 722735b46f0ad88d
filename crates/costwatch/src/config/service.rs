//! The `server` section (the local HTTP endpoint) and `group_by`.

use crate::settings::units::{opt_http_url, opt_listen};
use crate::settings::{Issue, Settings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
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
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            public_url: None,
        }
    }
}

impl Settings for ServerConfig {
    fn problems(&self) -> Vec<Issue> {
        let Some(url) = &self.public_url else {
            return Vec::new();
        };
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
            return Vec::new();
        };
        vec![Issue::reading(
            "public_url",
            &["listen"],
            problem.to_owned(),
        )]
    }
}

/// Labels whose values form a session's peer group when `group_by` is not
/// set.
pub fn default_group_by() -> Vec<String> {
    vec!["feature".to_owned()]
}
