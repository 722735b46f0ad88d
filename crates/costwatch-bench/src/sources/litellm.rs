//! The LiteLLM source beside `crates/costwatch-bench/litellm.py`: the
//! simulator serves the scenario as a LiteLLM proxy's spend logs
//! (`GET /spend/logs/v2`), and the script reads the same pages of 1,000
//! rows with the master key, grouped by `session_id` ([`super::compare`]).

use super::compare::ServedSource;

/// The LiteLLM proxy at the simulator's root, read with its master key.
pub const LITELLM: ServedSource = ServedSource {
    name: "litellm",
    title: "LiteLLM",
    rows: "spend-log rows",
    config: |root| format!("  kind: litellm\n  api_url: {root}\n"),
    script_args: |served| vec!["--url".to_owned(), served.root_url().to_owned()],
    script_key_env: "COSTWATCH_ADMIN_KEY",
};
