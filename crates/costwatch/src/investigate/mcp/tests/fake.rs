//! A scripted MCP endpoint on loopback: it records every request (headers
//! and JSON body) and answers with what its script returns for it.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use url::Url;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `POST`, `DELETE`, ...
    pub http_method: String,
    /// Every header, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON; `Null` when it is not JSON.
    pub body: Value,
}

impl Seen {
    /// A header's value (`name` in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The JSON-RPC method.
    pub fn method(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }

    /// `params._meta`, if the request carries one.
    pub fn meta(&self) -> Option<&Value> {
        self.body.pointer("/params/_meta")
    }

    /// The revision `_meta` names.
    pub fn meta_version(&self) -> Option<&str> {
        self.meta()?
            .get("io.modelcontextprotocol/protocolVersion")?
            .as_str()
    }
}

/// How a response is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One `application/json` body.
    Json,
    /// A `text/event-stream`: a comment, a progress notification, then the
    /// response.
    Sse,
}

/// What the script answers.
#[derive(Debug, Clone)]
pub struct Answer {
    status: u16,
    body: Option<Value>,
    text: Option<String>,
    form: Form,
    session_id: Option<String>,
}

impl Answer {
    /// The result of request `seen`.
    pub fn result(seen: &Seen, result: Value) -> Answer {
        Answer::message(
            200,
            json!({"jsonrpc": "2.0", "id": seen.body["id"], "result": result}),
        )
    }

    /// A JSON-RPC error answering `seen`, with HTTP `status`.
    pub fn error(
        status: u16,
        seen: &Seen,
        code: i64,
        message: &str,
        data: Option<Value>,
    ) -> Answer {
        let mut error = json!({"code": code, "message": message});
        if let Some(data) = data {
            error["data"] = data;
        }
        Answer::message(
            status,
            json!({"jsonrpc": "2.0", "id": seen.body["id"], "error": error}),
        )
    }

    /// `status` with a plain-text body.
    pub fn plain(status: u16, text: &str) -> Answer {
        Answer {
            status,
            body: None,
            text: Some(text.to_owned()),
            form: Form::Json,
            session_id: None,
        }
    }

    /// 202 Accepted, for a notification.
    pub fn accepted() -> Answer {
        Answer {
            status: 202,
            body: None,
            text: None,
            form: Form::Json,
            session_id: None,
        }
    }

    fn message(status: u16, message: Value) -> Answer {
        Answer {
            status,
            body: Some(message),
            text: None,
            form: Form::Json,
            session_id: None,
        }
    }

    /// The same answer sent in `form` if it is a success; errors stay
    /// JSON, as servers send them.
    pub fn in_form(mut self, form: Form) -> Answer {
        if self.status == 200 {
            self.form = form;
        }
        self
    }

    /// The same answer with an `Mcp-Session-Id`.
    pub fn with_session(mut self, id: &str) -> Answer {
        self.session_id = Some(id.to_owned());
        self
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap();
        let mut res = match (self.body, self.text, self.form) {
            (Some(body), _, Form::Json) => (status, axum::Json(body)).into_response(),
            (Some(body), _, Form::Sse) => {
                let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "t", "progress": 1}});
                let stream = format!(
                    ": scripted\r\n\r\nevent: message\r\ndata: {progress}\r\n\r\nevent: message\r\ndata: {body}\r\n\r\n"
                );
                (status, [("content-type", "text/event-stream")], stream).into_response()
            }
            (None, Some(text), _) => (status, text).into_response(),
            (None, None, _) => status.into_response(),
        };
        if let Some(id) = self.session_id {
            res.headers_mut()
                .insert("mcp-session-id", id.parse().unwrap());
        }
        res
    }
}

/// What a script is: the answer to each request.
pub type Script = Arc<dyn Fn(&Seen) -> Answer + Send + Sync>;

#[derive(Clone)]
struct FakeState {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Script,
}

/// The endpoint, served until the test ends.
pub struct Fake {
    url: Url,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    /// Serves `script` at `http://127.0.0.1:<port>/mcp`.
    pub async fn start(script: Script) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = FakeState {
            seen: seen.clone(),
            script,
        };
        let app = axum::Router::new()
            .route("/mcp", axum::routing::any(handle))
            .with_state(state);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Fake {
            url: Url::parse(&format!("http://{addr}/mcp")).unwrap(),
            seen,
        }
    }

    /// The endpoint's URL.
    pub fn url(&self) -> Url {
        self.url.clone()
    }

    /// Every request so far, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The JSON-RPC methods of every request so far.
    pub fn methods(&self) -> Vec<String> {
        self.seen().iter().map(|s| s.method().to_owned()).collect()
    }
}

async fn handle(
    State(state): State<FakeState>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = Seen {
        http_method: method.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    state.seen.lock().unwrap().push(seen.clone());
    (state.script)(&seen).into_response()
}
