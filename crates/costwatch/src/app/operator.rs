//! The parts of the operator's commands (`findings`, `incidents`,
//! `incident show`, `silence`, `alerts`): the configured state database,
//! opened to read what costwatch holds or to keep a silence, and the dry
//! run of the next tick.

use super::AppError;
use super::oneshot::sqlite_path;
use crate::alerting::preview::{Preview, preview};
use crate::config::Config;
use crate::notify::preview::ChannelSpec;
use crate::pipeline::Schedule;
use crate::store::SqlStore;
use chrono::{DateTime, Utc};

/// Opens the configured state database (migrating it, as the daemon does).
/// A SQLite file that does not exist is created only with `create` (to
/// keep a silence before the first run); otherwise it is an error naming
/// the file, so a wrong `--config` does not leave empty databases behind.
pub async fn open_state(cfg: &Config, create: bool) -> Result<SqlStore, AppError> {
    if !create && let Some(path) = sqlite_path(&cfg.state.url).filter(|p| !p.exists()) {
        return Err(AppError::setup(
            "state.url",
            format!(
                "no state database at {} (costwatch creates it when it first runs)",
                path.display()
            ),
        ));
    }
    SqlStore::open_with(&cfg.state.url, cfg.state.max_connections)
        .await
        .map_err(|e| AppError::failed("cannot open the state database", e))
}

/// The channels a configuration names, as far as their rendering goes.
pub fn channel_specs(cfg: &Config) -> Vec<ChannelSpec> {
    cfg.notify
        .email
        .iter()
        .map(ChannelSpec::from)
        .chain(cfg.notify.webhooks.iter().map(ChannelSpec::from))
        .map(|c| c.with_public_url(cfg.server.public_url.as_ref()))
        .collect()
}

/// What the next tick of the `main` job would send at `now` and how each
/// configured channel would get it, read from `store` without changing it.
pub async fn preview_alerts(
    cfg: &Config,
    store: &SqlStore,
    now: DateTime<Utc>,
) -> Result<Preview, AppError> {
    let mut linked = cfg.clone();
    super::complete_links(&mut linked).await;
    let policy = linked.alerts.clone();
    let escalate = cfg
        .investigation
        .enabled
        .then_some(&cfg.investigation.escalate);
    let job = Schedule::main(&cfg.windows).job;
    Ok(preview(store, &job, &policy, &channel_specs(cfg), escalate, now).await?)
}
