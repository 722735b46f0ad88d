//! The parts of `demo`: the real pipeline, alerting and investigation
//! against the built-in gateway simulator and a scripted model.

use super::{AppError, simulator_limits, simulator_source};
use crate::backtest::{self, Replay, WindowRetries};
use crate::clock::{Clock, FakeClock, SystemClock};
use crate::config::{AlertPolicy, Caps, DEFAULT_MODEL, EscalateConfig, Severity};
use crate::daemon::{Daemon, DaemonSettings};
use crate::detect::Detector;
use crate::escalate::Escalation;
use crate::investigate::Tools;
use crate::investigate::budget::Prices;
use crate::investigate::mcp::McpClient;
use crate::investigate::model::ModelClient;
use crate::investigate::run::RunOptions;
use crate::logtools::{LogTools, WindowCalls};
use crate::notify::outbox::Channel;
use crate::notify::{Alert, Notifier, NotifyError};
use crate::pipeline::{Pipeline, Schedule};
use crate::secret::Secret;
use crate::source::HttpLimits;
use crate::source::SourceKind;
use crate::store::SqlStore;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch_sim::SEED_WINDOW;
use costwatch_sim::dataset::Dataset;
use costwatch_sim::model::{Script, ScriptedModelServer};
use costwatch_sim::scenario::{self, ScenarioParams};
use costwatch_sim::server::{SimOptions, SimServer};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Session ids of each kind of waste, as the simulator labelled them.
pub type Truth = BTreeMap<String, BTreeSet<String>>;

/// The end of the seed window's hour plus the settle lag.
const SEED_DAY_END: DateTime<Utc> = match DateTime::from_timestamp(1_791_720_300, 0) {
    Some(t) => t,
    None => DateTime::<Utc>::UNIX_EPOCH,
};

/// The seed window (26 sessions, one example of each kind of waste beside
/// its fixed twin), served by a running simulator.
pub struct SeedDemo {
    /// The simulator serving it.
    pub sim: SimServer,
    /// First request.
    pub from: DateTime<Utc>,
    /// Last request.
    pub to: DateTime<Utc>,
    /// The labelled waste.
    pub truth: Truth,
}

fn seed_dataset() -> Result<Dataset, AppError> {
    Dataset::from_fixture_str(SEED_WINDOW).map_err(|e| AppError::failed("embedded seed window", e))
}

/// Serves `dataset` from the built-in gateway simulator on 127.0.0.1.
pub async fn start_simulator(dataset: Arc<Dataset>) -> Result<SimServer, AppError> {
    SimServer::start(dataset, SimOptions::default())
        .await
        .map_err(|e| AppError::failed("cannot start the simulator", e))
}

/// Starts the simulator on the seed window.
pub async fn seed_demo() -> Result<SeedDemo, AppError> {
    let seed = seed_dataset()?;
    let (from, to) = seed.time_range().ok_or(AppError::EmptySeed)?;
    let truth = seed.truth.by_kind.clone();
    let sim = start_simulator(Arc::new(seed)).await?;
    Ok(SeedDemo {
        sim,
        from,
        to,
        truth,
    })
}

impl SeedDemo {
    /// Replays the seed window in hour windows, then stops the simulator.
    pub async fn replay(self, detector: Detector, kind: SourceKind) -> Result<Replay, AppError> {
        let replay = backtest::replay(
            simulator_source(&self.sim, kind).await?,
            detector,
            "sqlite::memory:",
            self.from,
            self.to + ChronoDuration::hours(1),
            Duration::from_secs(3600),
            4,
            Arc::new(SystemClock),
            &WindowRetries::like_source(&simulator_limits()),
            |_| {},
        )
        .await?;
        let _ = self.sim.shutdown().await;
        Ok(replay)
    }
}

/// Days of labelled traffic with incidents and look-alikes.
pub struct TrafficDemo {
    /// How it was generated.
    pub params: ScenarioParams,
    /// The sessions and requests.
    pub dataset: Arc<Dataset>,
    /// The labelled waste.
    pub truth: Truth,
}

/// Generates `days` of traffic from `seed`.
pub fn traffic_demo(seed: u64, days: u32) -> TrafficDemo {
    traffic_demo_from(seed, days, ScenarioParams::default().start)
}

/// Generates `days` of traffic from `seed` that ends at the start of the
/// hour of `now`: traffic a daemon started now reads as recent history.
pub fn traffic_demo_until(seed: u64, days: u32, now: DateTime<Utc>) -> TrafficDemo {
    let hour = now.timestamp().div_euclid(3600) * 3600;
    let end = DateTime::from_timestamp(hour, 0).unwrap_or(now);
    traffic_demo_from(seed, days, end - ChronoDuration::days(i64::from(days)))
}

fn traffic_demo_from(seed: u64, days: u32, start: DateTime<Utc>) -> TrafficDemo {
    let params = ScenarioParams {
        seed,
        days,
        start,
        ..ScenarioParams::default()
    };
    let dataset = Arc::new(scenario::generate(&params));
    let truth = dataset.truth.by_kind.clone();
    TrafficDemo {
        params,
        dataset,
        truth,
    }
}

impl TrafficDemo {
    /// Serves the traffic from a simulator bound to `bind` (REST under
    /// `/v1`, MCP at `/v1/mcp`) until the returned server is dropped.
    pub async fn serve(&self, bind: std::net::SocketAddr) -> Result<SimServer, AppError> {
        let opts = SimOptions {
            bind,
            ..SimOptions::default()
        };
        SimServer::start(self.dataset.clone(), opts)
            .await
            .map_err(|e| AppError::failed(format!("cannot serve the simulator on {bind}"), e))
    }

    /// Serves the traffic from a simulator and replays it in 15-minute
    /// windows: the replay and how long it took.
    pub async fn replay(
        &self,
        detector: Detector,
        kind: SourceKind,
    ) -> Result<(Replay, Duration), AppError> {
        let sim = start_simulator(self.dataset.clone()).await?;
        let from = self.params.start;
        let to = from + ChronoDuration::days(i64::from(self.params.days));
        let started = Instant::now();
        let replay = backtest::replay(
            simulator_source(&sim, kind).await?,
            detector,
            "sqlite::memory:",
            from,
            to,
            Duration::from_secs(900),
            4,
            Arc::new(SystemClock),
            &WindowRetries::like_source(&simulator_limits()),
            |_| {},
        )
        .await?;
        let _ = sim.shutdown().await;
        Ok((replay, started.elapsed()))
    }
}

/// A channel that keeps what it is sent (for the demo's printout).
#[derive(Default)]
struct Collect(Mutex<Vec<Alert>>);

impl Notifier for Collect {
    fn name(&self) -> &str {
        "demo"
    }

    async fn send(&self, alert: &Alert) -> Result<(), NotifyError> {
        if let Ok(mut v) = self.0.lock() {
            v.push(alert.clone());
        }
        Ok(())
    }
}

/// Alerts for the seed window through the real daemon tick, each escalated to
/// an investigation with the scripted model: over the simulator's MCP tools
/// for the reference gateway, over costwatch's own for every other source.
pub async fn demo_investigation(
    detector: &Detector,
    kind: SourceKind,
) -> Result<Vec<Alert>, AppError> {
    let sim = start_simulator(Arc::new(seed_dataset()?)).await?;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .map_err(|e| AppError::failed("cannot start the scripted model", e))?;
    let limits = HttpLimits {
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_secs(5),
        max_body_bytes: 4 << 20,
    };
    let url = |u: String| url::Url::parse(&u).map_err(|e| AppError::failed("simulator url", e));
    let options = RunOptions::default();
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(SEED_DAY_END));
    let source = simulator_source(&sim, kind).await?;
    // The reference gateway serves its log tools over MCP; every other
    // source gets costwatch's own, over a source of their own that asks
    // the pipeline's for what the last window read.
    let tools = if kind == SourceKind::Reference {
        Tools::new(
            McpClient::new(
                url(sim.mcp_url())?,
                &Secret::new(sim.admin_key()),
                options.tools.clone(),
                Duration::from_secs(10),
            )
            .map_err(|e| AppError::setup("mcp", e))?,
        )
    } else {
        let window_source: Arc<dyn WindowCalls> = Arc::new(source.clone());
        Tools::new(
            LogTools::new(simulator_source(&sim, kind).await?, clock.clone())
                .allowlisted(options.tools.clone())
                .with_window_source(window_source),
        )
    };
    let escalation = Escalation {
        tools,
        model: ModelClient::new(
            url(model.base_url())?,
            &Secret::new(model.inference_key()),
            DEFAULT_MODEL,
            limits,
        )
        .map_err(|e| AppError::setup("model", e))?,
        caps: Caps::default(),
        prices: Prices {
            input_usd_per_mtok: 0.10,
            cached_input_usd_per_mtok: 0.01,
            output_usd_per_mtok: 0.40,
        },
        options,
        policy: EscalateConfig {
            min_severity: Severity::Info,
            max_per_hour: 10,
            ..EscalateConfig::default()
        },
    };
    let collected = Arc::new(Collect::default());
    let store = SqlStore::open("sqlite::memory:")
        .await
        .map_err(|e| AppError::failed("state", e))?;
    let schedule = Schedule {
        job: "main".to_owned(),
        windows: crate::config::WindowConfig {
            size: Duration::from_secs(3600),
            settle_lag: Duration::from_secs(120),
            start: Some(SEED_DAY_END - ChronoDuration::minutes(65)),
            max_backfill: Duration::from_secs(86_400),
        },
    };
    let pipeline = Pipeline::new(source, store, detector.clone(), schedule, 4, clock.clone());
    let settings = DaemonSettings {
        policy: AlertPolicy {
            delivery_deadline: Duration::from_secs(3600),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(10),
            ..AlertPolicy::default()
        },
        max_catch_up_windows: 10,
        // No deadline to speak of: the simulator is on loopback.
        tick_timeout: Duration::from_secs(u64::from(u32::MAX)),
        tick_watch: crate::ops::stall::TickWatch::new(),
        max_backfill: Duration::from_secs(86_400),
        channels: vec![collected.clone() as Arc<dyn Channel>],
        metrics: Arc::new(crate::ops::metrics::Metrics::new()),
        replica: "demo".to_owned(),
        lease_ttl: Duration::from_secs(60),
        claim_ttl: Duration::from_secs(40),
        escalation: Some(Arc::new(escalation)),
    };
    let daemon = Daemon::new(pipeline, settings, clock);
    daemon.tick().await?;
    let alerts = collected.0.lock().map(|v| v.clone()).unwrap_or_default();
    let _ = model.shutdown().await;
    let _ = sim.shutdown().await;
    Ok(alerts)
}
