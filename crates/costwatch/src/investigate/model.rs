//! The investigating model: a client for any OpenAI-compatible
//! `POST {llm_url}/chat/completions` (gateway-api.md section 3).
//!
//! The request carries the model, the messages, function tools built from
//! [`ToolSpec`]s (`parameters` is the tool's input schema, as-is),
//! `tool_choice` and `max_tokens`; it is paid for with the inference key,
//! which is never the admin key and is sent only in the `Authorization`
//! header, marked sensitive. The answer's first choice, its `usage` and its
//! `id` are parsed into a [`Completion`].
//!
//! Only answers that certainly cost nothing are retried: 429 and 5xx
//! statuses (after `Retry-After` or an exponential backoff) and connections
//! that could not be opened. A timeout after the request was sent, a body cut
//! off or an answer that cannot be read may have been billed, so they are not
//! retried and the error says so ([`ModelCallError::maybe_billed`]): the run
//! then counts the call at its worst case.

pub use crate::domain::investigation::{ToolChoice, Usage};

use super::tokens::{
    PromptEstimator, RawCount, ServerCounter, Tokenizer, TokenizerChoice, count_pieces,
    default_tokenize_url,
};
use super::{InvestigateError, ToolSpec};
use crate::clock::{Sleeper, TokioSleeper};
use crate::http::{ClientSettings, HttpClient, HttpError, Resend, RetryPolicy, Target};
use crate::secret::Secret;
use crate::source::HttpLimits;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use url::Url;

/// The header carrying our id of a call, echoed in the step log.
pub const CLIENT_REQUEST_ID_HEADER: &str = "x-client-request-id";

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The instruction.
    System,
    /// The incident digest.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// A function call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id of the call; the tool message answers to it.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// The function part of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Tool name.
    pub name: String,
    /// Arguments as the model wrote them: a JSON string, not checked here.
    pub arguments: String,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The calls an assistant message asks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A system message.
    pub fn system(text: impl Into<String>) -> ChatMessage {
        ChatMessage::text(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> ChatMessage {
        ChatMessage::text(Role::User, text)
    }

    /// An assistant message with optional text and tool calls. Without
    /// text beside tool calls, the content is `""`: OpenAI takes it, while
    /// llama-cpp-python's server answers 400 to `"content": null` and 500
    /// to a message without `content`.
    pub fn assistant(content: Option<String>, tool_calls: Vec<ToolCall>) -> ChatMessage {
        let content = match content {
            None if !tool_calls.is_empty() => Some(String::new()),
            other => other,
        };
        ChatMessage {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
        }
    }

    /// The result of the call `id`.
    pub fn tool(id: impl Into<String>, text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::Tool,
            content: Some(text.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(id.into()),
        }
    }

    fn text(role: Role, text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(text.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A function tool as the chat API takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name, description and parameters.
    pub function: FunctionDef,
}

/// The function part of a [`FunctionTool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments: the MCP tool's `inputSchema`, as-is.
    pub parameters: Value,
}

impl FunctionTool {
    /// The function tool for an MCP tool.
    pub fn from_spec(spec: &ToolSpec) -> FunctionTool {
        FunctionTool {
            kind: "function".to_owned(),
            function: FunctionDef {
                name: spec.name.clone(),
                description: spec.description.clone(),
                parameters: spec.input_schema.clone(),
            },
        }
    }
}

/// One `chat/completions` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name.
    pub model: String,
    /// Tools offered, in a fixed order: first, as providers render them
    /// first, so the same tools and instruction open every request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<FunctionTool>,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Whether tools may be called (sent only with tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Most completion tokens the call may produce.
    pub max_tokens: u32,
    /// Sampling temperature; the provider's default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// The exact bytes sent: the budget estimates the prompt from them.
    pub fn body(&self) -> Result<Vec<u8>, InvestigateError> {
        serde_json::to_vec(self)
            .map_err(|e| InvestigateError::Protocol(format!("cannot encode the request: {e}")))
    }
}

/// What one call returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The provider's id of the answer (`id`).
    pub id: Option<String>,
    /// The answer's text, if any.
    pub content: Option<String>,
    /// The calls it asks for.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped (`stop`, `tool_calls`, `length`, ...).
    pub finish_reason: Option<String>,
    /// Token counts.
    pub usage: Usage,
    /// Retries made before this answer (429/5xx, connection failures).
    pub retries: u32,
}

/// A failed call, and whether it may have been billed anyway.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct ModelCallError {
    /// What went wrong.
    pub error: InvestigateError,
    /// True when the provider may have run the call (a timeout after
    /// sending, a cut-off or unreadable answer): its cost is unknown.
    pub maybe_billed: bool,
    /// A short name for the step log: `Timeout`, `RateLimitError`, ...
    pub error_type: String,
}

impl ModelCallError {
    fn new(error: InvestigateError, maybe_billed: bool, error_type: &str) -> ModelCallError {
        ModelCallError {
            error,
            maybe_billed,
            error_type: error_type.to_owned(),
        }
    }
}

impl From<ModelCallError> for InvestigateError {
    fn from(e: ModelCallError) -> InvestigateError {
        e.error
    }
}

/// Client for one OpenAI-compatible model endpoint.
#[derive(Clone)]
pub struct ModelClient {
    http: HttpClient,
    url: Url,
    auth: HeaderValue,
    model: String,
    max_body_bytes: usize,
    retry: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
    estimator: Arc<PromptEstimator>,
    /// The server's tokenize endpoint, with `tokenizer: server`.
    counter: Option<Arc<ServerCounter>>,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient")
            .field("url", &self.url.as_str())
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ModelClient {
    /// A client for `model` at `llm_url` (e.g. `https://api.example/v1`;
    /// requests go to `{llm_url}/chat/completions`), paid with
    /// `inference_key`.
    pub fn new(
        llm_url: Url,
        inference_key: &Secret,
        model: impl Into<String>,
        limits: HttpLimits,
    ) -> Result<ModelClient, InvestigateError> {
        let http = HttpClient::new(ClientSettings::with_timeouts(
            limits.timeout,
            limits.connect_timeout,
        ))
        .map_err(|e| InvestigateError::Rejected(e.to_string()))?;
        let auth = crate::http::bearer(inference_key).ok_or_else(|| {
            InvestigateError::Rejected("inference key is not a valid header value".into())
        })?;
        let url = crate::http::as_directory(llm_url)
            .join("chat/completions")
            .map_err(|e| InvestigateError::Rejected(format!("bad model url: {e}")))?;
        Ok(ModelClient {
            http,
            url,
            auth,
            model: model.into(),
            max_body_bytes: limits.max_body_bytes,
            // A call is paid for: it is sent again only when the provider
            // certainly did not run it (a connection never opened, 429, 5xx).
            retry: RetryPolicy::exponential(
                limits.max_retries,
                limits.retry_base,
                limits.retry_max,
            )
            .with_resend(Resend::OnlyUnprocessed),
            sleeper: Arc::new(TokioSleeper),
            estimator: Arc::new(PromptEstimator::new(None)),
            counter: None,
        })
    }

    /// Counts prompts with `choice`'s tokenizer for this model (the
    /// calibrated bound without one); see `investigate::tokens`.
    /// With [`TokenizerChoice::Server`], asks the server's tokenize
    /// endpoint at its default path ([`default_tokenize_url`]).
    pub fn with_tokenizer(mut self, choice: TokenizerChoice) -> ModelClient {
        self.counter = None;
        self.estimator = Arc::new(PromptEstimator::new(Tokenizer::for_model(
            choice,
            &self.model,
        )));
        if choice == TokenizerChoice::Server
            && let Some(url) = default_tokenize_url(&self.url)
        {
            self = self.with_tokenize_url(url, false);
        }
        self
    }

    /// Counts prompts with the server's tokenize endpoint at `url` (see
    /// `investigate::tokens::server`), message text HTML-escaped when the
    /// server's chat template `escapes_html`. The inference key goes
    /// along only to the model's own origin.
    pub fn with_tokenize_url(mut self, url: Url, escapes_html: bool) -> ModelClient {
        let auth = (url.origin() == self.url.origin()).then(|| self.auth.clone());
        self.counter = Some(Arc::new(
            ServerCounter::new(self.http.clone(), url, auth).escaping_html(escapes_html),
        ));
        self.estimator = Arc::new(PromptEstimator::server());
        self
    }

    /// The raw count of `request` for the estimator: by the server's
    /// tokenize endpoint when one is set (pieces marked as a fallback,
    /// estimated at the prior, when it fails), else as the estimator
    /// counts.
    pub async fn raw_count(&self, request: &ChatRequest) -> RawCount {
        let Some(counter) = &self.counter else {
            return self.estimator.raw(request);
        };
        match counter.count_request(request).await {
            Ok(raw) => raw,
            Err(error) => {
                tracing::warn!(
                    %error,
                    "the model server did not count the prompt: this call is estimated at the prior"
                );
                RawCount {
                    fallback: true,
                    ..count_pieces(request)
                }
            }
        }
    }

    /// The prompt estimator of this model, shared by every run.
    pub fn estimator(&self) -> &PromptEstimator {
        &self.estimator
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> ModelClient {
        self.sleeper = sleeper;
        self
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The endpoint called.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Sends `request`, tagged with `client_request_id`; retries 429, 5xx
    /// and failed connections, nothing that may have been billed.
    pub async fn complete(
        &self,
        request: &ChatRequest,
        client_request_id: &str,
    ) -> Result<Completion, ModelCallError> {
        let body = request
            .body()
            .map_err(|e| ModelCallError::new(e, false, "EncodeError"))?;
        let target = Target::path("POST", &self.url);
        let send = || {
            self.http
                .reqwest()
                .post(self.url.clone())
                .header(AUTHORIZATION, self.auth.clone())
                .header(CONTENT_TYPE, "application/json")
                .header(CLIENT_REQUEST_ID_HEADER, client_request_id)
                .body(body.clone())
        };
        let done = self
            .http
            .fetch_with_retries(
                &self.retry,
                self.sleeper.as_ref(),
                &target,
                self.max_body_bytes,
                send,
            )
            .await
            .map_err(|gave_up| self.call_error(gave_up.error))?;
        // An answer that cannot be read may still have been billed.
        let mut completion = parse_completion(&done.value)
            .map_err(|e| ModelCallError::new(e, true, "ProtocolError"))?;
        completion.retries = done.retries;
        Ok(completion)
    }

    /// A failed exchange as a model call error: whether it may have been
    /// billed, and its short name for the step log.
    fn call_error(&self, error: HttpError) -> ModelCallError {
        let billed = error.maybe_processed();
        let error_type = match &error {
            HttpError::Send { connect: true, .. } => "ConnectError",
            e if e.timed_out() => "Timeout",
            HttpError::Send { .. } | HttpError::Setup { .. } => "RequestError",
            HttpError::CutOff { .. } => "BodyError",
            HttpError::TooLarge { .. } => "ProtocolError",
            HttpError::Status { status: 429, .. } => "RateLimitError",
            HttpError::Status { status: 500.., .. } => "ServerError",
            HttpError::Status {
                status: 401 | 403, ..
            } => "AuthenticationError",
            HttpError::Status { status: 404, .. } => "NotFoundError",
            HttpError::Status { .. } => "BadRequestError",
        };
        let text = error.to_string();
        let error = match &error {
            HttpError::TooLarge { .. } => InvestigateError::Protocol(text),
            e if self.retry.is_transient(e) => InvestigateError::Transient(text),
            _ => InvestigateError::Rejected(text),
        };
        ModelCallError::new(error, billed, error_type)
    }
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<WireDetails>,
}

#[derive(Deserialize)]
struct WireDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Parses a `chat/completions` answer. `usage` is required: without it the
/// call's cost is unknown.
pub fn parse_completion(body: &[u8]) -> Result<Completion, InvestigateError> {
    let wire: WireResponse = serde_json::from_slice(body)
        .map_err(|e| InvestigateError::Protocol(format!("model answer is not valid: {e}")))?;
    let usage = wire
        .usage
        .ok_or_else(|| InvestigateError::Protocol("model answer has no usage".into()))?;
    let choice = wire
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| InvestigateError::Protocol("model answer has no choices".into()))?;
    let content = match choice.message.content {
        Value::String(s) => Some(s),
        // Some providers answer with content parts.
        Value::Array(parts) => {
            let text: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!text.is_empty()).then(|| text.concat())
        }
        _ => None,
    };
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: c.id.unwrap_or_else(|| format!("call_{i}")),
            kind: "function".to_owned(),
            function: FunctionCall {
                name: c.function.name,
                arguments: match c.function.arguments {
                    Value::String(s) => s,
                    Value::Null => String::new(),
                    other => other.to_string(),
                },
            },
        })
        .collect();
    Ok(Completion {
        id: wire.id,
        content,
        tool_calls,
        finish_reason: choice.finish_reason,
        usage: Usage {
            prompt_tokens: usage.prompt_tokens,
            cached_tokens: usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            completion_tokens: usage.completion_tokens,
        },
        retries: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn the_request_is_the_openai_shape() {
        let spec = ToolSpec {
            name: "get_request".into(),
            description: "One request row.".into(),
            input_schema: json!({"type": "object", "properties": {"request_id": {"type": "string"}}}),
        };
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::system("s"),
                ChatMessage::assistant(
                    None,
                    vec![ToolCall {
                        id: "c1".into(),
                        kind: "function".into(),
                        function: FunctionCall {
                            name: "get_request".into(),
                            arguments: "{}".into(),
                        },
                    }],
                ),
                ChatMessage::tool("c1", "row"),
            ],
            tools: vec![FunctionTool::from_spec(&spec)],
            tool_choice: Some(ToolChoice::None),
            max_tokens: 64,
            temperature: None,
        };
        let v: Value = serde_json::from_slice(&req.body().unwrap()).unwrap();
        assert_eq!(
            v,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "s"},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "get_request", "arguments": "{}"}}]},
                    {"role": "tool", "content": "row", "tool_call_id": "c1"}
                ],
                "tools": [{"type": "function", "function": {"name": "get_request",
                    "description": "One request row.", "parameters": spec.input_schema}}],
                "tool_choice": "none",
                "max_tokens": 64
            })
        );
    }

    #[test]
    fn answers_parse_with_usage_and_cached_tokens() {
        let body = json!({
            "id": "chatcmpl-1",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "x", "arguments": "{\"a\":1}"}},
                    {"type": "function", "function": {"name": "y", "arguments": {"b": 2}}}
                ]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7,
                      "prompt_tokens_details": {"cached_tokens": 64}}
        });
        let c = parse_completion(body.to_string().as_bytes()).unwrap();
        assert_eq!(c.id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(c.content, None);
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(c.tool_calls[0].function.arguments, "{\"a\":1}");
        assert_eq!(c.tool_calls[1].id, "call_1");
        assert_eq!(c.tool_calls[1].function.arguments, "{\"b\":2}");
        assert_eq!(
            c.usage,
            Usage {
                prompt_tokens: 100,
                cached_tokens: 64,
                completion_tokens: 7
            }
        );
    }

    #[test]
    fn an_answer_without_usage_or_choices_is_a_protocol_error() {
        let no_usage = json!({"choices": [{"message": {"content": "hi"}}]});
        assert!(matches!(
            parse_completion(no_usage.to_string().as_bytes()),
            Err(InvestigateError::Protocol(_))
        ));
        let no_choice =
            json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
        assert!(matches!(
            parse_completion(no_choice.to_string().as_bytes()),
            Err(InvestigateError::Protocol(_))
        ));
        assert!(parse_completion(b"<html>").is_err());
    }

    #[test]
    fn the_client_never_shows_its_key() {
        let c = ModelClient::new(
            Url::parse("http://127.0.0.1:1/v1").unwrap(),
            &Secret::new("sk-inference-secret"),
            "m",
            HttpLimits {
                timeout: Duration::from_secs(1),
                connect_timeout: Duration::from_secs(1),
                max_retries: 0,
                retry_base: Duration::from_millis(1),
                retry_max: Duration::from_millis(1),
                max_body_bytes: 1 << 20,
            },
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("sk-inference-secret"));
        assert_eq!(c.url().as_str(), "http://127.0.0.1:1/v1/chat/completions");
    }
}
