//! Tests of the alerting sections: `alerts` and `notify`.

use super::tests_support::*;
use super::*;
use crate::config::SmtpSecurity;
use crate::config::env::SMTP_PASSWORD_VAR;
use crate::secret::Secret;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::error::Error;
use std::time::Duration;
use url::Url;

#[test]
fn problems_of_the_alerting_sections_have_positions() -> TestResult {
    let email_keys = "expected one of `host`, `port`, `security`, `ca_file`, \
        `username`, `password_file`, `from`, `to`, `timeout`";
    let mailbox = "must be a mailbox such as `costwatch <costwatch@example.com>`";
    let cases: &[(&str, &[&str])] = &[
        (
            "alerting_errors.yaml",
            &[
                "alerting_errors.yaml:5:9: schedule.cron: cannot parse \"61 * * * *\": minute field `61`: number out of bounds",
                "alerting_errors.yaml:6:13: schedule.timezone: unknown time zone `Mars/Olympus_Mons`; expected an iana name such as `UTC` or `Europe/Berlin`",
                "alerting_errors.yaml:7:25: schedule.max_catch_up_windows: must be at least 1, got 0",
                "alerting_errors.yaml:9:13: alerts.cooldown: invalid duration `soon`: expected number at 0",
                "alerting_errors.yaml:10:19: alerts.realert_growth: must be 0 (never re-alert) or at least 1, got 0.5",
                "alerting_errors.yaml:11:18: alerts.resolve_after: must be greater than 0",
                "alerting_errors.yaml:12:17: alerts.top_sessions: must be between 1 and 50, got 51",
                "alerting_errors.yaml:13:26: alerts.summary_after_windows: must be at least 1, got 0",
                "alerting_errors.yaml:14:22: alerts.delivery_deadline: must be greater than 0",
                "alerting_errors.yaml:16:14: alerts.retry_max: must be at least retry_base (1m), got 30s",
                "alerting_errors.yaml:17:19: alerts.gateway_ui_url: must be an http or https url, got scheme `ftp`",
                "alerting_errors.yaml:21:15: notify.email.security: plain smtp (`none`) is only allowed to a loopback host, got `smtp.example.com`; use `starttls` or `tls`",
                "alerting_errors.yaml:22:11: notify.email.port: invalid value: integer `70000`, expected a port number",
                "alerting_errors.yaml:23:14: notify.email.ca_file: cannot read no_such_ca.pem: no such file or directory (os error 2)",
                "alerting_errors.yaml:24:15: notify.email.username: must not be empty",
                "alerting_errors.yaml:25:20: notify.email.password_file: cannot read no_such_password.txt: no such file or directory (os error 2)",
                &format!(
                    "alerting_errors.yaml:26:11: notify.email.from: {mailbox}, got `costwatch`"
                ),
                &format!("alerting_errors.yaml:27:30: notify.email.to[1]: {mailbox}, got `nobody`"),
                "alerting_errors.yaml:28:14: notify.email.timeout: must be greater than 0",
                &format!(
                    "alerting_errors.yaml:29:5: notify.email.tls: unknown field `tls`, {email_keys}"
                ),
                "alerting_errors.yaml:31:11: server.listen: must be an ip address and port such as `127.0.0.1:9464`, or null to disable, got `localhost:9464`",
            ],
        ),
        (
            "webhook_errors.yaml",
            &[
                "webhook_errors.yaml:8:13: notify.webhooks[1].name: duplicate webhook name `chat`, first defined at webhook_errors.yaml:6:13",
                "webhook_errors.yaml:10:14: notify.webhooks[1].shape: unknown variant `teams`, expected one of `generic`, `slack`, `alertmanager`",
                "webhook_errors.yaml:11:13: notify.webhooks[2].name: must be lower-case letters, digits, `_` and `-`, got `Chat Ops`",
                "webhook_errors.yaml:12:12: notify.webhooks[2].url: must be an http or https url, got scheme `ftp`",
                "webhook_errors.yaml:13:7: notify.webhooks[3]: missing field `name`",
                "webhook_errors.yaml:14:20: notify.webhooks[3].secret_file: cannot read no_such_secret.txt: no such file or directory (os error 2)",
                "webhook_errors.yaml:15:16: notify.webhooks[3].timeout: must be greater than 0",
                "webhook_errors.yaml:18:13: notify.webhooks[5].name: webhooks `pager-1` and `pager_1` would share the secret variable COSTWATCH_WEBHOOK_PAGER_1_SECRET; rename one (first defined at webhook_errors.yaml:16:13)",
                "webhook_errors.yaml:20:7: notify.webhooks[6]: invalid type: string \"not a mapping\", expected a mapping",
                "webhook_errors.yaml:21:7: notify.webhooks[7]: missing field `url`",
                "webhook_errors.yaml:24:24: notify.webhooks[8].repost_interval: only an alertmanager webhook re-posts firing alerts; remove it or set shape: alertmanager",
                "webhook_errors.yaml:28:24: notify.webhooks[9].repost_interval: must be greater than 0",
            ],
        ),
    ];
    for (name, want) in cases {
        assert_eq!(fixture_problems(name, &[])?, *want, "{name}");
    }
    Ok(())
}

#[test]
fn an_email_section_needs_host_sender_and_recipients() -> TestResult {
    let (dir, path) = config_in_tempdir("notify:\n  email:\n    security: tls\n", &[])?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded without host, from and to")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "costwatch.yaml:5:5: notify.email: missing field `host`",
            "costwatch.yaml:5:5: notify.email: missing field `from`",
            "costwatch.yaml:5:5: notify.email: missing field `to`",
        ]
    );
    let text = "notify:\n  email:\n    host: smtp.example.com\n    \
        from: costwatch@example.com\n    to: []\n";
    let (dir, path) = config_in_tempdir(text, &[])?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded without recipients")?;
    assert_eq!(
        shown(&err, dir.path()),
        ["costwatch.yaml:7:9: notify.email.to: must list at least one recipient"]
    );
    // A recipient list of the wrong type is reported once.
    let text = "notify:\n  email:\n    host: smtp.example.com\n    security: 3\n    \
        from: costwatch@example.com\n    to: oncall@example.com\n";
    let (dir, path) = config_in_tempdir(text, &[])?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded with a bare recipient")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "costwatch.yaml:6:15: notify.email.security: invalid type: integer `3`, expected a string",
            "costwatch.yaml:8:9: notify.email.to: invalid type: string \"oncall@example.com\", expected a sequence",
        ]
    );
    // `email:` with nothing under it is no email channel.
    let (_dir, path) = config_in_tempdir("notify:\n  email:\n  webhooks: []\n", &[])?;
    assert!(
        load_with_env(&path, &BTreeMap::new())?
            .notify
            .email
            .is_none()
    );
    Ok(())
}

#[test]
fn plain_smtp_is_only_allowed_to_a_loopback_host() -> TestResult {
    // Host, security, whether it loads, and the port it gets.
    let cases: &[(&str, &str, Option<u16>)] = &[
        ("localhost", "none", Some(25)),
        ("LocalHost", "none", Some(25)),
        ("127.0.0.1", "none", Some(25)),
        ("127.8.9.10", "none", Some(25)),
        ("'::1'", "none", Some(25)),
        ("'[::1]'", "none", Some(25)),
        ("smtp.example.com", "none", None),
        ("10.0.0.1", "none", None),
        ("'::2'", "none", None),
        ("localhost.example.com", "none", None),
        ("smtp.example.com", "starttls", Some(587)),
        ("smtp.example.com", "tls", Some(465)),
    ];
    for (host, security, want) in cases {
        let text = format!(
            "notify:\n  email:\n    host: {host}\n    security: {security}\n    \
             from: costwatch@example.com\n    to: [oncall@example.com]\n"
        );
        let (dir, path) = config_in_tempdir(&text, &[])?;
        let got = load_with_env(&path, &BTreeMap::new());
        match (got, want) {
            (Ok(config), Some(port)) => {
                let email = config.sections.notify.email.ok_or("no email channel")?;
                assert_eq!(email.port(), *port, "{host} {security}");
            }
            (Err(err), None) => {
                let shown = shown(&err, dir.path());
                assert_eq!(shown.len(), 1, "{host}: {shown:?}");
                assert!(
                    shown[0].starts_with(
                        "costwatch.yaml:6:15: notify.email.security: plain smtp (`none`) is only allowed to a loopback host"
                    ),
                    "{host}: {shown:?}"
                );
            }
            (got, _) => return Err(format!("{host} {security}: got {got:?}").into()),
        }
    }
    Ok(())
}

#[test]
fn every_channel_loads_with_its_settings() -> TestResult {
    let config = load_with_env(&fixtures().join("notify.yaml"), &BTreeMap::new())?;
    let email = config.notify.email.as_ref().ok_or("no email channel")?;
    assert_eq!(
        (email.host.as_str(), email.port(), email.security),
        ("127.0.0.1", 25, SmtpSecurity::None)
    );
    assert_eq!(email.ca_file, Some(fixtures().join("ca.pem")));
    assert_eq!(email.username.as_deref(), Some("costwatch"));
    assert_eq!(email.from, "costwatch <costwatch@example.com>");
    assert_eq!(email.to, ["oncall@example.com", "Team <team@example.com>"]);
    assert_eq!(email.timeout, Duration::from_secs(30));
    let hooks: Vec<_> = config
        .notify
        .webhooks
        .iter()
        .map(|w| (w.name.as_str(), w.url.as_str(), w.shape, w.timeout))
        .collect();
    assert_eq!(
        hooks,
        [
            (
                "chat-ops",
                "https://hooks.example.com/services/T0/B0/X",
                super::super::WebhookShape::Slack,
                Duration::from_secs(10)
            ),
            (
                "am",
                "http://127.0.0.1:9093/api/v2/alerts",
                super::super::WebhookShape::Alertmanager,
                Duration::from_secs(3)
            ),
        ]
    );
    assert!(config.notify.webhooks[1].secret.is_none());
    // Alertmanager gets firing alerts again at its repost_interval; 1m
    // (Prometheus's resend delay) when it is left out.
    assert_eq!(
        config.notify.webhooks[1].repost_interval,
        Duration::from_secs(30)
    );
    assert_eq!(
        config.notify.webhooks[0].repost_interval,
        Duration::from_secs(60)
    );
    assert_eq!(
        config.alerts.gateway_ui_url.as_ref().map(Url::as_str),
        Some("https://gateway.example/ui/")
    );
    assert_eq!(config.server.listen, None);
    Ok(())
}

/// An environment and the secret expected with it.
type SecretCase<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);

#[test]
fn smtp_password_comes_from_env_or_file_and_never_shows() -> TestResult {
    const FROM_FILE: &str = "smtp-pass-from-file-42";
    const FROM_ENV: &str = "smtp-pass-from-env-17";
    let cases: &[SecretCase<'_>] = &[
        (&[(SMTP_PASSWORD_VAR, FROM_ENV)], Some(FROM_ENV)),
        (&[(SMTP_PASSWORD_VAR, "")], Some(FROM_FILE)),
        (&[], Some(FROM_FILE)),
    ];
    for (env, want) in cases {
        let config = load_with_env(&fixtures().join("notify.yaml"), &env_of(env))?;
        let email = config.notify.email.as_ref().ok_or("no email channel")?;
        assert_eq!(
            email.password.as_ref().map(Secret::expose),
            *want,
            "{env:?}"
        );
        let debug = format!("{config:?}");
        assert!(
            !debug.contains(FROM_FILE) && !debug.contains(FROM_ENV),
            "{debug}"
        );
    }
    // Without password_file only the environment gives one.
    let text = "notify:\n  email:\n    host: smtp.example.com\n    \
        from: costwatch@example.com\n    to: [oncall@example.com]\n";
    let (_dir, path) = config_in_tempdir(text, &[])?;
    let email = |env: &[(&str, &str)]| -> Result<Option<String>, Box<dyn Error>> {
        let config = load_with_env(&path, &env_of(env))?;
        Ok(config
            .sections
            .notify
            .email
            .and_then(|e| e.password)
            .map(|p| p.expose().to_owned()))
    };
    assert_eq!(email(&[])?, None);
    assert_eq!(
        email(&[(SMTP_PASSWORD_VAR, FROM_ENV)])?.as_deref(),
        Some(FROM_ENV)
    );
    // An empty password file is a problem that names the file only.
    let text = "notify:\n  email:\n    host: smtp.example.com\n    \
        password_file: pw.txt\n    from: costwatch\n    to: [oncall@example.com]\n";
    let (dir, path) = config_in_tempdir(text, &[("pw.txt", "\n")])?;
    let err = load_with_env(&path, &BTreeMap::new())
        .err()
        .ok_or("loaded with an empty password file")?;
    assert_eq!(
        shown(&err, dir.path()),
        [
            "costwatch.yaml:6:20: notify.email.password_file: pw.txt is empty",
            "costwatch.yaml:7:11: notify.email.from: must be a mailbox such as `costwatch <costwatch@example.com>`, got `costwatch`",
        ]
    );
    // A readable password never appears in the problems of its section.
    let (dir, path) = config_in_tempdir(text, &[("pw.txt", FROM_FILE)])?;
    let err = load_with_env(&path, &env_of(&[]))
        .err()
        .ok_or("loaded with a bad sender")?;
    let shown = shown(&err, dir.path());
    assert_eq!(shown.len(), 1);
    assert!(!err.to_string().contains(FROM_FILE));
    Ok(())
}

#[test]
fn webhook_secret_comes_from_its_variable_or_file_and_never_shows() -> TestResult {
    const FROM_FILE: &str = "hook-secret-from-file-7";
    const FROM_ENV: &str = "hook-secret-from-env-3";
    // `chat-ops` maps to COSTWATCH_WEBHOOK_CHAT_OPS_SECRET.
    let cases: &[SecretCase<'_>] = &[
        (
            &[("COSTWATCH_WEBHOOK_CHAT_OPS_SECRET", FROM_ENV)],
            Some(FROM_ENV),
        ),
        (
            &[("COSTWATCH_WEBHOOK_CHAT_OPS_SECRET", "")],
            Some(FROM_FILE),
        ),
        (
            &[("COSTWATCH_WEBHOOK_CHAT-OPS_SECRET", FROM_ENV)],
            Some(FROM_FILE),
        ),
        (&[], Some(FROM_FILE)),
    ];
    for (env, want) in cases {
        let config = load_with_env(&fixtures().join("notify.yaml"), &env_of(env))?;
        let hook = &config.notify.webhooks[0];
        assert_eq!(hook.name, "chat-ops");
        assert_eq!(hook.secret.as_ref().map(Secret::expose), *want, "{env:?}");
        let debug = format!("{config:?}");
        assert!(
            !debug.contains(FROM_FILE) && !debug.contains(FROM_ENV),
            "{debug}"
        );
    }
    // A webhook without secret_file gets one from the environment only,
    // and the variable of one webhook does not reach another.
    let config = load_with_env(
        &fixtures().join("notify.yaml"),
        &env_of(&[("COSTWATCH_WEBHOOK_AM_SECRET", FROM_ENV)]),
    )?;
    let secrets: Vec<Option<&str>> = config
        .notify
        .webhooks
        .iter()
        .map(|w| w.secret.as_ref().map(Secret::expose))
        .collect();
    assert_eq!(secrets, [Some(FROM_FILE), Some(FROM_ENV)]);
    Ok(())
}

#[test]
fn env_overrides_reach_the_alerting_sections() -> TestResult {
    let config = load_with_env(
        &fixtures().join("minimal.yaml"),
        &env_of(&[
            // Unquoted: not valid YAML, so taken as the text itself.
            ("COSTWATCH_SCHEDULE__CRON", "*/10 * * * *"),
            ("COSTWATCH_SCHEDULE__TIMEZONE", "Europe/Berlin"),
            ("COSTWATCH_ALERTS__COOLDOWN", "1h"),
            ("COSTWATCH_ALERTS__SEND_RESOLVED", "false"),
            ("COSTWATCH_SERVER__LISTEN", "null"),
            ("COSTWATCH_NOTIFY__EMAIL__HOST", "smtp.example.com"),
            ("COSTWATCH_NOTIFY__EMAIL__SECURITY", "tls"),
            ("COSTWATCH_NOTIFY__EMAIL__FROM", "costwatch@example.com"),
            (
                "COSTWATCH_NOTIFY__EMAIL__TO",
                "[a@example.com, b@example.com]",
            ),
        ]),
    )?;
    assert_eq!(config.schedule.cron.text(), "*/10 * * * *");
    assert_eq!(config.schedule.timezone, chrono_tz::Tz::Europe__Berlin);
    let t = DateTime::parse_from_rfc3339("2026-05-04T12:03:10Z")?.with_timezone(&Utc);
    assert_eq!(
        config.schedule.next_after(t),
        Some(DateTime::parse_from_rfc3339("2026-05-04T12:10:00Z")?.with_timezone(&Utc))
    );
    assert_eq!(config.alerts.cooldown, Duration::from_secs(3600));
    assert!(!config.alerts.send_resolved);
    assert_eq!(config.server.listen, None);
    let email = config.sections.notify.email.ok_or("no email channel")?;
    assert_eq!(
        (email.host.as_str(), email.port()),
        ("smtp.example.com", 465)
    );
    assert_eq!(email.to, ["a@example.com", "b@example.com"]);
    // The 6-field form and a quoted value work too.
    let config = load_with_env(
        &fixtures().join("minimal.yaml"),
        &env_of(&[("COSTWATCH_SCHEDULE__CRON", "'0 */10 * * * *'")]),
    )?;
    assert_eq!(config.schedule.cron.text(), "0 */10 * * * *");
    Ok(())
}

#[test]
fn bad_env_overrides_of_the_alerting_sections_name_the_variable() -> TestResult {
    let cases: &[(&str, &str, &str)] = &[
        (
            "COSTWATCH_SCHEDULE__CRON",
            "0 0 30 2 *",
            "env COSTWATCH_SCHEDULE__CRON: schedule.cron: \"0 0 30 2 *\" never fires",
        ),
        (
            "COSTWATCH_SCHEDULE__CRON",
            "*/5 * * *",
            "env COSTWATCH_SCHEDULE__CRON: schedule.cron: cannot parse \"*/5 * * *\": expected 5 fields, or 6 with seconds first, got 4",
        ),
        (
            "COSTWATCH_SCHEDULE__TIMEZONE",
            "Europe/Berlln",
            "env COSTWATCH_SCHEDULE__TIMEZONE: schedule.timezone: unknown time zone `Europe/Berlln`; expected an iana name such as `UTC` or `Europe/Berlin`",
        ),
        (
            "COSTWATCH_SERVER__LISTEN",
            "9464",
            "env COSTWATCH_SERVER__LISTEN: server.listen: invalid type: integer `9464`, expected a string",
        ),
    ];
    for (var, value, want) in cases {
        let got = fixture_problems("minimal.yaml", &[(var, value)])?;
        assert_eq!(got, [*want], "{var}={value}");
    }
    // A section built from the environment alone reports all it lacks
    // against the variables.
    let got = fixture_problems(
        "minimal.yaml",
        &[("COSTWATCH_NOTIFY__EMAIL__HOST", "smtp.example.com")],
    )?;
    assert_eq!(
        got,
        [
            "env COSTWATCH_NOTIFY__EMAIL__HOST: notify.email: missing field `from`",
            "env COSTWATCH_NOTIFY__EMAIL__HOST: notify.email: missing field `to`",
        ]
    );
    Ok(())
}

#[test]
fn server_public_url_is_a_plain_http_url_with_a_trailing_slash() -> Result<(), Box<dyn Error>> {
    let text = "server:\n  public_url: https://cw.example.com/ops\n";
    let (_dir, path) = config_in_tempdir(text, &[])?;
    let config = load_with_env(&path, &BTreeMap::new())?;
    assert_eq!(
        config.server.public_url.as_ref().map(Url::as_str),
        Some("https://cw.example.com/ops/")
    );
    let (_dir, path) = config_in_tempdir("server: {}\n", &[])?;
    assert_eq!(
        load_with_env(&path, &BTreeMap::new())?.server.public_url,
        None
    );
    for (text, problem) in [
        (
            "server:\n  public_url: ftp://cw.example.com/\n",
            "costwatch.yaml:4:15: server.public_url: must be an http or https url, got scheme `ftp`",
        ),
        (
            "server:\n  public_url: https://u:p@cw.example.com/?t=1\n",
            "costwatch.yaml:4:15: server.public_url: must be a plain http(s) url without credentials, query or fragment, such as `https://costwatch.example.com/`",
        ),
        (
            "server:\n  listen: null\n  public_url: https://cw.example.com/\n",
            "costwatch.yaml:5:15: server.public_url: needs server.listen: the charts it links to are served there",
        ),
    ] {
        let (dir, path) = config_in_tempdir(text, &[])?;
        let err = load_with_env(&path, &BTreeMap::new())
            .err()
            .ok_or("loaded a bad public_url")?;
        assert_eq!(shown(&err, dir.path()), [problem]);
    }
    Ok(())
}
