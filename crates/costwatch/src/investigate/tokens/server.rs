//! Counting with the model server's own tokenizer, through its tokenize
//! endpoint: for a model whose tokenizer no crate ships but whose server
//! counts text on request.
//!
//! The endpoint of llama-cpp-python's server is the one spoken here
//! (`llama_cpp/server/app.py`: `POST /extras/tokenize/count` with
//! `{"input": text}` answers `{"count": n}`; `POST /extras/tokenize`
//! answers `{"tokens": [..]}`). Either answer is read.
//!
//! What is counted is the request's text, each piece on its own: the tool
//! definitions' JSON, each message's text and each tool call's name and
//! arguments. The chat template's own text (role markers, the instructions
//! a function-calling template adds, tools rendered its way, results it
//! leaves out) is not: the calibration (`calibration.rs`) learns it from
//! reported usage, as it does for the bound, but from token counts rather
//! than pieces, so what is added within a run is counted at the model's
//! own rate, whatever the text is made of.
//!
//! Texts are counted once: their counts are kept (by hash, up to
//! [`CACHE_ENTRIES`]), so a round asks only for what it added, and the
//! tools and the instruction, the same in every run, are asked for once.

use super::pieces::{self, RawCount};
use crate::http::{HttpClient, Target};
use crate::investigate::model::{ChatRequest, Role};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use url::Url;

/// How many texts' counts are kept.
pub const CACHE_ENTRIES: usize = 1_024;
/// The largest answer read from the endpoint.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// The path of llama-cpp-python's count endpoint, the default below the
/// model server's origin.
pub const DEFAULT_TOKENIZE_PATH: &str = "/extras/tokenize/count";

/// Counts text with a model server's tokenize endpoint.
pub struct ServerCounter {
    http: HttpClient,
    url: Url,
    auth: Option<HeaderValue>,
    escape_html: bool,
    cache: Mutex<HashMap<(u64, usize), u64>>,
}

impl std::fmt::Debug for ServerCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCounter")
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    tokens: Option<Vec<serde_json::Value>>,
}

impl ServerCounter {
    /// A counter asking `url`, with the model's `auth` header (`None` for
    /// an endpoint of another origin than the model's: the inference key
    /// is sent only where the model is served).
    pub fn new(http: HttpClient, url: Url, auth: Option<HeaderValue>) -> ServerCounter {
        ServerCounter {
            http,
            url,
            auth,
            escape_html: false,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Counts message text HTML-escaped, as a chat template rendered with
    /// autoescaping puts it in the prompt (llama-cpp-python's function-
    /// calling handlers render with `select_autoescape`, so a `"` in a
    /// message is `&#34;` to the model: several tokens, not one).
    pub fn escaping_html(mut self, escape: bool) -> ServerCounter {
        self.escape_html = escape;
        self
    }

    /// The tokens of `text`, from the cache or the endpoint.
    pub async fn count(&self, text: &str) -> Result<u64, String> {
        if text.is_empty() {
            return Ok(0);
        }
        let mut h = DefaultHasher::new();
        text.hash(&mut h);
        let key = (h.finish(), text.len());
        if let Some(n) = self.cached(key) {
            return Ok(n);
        }
        let target = Target::path("POST", &self.url);
        let body = serde_json::json!({ "input": text }).to_string();
        let mut request = self
            .http
            .reqwest()
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let bytes = self
            .http
            .fetch(request, &target, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| e.to_string())?;
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{target}: the count is not valid JSON: {e}"))?;
        let n = match (answer.count, answer.tokens) {
            (Some(n), _) => n,
            (None, Some(tokens)) => tokens.len() as u64,
            (None, None) => return Err(format!("{target}: the answer has no count or tokens")),
        };
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, n);
        Ok(n)
    }

    /// `text` as the chat template puts it in the prompt: HTML-escaped
    /// when the template escapes (see [`ServerCounter::escaping_html`]).
    fn rendered<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if self.escape_html && text.contains(['&', '<', '>', '"', '\'']) {
            std::borrow::Cow::Owned(html_escaped(text))
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }

    fn cached(&self, key: (u64, usize)) -> Option<u64> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .copied()
    }

    /// The raw count of `request` in the server's tokens: the tool
    /// definitions, each message's text (tool results apart) and tool
    /// calls, and `PIECES_PER_MESSAGE` per message of framing. (Bytes are
    /// not measured: the server's counts are learned from without them.)
    pub async fn count_request(&self, request: &ChatRequest) -> Result<RawCount, String> {
        let mut raw = RawCount::default();
        if !request.tools.is_empty() {
            let tools = serde_json::to_string(&request.tools).map_err(|e| e.to_string())?;
            raw.tools = self.count(&tools).await?;
        }
        let mut total = raw.tools + pieces::PIECES_PER_MESSAGE * request.messages.len() as u64;
        for m in &request.messages {
            if let Some(c) = m.content.as_deref() {
                let n = self.count(&self.rendered(c)).await?;
                total += n;
                if m.role == Role::Tool {
                    raw.results += n;
                }
            }
            for c in &m.tool_calls {
                let call = format!("{}:\n{}", c.function.name, c.function.arguments);
                total += self.count(&self.rendered(&call)).await?;
            }
        }
        raw.total = total;
        Ok(raw)
    }
}

/// `text` escaped as Jinja's autoescape (MarkupSafe's `escape`) does.
pub fn html_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The default endpoint for a model served at `llm_url`: its origin with
/// [`DEFAULT_TOKENIZE_PATH`].
pub fn default_url(llm_url: &Url) -> Option<Url> {
    let mut url = llm_url.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.set_path(DEFAULT_TOKENIZE_PATH);
    (url.scheme() == "http" || url.scheme() == "https").then_some(url)
}
