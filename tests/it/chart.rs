//! The alert chart end to end: an email with the chart inline as a real
//! SMTP server (aiosmtpd) stores it and Python's `email` package reads it,
//! the chart served by the operations endpoint from the stored alert, and
//! that chart shown by a real headless browser (Debian's chromium).

use crate::email::{SmtpPeer, peers_python, sample_alert, settings};
use crate::status::{chromium, decode, headless};
use costwatch::clock::{Clock, SystemClock};
use costwatch::detect::GroupBaseline;
use costwatch::domain::Kind;
use costwatch::notify::chart::ChartSpec;
use costwatch::notify::chart::draw::FLAGGED;
use costwatch::notify::email::{EmailNotifier, SmtpSecurity};
use costwatch::notify::{Alert, Notifier};
use costwatch::ops::metrics::Metrics;
use costwatch::ops::status::{Parts, ReplicaView, StatusPage};
use costwatch::pipeline::Schedule;
use costwatch::store::{SqlStore, Store};
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// The email test's alert, its sessions with cache-read shares, and the
/// chart of them against a group around 70 %.
fn alert_with_chart() -> Alert {
    let mut alert = sample_alert();
    for (s, share) in alert.sessions.iter_mut().zip([0.0, 0.04]) {
        s.evidence["cached_share"] = share.into();
    }
    let mut b = GroupBaseline::new(512);
    for i in 0..200 {
        b.cached_share.push(0.55 + 0.3 * f64::from(i % 21) / 20.0);
    }
    alert.chart = ChartSpec::capture(Kind::NoCache, &alert.group, &b, &alert.sessions);
    assert!(alert.chart.is_some());
    alert
}

/// Python's own MIME parser over a stored message: each part's type,
/// Content-ID, disposition and (for text) body; PNG parts are written to
/// `png_out`.
const WALK: &str = r#"
import email, email.policy, json, sys
msg = email.message_from_bytes(open(sys.argv[1], "rb").read(), policy=email.policy.default)
parts = []
for p in msg.walk():
    entry = {"type": p.get_content_type(), "cid": p.get("Content-ID"),
             "disposition": p.get_content_disposition()}
    if p.get_content_type() in ("text/plain", "text/html"):
        entry["body"] = p.get_content()
    if p.get_content_type() == "image/png":
        data = p.get_content()
        open(sys.argv[2], "wb").write(data)
        entry["bytes"] = len(data)
    parts.append(entry)
print(json.dumps(parts))
"#;

#[tokio::test]
async fn the_smtp_server_receives_the_chart_inline_and_referenced_by_the_html() {
    let peer = SmtpPeer::start("aiosmtpd.handlers.Mailbox", &[], &[]).await;
    let notifier = EmailNotifier::new(settings(peer.port, SmtpSecurity::None)).unwrap();
    let alert = alert_with_chart();
    notifier.send(&alert).await.unwrap();
    let messages = peer.messages();
    assert_eq!(messages.len(), 1);

    let dir = TempDir::new().unwrap();
    let (file, png) = (dir.path().join("msg.eml"), dir.path().join("chart.png"));
    std::fs::write(&file, &messages[0]).unwrap();
    let out = Command::new(peers_python())
        .args(["-c", WALK])
        .arg(&file)
        .arg(&png)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parts: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let types: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "multipart/alternative",
            "text/plain",
            "multipart/related",
            "text/html",
            "image/png"
        ]
    );
    let image = &parts[4];
    assert_eq!(image["disposition"], "inline");
    let cid = image["cid"].as_str().unwrap();
    let bare = cid.trim_start_matches('<').trim_end_matches('>');
    assert!(cid.starts_with('<') && bare.starts_with("chart."), "{cid}");
    let html = parts[3]["body"].as_str().unwrap();
    assert!(html.contains(&format!("src=\"cid:{bare}\"")), "{html}");
    assert!(html.contains("alt=\"Chart: cache-read share per session in feature=support-agent"));
    let text = parts[1]["body"].as_str().unwrap();
    assert!(
        text.contains("Chart: cache-read share per session"),
        "{text}"
    );
    // The image is the chart as drawn, flagged sessions marked.
    let (w, h, pixels) = decode(&png);
    assert_eq!((w, h), (600, 260));
    assert!(pixels.contains(&[FLAGGED.0, FLAGGED.1, FLAGGED.2]));
    assert!(image["bytes"].as_u64().unwrap() < 8 * 1024);
}

/// A state holding one stored alert with a chart, and the operations
/// endpoint serving it.
struct Served {
    _dir: TempDir,
    base: String,
    alert: Alert,
    _stop: tokio::sync::watch::Sender<bool>,
}

async fn serve() -> Served {
    let dir = TempDir::new().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("state.db").display()
    );
    let store = SqlStore::open(&url).await.unwrap();
    let now = SystemClock.now();
    let alert = alert_with_chart();
    store
        .enqueue(
            None,
            &[],
            std::slice::from_ref(&alert),
            &["email".to_owned()],
            now,
            now + chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    let parts = Parts {
        store,
        schedule: Schedule {
            job: "main".into(),
            windows: costwatch::config::WindowConfig {
                size: Duration::from_secs(3600),
                settle_lag: Duration::from_secs(120),
                start: None,
                max_backfill: Duration::from_secs(86_400),
            },
        },
        investigations: false,
        day_cap_usd: 0.0,
    };
    let page = StatusPage::new(
        parts,
        Arc::new(SystemClock),
        Arc::new(|| ReplicaView {
            name: "test".into(),
            last_tick: None,
            leader: true,
            failed_reads_in_row: 0,
            unhealthy: None,
        }),
    );
    let (stop, rx) = tokio::sync::watch::channel(false);
    let (addr, _task) = costwatch::ops::http::serve(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(Metrics::new()),
        Arc::new(Default::default),
        Some(page),
        None,
        rx,
    )
    .await
    .unwrap();
    Served {
        _dir: dir,
        base: format!("http://{addr}"),
        alert,
        _stop: stop,
    }
}

#[tokio::test]
async fn the_operations_endpoint_serves_the_chart_of_the_newest_notification() {
    let s = serve().await;
    let url = format!("{}/incidents/{}/chart.png", s.base, s.alert.fingerprint);
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/png");
    let bytes = res.bytes().await.unwrap();
    let spec = s.alert.chart.as_ref().unwrap();
    assert_eq!(
        bytes.as_ref(),
        costwatch::notify::chart::render_png(spec).unwrap()
    );
    let missing = reqwest::get(format!("{}/incidents/fp-none/chart.png", s.base))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_shows_the_served_chart_in_the_email_html() {
    let Some(browser) = chromium() else {
        return;
    };
    let s = serve().await;
    let profile = TempDir::new().unwrap();
    // The email's HTML, its cid: reference pointed at the served chart.
    let chart = format!("{}/incidents/{}/chart.png", s.base, s.alert.fingerprint);
    let html = costwatch::notify::render::email_html_with_chart(&s.alert, Some("chart"))
        .replace("cid:chart", &chart);
    let page = profile.path().join("email.html");
    std::fs::write(&page, html).unwrap();
    let shot = profile.path().join("email.png");
    let url = format!("file://{}", page.display());
    tokio::task::spawn_blocking({
        let (browser, profile, shot) = (browser.clone(), profile.path().to_owned(), shot.clone());
        move || {
            let arg = format!("--screenshot={}", shot.display());
            headless(&browser, &profile, &[&arg, "--window-size=800,900"], &url);
        }
    })
    .await
    .unwrap();
    let (w, h, pixels) = decode(&shot);
    assert_eq!((w, h), (800, 900));
    // The image loaded: the flagged sessions' red and the median's blue
    // are on the screen, which the page's own text never uses.
    let red = pixels
        .iter()
        .filter(|p| **p == [FLAGGED.0, FLAGGED.1, FLAGGED.2])
        .count();
    assert!(red > 50, "{red} red pixels: the chart did not load");
    // Kept to look at (never committed).
    let kept = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("chart-email-800.png");
    let _ = std::fs::copy(&shot, kept);
}
