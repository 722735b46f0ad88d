//! `costwatch check`, `costwatch rules` and `costwatch test-alert`.

use super::{CheckArgs, Exit, RulesArgs, RunArgs};
use anyhow::anyhow;
use costwatch::app;
use costwatch::config::{self, Config, KindConfig, Rules};
use costwatch::printable::printable;
use costwatch::source::SourceKind;

pub async fn check(a: CheckArgs) -> Result<(), Exit> {
    if a.config.is_none() && a.rules.is_empty() {
        return Err(Exit::Failed(anyhow!(
            "nothing to check: give --config FILE and/or --rules PATH"
        )));
    }
    if let Some(path) = &a.config {
        let cfg = config::load(path)?;
        let origin = if cfg.rule_paths.is_empty() {
            ", built in"
        } else {
            ""
        };
        println!(
            "{}: ok ({}{origin})",
            path.display(),
            rules_summary(&cfg.rules)
        );
        if cfg.source.kind().is_http_api() && cfg.source.common.admin_key.is_none() {
            println!(
                "note: no admin key is set (COSTWATCH_ADMIN_KEY or source.admin_key_file); commands that read the gateway will refuse to start"
            );
        }
        if a.online {
            check_online(&cfg).await?;
        }
    }
    if !a.rules.is_empty() {
        let rules = config::load_rules(&a.rules)?;
        println!("rules: ok ({})", rules_summary(&rules));
    }
    Ok(())
}

/// `costwatch rules`: the built-in rules, checked, then printed on request.
pub fn rules(a: RulesArgs) -> Result<(), Exit> {
    let rules = config::builtin_rules()?;
    if a.print_defaults {
        for (name, text) in config::BUILTIN_RULES {
            println!("# file: {name}");
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
        }
    } else {
        println!(
            "built-in rules: {} (print them with --print-defaults)",
            rules_summary(&rules)
        );
    }
    Ok(())
}

async fn check_online(cfg: &Config) -> Result<(), Exit> {
    match app::check_state(cfg).await? {
        Err(path) => {
            println!(
                "state database: {} does not exist yet; it is created at the first start",
                path.display()
            );
            if let KindConfig::Otlp(receiver, ..) = &cfg.source.of_kind {
                // The received calls live there: nothing to read, and a
                // check creates nothing.
                println!(
                    "source (otlp): nothing received yet; `costwatch run` receives on http://{}/v1/traces",
                    receiver.listen
                );
                return Ok(());
            }
        }
        Ok(backend) => println!("state database: ok ({backend})"),
    }
    let now = costwatch::clock::Clock::now(&costwatch::clock::SystemClock);
    if let Some(p) = app::probe_source(cfg, now).await? {
        for line in probe_lines(&p) {
            println!("{line}");
        }
    }
    Ok(())
}

/// What `check --online` says about the source: a summary, then a warning
/// per thing that would keep costwatch from finding anything.
fn probe_lines(p: &app::Probe) -> Vec<String> {
    let (noun, rows) = if p.kind.is_row_source() {
        ("calls", p.rows)
    } else {
        ("session rows", p.rows)
    };
    let mut out = vec![format!(
        "source ({}): ok ({} models priced; last hour: {rows} {noun}, {} sessions)",
        p.kind, p.models, p.sessions
    )];
    if p.kind.is_row_source() {
        out.push(format!(
            "prices: the source's own where it reports them, then its catalogue, \
             source.models_file and the shipped table ({}), then what the reported costs teach",
            costwatch::pricing::table::default_table_source()
        ));
    }
    if rows == 0 {
        let look = match p.kind {
            SourceKind::Otlp => {
                "that your exporters send to source.listen (POST /v1/traces) and that your \
                 agents are running"
            }
            SourceKind::OtlpFiles => {
                "that source.path is the folder your Collector's file exporter writes to"
            }
            _ => {
                "that source.api_url points at the instance your agents log to, and that \
                 they are running"
            }
        };
        out.push(format!(
            "warning: no {noun} between {} and {}: check {look}",
            p.window.start.to_rfc3339(),
            p.window.end.to_rfc3339()
        ));
    }
    if p.cache_unreported_sessions > 0 {
        out.push(format!(
            "warning: {} of {} sessions carry no cache-read count on any call, so no_cache \
             cannot judge them: their instrumentation does not record \
             gen_ai.usage.cache_read.input_tokens (the official OpenAI one does not on chat \
             spans)",
            p.cache_unreported_sessions, p.sessions
        ));
    }
    if p.kind.is_row_source() && rows > 0 && p.calls_without_session == rows {
        out.push(
            "warning: no call carries a session id, so every call is judged alone: send one \
             from your clients (see the manual's chapter on your source) or set \
             source.session_key"
                .to_owned(),
        );
    } else if p.calls_without_session > 0 {
        out.push(format!(
            "note: {} of {rows} calls carry no session id and are judged one by one",
            p.calls_without_session
        ));
    }
    if !p.models_without_caching_facts.is_empty() {
        out.push(format!(
            "warning: no caching facts (minimum cacheable prefix, cache lifetime) for {} in \
             use: no_cache judges them with its rule's defaults (min_cacheable_tokens, \
             cache_lifetime_seconds); give them in the rule's model_min_cacheable_tokens and \
             model_cache_lifetime_seconds, or in source.models_file (caching facts shipped: \
             collected {})",
            p.models_without_caching_facts.join(", "),
            costwatch::pricing::caching::collected()
        ));
    }
    out.extend(p.caching_facts.iter().map(|f| f.line()));
    if p.unpriced_calls > 0 {
        out.push(format!(
            "warning: {} calls have no cost from the source and a model missing from the \
             price table (counted at $0): add them to source.models_file",
            p.unpriced_calls
        ));
    }
    out
}

fn rules_summary(r: &Rules) -> String {
    format!(
        "{} no_cache, {} oversized_model, {} retry_loop rules",
        r.no_cache.len(),
        r.oversized_model.len(),
        r.retry_loop.len()
    )
}

pub async fn test_alert(a: RunArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let results = app::test_alert(&cfg).await?;
    let mut failed = 0;
    for (name, result) in &results {
        match result {
            Ok(()) => println!("{name}: sent"),
            Err(e) => {
                failed += 1;
                println!("{name}: FAILED: {}", printable(&e.to_string()));
            }
        }
    }
    if failed > 0 {
        return Err(Exit::Failed(anyhow!(
            "{failed} of {} channels failed",
            results.len()
        )));
    }
    Ok(())
}
