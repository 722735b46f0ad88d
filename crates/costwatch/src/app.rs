//! The composition root: every runtime part is built here from a
//! configuration, for the service (`costwatch run`) and for the one-shot
//! commands. Nothing else in the library wires parts together.

pub mod any;
mod backtest;
mod demo;
mod mcp;
mod oneshot;
mod operator;
pub mod receiver;
mod replica;
mod service;
mod sim_spans;

pub use backtest::{SpendReport, replay_spend, simulator_env, simulator_limits, simulator_source};
pub use demo::{
    SeedDemo, TrafficDemo, Truth, demo_investigation, seed_demo, start_simulator, traffic_demo,
    traffic_demo_until,
};
pub use mcp::{mcp_access, mcp_server};
pub use oneshot::{OnceReport, Probe, check_state, once, probe_source, test_alert};
pub use operator::{channel_specs, open_state, preview_alerts};
pub use replica::Replica;

use crate::app::any::AnySource;
use crate::clock::{Clock, SystemClock};
use crate::config::{Config, ConfigError, DetectionConfig, KindConfig, Rules, default_group_by};
use crate::daemon::{Daemon, DaemonSettings};
use crate::detect::Detector;
use crate::escalate::Escalation;
use crate::ingest::StoredCalls;
use crate::investigate::budget::Prices;
use crate::investigate::mcp::McpClient;
use crate::investigate::model::ModelClient;
use crate::investigate::run::RunOptions;
use crate::investigate::{LogToolsChoice, Tools};
use crate::logtools::{LogTools, WindowCalls};
use crate::notify::email::{EmailNotifier, EmailSettings};
use crate::notify::outbox::Channel;
use crate::notify::webhook::WebhookNotifier;
use crate::ops::metrics::Metrics;
use crate::ops::stall::TickWatch;
use crate::pipeline::{Pipeline, PipelineError, Schedule};
use crate::pricing::table::PriceTable;
use crate::source::langfuse::LangfuseReader;
use crate::source::litellm::LiteLlmReader;
use crate::source::otlp::OtlpFilesReader;
use crate::source::reference::ReferenceSource;
use crate::source::rows::RowSource;
use crate::source::{HttpLimits, Source, SourceError};
use crate::store::{SqlStore, StoreError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a part could not be built or a command could not run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The configuration or its rules are invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A command that reads the gateway was started without its admin key.
    #[error("no admin key: set COSTWATCH_ADMIN_KEY or source.admin_key_file in {}", path.display())]
    NoAdminKey {
        /// The configuration file.
        path: PathBuf,
    },
    /// Investigations are enabled but a key is missing.
    #[error(
        "investigation.enabled needs an inference key, and the admin key when the log tools are read over MCP"
    )]
    InvestigationKeys,
    /// The embedded seed window of the demo has no requests.
    #[error("empty seed window")]
    EmptySeed,
    /// `test-alert` found nothing to send to.
    #[error("no channel is configured (notify.email, notify.webhooks)")]
    NoChannel,
    /// The investigating model is not in the gateway's catalogue.
    #[error(
        "investigation.model {model} is not in the gateway's catalogue: set investigation.prices"
    )]
    NotInCatalogue {
        /// The model asked for.
        model: String,
    },
    /// The gateway could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A window could not be processed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// A part refused its settings; `what` names the setting.
    #[error("{what}: {reason}")]
    Setup {
        /// The setting or part, e.g. `investigation.llm_url`.
        what: String,
        /// Why it was refused.
        reason: String,
    },
    /// An operation failed; `what` says which, the source why.
    #[error("{what}")]
    Failed {
        /// What could not be done, e.g. `cannot open the state database`.
        what: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl AppError {
    /// A part that refused its settings.
    fn setup(what: impl Into<String>, reason: impl std::fmt::Display) -> AppError {
        AppError::Setup {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// An operation that failed because of `source`.
    fn failed(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> AppError {
        AppError::Failed {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// The built service.
pub struct App {
    /// The configuration it was built from.
    pub config: Config,
    /// The detection job.
    pub daemon: Daemon<AnySource, SqlStore>,
    /// The parts that outlive a reload.
    shared: Shared,
}

/// What a reload keeps: the counters, the clock, the replica's name and
/// the watch on the running tick.
#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    clock: Arc<dyn Clock>,
    replica: Arc<Replica>,
    tick_watch: TickWatch,
}

impl App {
    /// Builds the service on the system clock: opens (and migrates) the
    /// state database, the gateway client, the channels and the escalation.
    pub async fn build(cfg: &Config) -> Result<App, AppError> {
        let shared = Shared {
            metrics: Arc::new(Metrics::new()),
            clock: Arc::new(SystemClock),
            replica: Arc::new(Replica::for_state(&cfg.state.url)),
            tick_watch: TickWatch::new(),
        };
        App::build_with(cfg, shared).await
    }

    async fn build_with(cfg: &Config, shared: Shared) -> Result<App, AppError> {
        let mut cfg = cfg.clone();
        complete_links(&mut cfg).await;
        let cfg = &cfg;
        let pipeline = main_pipeline(cfg, shared.clock.clone()).await?;
        // A gateway that is down at start must not keep the daemon from
        // running: without its catalogue, investigations wait for a reload.
        let window_source: Arc<dyn WindowCalls> = Arc::new(pipeline.source().clone());
        let escalation = match escalation(cfg, Some(window_source)).await {
            Ok(e) => e.map(Arc::new),
            Err(e) => {
                tracing::error!(error = %chain(&e), "investigations are disabled until the next reload");
                None
            }
        };
        let mut settings = DaemonSettings::from_config(
            cfg,
            channels(cfg)?,
            shared.metrics.clone(),
            shared.replica.name().to_owned(),
            escalation,
        );
        settings.tick_watch = shared.tick_watch.clone();
        Ok(App {
            daemon: Daemon::new(pipeline, settings, shared.clock.clone()),
            config: cfg.clone(),
            shared,
        })
    }
}

/// An error followed by each of its sources, separated by `: `.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}

/// The alert channels a configuration names.
pub fn channels(cfg: &Config) -> Result<Vec<Arc<dyn Channel>>, AppError> {
    let mut out: Vec<Arc<dyn Channel>> = Vec::new();
    if let Some(e) = &cfg.notify.email {
        let settings = EmailSettings::from_config(e).map_err(|err| {
            let file = e.ca_file.as_deref().unwrap_or(std::path::Path::new(""));
            AppError::failed(
                format!("cannot read notify.email.ca_file {}", file.display()),
                err,
            )
        })?;
        let n = EmailNotifier::new(settings).map_err(|err| AppError::setup("notify.email", err))?;
        out.push(Arc::new(n));
    }
    for w in &cfg.notify.webhooks {
        let n = WebhookNotifier::new(w.clone())
            .map_err(|err| AppError::setup(format!("notify.webhooks {}", w.name), err))?
            .with_public_url(cfg.server.public_url.clone());
        out.push(Arc::new(n));
    }
    Ok(out)
}

/// The source a configuration names. The HTTP APIs need an admin key;
/// `otlp` reads the calls its receiver stored in the state database
/// (opened here, on connections of its own); `otlp_files` reads the files
/// of `source.path`.
pub async fn gateway(cfg: &Config) -> Result<AnySource, AppError> {
    let s = &cfg.source;
    let limits = || s.http.clone();
    Ok(match &s.of_kind {
        KindConfig::Reference(api) => AnySource::Reference(Box::new(
            ReferenceSource::new(
                api.api_url.clone(),
                admin_key(cfg)?,
                s.page_limit(),
                s.common.filter.clone(),
                limits(),
            )?
            .with_max_pages(s.common.max_pages),
        )),
        KindConfig::Litellm(api, rows) => AnySource::Litellm(RowSource::new(
            LiteLlmReader::new(api.api_url.clone(), admin_key(cfg)?, rows, limits())?,
            rows.clone(),
            price_table(cfg),
        )),
        KindConfig::Langfuse(api, keys, rows) => AnySource::Langfuse(RowSource::new(
            LangfuseReader::new(
                api.api_url.clone(),
                &keys.public_key,
                admin_key(cfg)?,
                rows,
                limits(),
            )?,
            rows.clone(),
            price_table(cfg),
        )),
        KindConfig::Otlp(_, _, rows) => {
            let store = SqlStore::open_with(&cfg.state.url, 2)
                .await
                .map_err(|e| AppError::failed("cannot open the state database", e))?;
            AnySource::Otlp(RowSource::new(
                StoredCalls::new(store, s.page_limit()),
                rows.clone(),
                price_table(cfg),
            ))
        }
        KindConfig::OtlpFiles(files, mapping, rows) => AnySource::OtlpFiles(RowSource::new(
            OtlpFilesReader::new(files.path.clone(), mapping.clone()),
            rows.clone(),
            price_table(cfg),
        )),
    })
}

/// Completes the session links of `cfg`: Langfuse's pages need the id of
/// the keys' project, read once from the source (one attempt: a source
/// down leaves the links out, with a warning, rather than holding up a
/// start).
pub async fn complete_links(cfg: &mut Config) {
    let Some(links) = cfg.alerts.session_links.clone() else {
        return;
    };
    if !links.needs_project() {
        return;
    }
    let (KindConfig::Langfuse(api, keys, rows), Some(key)) =
        (&cfg.source.of_kind, &cfg.source.common.admin_key)
    else {
        return;
    };
    let once = HttpLimits {
        max_retries: 0,
        ..cfg.source.http.clone()
    };
    let read = match LangfuseReader::new(api.api_url.clone(), &keys.public_key, key, rows, once) {
        Ok(reader) => reader.project_id().await,
        Err(e) => Err(e),
    };
    match read {
        Ok(id) => cfg.alerts.session_links = Some(links.with_project(&id)),
        Err(e) => {
            tracing::warn!(error = %e, "sessions are not linked: the Langfuse project is unknown")
        }
    }
}

/// The admin key of a source read over HTTP.
fn admin_key(cfg: &Config) -> Result<&crate::secret::Secret, AppError> {
    cfg.source
        .common
        .admin_key
        .as_ref()
        .ok_or_else(|| AppError::NoAdminKey {
            path: cfg.path.clone(),
        })
}

/// The price table of a row source: `source.models_file`, then the table
/// shipped inside the binary.
pub fn price_table(cfg: &Config) -> PriceTable {
    let mut table = PriceTable::new(cfg.source.models.clone());
    table.extend(crate::pricing::table::default_table());
    table
}

/// The detector a configuration describes.
pub fn detector(cfg: &Config) -> Detector {
    detector_of(cfg.rules.clone(), cfg.group_by.clone(), &cfg.detection)
}

/// The detector for `rules` with every other setting at its default, for
/// commands run without a configuration file.
pub fn default_detector(rules: Rules) -> Detector {
    detector_of(rules, default_group_by(), &DetectionConfig::default())
}

fn detector_of(rules: Rules, group_by: Vec<String>, d: &DetectionConfig) -> Detector {
    Detector {
        rules,
        group_by,
        baseline_samples: d.baseline_samples,
        max_candidates: d.max_candidates,
    }
}

/// The pipeline of the `main` job a configuration describes: its state
/// database (opened and migrated), gateway, detector and windows.
pub async fn main_pipeline(
    cfg: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Pipeline<AnySource, SqlStore>, AppError> {
    let store = SqlStore::open_with(&cfg.state.url, cfg.state.max_connections)
        .await
        .map_err(|e| AppError::failed("cannot open the state database", e))?;
    Ok(Pipeline::new(
        gateway(cfg).await?,
        store,
        detector(cfg),
        Schedule::main(&cfg.windows),
        cfg.detection.drilldown_concurrency,
        clock,
    ))
}

/// The prices of `model`: as configured, else from the gateway's catalogue.
async fn prices<S: Source>(
    configured: Option<Prices>,
    source: &S,
    model: &str,
) -> Result<Prices, AppError> {
    if let Some(p) = configured {
        return Ok(p);
    }
    let models = source.models().await.map_err(|e| {
        AppError::failed(
            "investigation: cannot read the model catalogue for prices (or set investigation.prices)",
            e,
        )
    })?;
    let m = models
        .iter()
        .find(|m| m.id == model)
        .ok_or_else(|| AppError::NotInCatalogue {
            model: model.to_owned(),
        })?;
    Ok(Prices::from_catalogue(m))
}

/// The escalation a configuration describes; `None` when disabled. Prices
/// come from `investigation.prices`, else from the source's catalogue. The
/// log tools are the MCP server's at `investigation.mcp_url`, or
/// costwatch's own over a source of their own, answering from
/// `window_source` (the pipeline's) what the last window read.
pub async fn escalation(
    cfg: &Config,
    window_source: Option<Arc<dyn WindowCalls>>,
) -> Result<Option<Escalation>, AppError> {
    let inv = &cfg.investigation;
    if !inv.enabled {
        return Ok(None);
    }
    let Some(inference_key) = &inv.inference_key else {
        return Err(AppError::InvestigationKeys);
    };
    let source = gateway(cfg).await?;
    let prices = prices(inv.prices, &source, &inv.model).await?;
    let limits = HttpLimits {
        timeout: inv.caps.wall_timeout,
        max_retries: 2,
        max_body_bytes: 4 << 20,
        ..cfg.source.http.clone()
    };
    let options = RunOptions {
        tools: inv.tools.clone(),
        ..RunOptions::default()
    };
    let tools = match (inv.log_tools_for(cfg.source.kind()), &inv.mcp_url) {
        (LogToolsChoice::Builtin, _) => {
            let tools = LogTools::new(source, Arc::new(SystemClock)).allowlisted(inv.tools.clone());
            Tools::new(match window_source {
                Some(w) => tools.with_window_source(w),
                None => tools,
            })
        }
        (LogToolsChoice::Mcp, None) => {
            return Err(AppError::setup(
                "investigation.mcp_url",
                "is required with log_tools: mcp",
            ));
        }
        (LogToolsChoice::Mcp, Some(url)) => {
            let Some(admin_key) = &cfg.source.common.admin_key else {
                return Err(AppError::InvestigationKeys);
            };
            let client = McpClient::new(
                url.clone(),
                admin_key,
                inv.tools.clone(),
                options.tool_timeout,
            )
            .map_err(|e| AppError::setup("investigation.mcp_url", e))?;
            // Langfuse's own MCP takes the project's key pair as Basic.
            let client = match &cfg.source.of_kind {
                KindConfig::Langfuse(_, keys, _) => client
                    .with_basic_auth(&keys.public_key, admin_key)
                    .map_err(|e| AppError::setup("investigation.mcp_url", e))?,
                _ => client,
            };
            Tools::new(client)
        }
    };
    let model = ModelClient::new(
        inv.llm_url.clone(),
        inference_key,
        inv.model.clone(),
        limits,
    )
    .map_err(|e| AppError::setup("investigation.llm_url", e))?
    .with_tokenizer(inv.tokenizer);
    let model = match &inv.tokenize_url {
        Some(url) => model.with_tokenize_url(url.clone(), inv.template_escapes_html),
        None => model,
    };
    Ok(Some(Escalation {
        tools,
        model,
        caps: inv.caps.clone(),
        prices,
        options,
        policy: inv.escalate.clone(),
    }))
}

/// How long an outbox claim lasts: the slowest channel's timeout and a margin.
fn claim_ttl(cfg: &Config) -> Duration {
    let slowest = cfg
        .notify
        .webhooks
        .iter()
        .map(|w| w.timeout)
        .chain(cfg.notify.email.as_ref().map(|e| e.timeout))
        .max()
        .unwrap_or(Duration::from_secs(30));
    slowest + Duration::from_secs(10)
}

impl DaemonSettings {
    /// The settings a configuration describes (`alerts`, `schedule`,
    /// `windows`, `state`), around the runtime parts, with a watch of their
    /// own on the running tick.
    pub fn from_config(
        cfg: &Config,
        channels: Vec<Arc<dyn Channel>>,
        metrics: Arc<Metrics>,
        replica: String,
        escalation: Option<Arc<Escalation>>,
    ) -> DaemonSettings {
        DaemonSettings {
            policy: cfg.alerts.clone(),
            max_catch_up_windows: cfg.schedule.max_catch_up_windows,
            tick_timeout: cfg.schedule.tick_timeout,
            tick_watch: TickWatch::new(),
            max_backfill: cfg.windows.max_backfill,
            channels,
            metrics,
            replica,
            lease_ttl: cfg.state.lease_ttl,
            claim_ttl: claim_ttl(cfg),
            escalation,
        }
    }
}
