//! The built `costwatch` binary: `check`, `backtest --simulate` and `once`.

use crate::support::{costwatch_command, free_port, manifest_dir, seed_dataset, start_sim};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;

/// The three sessions of the seed window that waste money.
pub const SEED_WASTE: [&str; 3] = [
    "replay-mismatch-a14896679e70",
    "subagent-sol-9b31c0e4d2aa",
    "retry-loop-7f2e81c09ab5",
];

/// The binary run from the crate root, with no `COSTWATCH_*` variable
/// inherited from whoever runs the tests.
fn costwatch(args: &[&str]) -> Command {
    costwatch_command(args)
}

/// Runs a command off the async runtime (the simulator keeps serving).
async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("the binary runs"))
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The 1-based line and column where `needle` starts in `text`.
fn position(text: &str, needle: &str) -> (usize, usize) {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in the text"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = at - before.rfind('\n').map_or(0, |nl| nl + 1) + 1;
    (line, column)
}

/// `file:line:col: field:` for the place `needle` starts.
fn located(file: &Path, text: &str, needle: &str, field: &str) -> String {
    let (line, column) = position(text, needle);
    format!("{}:{line}:{column}: {field}:", file.display())
}

/// `file:line:col: field:` for the value written as `key: value`.
fn located_value(file: &Path, text: &str, key: &str, value: &str, field: &str) -> String {
    let (line, column) = position(text, &format!("{key}: {value}"));
    let column = column + key.len() + 2;
    format!("{}:{line}:{column}: {field}:", file.display())
}

#[test]
fn the_shipped_config_and_rules_check_clean() {
    let out = costwatch(&[
        "check",
        "--config",
        "config/costwatch.example.yaml",
        "--rules",
        "rules",
    ])
    .output()
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("rules: ok (1 no_cache, 1 oversized_model, 1 retry_loop rules)"),
        "{stdout}"
    );
}

#[test]
fn check_reports_every_problem_with_file_line_and_column() {
    let dir = TempDir::new().unwrap();
    let rules_dir = dir.path().join("rules");
    std::fs::create_dir(&rules_dir).unwrap();
    let rule_file = rules_dir.join("strict.yaml");
    let rules = "\
# Two out-of-range values and a wrong type.
no_cache:
  - name: strict-cache
    min_requests: 1
    max_cached_share: 1.5
retry_loop:
  - name: loop
    min_identical_run: many
";
    std::fs::write(&rule_file, rules).unwrap();

    let out = costwatch(&["check", "--rules", rules_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let expected = [
        located_value(
            &rule_file,
            rules,
            "max_cached_share",
            "1.5",
            "no_cache[0].max_cached_share",
        ),
        located_value(
            &rule_file,
            rules,
            "min_requests",
            "1",
            "no_cache[0].min_requests",
        ),
        located_value(
            &rule_file,
            rules,
            "min_identical_run",
            "many",
            "retry_loop[0].min_identical_run",
        ),
    ];
    assert!(expected[0].ends_with(":5:23: no_cache[0].max_cached_share:"));
    for want in &expected {
        assert!(
            stderr.contains(want.as_str()),
            "missing `{want}` in:\n{stderr}"
        );
    }
    assert_eq!(stderr.lines().count(), 3, "{stderr}");

    // A configuration file: an unknown key and a wrong type, plus its rules.
    let config_file = dir.path().join("costwatch.yaml");
    let config = "\
source:
  api_url: http://127.0.0.1:9/v1
  page_limt: 20
detection:
  max_candidates: lots
rules: [rules]
";
    std::fs::write(&config_file, config).unwrap();
    let out = costwatch(&["check", "--config", config_file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let unknown = located(&config_file, config, "page_limt", "source.page_limt");
    let wrong = located_value(
        &config_file,
        config,
        "max_candidates",
        "lots",
        "detection.max_candidates",
    );
    for want in [&unknown, &wrong] {
        assert!(
            stderr.contains(want.as_str()),
            "missing `{want}` in:\n{stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("{unknown} unknown field `page_limt`")),
        "{stderr}"
    );
    for want in &expected {
        assert!(
            stderr.contains(want.as_str()),
            "missing `{want}` in:\n{stderr}"
        );
    }
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn backtest_on_the_simulator_prints_findings_as_json_lines() {
    let out = costwatch(&["backtest", "--simulate", "--days", "1", "--format", "jsonl"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = text(&out.stdout);
    let mut per_kind: BTreeMap<String, usize> = BTreeMap::new();
    for line in stdout.lines() {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in [
            "kind",
            "session_id",
            "window_start",
            "window_end",
            "severity",
            "rule",
            "labels",
            "impact_usd",
            "evidence",
        ] {
            assert!(row.get(key).is_some(), "no `{key}` in {line}");
        }
        let kind = row["kind"].as_str().unwrap();
        assert!(
            ["no_cache", "oversized_model", "retry_loop"].contains(&kind),
            "{line}"
        );
        assert!(
            row["impact_usd"].as_f64().is_some_and(|v| v >= 0.0),
            "{line}"
        );
        assert!(
            row["evidence"].is_object() && row["labels"].is_object(),
            "{line}"
        );
        *per_kind.entry(kind.to_owned()).or_default() += 1;
    }
    assert!(!per_kind.is_empty(), "a day of traffic has findings");

    // The score table: one row per kind, whose flagged count (tp + fp) is
    // the number of lines printed for that kind.
    let header = stderr
        .lines()
        .position(|l| {
            l.split_whitespace().collect::<Vec<_>>()
                == ["kind", "tp", "fp", "fn", "precision", "recall", "f1"]
        })
        .unwrap_or_else(|| panic!("no score table in:\n{stderr}"));
    let rows: Vec<Vec<&str>> = stderr
        .lines()
        .skip(header + 1)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(kinds, ["no_cache", "oversized_model", "retry_loop"]);
    for r in &rows {
        let n = |i: usize| -> f64 { r[i].parse().unwrap() };
        assert_eq!(
            (n(1) + n(2)) as usize,
            per_kind.get(r[0]).copied().unwrap_or(0),
            "{r:?}"
        );
        assert!(
            (0.0..=1.0).contains(&n(4)) && (0.0..=1.0).contains(&n(5)),
            "{r:?}"
        );
    }
}

/// A configuration for `once` over hourly windows from 11:00 of the seed day;
/// the gateway URL, key and state come from the environment.
fn once_config(dir: &TempDir) -> std::path::PathBuf {
    let path = dir.path().join("costwatch.yaml");
    let rules = manifest_dir().join("rules");
    let yaml = format!(
        "source:\n  api_url: http://127.0.0.1:9/v1\n  page_limit: 10\n\
         windows:\n  size: 1h\n  start: 2026-10-11T11:00:00Z\n\
         rules: [{}]\n",
        rules.display()
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `costwatch once --config config --at 13:00` of the seed day, reading `sim`.
fn once_on_seed_day(config: &Path, sim: &costwatch_sim::server::SimServer) -> Command {
    let mut cmd = costwatch(&[
        "once",
        "--config",
        config.to_str().unwrap(),
        "--at",
        "2026-10-11T13:00:00Z",
    ]);
    cmd.env("COSTWATCH_SOURCE__API_URL", sim.base_url())
        .env("COSTWATCH_ADMIN_KEY", "sim-admin-key");
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_against_the_simulator_stores_its_progress() {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let once = || {
        let mut cmd = once_on_seed_day(&config, &sim);
        cmd.env("COSTWATCH_STATE__URL", &state)
            .current_dir(dir.path());
        cmd
    };

    let out = run(once()).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    for id in SEED_WASTE {
        assert_eq!(stdout.matches(id).count(), 1, "{id} in:\n{stdout}");
    }
    assert!(
        stderr.contains("1 windows processed, 3 new findings"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("window processed"),
        "a line per window only with -v: {stderr}"
    );
    let hits = sim.stats();
    assert!(hits.hits("/v1/sessions") >= 3, "26 sessions in pages of 10");

    // The second run finds the window done: nothing to read, nothing new.
    let out = run(once()).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("0 windows processed, 0 new findings"),
        "{stderr}"
    );
    assert_eq!(
        sim.stats().hits,
        hits.hits,
        "the gateway was not read again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_against_a_gateway_that_is_down_says_why_once_and_exits_1() {
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let down = format!("http://127.0.0.1:{}/v1", free_port());
    let mut cmd = costwatch(&["once", "--config", config.to_str().unwrap()]);
    cmd.env("COSTWATCH_SOURCE__API_URL", &down)
        .env("COSTWATCH_ADMIN_KEY", "sim-admin-key")
        .env("COSTWATCH_SOURCE__MAX_RETRIES", "0")
        .env("COSTWATCH_STATE__URL", &state);
    let out = run(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.contains("stays due"), "{stderr}");
    assert_eq!(
        last.matches("GET /v1/models").count(),
        1,
        "the cause is said once: {last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_without_an_admin_key_names_the_variable() {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let mut cmd = costwatch(&["once", "--config", config.to_str().unwrap()]);
    cmd.env("COSTWATCH_SOURCE__API_URL", sim.base_url())
        .env("COSTWATCH_STATE__URL", &state)
        .current_dir(dir.path());
    let out = run(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("COSTWATCH_ADMIN_KEY"), "{stderr}");
    assert!(text(&out.stdout).is_empty());
    assert!(sim.stats().hits.is_empty(), "the gateway was never called");
}

#[test]
fn demo_runs_outside_the_repository_on_the_built_in_rules() {
    let dir = TempDir::new().unwrap();
    let out = costwatch(&["demo", "--days", "1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for session in SEED_WASTE {
        assert!(
            stdout.contains(session),
            "{session} not found in:\n{stdout}"
        );
    }
    // One day of seed 7 has no no_cache finding: its total is $0.0000.
    assert!(!stdout.contains("$-"), "a negative amount in:\n{stdout}");
}

#[test]
fn a_demo_read_by_head_ends_quietly() {
    use std::io::{BufRead, BufReader};
    let mut child = costwatch(&["demo", "--days", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `costwatch demo | head -1`: one line read, then the pipe closed.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("costwatch demo"), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_readme_first_steps_work_from_a_copied_example_config() {
    // `cp config/costwatch.example.yaml costwatch.yaml && costwatch check`,
    // in a folder with no rules of its own.
    let dir = TempDir::new().unwrap();
    let copy = dir.path().join("costwatch.yaml");
    std::fs::copy(manifest_dir().join("config/costwatch.example.yaml"), &copy).unwrap();
    let out = costwatch(&["check", "--config", copy.to_str().unwrap()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("built in"), "{stdout}");
}

#[test]
fn printed_default_rules_are_a_valid_starting_point() {
    let out = costwatch(&["rules", "--print-defaults"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    // Split the output back into its files and check them as rules.
    let dir = TempDir::new().unwrap();
    let mut files = 0;
    for part in printed.split("# file: ").filter(|p| !p.is_empty()) {
        let (name, body) = part.split_once('\n').unwrap();
        assert_eq!(
            body,
            std::fs::read_to_string(manifest_dir().join("rules").join(name)).unwrap(),
            "{name} is printed as shipped"
        );
        std::fs::write(dir.path().join(name), body).unwrap();
        files += 1;
    }
    assert_eq!(files, 3, "{printed}");
    let out = costwatch(&["check", "--rules", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn a_missing_rule_folder_names_the_config_line_and_the_resolved_path() {
    let dir = TempDir::new().unwrap();
    let cfg = dir.path().join("costwatch.yaml");
    let yaml = "source:\n  api_url: http://127.0.0.1:9/v1\nrules: [../rules]\n";
    std::fs::write(&cfg, yaml).unwrap();
    let out = costwatch(&["check", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let resolved = dir.path().join("../rules");
    let want = format!(
        "{} cannot read {}",
        located(&cfg, yaml, "../rules]", "rules[0]"),
        resolved.display()
    );
    assert!(
        text(&out.stderr).contains(&want),
        "{}\nwant: {want}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_at_a_future_time_commits_no_window_that_has_not_happened() {
    use costwatch::clock::{Clock, SystemClock};
    use costwatch::store::{SqlStore, Store, WindowStore};
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let now = SystemClock.now();
    let start = (now - chrono::Duration::days(2)).format("%Y-%m-%dT00:00:00Z");
    let config = dir.path().join("costwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "source:\n  api_url: http://127.0.0.1:9/v1\n\
             windows:\n  size: 6h\n  settle_lag: 1m\n  start: {start}\n"
        ),
    )
    .unwrap();
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let tomorrow = (now + chrono::Duration::days(1)).to_rfc3339();
    let mut cmd = costwatch(&[
        "once",
        "--config",
        config.to_str().unwrap(),
        "--at",
        &tomorrow,
    ]);
    cmd.env("COSTWATCH_SOURCE__API_URL", sim.base_url())
        .env("COSTWATCH_ADMIN_KEY", "sim-admin-key")
        .env("COSTWATCH_STATE__URL", &state);
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let store = SqlStore::open(&state).await.unwrap();
    let windows = store.windows("main").await.unwrap();
    assert!(
        windows.len() >= 8,
        "the two past days were read: {windows:?}"
    );
    let watermark = store.watermark("main").await.unwrap().unwrap();
    assert!(
        watermark + chrono::Duration::minutes(1) <= SystemClock.now(),
        "the watermark {watermark} passed the present"
    );
    assert!(
        windows
            .iter()
            .all(|w| w.window.end + chrono::Duration::minutes(1) <= SystemClock.now()),
        "{windows:?}"
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_file_follows_the_configuration_not_the_working_directory() {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let elsewhere = TempDir::new().unwrap();
    let once = |cwd: &Path| {
        let mut cmd = once_on_seed_day(&config, &sim);
        cmd.current_dir(cwd);
        cmd
    };
    let out = run(once(dir.path())).await;
    assert!(
        text(&out.stderr).contains("1 windows processed, 3 new findings"),
        "{}",
        text(&out.stderr)
    );
    // From another folder, the same state: nothing is processed twice.
    let out = run(once(elsewhere.path())).await;
    assert!(
        text(&out.stderr).contains("0 windows processed, 0 new findings"),
        "{}",
        text(&out.stderr)
    );
    assert!(dir.path().join("costwatch.db").exists());
    assert!(!elsewhere.path().join("costwatch.db").exists());
}

/// Runs `once` over the seed window with stderr on a pipe of our own, and
/// `JOURNAL_STREAM` naming that pipe when `journal` is set; returns stderr.
async fn once_logs(journal: bool) -> String {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let (mut reader, writer) = std::io::pipe().unwrap();
    let meta = std::fs::metadata(format!("/proc/self/fd/{}", writer.as_raw_fd())).unwrap();
    let mut cmd = once_on_seed_day(&config, &sim);
    cmd.arg("-v")
        .env_remove("JOURNAL_STREAM")
        .stdout(std::process::Stdio::null())
        .stderr(writer);
    if journal {
        cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    }
    let status = tokio::task::spawn_blocking(move || {
        let status = cmd.status().unwrap();
        drop(cmd);
        status
    })
    .await
    .unwrap();
    assert!(status.success());
    let mut out = String::new();
    reader.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_carry_no_escape_codes_off_a_terminal_and_no_timestamp_in_the_journal() {
    let piped = once_logs(false).await;
    let line = piped
        .lines()
        .find(|l| l.contains("window processed"))
        .unwrap_or_else(|| panic!("no log line in:\n{piped}"));
    assert!(!piped.contains('\u{1b}'), "escape codes in:\n{piped}");
    assert!(line.starts_with("20"), "a timestamp first: {line}");

    let journal = once_logs(true).await;
    let line = journal
        .lines()
        .find(|l| l.contains("window processed"))
        .unwrap_or_else(|| panic!("no log line in:\n{journal}"));
    assert!(!journal.contains('\u{1b}'), "escape codes in:\n{journal}");
    assert!(
        line.trim_start().starts_with("INFO"),
        "the journal stamps lines itself: {line}"
    );
}

/// The seed window with each wasteful session's id followed by `tail`.
pub fn seed_with_hostile_ids(tail: &str) -> costwatch_sim::Dataset {
    let seed = seed_dataset();
    let sessions = seed
        .sessions
        .into_iter()
        .map(|mut s| {
            if SEED_WASTE.contains(&s.session_id.as_str()) {
                s.session_id.push_str(tail);
                for r in &mut s.requests {
                    r.session_id.clone_from(&s.session_id);
                }
                if let Some(row) = &mut s.fixed_row {
                    row["session_id"] = Value::from(s.session_id.as_str());
                }
            }
            s
        })
        .collect();
    costwatch_sim::Dataset::new(seed.models, sessions, seed.truth)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_prints_session_ids_with_control_characters_escaped() {
    // Clears the screen, writes a forged finding on a line of its own, and
    // reverses what follows on screen.
    let tail = "\u{1b}[2J\r\n2026-10-11 11:00  no_cache  critical  forged\u{202e}\u{9b}0m";
    let sim = start_sim(seed_with_hostile_ids(tail)).await;
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let mut cmd = once_on_seed_day(&config, &sim);
    cmd.current_dir(dir.path());
    let out = run(cmd).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("1 windows processed, 3 new findings"),
        "{stderr}"
    );
    for (name, printed) in [("stdout", &stdout), ("stderr", &stderr)] {
        let raw: Vec<char> = printed
            .chars()
            .filter(|&c| costwatch::printable::is_unsafe(c) && c != '\n')
            .collect();
        assert!(raw.is_empty(), "{name} carries {raw:?}:\n{printed}");
    }
    let escaped = "\\x1b[2J\\r\\n2026-10-11 11:00  no_cache  critical  forged\\u{202e}\\u{9b}0m";
    assert_eq!(stdout.lines().count(), 3, "one line per finding:\n{stdout}");
    for id in SEED_WASTE {
        let shown = format!("{id}{escaped}");
        assert_eq!(
            stdout.lines().filter(|l| l.contains(&shown)).count(),
            1,
            "{shown} in:\n{stdout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_page_is_logged_and_reported_with_gateway_text_escaped() {
    use costwatch_sim::{Fault, FaultKind, FaultPath};
    let sim = start_sim(seed_dataset()).await;
    // A model name that would end the log line and forge the next one.
    let model = "gpt\r\n2026-10-11T13:00:00Z  INFO forged\u{1b}[2J";
    sim.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::SetField {
            row: 0,
            field: "by_model".into(),
            value: serde_json::json!({ model: {"requests": "many"} }),
        },
    )));
    let dir = TempDir::new().unwrap();
    let config = once_config(&dir);
    let mut cmd = once_on_seed_day(&config, &sim);
    cmd.current_dir(dir.path());
    let out = run(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(text(&out.stdout).is_empty());
    let escaped = "data[0].by_model.gpt\\r\\n2026-10-11T13:00:00Z  INFO forged\\x1b[2J.requests";
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(escaped)).collect();
    assert_eq!(lines.len(), 2, "the log line and the error:\n{stderr}");
    assert!(lines[0].contains("window failed"), "{stderr}");
    assert!(lines[1].starts_with("costwatch: "), "{stderr}");
    let raw: Vec<char> = stderr
        .chars()
        .filter(|&c| costwatch::printable::is_unsafe(c) && c != '\n')
        .collect();
    assert!(raw.is_empty(), "stderr carries {raw:?}:\n{stderr}");
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("2026-10-11T13:00:00Z"))
    );
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = costwatch(&["--version"]).output().unwrap();
    let version = text(&out.stdout);
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(manifest_dir())
        .output()
        .unwrap();
    assert!(head.status.success(), "the tests run from a git checkout");
    let head = text(&head.stdout).trim().to_owned();
    assert_eq!(
        version.trim(),
        format!("costwatch {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
}

const SUBCOMMANDS: [&str; 17] = [
    "check",
    "run",
    "once",
    "test-alert",
    "backtest",
    "demo",
    "schema",
    "reference",
    "rules",
    "completions",
    "man",
    "findings",
    "incidents",
    "incident",
    "status",
    "silence",
    "alerts",
];

#[test]
fn the_generated_files_are_what_the_commands_print_and_a_closed_pipe_is_no_error() {
    let committed = |name: &str| std::fs::read_to_string(manifest_dir().join(name)).unwrap();
    for (args, file) in [
        (
            &["reference", "--example"][..],
            "config/costwatch.example.yaml",
        ),
        (&["reference"][..], "docs/src/reference/configuration.md"),
        (&["reference", "--rules"][..], "docs/src/reference/rules.md"),
        (&["schema", "--config"][..], "config/costwatch.schema.json"),
        (&["schema"][..], "rules/rules.schema.json"),
    ] {
        let out = costwatch(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout) == committed(file),
            "{args:?} differs from {file}"
        );
    }
    // A reader that stops early (`costwatch reference | head`).
    let mut child = costwatch(&["reference"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn completion_scripts_load_and_know_every_command() {
    let script = |shell: &str| {
        let out = costwatch(&["completions", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let bash = script("bash");
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("costwatch.bash");
    std::fs::write(&file, &bash).unwrap();
    let loaded = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p costwatch",
            file.display()
        ))
        .output()
        .unwrap();
    assert!(
        text(&loaded.stdout).contains("-F _costwatch costwatch"),
        "{}",
        text(&loaded.stderr)
    );
    let zsh = script("zsh");
    assert!(zsh.starts_with("#compdef costwatch"), "{zsh}");
    let fish = script("fish");
    for command in SUBCOMMANDS {
        for (shell, text) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
            assert!(text.contains(command), "{shell} lacks {command}");
        }
    }
    assert!(fish.contains("complete -c costwatch"), "{fish}");
}

#[test]
fn the_manual_page_has_a_section_per_command() {
    let out = costwatch(&["man"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(page.contains(".TH costwatch 1"), "{page}");
    for command in SUBCOMMANDS {
        let section = format!(".SH \"COSTWATCH {}\"", command.to_uppercase());
        assert!(page.contains(&section), "no {section}");
    }
    assert!(page.contains("\\-\\-config"), "options are documented");
    for nested in [
        "INCIDENT SHOW",
        "SILENCE ADD",
        "SILENCE LIST",
        "SILENCE EXPIRE",
    ] {
        let section = format!(".SH \"COSTWATCH {nested}\"");
        assert!(page.contains(&section), "no {section}");
    }
}
