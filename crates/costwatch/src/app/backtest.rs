//! The parts of `backtest`: a gateway client for the simulator, and the
//! alert replay behind `--spend-preview` and `--investigate`.

use super::{AppError, escalation};
use crate::app::any::AnySource;
use crate::backtest::{self, SpendPreview, WindowRetries};
use crate::config::{AlertPolicy, Caps, Config, DEFAULT_MODEL, EscalateConfig};
use crate::detect::Detector;
use crate::investigate::budget::Prices;
use crate::logtools::WindowCalls;
use crate::notify::Alert;
use crate::pricing::table::PriceTable;
use crate::secret::Secret;
use crate::source::langfuse::LangfuseReader;
use crate::source::litellm::LiteLlmReader;
use crate::source::reference::ReferenceSource;
use crate::source::rows::RowSource;
use crate::source::{HttpLimits, Labels, ModelPrice, Source, SourceKind};
use crate::store::{SqlStore, Store};
use chrono::{DateTime, Utc};
use costwatch_sim::server::SimServer;
use std::sync::Arc;
use std::time::Duration;

/// The limits of a gateway client reading the simulator on loopback.
pub fn simulator_limits() -> HttpLimits {
    HttpLimits {
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
        max_retries: 3,
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_secs(5),
        max_body_bytes: 8 << 20,
    }
}

/// Pages of 50, the gateway's largest.
const SIMULATOR_PAGE_LIMIT: u32 = 50;

/// A client of the simulator in the form `kind`: its reference routes, or
/// the same traffic as the LiteLLM proxy's spend logs, Langfuse's
/// observations, or OpenTelemetry GenAI spans (received over OTLP/HTTP or
/// read from files, see `sim_spans`). Row sources price
/// calls from the simulator's own catalogue, as `source.models_file` would.
pub async fn simulator_source(sim: &SimServer, kind: SourceKind) -> Result<AnySource, AppError> {
    let url = |u: String| url::Url::parse(&u).map_err(|e| AppError::failed("simulator url", e));
    let key = Secret::new(sim.admin_key());
    let settings = crate::source::rows::RowSettings::defaults(kind);
    let mut prices = PriceTable::new(sim.dataset().models.iter().map(sim_price).collect());
    prices.extend(crate::pricing::table::default_table());
    Ok(match kind {
        SourceKind::Otlp | SourceKind::OtlpFiles => {
            return super::sim_spans::source(sim, kind, prices).await;
        }
        SourceKind::Reference => AnySource::Reference(Box::new(ReferenceSource::new(
            url(sim.base_url())?,
            &key,
            SIMULATOR_PAGE_LIMIT,
            Labels::new(),
            simulator_limits(),
        )?)),
        SourceKind::Litellm => AnySource::Litellm(RowSource::new(
            LiteLlmReader::new(url(sim.litellm_url())?, &key, &settings, simulator_limits())?,
            settings,
            prices,
        )),
        SourceKind::Langfuse => AnySource::Langfuse(RowSource::new(
            LangfuseReader::new(
                url(sim.langfuse_url())?,
                sim.langfuse().public_key(),
                &key,
                &settings,
                simulator_limits(),
            )?,
            settings,
            prices,
        )),
    })
}

/// What `demo --serve` prints for a kind read over HTTP: the simulator's
/// URL in that form, and the settings besides `source.api_url` it needs
/// (as environment lines).
pub fn simulator_env(sim: &SimServer, kind: SourceKind) -> (String, String) {
    match kind {
        SourceKind::Reference | SourceKind::Otlp | SourceKind::OtlpFiles => {
            (sim.base_url(), String::new())
        }
        SourceKind::Litellm => (
            sim.litellm_url(),
            "COSTWATCH_SOURCE__KIND=litellm\n".to_owned(),
        ),
        SourceKind::Langfuse => (
            sim.langfuse_url(),
            format!(
                "COSTWATCH_SOURCE__KIND=langfuse\nCOSTWATCH_SOURCE__PUBLIC_KEY={}\n",
                sim.langfuse().public_key()
            ),
        ),
    }
}

/// A model of the simulator's catalogue as a price.
fn sim_price(m: &costwatch_sim::dataset::SimModel) -> ModelPrice {
    ModelPrice {
        id: m.id.clone(),
        input_usd_per_mtok: m.input_usd_per_mtok,
        cached_input_usd_per_mtok: m.cached_input_usd_per_mtok,
        cache_write_usd_per_mtok: m.cache_write_usd_per_mtok,
        output_usd_per_mtok: m.output_usd_per_mtok,
        supports_prompt_cache: m.supports_prompt_cache,
        min_cacheable_prompt_tokens: None,
        cache_lifetime_seconds: None,
    }
}

/// What the alert replay found: the alerts, what escalating them would
/// cost, and (with `--investigate`) what the investigations did cost.
#[derive(Debug)]
pub struct SpendReport {
    /// Every alert over the range, investigated ones with their investigation.
    pub alerts: Vec<Alert>,
    /// The estimate.
    pub preview: SpendPreview,
    /// The investigating model.
    pub model: String,
    /// The cap of one run, in dollars.
    pub max_usd_per_run: f64,
    /// The cap of one day, in dollars.
    pub max_usd_per_day: f64,
    /// Investigations really run.
    pub investigations: usize,
    /// What they cost.
    pub investigation_usd: f64,
    /// Where their records were kept (`--state`), if anywhere.
    pub kept_in: Option<String>,
}

/// Replays `[from, to)` through the daemon's tick with the alerting and
/// investigation settings of `cfg` (the defaults without one), estimating
/// what escalating the alerts would cost; with `investigate`, really runs the
/// investigations (enabled for the occasion) and, when `state` names a
/// database other than a throwaway in-memory one, keeps their records
/// there (`costwatch investigation show`). A tick that could not read its
/// window is run again as `retries` says.
#[allow(clippy::too_many_arguments)]
pub async fn replay_spend<S>(
    cfg: Option<&Config>,
    investigate: bool,
    state: Option<&str>,
    source: S,
    detector: Detector,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
    retries: &WindowRetries,
) -> Result<SpendReport, AppError>
where
    S: Source + Clone + 'static,
{
    let policy = cfg.map_or_else(AlertPolicy::default, |c| c.alerts.clone());
    let escalation = match (investigate, cfg) {
        (true, Some(c)) => {
            let mut c = c.clone();
            c.investigation.enabled = true;
            let window_source: Arc<dyn WindowCalls> = Arc::new(source.clone());
            escalation(&c, Some(window_source)).await?
        }
        _ => None,
    };
    let inv = cfg.map(|c| &c.investigation);
    let wants = inv.map_or_else(EscalateConfig::default, |i| i.escalate.clone());
    let caps = inv.map_or_else(Caps::default, |i| i.caps.clone());
    let model = inv.map_or(DEFAULT_MODEL, |i| i.model.as_str()).to_owned();
    let prices = match inv.and_then(|i| i.prices) {
        Some(p) => p,
        None => {
            let models = source
                .models()
                .await
                .map_err(|e| AppError::setup("model catalogue", e))?;
            let m = models.iter().find(|m| m.id == model).ok_or_else(|| {
                AppError::setup(
                    format!("investigation.model {model} is not in the catalogue"),
                    "set investigation.prices",
                )
            })?;
            Prices::from_catalogue(m)
        }
    };
    let replay = backtest::replay_alerts(
        source, detector, from, to, window, policy, escalation, retries,
    )
    .await?;
    let kept_in = match state.filter(|s| !crate::store::is_throwaway(s)) {
        Some(url) if !replay.records.is_empty() => {
            let store = SqlStore::open(url)
                .await
                .map_err(|e| AppError::failed("cannot open the state database", e))?;
            for record in &replay.records {
                store
                    .save_investigation(record)
                    .await
                    .map_err(|e| AppError::failed("cannot keep the investigations", e))?;
            }
            Some(url.to_owned())
        }
        _ => None,
    };
    let preview = backtest::spend_preview(
        &replay.alerts,
        |a| wants.wants(a),
        wants.max_per_hour,
        &prices,
        caps.max_usd_per_run,
        caps.max_usd_per_day,
    );
    Ok(SpendReport {
        alerts: replay.alerts,
        preview,
        model,
        max_usd_per_run: caps.max_usd_per_run,
        max_usd_per_day: caps.max_usd_per_day,
        investigations: replay.investigations,
        investigation_usd: replay.investigation_usd,
        kept_in,
    })
}
