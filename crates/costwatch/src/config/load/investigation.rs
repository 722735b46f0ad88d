//! The `investigation` section.

use super::document::Doc;
use super::fields::{http_url, secret};
use super::to_usize;
use crate::config::raw::{RawCaps, RawEscalate, RawInvestigation, RawPrices};
use crate::config::{Caps, EscalateConfig, InvestigationConfig, Prices, TokenizerChoice};
use std::collections::BTreeMap;

/// The variable holding the inference key.
pub(super) const INFERENCE_KEY_VAR: &str = "COSTWATCH_INFERENCE_KEY";

pub(super) fn investigation_config(
    doc: &mut Doc,
    raw: RawInvestigation,
    env: &BTreeMap<String, String>,
) -> Option<InvestigationConfig> {
    let mcp_url = http_url(doc, "investigation.mcp_url", &raw.mcp_url);
    let llm_url = http_url(doc, "investigation.llm_url", &raw.llm_url);
    let tokenize_url = match (raw.tokenizer, raw.tokenize_url.as_deref()) {
        (TokenizerChoice::Server, Some(u)) => http_url(doc, "investigation.tokenize_url", u),
        (TokenizerChoice::Server, None) => llm_url
            .as_ref()
            .and_then(crate::investigate::tokens::default_tokenize_url),
        (_, Some(_)) => {
            doc.check(false, "investigation.tokenize_url", || {
                "is only read with `tokenizer: server`".to_owned()
            });
            None
        }
        (_, None) => None,
    };
    if raw.template_escapes_html {
        doc.check(
            raw.tokenizer == TokenizerChoice::Server,
            "investigation.template_escapes_html",
            || "is only read with `tokenizer: server`".to_owned(),
        );
    }
    doc.check(!raw.model.trim().is_empty(), "investigation.model", || {
        "must not be empty".to_owned()
    });
    doc.check(!raw.tools.is_empty(), "investigation.tools", || {
        "name at least one tool".to_owned()
    });
    let c = &raw.caps;
    doc.at_least_u64("investigation.caps.max_rounds", c.max_rounds, 1);
    doc.at_least_u64("investigation.caps.max_input_tokens", c.max_input_tokens, 1);
    doc.at_least_u64(
        "investigation.caps.max_output_tokens",
        c.max_output_tokens,
        1,
    );
    doc.at_least_u64(
        "investigation.caps.max_tool_result_bytes",
        c.max_tool_result_bytes,
        64,
    );
    doc.at_least_f64("investigation.caps.max_usd_per_run", c.max_usd_per_run, 0.0);
    doc.at_least_f64("investigation.caps.max_usd_per_day", c.max_usd_per_day, 0.0);
    doc.positive_duration("investigation.caps.wall_timeout", c.wall_timeout.0);
    if let Some(p) = &raw.prices {
        for (field, v) in [
            ("input_usd_per_mtok", p.input_usd_per_mtok),
            ("cached_input_usd_per_mtok", p.cached_input_usd_per_mtok),
            ("output_usd_per_mtok", p.output_usd_per_mtok),
        ] {
            doc.at_least_f64(&format!("investigation.prices.{field}"), v, 0.0);
        }
    }
    let inference_key = secret(
        doc,
        env.get(INFERENCE_KEY_VAR),
        raw.inference_key_file.as_deref(),
        "investigation.inference_key_file",
    );
    if raw.enabled {
        doc.check(inference_key.is_some(), "investigation.enabled", || {
            format!("needs an inference key: set {INFERENCE_KEY_VAR} or investigation.inference_key_file")
        });
    }
    Some(InvestigationConfig {
        enabled: raw.enabled,
        mcp_url: mcp_url?,
        llm_url: llm_url?,
        model: raw.model,
        inference_key,
        tools: raw.tools,
        tokenizer: raw.tokenizer,
        tokenize_url,
        template_escapes_html: raw.template_escapes_html,
        prices: raw.prices.map(Prices::from),
        escalate: raw.escalate.into(),
        caps: raw.caps.into(),
    })
}

impl From<RawPrices> for Prices {
    fn from(raw: RawPrices) -> Prices {
        Prices {
            input_usd_per_mtok: raw.input_usd_per_mtok,
            cached_input_usd_per_mtok: raw.cached_input_usd_per_mtok,
            output_usd_per_mtok: raw.output_usd_per_mtok,
        }
    }
}

impl From<RawEscalate> for EscalateConfig {
    fn from(raw: RawEscalate) -> EscalateConfig {
        EscalateConfig {
            kinds: raw.kinds,
            min_severity: raw.min_severity,
            max_per_hour: raw.max_per_hour,
        }
    }
}

impl Default for EscalateConfig {
    /// The defaults of `investigation.escalate`.
    fn default() -> Self {
        RawEscalate::default().into()
    }
}

impl From<RawCaps> for Caps {
    fn from(raw: RawCaps) -> Caps {
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Caps {
            max_rounds: clamp(raw.max_rounds),
            max_tool_calls: clamp(raw.max_tool_calls),
            max_input_tokens: raw.max_input_tokens,
            max_output_tokens: raw.max_output_tokens,
            max_usd_per_run: raw.max_usd_per_run,
            max_usd_per_day: raw.max_usd_per_day,
            max_tool_result_bytes: to_usize(raw.max_tool_result_bytes),
            wall_timeout: raw.wall_timeout.0,
        }
    }
}

impl Default for Caps {
    /// The defaults of `investigation.caps`.
    fn default() -> Self {
        RawCaps::default().into()
    }
}
