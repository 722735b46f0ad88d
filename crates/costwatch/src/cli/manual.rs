//! `costwatch completions` and `costwatch man`: generated from the command
//! line definition, so they never drift from it.

use super::{Cli, Exit, Shell};
use anyhow::Context;
use clap::CommandFactory;
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
