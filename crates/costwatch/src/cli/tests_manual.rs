//! The manual checked against the program it describes: README.md,
//! ARCHITECTURE.md, CONTRIBUTING.md and every page of `docs/src`.
//!
//! - every `costwatch …` command line in a shell block parses with the real
//!   command line definition, and every `costwatch …` in inline code names
//!   real subcommands and flags;
//! - every YAML block passes `costwatch check`: a block marked `yaml` is a
//!   whole configuration file, `yaml fragment` is checked inside one (its
//!   top-level keys replace those of a minimal file), `yaml rules` is a rule
//!   file, and `yaml external` (another program's file, such as the
//!   OpenTelemetry Collector's) only has to be YAML;
//! - every JSON block is JSON;
//! - every relative link and picture leads to a file, and every `#anchor`
//!   to a heading of its page;
//! - `docs/src/SUMMARY.md` lists every page of the manual.

use super::{CheckArgs, Cli, check::check};
use clap::Parser;
use clap::error::ErrorKind;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages checked, relative to the repository's root.
fn pages() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let mut dirs = vec![PathBuf::from("docs/src")];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root().join(&dir))
            .unwrap()
            .map(|e| dir.join(e.unwrap().file_name()))
            .collect();
        entries.sort();
        for path in entries {
            if root().join(&path).is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap()
}

/// A fenced code block: its info string, its text (the fence's indentation
/// removed) and the line of its first text line.
struct Block {
    info: String,
    text: String,
    line: usize,
}

/// The fenced code blocks of a page, and its text outside them (code
/// blocks blanked, so line numbers stay).
fn split(page: &str) -> (Vec<Block>, String) {
    let mut blocks = Vec::new();
    let mut prose = String::new();
    let mut open: Option<(usize, String, usize, String)> = None;
    for (i, line) in page.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None if trimmed.starts_with("```") => {
                let info = trimmed.trim_start_matches('`').trim().to_owned();
                open = Some((indent, info, i + 2, String::new()));
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
            Some((fence_indent, ..)) if trimmed.starts_with("```") && indent <= *fence_indent => {
                if let Some((_, info, line, text)) = open.take() {
                    blocks.push(Block { info, text, line });
                }
                prose.push('\n');
            }
            Some((fence_indent, _, _, text)) => {
                let cut = line
                    .char_indices()
                    .find(|(j, c)| *j >= *fence_indent || !c.is_whitespace())
                    .map_or(line.len(), |(j, _)| j);
                text.push_str(&line[cut..]);
                text.push('\n');
                prose.push('\n');
            }
        }
    }
    (blocks, prose)
}

/// Shell words of `line`, with `'…'`, `"…"` and `\` handled; a word that
/// starts with `#` ends the line. Operators (`|`, `&&`, `;`, `>`, `<`)
/// standing alone are words of their own.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The arguments of each costwatch invocation on a shell line: after a
/// `costwatch` word (or `$(costwatch`), or after `cargo run … --`, up to
/// the next operator, redirection or closing parenthesis.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let words = words(line);
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        // `costwatch` in a command's place: first, after an operator or a
        // prefix command, or opening a command substitution (not `-p
        // costwatch` or `systemctl start costwatch`).
        let placed = i == 0
            || ["|", "||", "&&", ";", "sudo", "time", "exec", "nohup"]
                .contains(&words[i - 1].as_str());
        let start = if (placed && words[i] == "costwatch") || words[i].ends_with("$(costwatch") {
            Some(i + 1)
        } else if placed && words[i] == "cargo" && words.get(i + 1).is_some_and(|w| w == "run") {
            words[i..].iter().position(|w| w == "--").map(|p| i + p + 1)
        } else {
            None
        };
        let Some(start) = start else {
            i += 1;
            continue;
        };
        let mut args = vec!["costwatch".to_owned()];
        let mut j = start;
        while j < words.len() {
            let w = &words[j];
            if ["|", "||", "&&", ";", "&"].contains(&w.as_str())
                || w.starts_with('>')
                || w.starts_with("2>")
                || w.starts_with('<')
            {
                break;
            }
            if let Some(last) = w.strip_suffix(')').filter(|_| words[i].contains("$(")) {
                args.push(last.to_owned());
                j += 1;
                break;
            }
            args.push(w.clone());
            j += 1;
        }
        out.push(args);
        i = j;
    }
    out
}

/// Shell lines of a block, continuation lines joined and `$ ` prompts cut;
/// with `prompted` (a `console` block: a session with its output), only
/// the lines after a `$ ` prompt.
fn shell_lines(text: &str, prompted: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = match line.strip_prefix("$ ") {
            Some(command) => command,
            None if prompted && current.is_empty() => continue,
            None => line,
        };
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

fn is_shell(info: &str) -> bool {
    matches!(
        info.split_whitespace().next().unwrap_or(""),
        "sh" | "bash" | "shell" | "console"
    )
}

/// Inline code spans of prose that start with `costwatch `.
fn inline_commands(prose: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose.lines().enumerate() {
        let parts: Vec<&str> = line.split('`').collect();
        // With an odd number of backticks the last span goes on below.
        for k in (1..parts.len().saturating_sub(1)).step_by(2) {
            if parts[k].starts_with("costwatch ") {
                out.push((i + 1, parts[k].to_owned()));
            }
        }
    }
    // A span broken over two lines is joined with the next line's start.
    let lines: Vec<&str> = prose.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let ticks = line.matches('`').count();
        if ticks % 2 == 1
            && let Some(open) = line.rfind('`')
            && line[open + 1..].starts_with("costwatch")
            && let Some(next) = lines.get(i + 1)
            && let Some(close) = next.find('`')
        {
            out.push((
                i + 1,
                format!("{} {}", &line[open + 1..], next[..close].trim()),
            ));
        }
    }
    out
}

#[test]
fn every_command_line_of_the_manual_parses() {
    let mut problems = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let (blocks, prose) = split(&read(&page));
        for block in blocks.iter().filter(|b| is_shell(&b.info)) {
            let prompted = block.info.starts_with("console");
            for (k, line) in shell_lines(&block.text, prompted).iter().enumerate() {
                for args in invocations(line) {
                    seen += 1;
                    if let Err(e) = Cli::try_parse_from(&args) {
                        let kind = e.kind();
                        // A shell variable's value is not known here.
                        let expanded = args.iter().any(|a| a.contains('$'))
                            && matches!(kind, ErrorKind::InvalidValue | ErrorKind::ValueValidation);
                        if !expanded
                            && kind != ErrorKind::DisplayHelp
                            && kind != ErrorKind::DisplayVersion
                        {
                            problems.push(format!(
                                "{}:{}: `{}`: {}",
                                page.display(),
                                block.line + k,
                                args.join(" "),
                                e.render().to_string().lines().next().unwrap_or("")
                            ));
                        }
                    }
                }
            }
        }
        // Prose names commands without every argument they need
        // (`costwatch run`), or with placeholders (`--from T`): those only
        // have to name real subcommands and flags.
        // `[--flag]` marks what may be left out.
        for (line, span) in inline_commands(&prose) {
            if span.contains('…') {
                continue;
            }
            for args in invocations(&span.replace(['[', ']'], "")) {
                seen += 1;
                let Err(e) = Cli::try_parse_from(&args) else {
                    continue;
                };
                let incomplete = matches!(
                    e.kind(),
                    ErrorKind::MissingRequiredArgument
                        | ErrorKind::MissingSubcommand
                        | ErrorKind::InvalidValue
                        | ErrorKind::ValueValidation
                        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                        | ErrorKind::DisplayHelp
                        | ErrorKind::DisplayVersion
                );
                if !incomplete {
                    problems.push(format!(
                        "{}:{line}: `{span}`: {}",
                        page.display(),
                        e.render().to_string().lines().next().unwrap_or("")
                    ));
                }
            }
        }
    }
    assert!(
        seen > 50,
        "only {seen} command lines found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The minimal configuration a fragment is checked inside.
const BASE: &str = "source:\n  kind: reference\n  api_url: http://127.0.0.1:8080/v1\n";

/// The top-level keys of a YAML text.
fn top_level_keys(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with([' ', '#', '-']) && !l.is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim().to_owned()))
        .collect()
}

/// `text` as a whole configuration: a fragment's keys replace the base's.
fn whole_file(text: &str, fragment: bool) -> String {
    if !fragment || top_level_keys(text).contains("source") {
        return text.to_owned();
    }
    format!("{BASE}{text}")
}

/// Writes a placeholder beside the file for each relative `*_file:` path
/// `text` names (secrets, CA files): they are the reader's own.
fn placeholder_files(dir: &Path, text: &str) {
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.split(" #").next().unwrap_or("").trim();
        if key.ends_with("_file") && !value.is_empty() && !value.starts_with('/') {
            std::fs::write(dir.join(value), "placeholder\n").unwrap();
        }
    }
}

#[tokio::test]
async fn every_yaml_block_of_the_manual_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let (blocks, _) = split(&read(&page));
        for block in &blocks {
            let mut info = block.info.split_whitespace();
            if info.next() != Some("yaml") {
                continue;
            }
            let at = format!("{}:{}", page.display(), block.line);
            let marker = info.next();
            let result = match marker {
                Some("external") => serde_saphyr::from_str::<serde_json::Value>(&block.text)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Some("rules") => {
                    let path = dir.path().join(format!("rules-{checked}.yaml"));
                    std::fs::write(&path, &block.text).unwrap();
                    check(CheckArgs {
                        config: None,
                        rules: vec![path],
                        online: false,
                    })
                    .await
                    .map_err(|e| format!("{e:?}"))
                }
                None | Some("fragment") => {
                    placeholder_files(dir.path(), &block.text);
                    let path = dir.path().join(format!("config-{checked}.yaml"));
                    std::fs::write(&path, whole_file(&block.text, marker.is_some())).unwrap();
                    check(CheckArgs {
                        config: Some(path),
                        rules: Vec::new(),
                        online: false,
                    })
                    .await
                    .map_err(|e| format!("{e:?}"))
                }
                Some(other) => Err(format!(
                    "unknown marker `{other}`: use yaml, yaml fragment, yaml rules or yaml external"
                )),
            };
            checked += 1;
            if let Err(e) = result {
                problems.push(format!("{at}: {e}"));
            }
        }
    }
    assert!(
        checked > 10,
        "only {checked} YAML blocks found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_json_block_of_the_manual_is_json() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let (blocks, _) = split(&read(&page));
        for block in blocks.iter().filter(|b| b.info == "json") {
            checked += 1;
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&block.text) {
                problems.push(format!("{}:{}: {e}", page.display(), block.line));
            }
        }
    }
    assert!(
        checked >= 3,
        "only {checked} JSON blocks found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The anchor a heading gets (mdBook's and GitHub's rule): lower case,
/// spaces as `-`, only letters, digits, `-` and `_` kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &str) -> BTreeSet<String> {
    let (_, prose) = split(page);
    prose
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of the markdown links and pictures of `prose`, with their
/// lines; inline code is skipped.
fn links(prose: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose.lines().enumerate() {
        let outside_code: String = line
            .split('`')
            .enumerate()
            .filter(|(k, _)| k % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            out.push((i + 1, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_link_of_the_manual_leads_somewhere() {
    let mut problems = Vec::new();
    let mut followed = 0;
    for page in pages() {
        let text = read(&page);
        let (_, prose) = split(&text);
        let folder = page.parent().unwrap_or(Path::new(""));
        for (line, target) in links(&prose) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            followed += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                page.clone()
            } else {
                folder.join(file)
            };
            if !root().join(&path).exists() {
                problems.push(format!("{}:{line}: {target}: no such file", page.display()));
                continue;
            }
            if !anchor.is_empty() && !anchors(&read(&path)).contains(anchor) {
                problems.push(format!(
                    "{}:{line}: {target}: no heading #{anchor} in {}",
                    page.display(),
                    path.display()
                ));
            }
        }
    }
    assert!(
        followed > 50,
        "only {followed} links found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_summary_lists_every_page_of_the_manual() {
    let summary = read(Path::new("docs/src/SUMMARY.md"));
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let pages: BTreeSet<String> = pages()
        .iter()
        .filter_map(|p| p.strip_prefix("docs/src").ok())
        .map(|p| p.display().to_string())
        .filter(|p| p != "SUMMARY.md")
        .collect();
    let missing: Vec<&String> = pages.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "pages SUMMARY.md does not list: {missing:?}"
    );
}

#[test]
fn the_scans_find_what_they_look_for() {
    let page = "Run `costwatch check\n--config F` or this:\n\n```sh\n$ costwatch once \\\n  --config c.yaml | head\nid=$(costwatch silence add --reason \"a (b)\")  # note\ncargo run --release -- demo\n```\n\n[a](x.md#y) and ![b](img.png)\n\n## A heading: `with code`\n";
    let (blocks, prose) = split(page);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].line, 5);
    let lines = shell_lines(&blocks[0].text, false);
    assert_eq!(
        shell_lines(
            "$ costwatch check \\\n  --config c\ncostwatch.yaml: ok\n",
            true
        ),
        ["costwatch check    --config c"]
    );
    let all: Vec<Vec<String>> = lines.iter().flat_map(|l| invocations(l)).collect();
    assert_eq!(
        all,
        [
            vec!["costwatch", "once", "--config", "c.yaml"],
            vec!["costwatch", "silence", "add", "--reason", "a (b)"],
            vec!["costwatch", "demo"],
        ]
    );
    assert_eq!(
        inline_commands(&prose),
        [(1, "costwatch check --config F".to_owned())]
    );
    assert_eq!(
        links(&prose),
        [(11, "x.md#y".to_owned()), (11, "img.png".to_owned())]
    );
    assert!(anchors(page).contains("a-heading-with-code"));
    assert_eq!(
        whole_file("alerts:\n  cooldown: 1h\n", true),
        format!("{BASE}alerts:\n  cooldown: 1h\n")
    );
}
