//! What the sections name, resolved: `group_by`'s labels, the SQLite
//! file, the public URL, the inference key; and the configuration's JSON
//! Schema.

use super::document::Doc;
use super::fields::secret;
use super::folder_of;
use crate::config::env::{INFERENCE_KEY_VAR, MCP_TOKEN_VAR};
use crate::config::locate::item;
use crate::config::{Sections, TokenizerChoice};
use crate::investigate::{InvestigationConfig, LogToolsChoice};
use crate::source::SourceKind;
use schemars::schema_for;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(super) fn check_group_by(doc: &mut Doc, group_by: &[String]) {
    for (i, label) in group_by.iter().enumerate() {
        let path = item("group_by", i);
        if doc.check(!label.is_empty(), &path, || "must not be empty".to_owned()) {
            doc.check(!group_by[..i].contains(label), &path, || {
                format!("duplicate label `{label}`")
            });
        }
    }
}

/// Resolves what the sections name against the configuration's folder and
/// the environment: the SQLite file, the inference key, the tokenize
/// endpoint; and the checks that need them.
pub(super) fn resolve(doc: &mut Doc, s: &mut Sections, env: &BTreeMap<String, String>) {
    let folder = folder_of(&doc.file).to_path_buf();
    s.state.url = crate::store::settings::sqlite_url_from(&folder, &s.state.url);
    if let Some(url) = s.server.public_url.as_mut()
        && !url.path().ends_with('/')
    {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    s.server.mcp_token = secret(
        doc,
        env.get(MCP_TOKEN_VAR),
        s.server.mcp_token_file.as_deref(),
        "server.mcp_token_file",
    );
    if s.server.mcp
        && let Some(listen) = s.server.listen
    {
        doc.check(
            listen.ip().is_loopback() || s.server.mcp_token.is_some(),
            "server.mcp",
            || {
                format!(
                    "server.listen {listen} is not loopback: MCP there needs a bearer token; \
                     set {MCP_TOKEN_VAR} or server.mcp_token_file"
                )
            },
        );
    }
    let inv = &mut s.investigation;
    if inv.tokenizer == TokenizerChoice::Server && inv.tokenize_url.is_none() {
        inv.tokenize_url = crate::investigate::tokens::default_tokenize_url(&inv.llm_url);
    }
    inv.inference_key = secret(
        doc,
        env.get(INFERENCE_KEY_VAR),
        inv.inference_key_file.as_deref(),
        "investigation.inference_key_file",
    );
    if inv.enabled {
        doc.check(inv.inference_key.is_some(), "investigation.enabled", || {
            format!(
                "needs an inference key: set {INFERENCE_KEY_VAR} or \
                 investigation.inference_key_file"
            )
        });
    }
}

/// With the investigation on and its log tools over MCP (set, or the
/// reference gateway's default), `investigation.mcp_url` is required.
pub(super) fn check_log_tools(doc: &mut Doc, kind: SourceKind, inv: &InvestigationConfig) {
    if inv.enabled && inv.log_tools_for(kind) == LogToolsChoice::Mcp {
        doc.check(inv.mcp_url.is_some(), "investigation.mcp_url", || {
            let why = match inv.log_tools {
                Some(_) => "with log_tools: mcp".to_owned(),
                None => format!("with source.kind: {kind}, whose log tools default to mcp"),
            };
            format!("is required {why} (or set investigation.log_tools: builtin)")
        });
    }
}

/// The JSON Schema of a configuration file: [`Sections`], with the
/// `source` section first
/// ([`source_schema`](crate::source::settings::source_schema)).
/// `costwatch.schema.json` is this, pretty-printed.
pub fn config_schema() -> Value {
    let mut schema = schema_for!(Sections).to_value();
    let source = crate::source::settings::source_schema();
    if let Some(root) = schema.as_object_mut() {
        root.insert("title".to_owned(), json!("costwatch configuration"));
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            properties.insert("source".to_owned(), source);
        }
        if let Some(Value::Array(order)) = root.get_mut("x-order") {
            order.insert(0, json!("source"));
        }
    }
    schema
}
