//! `costwatch mcp`: the same server over stdio, one JSON-RPC message per
//! line on stdin, one answer per line on stdout (logs go to stderr). Ends
//! when stdin closes.

use super::{Era, McpServer, PARSE_ERROR, PROTOCOL_VERSION_META, RpcError, response};
use crate::source::Source;
use crate::store::WindowStore;
use crate::store::inspect::Inspect;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The largest line read.
const MAX_LINE_BYTES: usize = 1 << 20;

/// Serves `server` over `input` and `output` until `input` ends.
pub async fn serve<S, St, R, W>(
    server: &McpServer<S, St>,
    mut input: R,
    mut output: W,
) -> std::io::Result<()>
where
    S: Source,
    St: Inspect + WindowStore,
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let reply = if line.len() > MAX_LINE_BYTES {
            Some(parse_error(format!(
                "a message is at most {MAX_LINE_BYTES} bytes"
            )))
        } else {
            match serde_json::from_str::<Value>(&line) {
                Ok(message) => server.handle(&message, era_of(&message), None).await,
                Err(e) => Some(parse_error(format!("not JSON: {e}"))),
            }
        };
        if let Some(reply) = reply {
            output.write_all(reply.to_string().as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
        }
    }
}

/// 2026-07-28 when the request's `_meta` names a revision, else the
/// handshake era.
fn era_of(message: &Value) -> Era {
    let named = message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(PROTOCOL_VERSION_META))
        .is_some();
    if named && message.get("method").and_then(Value::as_str) != Some("initialize") {
        Era::Modern
    } else {
        Era::Handshake
    }
}

fn parse_error(message: String) -> Value {
    response(
        &Value::Null,
        Err(RpcError {
            code: PARSE_ERROR,
            message,
            data: None,
        }),
    )
}
