//! The `source` section: what every kind reads ([`Common`], and
//! [`HttpLimits`]), and the settings of its kind
//! ([`KindConfig`]), read after `source.kind` from the parts that kind
//! reads ([`SourceKind::keys`]). A key of another kind is refused, naming
//! the kinds that read it.

use super::otlp::{Files, Receiver, SpanMapping};
use super::rows::{RowKeys, RowSettings, Rows};
use super::{HttpLimits, Labels, ModelPrice, SourceKind};
use crate::secret::Secret;
use crate::settings::units::http_url;
use crate::settings::{Issue, Settings, empty_label_name};
use schemars::{JsonSchema, schema_for};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use url::Url;

/// Where sessions come from.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// What every kind reads.
    pub common: Common,
    /// Limits of every HTTP request to the source (and of the
    /// investigation's MCP calls).
    pub http: HttpLimits,
    /// What only its kind reads.
    pub of_kind: KindConfig,
    /// The prices of `source.models_file`, if set.
    pub models: Vec<ModelPrice>,
}

/// The settings of one source kind.
#[derive(Debug, Clone)]
pub enum KindConfig {
    /// The reference gateway.
    Reference(Api),
    /// The LiteLLM proxy's spend logs.
    Litellm(Api, RowSettings),
    /// Langfuse's observations.
    Langfuse(Api, LangfuseKeys, RowSettings),
    /// Spans received over OTLP/HTTP.
    Otlp(Receiver, SpanMapping, RowSettings),
    /// Spans in OTLP/JSON files.
    OtlpFiles(Files, SpanMapping, RowSettings),
}

impl SourceConfig {
    /// Which kind it is.
    pub fn kind(&self) -> SourceKind {
        match &self.of_kind {
            KindConfig::Reference(..) => SourceKind::Reference,
            KindConfig::Litellm(..) => SourceKind::Litellm,
            KindConfig::Langfuse(..) => SourceKind::Langfuse,
            KindConfig::Otlp(..) => SourceKind::Otlp,
            KindConfig::OtlpFiles(..) => SourceKind::OtlpFiles,
        }
    }

    /// What a row reader is given; `None` for the reference gateway.
    pub fn rows(&self) -> Option<&RowSettings> {
        match &self.of_kind {
            KindConfig::Reference(..) => None,
            KindConfig::Litellm(_, r)
            | KindConfig::Langfuse(_, _, r)
            | KindConfig::Otlp(_, _, r)
            | KindConfig::OtlpFiles(_, _, r) => Some(r),
        }
    }

    /// As [`SourceConfig::rows`], to change.
    pub fn rows_mut(&mut self) -> Option<&mut RowSettings> {
        match &mut self.of_kind {
            KindConfig::Reference(..) => None,
            KindConfig::Litellm(_, r)
            | KindConfig::Langfuse(_, _, r)
            | KindConfig::Otlp(_, _, r)
            | KindConfig::OtlpFiles(_, _, r) => Some(r),
        }
    }

    /// The API's base URL, for the kinds read over HTTP.
    pub fn api_url(&self) -> Option<&Url> {
        match &self.of_kind {
            KindConfig::Reference(api)
            | KindConfig::Litellm(api, _)
            | KindConfig::Langfuse(api, ..) => Some(&api.api_url),
            KindConfig::Otlp(..) | KindConfig::OtlpFiles(..) => None,
        }
    }

    /// The page size: `source.page_limit`, or the kind's default.
    pub fn page_limit(&self) -> u32 {
        self.common
            .page_limit
            .unwrap_or(self.kind().default_page_limit())
    }
}

/// The `source` keys every kind reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Common {
    /// File holding the admin key (the reference gateway's `logs.read` key,
    /// a LiteLLM key, or Langfuse's secret key), relative to the
    /// configuration's folder; `COSTWATCH_ADMIN_KEY` wins. The
    /// investigation's MCP tools read with it too.
    pub admin_key_file: Option<PathBuf>,
    /// The admin key, from `COSTWATCH_ADMIN_KEY` or `admin_key_file`;
    /// commands that read an HTTP source refuse to start without it.
    #[serde(skip)]
    pub admin_key: Option<Secret>,
    /// Page size for listing calls; by default 50 for the reference
    /// gateway (its most), 500 for LiteLLM and Langfuse (most 1000), 5000
    /// for the OpenTelemetry kinds (most 10000).
    #[schemars(range(min = 1))]
    pub page_limit: Option<u32>,
    /// Most pages read in one listing (a window's sessions, a session's
    /// requests); a listing that goes on longer fails the read.
    #[schemars(range(min = 1))]
    #[serde(default = "default_max_pages")]
    pub max_pages: u64,
    /// Only sessions (calls) carrying all these labels are read: sent as
    /// `metadata.<key>=<value>` to the reference gateway, applied to each
    /// call by the other kinds.
    pub filter: Labels,
}

fn default_max_pages() -> u64 {
    super::gateway::DEFAULT_MAX_PAGES
}

impl Settings for Common {
    fn problems(&self) -> Vec<Issue> {
        empty_label_name("filter", &self.filter)
            .into_iter()
            .collect()
    }
}

/// The API of the kinds read over HTTP.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Api {
    /// Base URL of the API: the reference gateway's (e.g.
    /// `https://gateway.example/v1`), the LiteLLM proxy's or the Langfuse
    /// host's.
    #[serde(with = "http_url")]
    #[schemars(with = "String")]
    pub api_url: Url,
}

impl Settings for Api {}

/// The reference gateway's `labels`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ReferenceLabels {
    /// The old spelling of `filter`.
    pub labels: Labels,
}

impl Settings for ReferenceLabels {
    fn problems(&self) -> Vec<Issue> {
        empty_label_name("labels", &self.labels)
            .into_iter()
            .collect()
    }
}

/// Langfuse's key pair, besides the admin key (its secret key).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LangfuseKeys {
    /// Langfuse's public key (`pk-lf-...`); the secret key is the admin
    /// key.
    #[schemars(length(min = 1))]
    pub public_key: String,
}

impl Settings for LangfuseKeys {
    fn problems(&self) -> Vec<Issue> {
        Issue::when(self.public_key.trim().is_empty(), "public_key", || {
            "must not be empty".to_owned()
        })
        .into_iter()
        .collect()
    }
}

/// The keys of one part of the `source` section, as its schema lists them.
pub fn keys_of<P: JsonSchema>() -> Vec<String> {
    schemars::schema_for!(P)
        .to_value()
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

impl SourceKind {
    /// The keys of the `source` section this kind reads: `kind`, those of
    /// [`Common`] and [`HttpLimits`], and those of its own parts.
    pub fn keys(self) -> Vec<String> {
        let own = match self {
            SourceKind::Reference => [keys_of::<Api>(), keys_of::<ReferenceLabels>()].concat(),
            SourceKind::Litellm => {
                [keys_of::<Api>(), keys_of::<RowKeys>(), keys_of::<Rows>()].concat()
            }
            SourceKind::Langfuse => [
                keys_of::<Api>(),
                keys_of::<LangfuseKeys>(),
                keys_of::<RowKeys>(),
                keys_of::<Rows>(),
            ]
            .concat(),
            SourceKind::Otlp => [
                keys_of::<Receiver>(),
                keys_of::<SpanMapping>(),
                keys_of::<Rows>(),
            ]
            .concat(),
            SourceKind::OtlpFiles => [
                keys_of::<Files>(),
                keys_of::<SpanMapping>(),
                keys_of::<Rows>(),
            ]
            .concat(),
        };
        let mut keys = vec!["kind".to_owned()];
        for k in [keys_of::<Common>(), keys_of::<HttpLimits>(), own].concat() {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }
}

/// The JSON Schema of the `source` section: `kind`, then the keys of every
/// part of it, each with the kinds that read it (`x-kinds`); a key that
/// means something else per kind (`labels`) tells each meaning.
pub fn source_schema() -> Value {
    let mut source = Map::new();
    source.insert(
        "kind".to_owned(),
        json!({
            "description": "Which system is read: the reference gateway's API, the LiteLLM \
                proxy's spend logs, Langfuse's observations, OpenTelemetry GenAI spans received \
                over OTLP/HTTP or in OTLP/JSON files.",
            "enum": SourceKind::ALL.map(SourceKind::as_str),
            "default": "reference",
        }),
    );
    let parts = [
        schema_for!(Common),
        schema_for!(HttpLimits),
        schema_for!(Api),
        schema_for!(ReferenceLabels),
        schema_for!(LangfuseKeys),
        schema_for!(RowKeys),
        schema_for!(Rows),
        schema_for!(Receiver),
        schema_for!(SpanMapping),
        schema_for!(Files),
    ];
    for part in parts {
        let part = part.to_value();
        let Some(properties) = part.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (key, property) in properties {
            let kinds: Vec<&str> = SourceKind::ALL
                .into_iter()
                .filter(|k| k.keys().contains(key))
                .map(SourceKind::as_str)
                .collect();
            let entry = source.entry(key.clone()).or_insert_with(|| {
                let mut p = property.clone();
                if let Some(m) = p.as_object_mut() {
                    m.remove("description");
                }
                p
            });
            // `labels` means something else per kind: each meaning is told.
            let Some(entry) = entry.as_object_mut() else {
                continue;
            };
            let text = property.get("description").and_then(Value::as_str);
            let told = entry.get("description").and_then(Value::as_str);
            let description = match (told, text) {
                (Some(a), Some(b)) => format!("{a}\n\n{b}"),
                (a, b) => a.or(b).unwrap_or_default().to_owned(),
            };
            entry.insert("description".to_owned(), Value::String(description));
            entry.insert("x-kinds".to_owned(), json!(kinds));
        }
    }
    json!({
        "description": "Where sessions come from: `kind`, then the keys that kind reads.",
        "type": "object",
        "properties": source,
        "additionalProperties": false,
    })
}
