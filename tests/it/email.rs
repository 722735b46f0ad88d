//! The email channel against a real SMTP server (aiosmtpd, from
//! `COSTWATCH_PEERS_PYTHON`): delivery of a multipart alert with stable ids,
//! SMTP replies mapped to retry or reject, timeouts, STARTTLS with an extra
//! CA and login, and implicit TLS.

use crate::support::free_port;
use costwatch::notify::email::{EmailNotifier, EmailSettings, SmtpSecurity, message_id, thread_id};
use costwatch::notify::render::title_for;
use costwatch::notify::settings::EmailConfig;
use costwatch::notify::{Alert, AlertKind, AlertSession, AlertStatus, Notifier, NotifyError};
use costwatch::secret::Secret;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};
use tempfile::TempDir;

/// A firing no-cache alert with two sessions, dated 2026-03-04 11:00 UTC.
pub(crate) fn sample_alert() -> Alert {
    let t = |h| chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 3, 4, h, 0, 0).unwrap();
    let mut alert = costwatch::notify::sample_alert(t(11));
    alert.fingerprint = "fp-0123456789abcdef".into();
    alert.sequence = 0;
    alert.kind = AlertKind::NoCache;
    alert.group = "feature=support-agent".into();
    alert.labels = [("feature", "support-agent"), ("team", "care")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    alert.title = title_for(
        AlertKind::NoCache,
        &alert.group,
        12,
        4.2,
        AlertStatus::Firing,
    );
    alert.session_count = 12;
    alert.impact_usd = 8.4;
    alert.impact_usd_per_day = 4.2;
    alert.starts_at = t(10);
    alert.sessions = vec![
        AlertSession {
            session_id: "sess-top-001".into(),
            cost_usd: 1.75,
            impact_usd: 1.3125,
            explanation: "34 calls re-sent 900k prompt tokens, none cached".into(),
            evidence: serde_json::json!({"requests": 34, "input_tokens": 900000, "cached_tokens": 0}),
            link: Some("https://gateway.example.com/logs?session=sess-top-001".into()),
            what_to_do: costwatch::detect::remedy::for_cause(
                costwatch::detect::no_cache::Cause::PrefixChanged,
            )
            .into(),
        },
        AlertSession {
            session_id: "sess-second-002".into(),
            cost_usd: 0.9,
            impact_usd: 0.61,
            explanation: "20 calls, none cached".into(),
            evidence: serde_json::json!({"requests": 20}),
            link: None,
            what_to_do: String::new(),
        },
    ];
    alert
}

// ---- the real SMTP peer (aiosmtpd) -------------------------------------

pub(crate) use crate::support::peers_python;

/// A running aiosmtpd, killed on drop.
pub(crate) struct SmtpPeer {
    child: Child,
    pub(crate) port: u16,
    maildir: PathBuf,
    log: PathBuf,
    _dir: TempDir,
}

impl Drop for SmtpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SmtpPeer {
    /// Starts `python -m aiosmtpd` with `handler` on a free loopback
    /// port and waits until it accepts connections.
    pub(crate) async fn start(handler: &str, extra: &[String], env: &[(&str, &str)]) -> SmtpPeer {
        let dir = tempfile::tempdir().unwrap();
        let maildir = dir.path().join("maildir");
        let log = dir.path().join("aiosmtpd.log");
        let port = free_port();
        let peers_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers");
        let mut cmd = Command::new(peers_python());
        cmd.args(["-m", "aiosmtpd", "-n", "-l"])
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .args(["-c", handler])
            .arg(&maildir)
            .env("PYTHONPATH", &peers_dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let mut peer = SmtpPeer {
            child,
            port,
            maildir,
            log,
            _dir: dir,
        };
        peer.wait_ready().await;
        peer
    }

    async fn wait_ready(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("aiosmtpd exited early ({status}):\n{}", self.log_text());
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "aiosmtpd did not listen on port {} within 20 s:\n{}",
                self.port,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The messages stored so far, oldest first.
    pub(crate) fn messages(&self) -> Vec<String> {
        let new = self.maildir.join("new");
        let Ok(entries) = std::fs::read_dir(&new) else {
            return Vec::new();
        };
        let mut files: Vec<(SystemTime, PathBuf)> = entries
            .map(|e| {
                let e = e.unwrap();
                (e.metadata().unwrap().modified().unwrap(), e.path())
            })
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|(_, p)| std::fs::read_to_string(p).unwrap())
            .collect()
    }
}

pub(crate) fn settings(port: u16, security: SmtpSecurity) -> EmailSettings {
    EmailSettings {
        config: EmailConfig {
            host: "127.0.0.1".into(),
            port: Some(port),
            security,
            ca_file: None,
            username: None,
            password_file: None,
            password: None,
            from: "costwatch <costwatch@example.com>".into(),
            to: vec!["ops@example.com".into(), "Finance <fin@example.org>".into()],
            timeout: Duration::from_secs(10),
        },
        extra_ca_pem: None,
    }
}

// ---- a minimal MIME reader ---------------------------------------------

struct Parsed {
    headers: Vec<(String, String)>,
    body: String,
}

impl Parsed {
    fn parse(raw: &str) -> Parsed {
        let raw = raw.replace("\r\n", "\n");
        let (head, body) = raw.split_once("\n\n").unwrap_or((raw.as_str(), ""));
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in head.lines() {
            if line.starts_with([' ', '\t']) {
                let last = headers.last_mut().expect("continuation after a header");
                last.1.push(' ');
                last.1.push_str(line.trim());
            } else if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        Parsed {
            headers,
            body: body.to_owned(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `boundary` parameter of the Content-Type.
    fn boundary(&self) -> String {
        let ct = self.header("Content-Type").expect("content-type");
        let b = ct
            .split(';')
            .map(str::trim)
            .find_map(|p| p.strip_prefix("boundary="))
            .expect("boundary parameter");
        b.trim_matches('"').to_owned()
    }

    /// The parts of a multipart body, decoded, by their media type.
    fn parts(&self) -> BTreeMap<String, String> {
        let delimiter = format!("--{}", self.boundary());
        let mut parts = BTreeMap::new();
        let mut chunks = self.body.split(&delimiter);
        chunks.next(); // preamble
        for chunk in chunks {
            if chunk.starts_with("--") {
                break; // closing delimiter
            }
            let part = Parsed::parse(chunk.trim_start_matches('\n'));
            let media = part
                .header("Content-Type")
                .expect("part content-type")
                .split(';')
                .next()
                .unwrap()
                .trim()
                .to_ascii_lowercase();
            let encoding = part
                .header("Content-Transfer-Encoding")
                .unwrap_or("7bit")
                .to_ascii_lowercase();
            parts.insert(media, decode(&encoding, &part.body));
        }
        parts
    }
}

fn decode(encoding: &str, body: &str) -> String {
    match encoding {
        "7bit" | "8bit" | "binary" => body.to_owned(),
        "base64" => {
            use base64::Engine;
            let compact: String = body.split_whitespace().collect();
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .unwrap(),
            )
            .unwrap()
        }
        "quoted-printable" => {
            let bytes = body.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'=' {
                    if bytes.get(i + 1) == Some(&b'\n') {
                        i += 2; // soft line break
                        continue;
                    }
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 3;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            String::from_utf8(out).unwrap()
        }
        other => panic!("unexpected transfer encoding {other}"),
    }
}

// ---- plain SMTP ---------------------------------------------------------

#[tokio::test]
async fn plain_smtp_delivers_a_multipart_alert_with_stable_ids() {
    let peer = SmtpPeer::start("aiosmtpd.handlers.Mailbox", &[], &[]).await;
    let notifier = EmailNotifier::new(settings(peer.port, SmtpSecurity::None)).unwrap();
    assert_eq!(notifier.name(), "email");
    let alert = sample_alert();

    notifier.send(&alert).await.unwrap();
    let messages = peer.messages();
    assert_eq!(messages.len(), 1, "log:\n{}", peer.log_text());
    let msg = Parsed::parse(&messages[0]);

    assert_eq!(
        msg.header("Subject"),
        Some("[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day")
    );
    assert_eq!(
        msg.header("From"),
        Some("costwatch <costwatch@example.com>")
    );
    let to = msg.header("To").unwrap();
    assert!(to.contains("ops@example.com"), "{to}");
    assert!(to.contains("Finance <fin@example.org>"), "{to}");
    // The envelope reached both recipients (aiosmtpd records it).
    let rcpt = msg.header("X-RcptTo").unwrap();
    assert!(rcpt.contains("ops@example.com") && rcpt.contains("fin@example.org"));

    let key = "fp-0123456789abcdef:firing:0";
    let expected_id = message_id(key, "example.com");
    assert_eq!(msg.header("Message-ID"), Some(expected_id.as_str()));
    assert!(expected_id.starts_with('<') && expected_id.ends_with(".costwatch@example.com>"));
    assert_eq!(
        msg.header("X-Costwatch-Fingerprint"),
        Some("fp-0123456789abcdef")
    );
    assert_eq!(msg.header("X-Costwatch-Idempotency-Key"), Some(key));
    assert_eq!(
        msg.header("References"),
        Some(thread_id("fp-0123456789abcdef", "example.com").as_str())
    );
    assert!(msg.header("Date").unwrap().contains("4 Mar 2026 11:00:00"));
    assert!(
        msg.header("Content-Type")
            .unwrap()
            .starts_with("multipart/alternative")
    );

    let parts = msg.parts();
    assert_eq!(
        parts.keys().map(String::as_str).collect::<Vec<_>>(),
        ["text/html", "text/plain"]
    );
    for (media, body) in &parts {
        assert!(body.contains("sess-top-001"), "{media}: {body}");
        assert!(body.contains("+$1.31"), "{media}: {body}");
        assert!(body.contains("+$8.40 above peers"), "{media}: {body}");
        assert!(body.contains("+$4.20/day"), "{media}: {body}");
        assert!(
            body.contains("What to do:")
                && body.contains("timestamps and ids after the cached part"),
            "{media}: {body}"
        );
    }
    assert!(parts["text/html"].contains("<td>sess-second-002</td>"));
    assert!(parts["text/plain"].contains("Evidence for sess-top-001:"));

    // A retry of the same notification carries the same Message-ID; the
    // next notification of the incident a new one in the same thread.
    notifier.send(&alert).await.unwrap();
    let mut next = alert.clone();
    next.sequence = 1;
    notifier.send(&next).await.unwrap();
    let messages = peer.messages();
    assert_eq!(messages.len(), 3);
    let ids: Vec<String> = messages
        .iter()
        .map(|m| Parsed::parse(m).header("Message-ID").unwrap().to_owned())
        .collect();
    assert_eq!(ids.iter().filter(|id| **id == expected_id).count(), 2);
    assert!(ids.contains(&message_id("fp-0123456789abcdef:firing:1", "example.com")));
}

#[tokio::test]
async fn smtp_5xx_is_rejected_and_4xx_is_transient() {
    let peer = SmtpPeer::start("costwatch_smtp.ScriptedMailbox", &[], &[]).await;

    let mut s = settings(peer.port, SmtpSecurity::None);
    s.to = vec!["reject-me@example.com".into()];
    let err = EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap_err();
    match &err {
        NotifyError::Rejected(m) => {
            assert!(m.contains("550"), "{m}");
            assert!(m.contains("mailbox unavailable"), "{m}");
            assert!(m.starts_with("smtp 127.0.0.1:"), "{m}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }

    let mut s = settings(peer.port, SmtpSecurity::None);
    s.to = vec!["busy@example.com".into()];
    let err = EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap_err();
    match &err {
        NotifyError::Transient(m) => assert!(m.contains("451"), "{m}"),
        other => panic!("expected Transient, got {other:?}"),
    }
    assert!(peer.messages().is_empty());
}

#[tokio::test]
async fn nothing_listening_is_transient() {
    let port = free_port();
    let err = EmailNotifier::new(settings(port, SmtpSecurity::None))
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap_err();
    assert!(matches!(err, NotifyError::Transient(_)), "{err:?}");
}

#[tokio::test]
async fn a_silent_server_times_out_as_transient() {
    // Accepts connections but never greets.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let mut s = settings(port, SmtpSecurity::None);
    s.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    match err {
        NotifyError::Transient(m) => assert!(m.contains("timed out"), "{m}"),
        other => panic!("expected Transient, got {other:?}"),
    }
    hold.abort();
}

// ---- TLS ------------------------------------------------------------------

/// A test CA and a leaf for 127.0.0.1 signed by it, made with openssl.
struct TestPki {
    dir: TempDir,
}

impl TestPki {
    fn new() -> TestPki {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap_or_else(|e| {
                    panic!("openssl could not run ({e}): apt-get install -y openssl")
                });
            assert!(
                out.status.success(),
                "openssl {args:?} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509"];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=costwatch test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        run(&ca);
        let mut csr = vec!["req"];
        csr.extend(ec);
        csr.extend([
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        run(&csr);
        std::fs::write(
            dir.path().join("leaf.ext"),
            "basicConstraints=critical,CA:FALSE\n\
             subjectAltName=IP:127.0.0.1\n\
             keyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ]);
        TestPki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.path().join("ca.pem")).unwrap()
    }
}

#[tokio::test]
async fn starttls_with_the_extra_ca_and_login_delivers() {
    let pki = TestPki::new();
    let tls_args = [
        "--tlscert".to_owned(),
        pki.path("leaf.pem"),
        "--tlskey".to_owned(),
        pki.path("leaf.key"),
    ];
    let peer = SmtpPeer::start(
        "costwatch_smtp.ScriptedMailbox",
        &tls_args,
        &[("COSTWATCH_PEER_SMTP_AUTH", "alerts:correct-horse")],
    )
    .await;

    let mut s = settings(peer.port, SmtpSecurity::StartTls);
    s.extra_ca_pem = Some(pki.ca_pem());
    s.username = Some("alerts".into());
    s.password = Some(Secret::new("correct-horse"));
    EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap();
    let messages = peer.messages();
    assert_eq!(messages.len(), 1, "log:\n{}", peer.log_text());
    let msg = Parsed::parse(&messages[0]);
    assert_eq!(msg.header("X-Peer-Login"), Some("alerts"));
    assert!(msg.parts()["text/plain"].contains("sess-top-001"));

    // A wrong password is a permanent 535 and never shows in the error.
    let mut s = settings(peer.port, SmtpSecurity::StartTls);
    s.extra_ca_pem = Some(pki.ca_pem());
    s.username = Some("alerts".into());
    s.password = Some(Secret::new("wrong-battery"));
    let err = EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, NotifyError::Rejected(_)), "{text}");
    assert!(text.contains("535"), "{text}");
    assert!(!text.contains("wrong-battery"), "{text}");

    // Without the extra CA the server's certificate is not trusted.
    let mut s = settings(peer.port, SmtpSecurity::StartTls);
    s.username = Some("alerts".into());
    s.password = Some(Secret::new("correct-horse"));
    let err = EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, NotifyError::Transient(_)), "{text}");
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert_eq!(peer.messages().len(), 1);
}

#[tokio::test]
async fn implicit_tls_delivers() {
    let pki = TestPki::new();
    let tls_args = [
        "--smtpscert".to_owned(),
        pki.path("leaf.pem"),
        "--smtpskey".to_owned(),
        pki.path("leaf.key"),
    ];
    let peer = SmtpPeer::start("aiosmtpd.handlers.Mailbox", &tls_args, &[]).await;
    let mut s = settings(peer.port, SmtpSecurity::Tls);
    s.extra_ca_pem = Some(pki.ca_pem());
    EmailNotifier::new(s)
        .unwrap()
        .send(&sample_alert())
        .await
        .unwrap();
    let messages = peer.messages();
    assert_eq!(messages.len(), 1, "log:\n{}", peer.log_text());
    assert_eq!(
        Parsed::parse(&messages[0]).header("X-Costwatch-Idempotency-Key"),
        Some("fp-0123456789abcdef:firing:0")
    );
}
