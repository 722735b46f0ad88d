//! The email channel: one multipart/alternative message (plain text and
//! HTML) per alert, sent over SMTP with lettre. An alert with a chart has
//! its HTML part in a multipart/related with the chart's PNG inline
//! (`Content-Disposition: inline`, a `Content-ID` the HTML's
//! `<img src="cid:…">` names).
//!
//! Every message carries a `Message-ID` derived from the alert's idempotency
//! key, so a notification delivered twice (a retry after a lost reply) is
//! recognisable as the same message, and the headers
//! `X-Costwatch-Fingerprint` and `X-Costwatch-Idempotency-Key` for filters.

use super::render::{email_html_with_chart, email_subject, email_text};
use super::{Alert, Notifier, NotifyError};
use crate::secret::Secret;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime};

use super::settings::EmailConfig;
pub use super::settings::SmtpSecurity;

/// Everything the email channel needs: `notify.email` (reached through it:
/// `settings.host`), with its CA file already read.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// The channel's settings.
    pub config: EmailConfig,
    /// Extra CA certificates (PEM) to trust besides the system's, read from
    /// `ca_file`.
    pub extra_ca_pem: Option<Vec<u8>>,
}

impl std::ops::Deref for EmailSettings {
    type Target = EmailConfig;

    fn deref(&self) -> &EmailConfig {
        &self.config
    }
}

impl std::ops::DerefMut for EmailSettings {
    fn deref_mut(&mut self) -> &mut EmailConfig {
        &mut self.config
    }
}

impl EmailSettings {
    /// The settings `notify.email` describes, with its CA file read.
    pub fn from_config(c: &EmailConfig) -> std::io::Result<EmailSettings> {
        Ok(EmailSettings {
            config: c.clone(),
            extra_ca_pem: c.ca_file.as_ref().map(std::fs::read).transpose()?,
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
            .port(settings.port())
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
            server: format!("{}:{}", settings.host, settings.port()),
            timeout: settings.timeout,
            password: settings.config.password,
        })
    }

    /// The message sent for `alert`, its chart drawn here.
    pub fn message(&self, alert: &Alert) -> Result<Message, NotifyError> {
        let png = alert.chart.as_ref().and_then(chart_png);
        self.message_with_chart(alert, png)
    }

    /// The message sent for `alert`, with `png` (its chart, already drawn)
    /// inline in the HTML part: `multipart/related` holds the HTML and the
    /// image, whose `Content-ID` the HTML's `<img src="cid:…">` names.
    pub fn message_with_chart(
        &self,
        alert: &Alert,
        png: Option<Vec<u8>>,
    ) -> Result<Message, NotifyError> {
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
        let text = SinglePart::builder()
            .header(ContentType::TEXT_PLAIN)
            .body(email_text(alert));
        let html = |cid: Option<&str>| {
            SinglePart::builder()
                .header(ContentType::TEXT_HTML)
                .body(email_html_with_chart(alert, cid))
        };
        let body = match png {
            Some(png) => {
                let cid = chart_cid(&key, &self.id_domain);
                let image = lettre::message::Attachment::new_inline(cid.clone()).body(
                    png,
                    ContentType::parse("image/png")
                        .map_err(|e| NotifyError::Rejected(format!("email: image type: {e}")))?,
                );
                MultiPart::alternative().singlepart(text).multipart(
                    MultiPart::related()
                        .singlepart(html(Some(&cid)))
                        .singlepart(image),
                )
            }
            None => MultiPart::alternative()
                .singlepart(text)
                .singlepart(html(None)),
        };
        // With an investigation, its transcript travels as a text
        // attachment (the one copy this channel carries) so a person can
        // check every tool call the summary rests on.
        let transcript = alert
            .investigation
            .as_ref()
            .map(crate::notify::render::transcript_text);
        let content = match transcript {
            Some(text) => MultiPart::mixed().multipart(body).singlepart(
                lettre::message::Attachment::new("investigation-transcript.txt".to_owned())
                    .body(text, ContentType::TEXT_PLAIN),
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
        // Drawing takes milliseconds of CPU: off the runtime's workers.
        let png = match alert.chart.clone() {
            Some(spec) => tokio::task::spawn_blocking(move || chart_png(&spec))
                .await
                .ok()
                .flatten(),
            None => None,
        };
        let message = self.message_with_chart(alert, png)?;
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

/// The alert's chart as a PNG; a chart that cannot be drawn is logged and
/// left out (the text part still says what it would have shown).
fn chart_png(spec: &crate::notify::chart::ChartSpec) -> Option<Vec<u8>> {
    match crate::notify::chart::render_png(spec) {
        Ok(png) => Some(png),
        Err(error) => {
            tracing::warn!(%error, "The alert's chart could not be drawn; the email goes without it.");
            None
        }
    }
}

/// The `Content-ID` of the chart in the notification with idempotency key
/// `key` (without angle brackets).
pub fn chart_cid(key: &str, domain: &str) -> String {
    format!("chart.{}@{}", short_hash(key), domain)
}

/// The `Message-ID` of the notification with idempotency key `key`: the same
/// key always gives the same id.
pub fn message_id(key: &str, domain: &str) -> String {
    format!("<{}.costwatch@{}>", short_hash(key), domain)
}

/// A per-incident id every notification of the incident references (the
/// `References` header), so mail clients thread firing and resolved messages
/// together.
pub fn thread_id(fingerprint: &str, domain: &str) -> String {
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

    fn settings(port: u16, security: SmtpSecurity) -> EmailSettings {
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
        let mut alert = crate::notify::sample_alert(chrono::DateTime::UNIX_EPOCH);
        let plain = String::from_utf8(n.message(&alert).unwrap().formatted()).unwrap();
        assert!(!plain.contains("investigation-transcript.txt"));
        alert.investigation = Some(crate::domain::investigation::sample_report(
            "the loop drives the cost",
            0.0003,
        ));
        let with = String::from_utf8(n.message(&alert).unwrap().formatted()).unwrap();
        assert!(with.contains("multipart/mixed"), "{with}");
        assert!(with.contains("investigation-transcript.txt"), "{with}");
        assert!(
            with.contains("costwatch investigation inv-sample"),
            "{with}"
        );
        assert!(with.contains("1200 input tokens (0 cached, 0%)"), "{with}");
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
}
