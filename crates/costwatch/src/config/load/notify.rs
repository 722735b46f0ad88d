//! The `notify` section: email and webhooks.

use super::document::{Doc, value_at};
use super::fields::{existing_file, secret};
use crate::config::env::{SMTP_PASSWORD_VAR, webhook_secret_var};
use crate::config::locate::{Seg, child, item, path_string};
use crate::config::{EmailConfig, NotifyConfig, SmtpSecurity, WebhookConfig, WebhookShape};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Takes `notify.webhooks` out of the document while the sections are
/// read, so each webhook is read on its own after them
/// ([`resolve`]) and one bad entry does not hide the problems of the
/// others. `None` when it is not a list (the sections' reading reports it).
pub(super) fn set_webhooks_aside(doc: &mut Doc) -> Option<Value> {
    let list = doc.value.get_mut("notify")?.get_mut("webhooks")?;
    list.is_array()
        .then(|| std::mem::replace(list, Value::Array(Vec::new())))
}

/// Checks and resolves the `notify` section: the email channel's host,
/// mailboxes and password, then each webhook of `aside` read on its own.
/// `false` when a webhook could not be read.
pub(super) fn resolve(
    doc: &mut Doc,
    notify: &mut NotifyConfig,
    aside: Option<Value>,
    env: &BTreeMap<String, String>,
) -> bool {
    if let Some(email) = notify.email.as_mut() {
        resolve_email(doc, email, env);
    }
    let count = match aside {
        Some(Value::Array(list)) => {
            let count = list.len();
            if let Some(slot) = doc
                .value
                .get_mut("notify")
                .and_then(|n| n.get_mut("webhooks"))
            {
                *slot = Value::Array(list);
            }
            count
        }
        _ => 0,
    };
    match webhook_configs(doc, count, env) {
        Some(webhooks) => {
            notify.webhooks = webhooks;
            true
        }
        None => false,
    }
}

fn resolve_email(doc: &mut Doc, email: &mut EmailConfig, env: &BTreeMap<String, String>) {
    let host = &email.host;
    let host_ok = doc.check(
        !host.is_empty() && !host.contains(|c: char| c.is_whitespace() || c == '/'),
        "notify.email.host",
        || format!("must be a host name or ip address, got `{host}`"),
    ) && !doc.is_tainted("notify.email.host");
    if host_ok && email.security == SmtpSecurity::None {
        doc.check(is_loopback(host), "notify.email.security", || {
            format!(
                "plain smtp (`none`) is only allowed to a loopback host, got `{host}`; use `starttls` or `tls`"
            )
        });
    }
    email.ca_file = email
        .ca_file
        .take()
        .and_then(|file| existing_file(doc, "notify.email.ca_file", file));
    if let Some(user) = &email.username {
        doc.check(!user.is_empty(), "notify.email.username", || {
            "must not be empty".to_owned()
        });
    }
    email.password = secret(
        doc,
        env.get(SMTP_PASSWORD_VAR),
        email.password_file.as_deref(),
        "notify.email.password_file",
    );
    check_mailbox(doc, "notify.email.from", &email.from);
    let written = value_at(&doc.value, &email_segs("to")).is_some();
    let recipients_ok = if doc.is_tainted("notify.email.to") {
        false
    } else if written {
        doc.check(!email.to.is_empty(), "notify.email.to", || {
            "must list at least one recipient".to_owned()
        })
    } else {
        // Reported like serde's own missing fields, on the mapping.
        doc.check(false, "notify.email", || "missing field `to`".to_owned())
    };
    if recipients_ok {
        for (i, to) in email.to.iter().enumerate() {
            check_mailbox(doc, &item("notify.email.to", i), to);
        }
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
        // The name is checked also when the rest cannot be read.
        let name = value_at(&doc.value, &segs)
            .and_then(|w| w.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let webhook = doc.deserialize_at::<WebhookConfig>(&segs);
        let Some(name) = name.or_else(|| webhook.as_ref().map(|w| w.name.clone())) else {
            ok = false;
            continue;
        };
        let path = path_string(&segs);
        let name_path = child(&path, "name");
        let name_ok = !doc.is_tainted(&name_path)
            && doc.check(valid_webhook_name(&name), &name_path, || {
                format!("must be lower-case letters, digits, `_` and `-`, got `{name}`")
            })
            && match names.get(&name) {
                Some(first) => {
                    let message =
                        format!("duplicate webhook name `{name}`, first defined at {first}");
                    doc.check(false, &name_path, || message)
                }
                None => {
                    names.insert(name.clone(), doc.place(&name_path));
                    true
                }
            };
        let var = webhook_secret_var(&name);
        let name_ok = name_ok
            && match vars.get(&var) {
                Some((other, first)) => {
                    let message = format!(
                        "webhooks `{other}` and `{name}` would share the secret variable {var}; rename one (first defined at {first})"
                    );
                    doc.check(false, &name_path, || message)
                }
                None => {
                    vars.insert(var.clone(), (name.clone(), doc.place(&name_path)));
                    true
                }
            };
        let Some(mut raw) = webhook else {
            ok = false;
            continue;
        };
        raw.secret = secret(
            doc,
            env.get(&var).filter(|_| name_ok),
            raw.secret_file.as_deref(),
            &child(&path, "secret_file"),
        );
        let repost_written =
            value_at(&doc.value, &segs).is_some_and(|w| w.get("repost_interval").is_some());
        let repost_ok = !repost_written
            || doc.check(
                raw.shape == WebhookShape::Alertmanager,
                &child(&path, "repost_interval"),
                || {
                    "only an alertmanager webhook re-posts firing alerts; remove it or set \
                     shape: alertmanager"
                        .to_owned()
                },
            );
        if name_ok && repost_ok {
            webhooks.push(raw);
        } else {
            ok = false;
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
