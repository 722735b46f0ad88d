//! What a team does about a finding: one line per kind of waste, and for
//! `no_cache` per cause, named by the finding's own evidence
//! (`dominant_cause`). Alerts, `findings --format json` and the MCP tools
//! carry it beside the sentence that says why.

use super::Kind;
use super::no_cache::Cause;
use serde_json::Value;

/// The line for a finding of `kind` whose evidence is `evidence`.
pub fn what_to_do(kind: Kind, evidence: &Value) -> &'static str {
    match kind {
        Kind::NoCache => {
            let dominant = evidence.get("dominant_cause").and_then(Value::as_str);
            let cause = Cause::ALL.into_iter().find(|c| Some(c.name()) == dominant);
            match cause {
                Some(c) => for_cause(c),
                None => {
                    "keep the prompt's start byte-stable across calls, so the provider's cache can serve it"
                }
            }
        }
        Kind::OversizedModel => {
            "pin the sub-agent's model to the cheaper one its peers use, or declare the move (design_model in the rule)"
        }
        Kind::RetryLoop => {
            "cap the retries, with exponential backoff, and stop on errors that a retry cannot fix"
        }
    }
}

/// The line for a `no_cache` cause.
pub fn for_cause(cause: Cause) -> &'static str {
    match cause {
        Cause::PrefixChanged => {
            "keep the prompt's start byte-stable: timestamps and ids after the cached part, the tool list in a fixed order"
        }
        Cause::TtlExpired => "use the 1-hour cache, or shorten the pauses between calls",
        Cause::ProviderSwitch => {
            "pin the deployment: route a conversation's calls to the provider that holds its cache"
        }
        Cause::WrittenNeverRead => "stop marking prompts for the cache that are never reused",
        Cause::ModelSwitch => "keep a conversation on one model: a cache lives with its model",
        Cause::BelowMinimum => {
            "nothing to fix in the calls: their prompts are below the model's minimum cacheable prefix"
        }
        Cause::ColdStart => {
            "nothing to fix: a conversation's first call writes the cache the next ones read"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_and_cause_has_a_line_and_the_evidence_picks_it() {
        for c in Cause::ALL {
            let line = what_to_do(Kind::NoCache, &json!({"dominant_cause": c.name()}));
            assert_eq!(line, for_cause(c));
            assert!(!line.is_empty());
        }
        assert!(
            what_to_do(Kind::NoCache, &json!({"dominant_cause": "prefix_changed"}))
                .contains("timestamps and ids after the cached part")
        );
        assert!(
            what_to_do(Kind::NoCache, &json!({"dominant_cause": "ttl_expired"}))
                .contains("1-hour cache")
        );
        assert!(what_to_do(Kind::OversizedModel, &json!({})).contains("pin the sub-agent's model"));
        assert!(what_to_do(Kind::RetryLoop, &json!({})).contains("cap the retries"));
        // Evidence without a cause still gets the kind's line.
        assert!(what_to_do(Kind::NoCache, &json!({})).contains("byte-stable"));
    }
}
