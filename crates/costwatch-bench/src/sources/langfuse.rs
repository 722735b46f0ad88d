//! The Langfuse source beside `crates/costwatch-bench/langfuse.py`: the
//! simulator serves the scenario as a Langfuse project's generations
//! (`GET /api/public/v2/observations`, one per call), and the script reads
//! the same observations with the project's key pair, pages of 1,000
//! grouped by `sessionId` ([`super::compare`]).

use super::compare::ServedSource;
use costwatch_sim::langfuse::DEFAULT_PUBLIC_KEY;

/// Langfuse at the simulator's root, read with the project's public key
/// and the simulator's admin key as the secret key.
pub const LANGFUSE: ServedSource = ServedSource {
    name: "langfuse",
    title: "Langfuse",
    rows: "generations",
    config: |root| {
        format!("  kind: langfuse\n  api_url: {root}\n  public_key: {DEFAULT_PUBLIC_KEY}\n")
    },
    script_args: |served| {
        vec![
            "--url".to_owned(),
            served.root_url().to_owned(),
            "--public-key".to_owned(),
            DEFAULT_PUBLIC_KEY.to_owned(),
        ]
    },
    script_key_env: "LANGFUSE_SECRET_KEY",
};
