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
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Common>)]
pub struct Common {
    /// File holding the admin key (the reference gateway's `logs.read` key,
    /// a LiteLLM key, or Langfuse's secret key), relative to the
    /// configuration's folder; `COSTWATCH_ADMIN_KEY` wins. The
    /// investigation's MCP tools read with it too.
    #[schemars(example = "/run/credentials/costwatch.service/admin_key")]
    pub admin_key_file: Option<PathBuf>,
    /// The admin key, from `COSTWATCH_ADMIN_KEY` or `admin_key_file`;
    /// commands that read an HTTP source refuse to start without it.
    #[serde(skip)]
    pub admin_key: Option<Secret>,
    /// Page size for listing calls; by default 50 for the reference
    /// gateway (its most), 500 for LiteLLM and Langfuse (most 1000), 5000
    /// for the OpenTelemetry kinds (most 10000); at least 1.
    #[schemars(example = 50)]
    pub page_limit: Option<u32>,
    /// Most pages read in one listing (a window's sessions, a session's
    /// requests); a listing that goes on longer fails the read.
    #[schemars(range(min = 1))]
    pub max_pages: u64,
    /// Only sessions (calls) carrying all these labels are read: sent as
    /// `metadata.<key>=<value>` to the reference gateway, applied to each
    /// call by the other kinds.
    pub filter: Labels,
    /// The system's own web UI, for each session's link in alerts,
    /// `findings` and the MCP tools: a base URL below which the kind's
    /// session page is (LiteLLM's `/ui/logs?session_id=`, Langfuse's
    /// `/project/{project_id}/sessions/`, the reference gateway's
    /// `/sessions/`), or a whole page with `{session_id}` (and
    /// `{project_id}`) in it. Unset, LiteLLM's and Langfuse's links are on
    /// `api_url`'s host, and the OpenTelemetry kinds link nothing.
    #[schemars(example = "https://grafana.example/explore?session={session_id}")]
    pub ui_url: Option<String>,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            admin_key_file: None,
            admin_key: None,
            page_limit: None,
            max_pages: super::reference::DEFAULT_MAX_PAGES,
            filter: Labels::new(),
            ui_url: None,
        }
    }
}

impl Settings for Common {
    fn problems(&self) -> Vec<Issue> {
        let link = self.ui_url.as_deref().and_then(super::links::problem);
        empty_label_name("filter", &self.filter)
            .into_iter()
            .chain(link.map(|why| Issue::new("ui_url", why)))
            .collect()
    }
}

/// The API of the kinds read over HTTP.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Api>)]
pub struct Api {
    /// Base URL of the API: the reference gateway's (e.g.
    /// `https://gateway.example/v1`), the LiteLLM proxy's or the Langfuse
    /// host's.
    #[serde(with = "http_url")]
    #[schemars(with = "String")]
    #[schemars(example = "http://127.0.0.1:8080/v1")]
    pub api_url: Url,
}

impl Settings for Api {}

/// The reference gateway's `labels`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<ReferenceLabels>)]
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
#[schemars(transform = crate::settings::in_declared_order::<LangfuseKeys>)]
pub struct LangfuseKeys {
    /// Langfuse's public key (`pk-lf-...`); the secret key is the admin
    /// key.
    #[schemars(length(min = 1))]
    #[schemars(example = "pk-lf-...")]
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

/// One part of the `source` section: a struct read from the section's
/// keys it declares.
#[derive(Clone)]
pub struct Part {
    /// The struct's name.
    pub name: &'static str,
    /// Its keys, in declared order.
    pub keys: fn() -> Vec<String>,
    /// Its JSON Schema.
    pub schema: fn() -> Value,
}

macro_rules! part {
    ($t:ty) => {
        Part {
            name: stringify!($t),
            keys: crate::settings::declared_keys::<$t>,
            schema: || schema_for!($t).to_value(),
        }
    };
}

impl SourceKind {
    /// The parts of the `source` section this kind reads, [`Common`] and
    /// [`HttpLimits`] first.
    pub fn parts(self) -> Vec<Part> {
        let own = match self {
            SourceKind::Reference => vec![part!(Api), part!(ReferenceLabels)],
            SourceKind::Litellm => vec![part!(Api), part!(RowKeys), part!(Rows)],
            SourceKind::Langfuse => {
                vec![part!(Api), part!(LangfuseKeys), part!(RowKeys), part!(Rows)]
            }
            SourceKind::Otlp => vec![part!(Receiver), part!(SpanMapping), part!(Rows)],
            SourceKind::OtlpFiles => vec![part!(Files), part!(SpanMapping), part!(Rows)],
        };
        [vec![part!(Common), part!(HttpLimits)], own].concat()
    }

    /// The keys of the `source` section this kind reads: `kind`, then those
    /// of its parts.
    pub fn keys(self) -> Vec<String> {
        let mut keys = vec!["kind".to_owned()];
        for k in self.parts().iter().flat_map(|p| (p.keys)()) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }
}

/// The JSON Schema of the `source` section: `kind`, then the keys of every
/// part, in the order the kinds read them, each with the kinds that read it
/// (`x-kinds`); a key that means something else per kind (`labels`) tells
/// each meaning with its kinds.
pub fn source_schema() -> Value {
    let mut properties = Map::new();
    properties.insert(
        "kind".to_owned(),
        json!({
            "description": "Which system is read: the reference gateway's API, the LiteLLM \
                proxy's spend logs, Langfuse's observations, OpenTelemetry GenAI spans received \
                over OTLP/HTTP or in OTLP/JSON files.",
            "enum": SourceKind::ALL.map(SourceKind::as_str),
            "default": "reference",
        }),
    );
    let mut order = vec![Value::from("kind")];
    let mut seen_parts: Vec<&str> = Vec::new();
    let readers = |key: &str| -> Vec<&'static str> {
        SourceKind::ALL
            .into_iter()
            .filter(|k| k.keys().iter().any(|own| own == key))
            .map(SourceKind::as_str)
            .collect()
    };
    for part in SourceKind::ALL.into_iter().flat_map(SourceKind::parts) {
        if seen_parts.contains(&part.name) {
            continue;
        }
        seen_parts.push(part.name);
        let kinds: Vec<&str> = SourceKind::ALL
            .into_iter()
            .filter(|k| k.parts().iter().any(|p| p.name == part.name))
            .map(SourceKind::as_str)
            .collect();
        let schema = (part.schema)();
        for (key, property) in crate::settings::ordered_properties(&schema) {
            let text = property.get("description").and_then(Value::as_str);
            let meaning = format!("With kind {}: {}", kinds.join(", "), text.unwrap_or(""));
            match properties.get_mut(key).and_then(Value::as_object_mut) {
                Some(first) => {
                    let told = first
                        .remove("x-meaning")
                        .and_then(|m| m.as_str().map(str::to_owned));
                    let told = told.or_else(|| {
                        first
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    });
                    let both = format!("{}\n\n{meaning}", told.unwrap_or_default());
                    first.insert("description".to_owned(), json!(both));
                }
                None => {
                    let mut property = property.clone();
                    if let Some(p) = property.as_object_mut() {
                        p.insert("x-kinds".to_owned(), json!(readers(key)));
                        p.insert("x-meaning".to_owned(), json!(meaning));
                    }
                    properties.insert(key.clone(), property);
                    order.push(Value::from(key.as_str()));
                }
            }
        }
    }
    for property in properties.values_mut() {
        if let Some(p) = property.as_object_mut() {
            p.remove("x-meaning");
        }
    }
    json!({
        "description": "Where sessions come from: `kind`, then the keys that kind reads.",
        "type": "object",
        "properties": properties,
        "x-order": order,
        "additionalProperties": false,
    })
}
