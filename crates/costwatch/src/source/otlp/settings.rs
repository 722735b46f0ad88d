//! The `source` keys of the OpenTelemetry kinds: how spans become call
//! rows ([`SpanMapping`]: the session fallback, the labels and what
//! `gen_ai.usage.input_tokens` counts), the receiver of `otlp`
//! ([`Receiver`]) and the folder of `otlp_files` ([`Files`]).

use crate::secret::Secret;
use crate::settings::units::with_unit;
use crate::settings::{Issue, Settings, empty_label_name, spelled_as_text};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// An attribute named in the config: `span.<key>` or `resource.<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub enum AttrRef {
    /// An attribute of the span itself. Written `span.<key>`.
    Span(String),
    /// An attribute of the resource that sent the span (`service.name`,
    /// `deployment.environment.name`, ...). Written `resource.<key>`.
    Resource(String),
}

impl AttrRef {
    /// Parses the config spelling; the error says what is accepted.
    pub fn parse(s: &str) -> Result<AttrRef, String> {
        if let Some(key) = s.strip_prefix("span.")
            && !key.is_empty()
        {
            return Ok(AttrRef::Span(key.to_owned()));
        }
        if let Some(key) = s.strip_prefix("resource.")
            && !key.is_empty()
        {
            return Ok(AttrRef::Resource(key.to_owned()));
        }
        Err(format!(
            "`{s}` is not an attribute: use span.<key> or resource.<key>"
        ))
    }
}

spelled_as_text!(AttrRef);

impl fmt::Display for AttrRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrRef::Span(k) => write!(f, "span.{k}"),
            AttrRef::Resource(k) => write!(f, "resource.{k}"),
        }
    }
}

/// What a span without a conversation id is grouped by
/// (`source.session_fallback`): `trace` (default), `span.<key>` or
/// `resource.<key>`, or `none` (each call judged on its own).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub enum SessionFallback {
    /// The trace: every model call of one trace is one session. Written
    /// `trace`.
    Trace,
    /// The value of an attribute, as text; a span without it has no
    /// session.
    Attr(AttrRef),
    /// No session: each such call is judged on its own. Written `none`.
    None,
}

impl SessionFallback {
    /// Parses the config spelling; the error says what is accepted.
    pub fn parse(s: &str) -> Result<SessionFallback, String> {
        match s {
            "trace" => Ok(SessionFallback::Trace),
            "none" => Ok(SessionFallback::None),
            _ => AttrRef::parse(s).map(SessionFallback::Attr).map_err(|_| {
                format!(
                    "`{s}` is not a session fallback: use trace, none, span.<key> or resource.<key>"
                )
            }),
        }
    }
}

spelled_as_text!(SessionFallback);

impl fmt::Display for SessionFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionFallback::Trace => f.write_str("trace"),
            SessionFallback::Attr(a) => a.fmt(f),
            SessionFallback::None => f.write_str("none"),
        }
    }
}

/// Whether `gen_ai.usage.input_tokens` includes the cache reads and writes
/// (`source.input_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub enum InputTokens {
    /// Taken as the whole prompt unless the cache reads and writes add up
    /// to more than it, which only a count without them can do. Written
    /// `auto`.
    Auto,
    /// The whole prompt, cache reads and writes included (the semantic
    /// conventions' definition; OpenAI's usage). Written `total`.
    Total,
    /// Only the uncached part (Anthropic's usage as some instrumentations
    /// copy it); the cache reads and writes are added. Written `uncached`.
    Uncached,
}

impl InputTokens {
    /// Parses the config spelling; the error says what is accepted.
    pub fn parse(s: &str) -> Result<InputTokens, String> {
        match s {
            "auto" => Ok(InputTokens::Auto),
            "total" => Ok(InputTokens::Total),
            "uncached" => Ok(InputTokens::Uncached),
            _ => Err(format!(
                "`{s}` is not an input token count: use auto, total or uncached"
            )),
        }
    }
}

spelled_as_text!(InputTokens);

impl fmt::Display for InputTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputTokens::Auto => "auto",
            InputTokens::Total => "total",
            InputTokens::Uncached => "uncached",
        })
    }
}

/// How spans become call rows (`otlp`, `otlp_files`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<SpanMapping>)]
pub struct SpanMapping {
    /// What a span without `gen_ai.conversation.id` is grouped by:
    /// `trace`, `span.<key>`, `resource.<key>`, or `none` (each call
    /// judged on its own).
    #[serde(rename = "session_fallback")]
    #[schemars(with = "String")]
    pub fallback: SessionFallback,
    /// Label name -> the attribute its value comes from (`span.<key>` or
    /// `resource.<key>`), on top of the resource's.
    #[schemars(with = "BTreeMap<String, String>")]
    pub labels: BTreeMap<String, AttrRef>,
    /// Whether every string-valued resource attribute (`service.name`,
    /// ...) becomes a label of its own name.
    pub resource_labels: bool,
    /// Whether `gen_ai.usage.input_tokens` includes the cache reads and
    /// writes: `auto`, `total` or `uncached`.
    #[schemars(with = "String")]
    pub input_tokens: InputTokens,
}

impl Settings for SpanMapping {
    fn problems(&self) -> Vec<Issue> {
        empty_label_name("labels", &self.labels)
            .into_iter()
            .collect()
    }
}

impl Default for SpanMapping {
    /// Sessions by trace, no extra labels, resource labels on, input
    /// tokens read as `auto`.
    fn default() -> Self {
        SpanMapping {
            fallback: SessionFallback::Trace,
            labels: BTreeMap::new(),
            resource_labels: true,
            input_tokens: InputTokens::Auto,
        }
    }
}

/// The OTLP/HTTP receiver of `otlp`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Receiver>)]
pub struct Receiver {
    /// Where the receiver listens (OTLP/HTTP's usual port, on loopback).
    #[serde(deserialize_with = "listen")]
    #[schemars(with = "String")]
    pub listen: SocketAddr,
    /// File holding the bearer token exporters must send, relative to the
    /// configuration's folder; `COSTWATCH_OTLP_TOKEN` wins.
    #[schemars(example = "/run/credentials/costwatch.service/otlp_token")]
    pub token_file: Option<PathBuf>,
    /// The token, from `COSTWATCH_OTLP_TOKEN` or `token_file`.
    #[serde(skip)]
    pub token: Option<Secret>,
    /// Largest request body, as sent.
    #[schemars(range(min = 1024))]
    pub max_request_bytes: usize,
    /// Requests a second before exporters are asked to wait.
    #[schemars(range(min = 1))]
    pub max_requests_per_second: u32,
    /// How long received calls are kept, at most 3650d; at least
    /// `windows.size + windows.settle_lag + source.session_lookback`.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub retention: Duration,
}

/// Where the receiver listens by default.
const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    4318,
));

/// Longest `retention`: ten years.
const MAX_RETENTION: Duration = Duration::from_secs(3650 * 24 * 3600);

fn listen<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "must be an ip address and port such as `{DEFAULT_LISTEN}`, got `{}`",
            crate::printable::printable(&text)
        ))
    })
}

impl Default for Receiver {
    fn default() -> Self {
        Receiver {
            listen: DEFAULT_LISTEN,
            token_file: None,
            token: None,
            max_request_bytes: 8 * 1024 * 1024,
            max_requests_per_second: 200,
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl Settings for Receiver {
    fn problems(&self) -> Vec<Issue> {
        Issue::when(self.retention > MAX_RETENTION, "retention", || {
            format!(
                "must be at most 3650d, got {}",
                humantime::format_duration(self.retention)
            )
        })
        .into_iter()
        .collect()
    }
}

/// The files `otlp_files` reads.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Files>)]
pub struct Files {
    /// The folder of OTLP/JSON files (the Collector's file exporter's),
    /// or a glob of them like the Collector's `include` patterns
    /// (`otlp/traces-*.json*`; `*` and `?` within a name, `**` for any
    /// depth of folders), relative to the configuration's folder. In a
    /// folder, files ending in `.json` or `.jsonl` (gzipped or not) are
    /// read; a glob reads every file it names.
    #[schemars(example = "otlp-traces/")]
    pub path: PathBuf,
}

impl Settings for Files {}
