//! `costwatch mcp`: the MCP server over stdio, for an MCP client that
//! starts its servers as processes (Claude Code's `claude mcp add costwatch
//! -- costwatch mcp --config ...`). The same tools as `/mcp`: the log tools
//! over the configured source and, when the state database exists,
//! costwatch's own findings, incidents and baselines.

use super::Exit;
use clap::Args;
use costwatch::app;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config;
use costwatch::mcp_server::stdio;
use std::path::PathBuf;
use std::sync::Arc;

/// `costwatch mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Configuration file: its source and state database are read.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// Serves MCP over stdin and stdout until stdin closes.
pub async fn mcp(a: McpArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let state = match app::open_state(&cfg, false).await {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::warn!(error = %app::chain(&e), "serving the log tools only: findings, incidents and baselines need the state database");
            None
        }
    };
    let server = app::mcp_server(&cfg, state, None, clock).await?;
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    stdio::serve(&server, input, tokio::io::stdout())
        .await
        .map_err(|e| Exit::Failed(anyhow::anyhow!("stdio: {e}")))
}
