//! HTTP plumbing shared by the simulated servers: serving a router on a
//! loopback listener until shut down, and reading the bearer key.
//!
//! Keys travel as `Authorization: Bearer <key>`, as the gateway's admin key
//! does over REST and MCP (gateway-api.md sections 1 and 2) and the
//! inference key does for the model (section 3).

use axum::Router;
use axum::http::{HeaderMap, header};
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A router being served; stops on [`Listening::shutdown`] or when dropped.
pub(crate) struct Listening {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Listening {
    /// Binds `bind` and serves `app` there.
    pub(crate) async fn start(bind: SocketAddr, app: Router) -> std::io::Result<Listening> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Listening {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets open requests finish, and waits for the server.
    pub(crate) async fn shutdown(mut self) -> std::io::Result<()> {
        self.stop();
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The key of an `Authorization: Bearer <key>` header, if there is one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}
