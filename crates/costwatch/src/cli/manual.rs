//! What is generated, so it never drifts from its source: `costwatch
//! completions` and `costwatch man` from the command line definition,
//! `costwatch schema` and `costwatch reference` from the settings.

use super::{Cli, Exit, ReferenceArgs, SchemaArgs, Shell};
use anyhow::Context;
use clap::CommandFactory;
use costwatch::config;
use costwatch::settings::reference as generated;
use std::io::Write;

pub fn completions(shell: Shell) -> Result<(), Exit> {
    let mut cmd = Cli::command();
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // Rendered into memory first: the generator panics on a failed write.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "costwatch", &mut script);
    print(&script, "the completion script")
}

/// `costwatch schema`: the JSON Schema of rule files, or of configuration
/// files.
pub fn schema(a: SchemaArgs) -> Result<(), Exit> {
    let schema = if a.config {
        config::config_schema()
    } else {
        config::rules_schema()
    };
    let text = serde_json::to_string_pretty(&schema).context("cannot print the schema")?;
    print(format!("{text}\n").as_bytes(), "the schema")
}

/// `costwatch reference`: the configuration reference, the example file,
/// or the rules reference.
pub fn reference(a: ReferenceArgs) -> Result<(), Exit> {
    let text = if a.rules {
        generated::rules_reference(&config::rules_schema())
    } else if a.example {
        generated::example(&config::config_schema())
    } else {
        generated::reference(&config::config_schema())
    };
    print(text.as_bytes(), "the reference")
}

/// Writes `bytes` to stdout; a reader that stopped early (`| head`) is fine.
fn print(bytes: &[u8], what: &str) -> Result<(), Exit> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::Error::new(e)
            .context(format!("cannot write {what}"))
            .into()),
        _ => Ok(()),
    }
}

/// A section for `cmd` (named after `parent`), then one for each of its
/// own subcommands (`silence add`, ...).
fn sections(page: &mut Vec<u8>, cmd: &clap::Command, parent: &str) -> Result<(), Exit> {
    let name = format!("{parent} {}", cmd.get_name().to_uppercase());
    writeln!(page, ".SH \"{name}\"").context("cannot render the manual page")?;
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_synopsis_section(page)
        .and_then(|()| man.render_description_section(page))
        .and_then(|()| man.render_options_section(page))
        .context("cannot render the manual page")?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        sections(page, sub, &name)?;
    }
    Ok(())
}

/// The manual page: the command, then a section per subcommand.
pub fn man() -> Result<(), Exit> {
    let cmd = Cli::command();
    let mut page = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(&mut page)
        .and_then(|()| man.render_name_section(&mut page))
        .and_then(|()| man.render_synopsis_section(&mut page))
        .and_then(|()| man.render_description_section(&mut page))
        .and_then(|()| man.render_options_section(&mut page))
        .context("cannot render the manual page")?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        sections(&mut page, sub, "COSTWATCH")?;
    }
    man.render_version_section(&mut page)
        .context("cannot render the manual page")?;
    print(&page, "the manual page")
}
