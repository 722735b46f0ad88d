//! What a new user meets in the first hour, each through the built binary:
//! a wrong URL, a taken port, a kind switched by environment, a backfill
//! older than its limit, a cron step past its field, and `once` agreeing
//! with the alerts it queued.

use crate::operator::{command, config, json_of, run};
use crate::support::{costwatch_command, free_port, manifest_dir, seed_dataset, start_sim};
use serde_json::Value;
use std::process::Command;
use tempfile::TempDir;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A reference-gateway configuration in `dir` with `extra` appended.
fn config_with(dir: &TempDir, extra: &str) -> std::path::PathBuf {
    let path = dir.path().join("costwatch.yaml");
    let yaml = format!(
        "source:\n  api_url: http://127.0.0.1:9/v1\nstate:\n  url: sqlite://state.db\n\
         rules: [{}]\n{extra}",
        manifest_dir().join("rules").display()
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn a_cron_that_steps_past_its_field_is_refused_naming_the_line() {
    let dir = TempDir::new().unwrap();
    let cfg = config_with(&dir, "schedule:\n  cron: \"*/61 * * * *\"\n");
    let out = costwatch_command(&["check", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let want = format!(
        "{}:7:9: schedule.cron: cannot parse \"*/61 * * * *\": minute field `*/61`: \
         the step 61 is longer than the field's 60 values",
        cfg.display()
    );
    assert!(stderr.contains(&want), "want `{want}` in:\n{stderr}");
}

#[test]
fn a_kind_switch_by_environment_works_with_the_example_configuration() {
    let example = manifest_dir().join("config/costwatch.example.yaml");
    let check = |env: &[(&str, &str)]| {
        let mut cmd = costwatch_command(&["check", "--config", example.to_str().unwrap()]);
        cmd.envs(env.iter().copied());
        cmd.output().unwrap()
    };
    // Without unsetting the reference gateway's URL, the switch is refused.
    let out = check(&[("COSTWATCH_SOURCE__KIND", "otlp")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("source.api_url: only read with kind"),
        "{}",
        text(&out.stderr)
    );
    let out = check(&[
        ("COSTWATCH_SOURCE__KIND", "otlp"),
        ("COSTWATCH_SOURCE__API_URL", "null"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let folder = TempDir::new().unwrap();
    let out = check(&[
        ("COSTWATCH_SOURCE__KIND", "otlp_files"),
        ("COSTWATCH_SOURCE__API_URL", "null"),
        ("COSTWATCH_SOURCE__PATH", folder.path().to_str().unwrap()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// `once --at 13:00` of the seed day over hourly windows, reading `sim`.
fn once_at(cfg: &std::path::Path, sim: &costwatch_sim::server::SimServer, at: &str) -> Command {
    let mut cmd = command(cfg, &["once", "--at", at]);
    cmd.env("COSTWATCH_SOURCE__API_URL", sim.base_url())
        .env("COSTWATCH_ADMIN_KEY", sim.admin_key());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_reads_no_further_back_than_max_backfill() {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    // A start 30 days before the seed day, a backfill of three hours.
    let cfg = config_with(
        &dir,
        "windows:\n  size: 1h\n  start: 2026-09-11T11:00:00Z\n  max_backfill: 3h\n",
    );
    let out = run(once_at(&cfg, &sim, "2026-10-11T13:00:00Z")).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // 10:00 to 12:00; the window ending at 13:00 waits for its settle lag.
    assert!(
        stderr.contains("2 windows processed, 3 new findings"),
        "{stderr}"
    );
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("windows.max_backfill"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("costwatch backtest"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_windows_are_logged_only_at_debug_level() {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    // Eight hourly windows before the seed window's, with nothing in them.
    let cfg = config_with(
        &dir,
        "windows:\n  size: 1h\n  start: 2026-10-11T03:00:00Z\n",
    );
    let mut once = once_at(&cfg, &sim, "2026-10-11T13:00:00Z");
    once.arg("-v");
    let out = run(once).await;
    let stderr = text(&out.stderr);
    assert!(stderr.contains("9 windows processed"), "{stderr}");
    let informed = stderr
        .lines()
        .filter(|l| l.contains(" INFO ") && l.contains("window processed"))
        .count();
    assert_eq!(informed, 1, "only the window with sessions: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_decides_the_incidents_it_queues_alerts_for_as_run_would() {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let cfg = config(dir.path());
    // Six hourly windows from 11:00: the seed window's incidents go quiet
    // and resolve (`alerts.resolve_after`, 2h), all in one catch-up.
    let out = run(once_at(&cfg, &sim, "2026-10-11T17:05:00Z")).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("6 windows processed"), "{stderr}");
    assert!(stderr.contains("1 alert queued"), "{stderr}");
    for kind in ["no_cache", "oversized_model", "retry_loop"] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(kind) && l.contains("1 new findings")),
            "per-kind totals: {stderr}"
        );
    }
    let incidents = json_of(command(&cfg, &["incidents", "--format", "json"])).await;
    let incidents = incidents.as_array().unwrap();
    assert_eq!(incidents.len(), 3, "{incidents:?}");
    for i in incidents {
        assert_eq!(i["status"], "resolved", "{i}");
        assert!(i["notifications"].as_u64() >= Some(1), "told: {i}");
    }
    let preview = json_of(command(&cfg, &["alerts", "--format", "json"])).await;
    let upcoming = preview["upcoming"].as_array().unwrap();
    assert_eq!(upcoming.len(), 1, "{preview}");
    let summary = &upcoming[0];
    assert_eq!(summary["origin"], "queued", "{summary}");
    assert_eq!(summary["alert"]["kind"], "catch_up_summary", "{summary}");
    let said = summary["alert"]["summary"].as_str().unwrap();
    assert!(said.contains("on its first start"), "{said}");
    assert_eq!(said.matches("(over)").count(), 3, "{said}");
    // The incidents as data, and each one's timeline showing the summary
    // that told it, per channel.
    let listed = summary["alert"]["incidents"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{summary}");
    for l in listed {
        assert_eq!(l["status"], "resolved", "{l}");
        let fp = l["fingerprint"].as_str().unwrap();
        assert!(incidents.iter().any(|i| i["fingerprint"] == fp), "{l}");
        let out = run(command(&cfg, &["incident", "show", fp])).await;
        let shown = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            shown.contains("notification #1 queued: [costwatch] catch-up over 6 windows"),
            "{shown}"
        );
        for channel in ["email", "chat", "am"] {
            assert!(
                shown.contains(&format!("{channel}: queued")),
                "{channel}: {shown}"
            );
        }
    }

    // `status` tells the same, without the status page.
    let status = json_of(command(&cfg, &["status", "--format", "json"])).await;
    assert_eq!(
        status["job"]["watermark"], "2026-10-11T17:00:00Z",
        "{status}"
    );
    assert_eq!(
        status["job"]["evaluated"], "2026-10-11T17:00:00Z",
        "{status}"
    );
    assert_eq!(status["source"]["healthy"], true, "{status}");
    assert_eq!(
        status["incidents"]["items"],
        Value::Array(Vec::new()),
        "{status}"
    );
    assert_eq!(status["budget"]["enabled"], false, "{status}");
    let out = run(command(&cfg, &["status"])).await;
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        shown.contains("windows    read up to 2026-10-11 17:00 UTC"),
        "{shown}"
    );
    assert!(shown.contains("source     healthy"), "{shown}");
    assert!(shown.contains("incidents  0 open"), "{shown}");
    assert!(
        shown.contains("budget     investigations are off"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_online_answers_a_wrong_port_at_once_naming_the_url() {
    let dir = TempDir::new().unwrap();
    let cfg = config_with(&dir, "");
    let url = format!("http://127.0.0.1:{}/v1", free_port());
    let mut cmd = costwatch_command(&["check", "--online", "--config", cfg.to_str().unwrap()]);
    cmd.env("COSTWATCH_SOURCE__API_URL", &url)
        .env("COSTWATCH_ADMIN_KEY", "k");
    let out = run(cmd).await;
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "source.api_url: {url}: cannot connect to 127.0.0.1:"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("retrying"), "answered at once: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_call_warns_once_however_often_it_is_retried() {
    let dir = TempDir::new().unwrap();
    let cfg = config_with(&dir, "");
    let port = free_port();
    let mut cmd = costwatch_command(&["once", "--config", cfg.to_str().unwrap()]);
    cmd.env(
        "COSTWATCH_SOURCE__API_URL",
        format!("http://127.0.0.1:{port}/v1"),
    )
    .env("COSTWATCH_ADMIN_KEY", "k")
    .env("COSTWATCH_SOURCE__MAX_RETRIES", "3")
    .env("COSTWATCH_SOURCE__RETRY_BASE", "10ms")
    .current_dir(dir.path());
    let out = run(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let warnings = stderr.lines().filter(|l| l.contains(" WARN ")).count();
    assert_eq!(warnings, 1, "one warning for the failing call:\n{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "the error names where: {last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_names_the_address_and_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = TempDir::new().unwrap();
    let cfg = config_with(&dir, &format!("server:\n  listen: {addr}\n"));
    let mut cmd = costwatch_command(&["run", "--config", cfg.to_str().unwrap()]);
    cmd.env("COSTWATCH_ADMIN_KEY", "k").current_dir(dir.path());
    let out = run(cmd).await;
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr}, server.listen's address")),
        "{stderr}"
    );
    drop(taken);
}

/// `once` over the seed day read as `kind`, then `findings --format json`
/// and the alerts it queued: each session's link, with no link setting.
async fn links_of(kind: &str) -> (String, Vec<(String, String)>, Vec<(String, String)>) {
    let sim = start_sim(seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let cfg = config(dir.path());
    let url = match kind {
        "litellm" => sim.litellm_url(),
        _ => sim.langfuse_url(),
    };
    let mut once = command(&cfg, &["once", "--at", "2026-10-11T13:00:00Z"]);
    once.env("COSTWATCH_SOURCE__KIND", kind)
        .env("COSTWATCH_SOURCE__API_URL", &url)
        .env("COSTWATCH_ADMIN_KEY", sim.admin_key())
        .env("COSTWATCH_SOURCE__PUBLIC_KEY", sim.langfuse().public_key());
    if kind == "litellm" {
        once.env_remove("COSTWATCH_SOURCE__PUBLIC_KEY");
    }
    let env: Vec<(String, String)> = once
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v?.to_str()?.to_owned())))
        .collect();
    let out = run(once).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let with_env = |args: &[&str]| {
        let mut c = command(&cfg, args);
        c.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        c
    };
    let findings = json_of(with_env(&["findings", "--format", "json"])).await;
    let found = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let id = f["session_id"].as_str().unwrap().to_owned();
            (id, f["link"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let preview = json_of(with_env(&["alerts", "--format", "json"])).await;
    let alerted = preview["upcoming"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|u| u["alert"]["sessions"].as_array().unwrap().clone())
        .map(|s| {
            let id = s["session_id"].as_str().unwrap().to_owned();
            (id, s["link"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let origin = url::Url::parse(&url)
        .unwrap()
        .origin()
        .ascii_serialization();
    (origin, found, alerted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_link_to_litellms_and_langfuses_own_pages_with_no_setting() {
    let (origin, found, alerted) = links_of("litellm").await;
    assert_eq!(found.len(), 3, "{found:?}");
    for (id, link) in found.iter().chain(&alerted) {
        assert_eq!(link, &format!("{origin}/ui/logs?session_id={id}"));
    }
    assert!(!alerted.is_empty());
    let (origin, found, alerted) = links_of("langfuse").await;
    assert_eq!(found.len(), 3, "{found:?}");
    for (id, link) in found.iter().chain(&alerted) {
        assert_eq!(
            link,
            &format!(
                "{origin}/project/{}/sessions/{id}",
                costwatch_sim::langfuse::PROJECT_ID
            )
        );
    }
    assert!(!alerted.is_empty());
}
