//! The email channel: one multipart/alternative message (plain text and
//! HTML) per alert, sent over SMTP with lettre.
//!
//! Every message carries a `Message-ID` derived from the alert's idempotency
//! key, so a notification delivered twice (a retry after a lost reply) is
//! recognisable as the same message, and the headers
//! `X-Costwatch-Fingerprint` and `X-Costwatch-Idempotency-Key` for filters.

use super::render::{email_html, email_subject, email_text};
use super::{Alert, Notifier, NotifyError};
use crate::secret::Secret;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime};

pub use crate::config::SmtpSecurity;

/// Everything the email channel needs, with the CA file already read.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// SMTP host name or IP address; TLS certificates are checked against it.
    pub host: String,
    /// SMTP port.
    pub port: u16,
    /// Transport security.
    pub security: SmtpSecurity,
    /// Extra CA certificates (PEM) to trust besides the system's.
    pub extra_ca_pem: Option<Vec<u8>>,
    /// SMTP user, if the server wants authentication.
    pub username: Option<String>,
    /// SMTP password; required with `username`.
    pub password: Option<Secret>,
    /// Sender mailbox, e.g. `costwatch <costwatch@example.com>`.
    pub from: String,
    /// Recipients (at least one).
    pub to: Vec<String>,
    /// Timeout of one delivery, connection included.
    pub timeout: Duration,
}

impl EmailSettings {
    /// The settings `notify.email` describes, with its CA file read.
    pub fn from_config(c: &crate::config::EmailConfig) -> std::io::Result<EmailSettings> {
        Ok(EmailSettings {
            host: c.host.clone(),
            port: c.port,
            security: c.security,
            extra_ca_pem: c.ca_file.as_ref().map(std::fs::read).transpose()?,
            username: c.username.clone(),
            password: c.password.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            timeout: c.timeout,
        })
    }
}

/// Why the email channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EmailSetupError {
    /// The sender is not a mailbox.
    #[error("email.from: {value:?} is not a valid mailbox: {reason}")]
    From {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A recipient is not a mailbox.
    #[error("email.to[{index}]: {value:?} is not a valid mailbox: {reason}")]
    To {
        /// Position in the list.
        index: usize,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No recipients.
    #[error("email.to: at least one recipient is needed")]
    NoRecipients,
    /// The extra CA is not usable.
    #[error("email.ca_file: {0}")]
    Ca(String),
    /// A user without a password or a password without a user.
    #[error("email: {0}")]
    Credentials(&'static str),
    /// The TLS parameters could not be built.
    #[error("email: tls setup for {host}: {reason}")]
    Tls {
        /// The SMTP host.
        host: String,
        /// What went wrong.
        reason: String,
    },
}

/// Sends alerts by email.
pub struct EmailNotifier {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
    /// Domain of `Message-ID`s: the sender's.
    id_domain: String,
    /// `host:port`, for error messages.
    server: String,
    timeout: Duration,
    /// Kept only to scrub it from error messages.
    password: Option<Secret>,
}

impl std::fmt::Debug for EmailNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailNotifier")
            .field("server", &self.server)
            .field("from", &self.from.to_string())
            .field("to", &self.to.len())
            .finish_non_exhaustive()
    }
}

const X_FINGERPRINT: HeaderName = HeaderName::new_from_ascii_str("X-Costwatch-Fingerprint");
const X_IDEMPOTENCY_KEY: HeaderName = HeaderName::new_from_ascii_str("X-Costwatch-Idempotency-Key");

impl EmailNotifier {
    /// Checks the addresses and credentials and prepares the SMTP transport;
    /// nothing is sent and no connection is made.
    pub fn new(settings: EmailSettings) -> Result<EmailNotifier, EmailSetupError> {
        let from: Mailbox = settings
            .from
            .parse()
            .map_err(|e: lettre::address::AddressError| EmailSetupError::From {
                value: settings.from.clone(),
                reason: e.to_string(),
            })?;
        if settings.to.is_empty() {
            return Err(EmailSetupError::NoRecipients);
        }
        let to = settings
            .to
            .iter()
            .enumerate()
            .map(|(index, value)| {
                value.parse::<Mailbox>().map_err(|e| EmailSetupError::To {
                    index,
                    value: value.clone(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;

        let tls = match settings.security {
            SmtpSecurity::None => Tls::None,
            SmtpSecurity::StartTls => Tls::Required(tls_parameters(&settings)?),
            SmtpSecurity::Tls => Tls::Wrapper(tls_parameters(&settings)?),
        };
        if settings.security == SmtpSecurity::None && settings.extra_ca_pem.is_some() {
            return Err(EmailSetupError::Ca(
                "a CA is set but security is none: use starttls or tls".into(),
            ));
        }

        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&settings.host)
            .port(settings.port)
            .tls(tls)
            .timeout(Some(settings.timeout));
        match (&settings.username, &settings.password) {
            (Some(user), Some(password)) => {
                builder = builder
                    .credentials(Credentials::new(user.clone(), password.expose().to_owned()));
            }
            (Some(_), None) => {
                return Err(EmailSetupError::Credentials(
                    "username is set but no password",
                ));
            }
            (None, Some(_)) => {
                return Err(EmailSetupError::Credentials(
                    "password is set but no username",
                ));
            }
            (None, None) => {}
        }

        Ok(EmailNotifier {
            transport: builder.build(),
            id_domain: from.email.domain().to_owned(),
            from,
            to,
            server: format!("{}:{}", settings.host, settings.port),
            timeout: settings.timeout,
            password: settings.password,
        })
    }

    /// The message sent for `alert`.
    pub fn message(&self, alert: &Alert) -> Result<Message, NotifyError> {
        let key = alert.idempotency_key();
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(email_subject(alert))
            .date(SystemTime::from(alert.created_at))
            .message_id(Some(message_id(&key, &self.id_domain)))
            .references(thread_id(&alert.fingerprint, &self.id_domain))
            .raw_header(HeaderValue::new(
                X_FINGERPRINT,
                header_safe(&alert.fingerprint),
            ))
            .raw_header(HeaderValue::new(X_IDEMPOTENCY_KEY, header_safe(&key)));
        for to in &self.to {
            builder = builder.to(to.clone());
        }
        let body = MultiPart::alternative()
            .singlepart(
                SinglePart::builder()
                    .header(ContentType::TEXT_PLAIN)
                    .body(email_text(alert)),
            )
            .singlepart(
                SinglePart::builder()
                    .header(ContentType::TEXT_HTML)
                    .body(email_html(alert)),
            );
        // With an investigation, its full transcript travels as an attachment
        // so a person can check every tool call the summary rests on.
        let transcript = alert
            .investigation
            .as_ref()
            .and_then(|i| i.get("transcript_text"))
            .and_then(|t| t.as_str());
        let content = match transcript {
            Some(text) => MultiPart::mixed().multipart(body).singlepart(
                lettre::message::Attachment::new("investigation-transcript.txt".to_owned())
                    .body(text.to_owned(), ContentType::TEXT_PLAIN),
            ),
            None => body,
        };
        builder
            .multipart(content)
            .map_err(|e| NotifyError::Rejected(format!("email: message could not be built: {e}")))
    }

    fn classify(&self, err: &lettre::transport::smtp::Error) -> NotifyError {
        let text = self.scrub(&format!(
            "smtp {}: {}",
            self.server,
            lowercase_first(&collapse_repeats(&err.to_string()))
        ));
        if err.is_permanent() || err.is_client() {
            NotifyError::Rejected(text)
        } else {
            // 4xx replies, connection and TLS failures, timeouts, broken
            // replies: all worth another try.
            NotifyError::Transient(text)
        }
    }

    /// Removes the password from a message, should a server echo it.
    fn scrub(&self, text: &str) -> String {
        match &self.password {
            Some(p) if p.expose().len() >= 4 => text.replace(p.expose(), "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

impl Notifier for EmailNotifier {
    fn name(&self) -> &str {
        "email"
    }

    async fn send(&self, alert: &Alert) -> Result<(), NotifyError> {
        let message = self.message(alert)?;
        match tokio::time::timeout(self.timeout, self.transport.send(message)).await {
            Ok(Ok(_response)) => Ok(()),
            Ok(Err(err)) => Err(self.classify(&err)),
            Err(_elapsed) => Err(NotifyError::Transient(format!(
                "smtp {}: timed out after {}",
                self.server,
                humantime::format_duration(self.timeout)
            ))),
        }
    }
}

/// The `Message-ID` of the notification with idempotency key `key`: the same
/// key always gives the same id.
pub fn message_id(key: &str, domain: &str) -> String {
    format!("<{}.costwatch@{}>", short_hash(key), domain)
}

/// A per-incident id every notification of the incident references, so mail
/// clients thread firing and resolved messages together.
fn thread_id(fingerprint: &str, domain: &str) -> String {
    format!(
        "<{}.incident.costwatch@{}>",
        short_hash(fingerprint),
        domain
    )
}

fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    hex::encode(&digest[..16])
}

/// Printable ASCII only, for header values built from alert data.
fn header_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `a: A: b` becomes `a: b`: lettre repeats a kind when errors nest.
fn collapse_repeats(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split(": ") {
        if parts
            .last()
            .is_some_and(|last| last.eq_ignore_ascii_case(part))
        {
            continue;
        }
        parts.push(part);
    }
    parts.join(": ")
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn tls_parameters(settings: &EmailSettings) -> Result<TlsParameters, EmailSetupError> {
    let mut builder = TlsParameters::builder(settings.host.clone());
    if let Some(pem) = &settings.extra_ca_pem {
        if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(EmailSetupError::Ca(
                "no PEM certificate (-----BEGIN CERTIFICATE-----) found".into(),
            ));
        }
        let cert = Certificate::from_pem(pem)
            .map_err(|e| EmailSetupError::Ca(lowercase_first(&e.to_string())))?;
        builder = builder.add_root_certificate(cert);
    }
    builder.build_rustls().map_err(|e| EmailSetupError::Tls {
        host: settings.host.clone(),
        reason: lowercase_first(&e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::render::tests::sample_alert;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use tempfile::TempDir;

    // ---- the real SMTP peer (aiosmtpd) -------------------------------------

    /// Where the Python with aiosmtpd lives; fails the test when it is missing.
    fn peers_python() -> PathBuf {
        if let Some(p) = std::env::var_os("COSTWATCH_PEERS_PYTHON") {
            let p = PathBuf::from(p);
            assert!(
                p.exists(),
                "COSTWATCH_PEERS_PYTHON={} does not exist: run .ci/python-peers.sh",
                p.display()
            );
            return p;
        }
        let venv = std::env::var_os("COSTWATCH_PEERS_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                    .join(".cache/costwatch-peers")
            });
        let python = venv.join("bin/python");
        assert!(
            python.exists(),
            "no Python with aiosmtpd at {}: run .ci/python-peers.sh first \
             (or set COSTWATCH_PEERS_PYTHON)",
            python.display()
        );
        python
    }

    /// A running aiosmtpd, killed on drop.
    struct SmtpPeer {
        child: Child,
        port: u16,
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
        async fn start(handler: &str, extra: &[String], env: &[(&str, &str)]) -> SmtpPeer {
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
        fn messages(&self) -> Vec<String> {
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

    fn free_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    fn settings(port: u16, security: SmtpSecurity) -> EmailSettings {
        EmailSettings {
            host: "127.0.0.1".into(),
            port,
            security,
            extra_ca_pem: None,
            username: None,
            password: None,
            from: "costwatch <costwatch@example.com>".into(),
            to: vec!["ops@example.com".into(), "Finance <fin@example.org>".into()],
            timeout: Duration::from_secs(10),
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

    #[test]
    fn setup_checks_addresses_ca_and_credentials() {
        let mut s = settings(25, SmtpSecurity::None);
        s.from = "not an address".into();
        assert!(matches!(
            EmailNotifier::new(s),
            Err(EmailSetupError::From { .. })
        ));

        let mut s = settings(25, SmtpSecurity::None);
        s.to = vec!["ok@example.com".into(), "bad@".into()];
        let err = EmailNotifier::new(s).unwrap_err();
        assert!(
            err.to_string().starts_with("email.to[1]: \"bad@\""),
            "{err}"
        );

        let mut s = settings(25, SmtpSecurity::None);
        s.to.clear();
        assert!(matches!(
            EmailNotifier::new(s),
            Err(EmailSetupError::NoRecipients)
        ));

        let mut s = settings(25, SmtpSecurity::StartTls);
        s.extra_ca_pem = Some(b"garbage".to_vec());
        assert!(matches!(EmailNotifier::new(s), Err(EmailSetupError::Ca(_))));

        let mut s = settings(25, SmtpSecurity::None);
        s.username = Some("u".into());
        assert!(matches!(
            EmailNotifier::new(s),
            Err(EmailSetupError::Credentials(_))
        ));

        let mut s = settings(25, SmtpSecurity::None);
        s.password = Some(Secret::new("hunter2-pass"));
        let err = EmailNotifier::new(s).unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"));
    }

    #[test]
    fn an_investigation_travels_as_a_transcript_attachment() {
        let n = EmailNotifier::new(settings(25, SmtpSecurity::None)).unwrap();
        let mut alert = crate::notify::sample_alert(chrono::Utc::now());
        let plain = String::from_utf8(n.message(&alert).unwrap().formatted()).unwrap();
        assert!(!plain.contains("investigation-transcript.txt"));
        alert.investigation = Some(serde_json::json!({
            "summary": "the loop drives the cost",
            "cost_usd": 0.0003,
            "transcript_text": "round 1: tool call search_requests",
        }));
        let with = String::from_utf8(n.message(&alert).unwrap().formatted()).unwrap();
        assert!(with.contains("multipart/mixed"), "{with}");
        assert!(with.contains("investigation-transcript.txt"), "{with}");
        assert!(
            with.contains("round 1: tool call search_requests"),
            "{with}"
        );
    }

    #[test]
    fn message_ids_are_stable_and_distinct() {
        assert_eq!(
            message_id("a:firing:0", "x.org"),
            message_id("a:firing:0", "x.org")
        );
        assert_ne!(
            message_id("a:firing:0", "x.org"),
            message_id("a:resolved:0", "x.org")
        );
        assert_eq!(header_safe("a\r\nBcc: x"), "a__Bcc: x");
        assert_eq!(
            collapse_repeats("Connection error: Connection error: invalid peer certificate"),
            "Connection error: invalid peer certificate"
        );
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
}
