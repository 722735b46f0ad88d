//! `costwatch check`, `costwatch rules` and `costwatch test-alert`.

use super::{CheckArgs, Exit, RulesArgs, RunArgs};
use anyhow::anyhow;
use costwatch::app;
use costwatch::config::{self, Config, Rules};
use costwatch::printable::printable;

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
        if cfg.source.admin_key.is_none() {
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
        Err(path) => println!(
            "state database: {} does not exist yet; it is created at the first start",
            path.display()
        ),
        Ok(backend) => println!("state database: ok ({backend})"),
    }
    if let Some(models) = app::check_gateway(cfg).await? {
        println!("gateway: ok ({models} models in the catalogue)");
    }
    Ok(())
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
