//! The `notify` section: email and webhooks.

use super::document::{Doc, value_at};
use super::fields::{existing_file, http_url, secret};
use crate::config::env::{SMTP_PASSWORD_VAR, webhook_secret_var};
use crate::config::locate::{Seg, child, item, path_string};
use crate::config::raw::{REPOST_INTERVAL, RawEmail, RawNotify, RawWebhook};
use crate::config::{EmailConfig, NotifyConfig, SmtpSecurity, WebhookConfig, WebhookShape};
use std::collections::{BTreeMap, HashMap};

pub(super) fn notify_config(
    doc: &mut Doc,
    raw: RawNotify,
    env: &BTreeMap<String, String>,
) -> Option<NotifyConfig> {
    let email = raw.email.map(|email| email_config(doc, email, env));
    let webhooks = webhook_configs(doc, raw.webhooks.len(), env);
    Some(NotifyConfig {
        email,
        webhooks: webhooks?,
    })
}

pub(super) fn email_config(
    doc: &mut Doc,
    raw: RawEmail,
    env: &BTreeMap<String, String>,
) -> EmailConfig {
    let host_ok = doc.check(
        !raw.host.is_empty() && !raw.host.contains(|c: char| c.is_whitespace() || c == '/'),
        "notify.email.host",
        || format!("must be a host name or ip address, got `{}`", raw.host),
    ) && !doc.is_tainted("notify.email.host");
    if host_ok && raw.security == SmtpSecurity::None {
        doc.check(is_loopback(&raw.host), "notify.email.security", || {
            format!(
                "plain smtp (`none`) is only allowed to a loopback host, got `{}`; use `starttls` or `tls`",
                raw.host
            )
        });
    }
    let port = raw.port.unwrap_or(match raw.security {
        SmtpSecurity::None => 25,
        SmtpSecurity::StartTls => 587,
        SmtpSecurity::Tls => 465,
    });
    doc.check(port != 0, "notify.email.port", || {
        "must be between 1 and 65535, got 0".to_owned()
    });
    let ca_file = raw
        .ca_file
        .as_deref()
        .and_then(|file| existing_file(doc, "notify.email.ca_file", file));
    if let Some(user) = &raw.username {
        doc.check(!user.is_empty(), "notify.email.username", || {
            "must not be empty".to_owned()
        });
    }
    let password = secret(
        doc,
        env.get(SMTP_PASSWORD_VAR),
        raw.password_file.as_deref(),
        "notify.email.password_file",
    );
    check_mailbox(doc, "notify.email.from", &raw.from);
    let written = value_at(&doc.value, &email_segs("to")).is_some();
    let recipients_ok = if doc.is_tainted("notify.email.to") {
        false
    } else if written {
        doc.check(!raw.to.is_empty(), "notify.email.to", || {
            "must list at least one recipient".to_owned()
        })
    } else {
        // Reported like serde's own missing fields, on the mapping.
        doc.check(false, "notify.email", || "missing field `to`".to_owned())
    };
    if recipients_ok {
        for (i, to) in raw.to.iter().enumerate() {
            check_mailbox(doc, &item("notify.email.to", i), to);
        }
    }
    doc.positive_duration("notify.email.timeout", raw.timeout.0);
    EmailConfig {
        host: raw.host,
        port,
        security: raw.security,
        ca_file,
        username: raw.username,
        password,
        from: raw.from,
        to: raw.to,
        timeout: raw.timeout.0,
    }
}

/// The path of `notify.email.<key>`.
pub(super) fn email_segs(key: &str) -> [Seg; 3] {
    [
        Seg::Key("notify".to_owned()),
        Seg::Key("email".to_owned()),
        Seg::Key(key.to_owned()),
    ]
}

/// Whether an SMTP host is on this machine: `localhost`, 127.0.0.0/8 or ::1.
pub(super) fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A minimal mailbox check: `user@domain`, optionally as `Name <user@domain>`.
pub(super) fn check_mailbox(doc: &mut Doc, path: &str, mailbox: &str) -> bool {
    doc.check(mailbox.contains('@'), path, || {
        format!("must be a mailbox such as `costwatch <costwatch@example.com>`, got `{mailbox}`")
    })
}

/// The webhooks, each deserialized on its own so that one bad entry does
/// not hide the problems of the others.
pub(super) fn webhook_configs(
    doc: &mut Doc,
    count: usize,
    env: &BTreeMap<String, String>,
) -> Option<Vec<WebhookConfig>> {
    let mut webhooks = Vec::new();
    let mut ok = true;
    // Names, and the secret variables they map to, with where they were set.
    let mut names: HashMap<String, String> = HashMap::new();
    let mut vars: HashMap<String, (String, String)> = HashMap::new();
    for i in 0..count {
        let segs = [
            Seg::Key("notify".to_owned()),
            Seg::Key("webhooks".to_owned()),
            Seg::Index(i),
        ];
        let Some(raw) = doc.deserialize_at::<RawWebhook>(&segs) else {
            ok = false;
            continue;
        };
        let path = path_string(&segs);
        let name_path = child(&path, "name");
        let name_ok = !doc.is_tainted(&name_path)
            && doc.check(valid_webhook_name(&raw.name), &name_path, || {
                format!(
                    "must be lower-case letters, digits, `_` and `-`, got `{}`",
                    raw.name
                )
            })
            && match names.get(&raw.name) {
                Some(first) => {
                    let message = format!(
                        "duplicate webhook name `{}`, first defined at {first}",
                        raw.name
                    );
                    doc.check(false, &name_path, || message)
                }
                None => {
                    names.insert(raw.name.clone(), doc.place(&name_path));
                    true
                }
            };
        let var = webhook_secret_var(&raw.name);
        let name_ok = name_ok
            && match vars.get(&var) {
                Some((other, first)) => {
                    let message = format!(
                        "webhooks `{other}` and `{}` would share the secret variable {var}; rename one (first defined at {first})",
                        raw.name
                    );
                    doc.check(false, &name_path, || message)
                }
                None => {
                    vars.insert(var.clone(), (raw.name.clone(), doc.place(&name_path)));
                    true
                }
            };
        let url = if doc.is_tainted(&child(&path, "url")) {
            None
        } else {
            http_url(doc, &child(&path, "url"), &raw.url)
        };
        let secret = secret(
            doc,
            env.get(&var).filter(|_| name_ok),
            raw.secret_file.as_deref(),
            &child(&path, "secret_file"),
        );
        let timeout_ok = doc.positive_duration(&child(&path, "timeout"), raw.timeout.0);
        let repost_path = child(&path, "repost_interval");
        let repost_ok = match raw.repost_interval {
            None => true,
            Some(_) if raw.shape != WebhookShape::Alertmanager => {
                doc.check(false, &repost_path, || {
                    "only an alertmanager webhook re-posts firing alerts; remove it or set shape: alertmanager".to_owned()
                })
            }
            Some(every) => doc.positive_duration(&repost_path, every.0),
        };
        match url {
            Some(url) if name_ok && timeout_ok && repost_ok => webhooks.push(WebhookConfig {
                name: raw.name,
                url,
                shape: raw.shape,
                secret,
                timeout: raw.timeout.0,
                repost_interval: raw.repost_interval.unwrap_or(REPOST_INTERVAL).0,
            }),
            _ => ok = false,
        }
    }
    ok.then_some(webhooks)
}

pub(super) fn valid_webhook_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}
