//! How spans become call rows: the session fallback, the labels and what
//! `gen_ai.usage.input_tokens` counts (`source.session_fallback`,
//! `source.labels`, `source.resource_labels`, `source.input_tokens`).

use std::collections::BTreeMap;
use std::fmt;

/// An attribute named in the config: `span.<key>` or `resource.<key>`.
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl fmt::Display for InputTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputTokens::Auto => "auto",
            InputTokens::Total => "total",
            InputTokens::Uncached => "uncached",
        })
    }
}

/// How spans become call rows.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanMapping {
    /// What a span without a conversation id is grouped by.
    pub fallback: SessionFallback,
    /// Label name -> the attribute its value comes from, on top of the
    /// resource's (`source.labels`).
    pub labels: BTreeMap<String, AttrRef>,
    /// Whether every string-valued resource attribute (`service.name`,
    /// ...) becomes a label of its own name (`source.resource_labels`).
    pub resource_labels: bool,
    /// What `gen_ai.usage.input_tokens` counts.
    pub input_tokens: InputTokens,
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
