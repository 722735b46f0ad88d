//! The MCP server a configuration describes: the log tools over a source
//! of their own (answering from the pipeline's what the last window read)
//! and, with the state database, costwatch's own tools.

use super::any::AnySource;
use super::{AppError, gateway};
use crate::clock::Clock;
use crate::config::Config;
use crate::logtools::state::StateTools;
use crate::logtools::{LogTools, WindowCalls};
use crate::mcp_server::McpServer;
use crate::mcp_server::http::Access;
use crate::secret::BearerToken;
use crate::store::SqlStore;
use std::sync::Arc;

/// The server over `cfg`'s source and, when given, `state`; `window_source`
/// is the running pipeline's source, if there is one.
pub async fn mcp_server(
    cfg: &Config,
    state: Option<SqlStore>,
    window_source: Option<Arc<dyn WindowCalls>>,
    clock: Arc<dyn Clock>,
) -> Result<McpServer<AnySource, SqlStore>, AppError> {
    let logs = LogTools::new(gateway(cfg).await?, clock.clone());
    let logs = match window_source {
        Some(w) => logs.with_window_source(w),
        None => logs,
    };
    let logs = match &state {
        Some(store) => logs.with_known_sessions(Arc::new(store.clone())),
        None => logs,
    };
    let mut linked = cfg.clone();
    super::complete_links(&mut linked).await;
    let links = linked.alerts.session_links.clone();
    Ok(McpServer::new(
        logs,
        state.map(|s| StateTools::new(s, clock).with_links(links)),
    ))
}

/// Who may call `/mcp`: `server.mcp_token`'s holders, from loopback or
/// `server.public_url`'s origin.
pub fn mcp_access(cfg: &Config) -> Access {
    Access {
        token: cfg.server.mcp_token.as_ref().map(BearerToken::new),
        public_origin: None,
    }
    .with_public_url(cfg.server.public_url.as_ref())
}
