//! [`RowSource`]: a [`Source`] over a [`RowReader`].
//!
//! A window `[start, end)` is read as calls from `start - session_lookback`
//! to `end`, grouped by session; the sessions with a call in the window are
//! handed on, each aggregated over every call read (so a session that began
//! before the window counts its earlier calls, as the reference API's
//! session rows do). After a window is read, the sessions still open
//! within the lookback are carried over: when the next window starts where
//! this one ended, only that window's calls are read, and the carried
//! sessions are extended. Any other window (the first, a replay, a gap, a
//! retry after a failed read) is read with its full lookback, so the carry
//! only saves work and never changes what is found.
//!
//! Cache reads a row leaves out: a call whose system may omit a cache-read
//! count of 0 (an OpenTelemetry span, [`CallRow::instrumentation`]) read 0
//! cached when its instrumentation reported a cache-read count on any call
//! that started within the window or its lookback, the calls a window
//! read whole reads; else its reads are unknown, and a session all of whose
//! successful calls are unknown is handed on as
//! [`cache_unreported`](SessionRecord::cache_unreported). What was learned
//! is carried with the sessions, as the latest such call per
//! instrumentation, and applied only once the window's calls are all read
//! (see [`super::reporters`]), so it holds for a window read whole and for
//! the same calls read with the carry alike.
//!
//! Prices: a call the system did not price is priced from the system's
//! own catalogue (its rules, where it matches calls by pattern, date or
//! usage, at the call's time and usage), then from the tables. Once a
//! window's calls are read, every model its sessions name is priced as of
//! the window's end, the same way, and a model neither prices gets the
//! prices its reported costs teach (`crate::pricing::learned`, from the
//! calls read for the window; kept for later windows, at most
//! [`MAX_LEARNED`] models): [`Source::window_models`].
//!
//! Memory: the open sessions of the lookback and window (at most
//! `source.max_open_sessions`, else the read fails with a message that says
//! to shorten the window), plus the calls themselves up to
//! `source.max_kept_rows` for drill-downs; a session whose calls were not
//! all kept is read again, over its own time span, when drilled into.

use super::aggregate::{Cost, OpenSession, PER_CALL_LABEL, PER_CALL_VALUE, billed, per_call_id};
use super::reporters::Reporters;
use super::{CallRow, Published, RowReader, RowSettings};
use crate::pricing::learned::Learner;
use crate::pricing::table::PriceTable;
use crate::source::{
    FoundCalls, LabelledCall, ModelPrice, ReadStats, RequestQuery, RequestRecord, SessionRecord,
    Source, SourceError, Window,
};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

/// Most models whose learned prices are kept from window to window.
pub const MAX_LEARNED: usize = 1024;

/// Sessions built from a row reader's calls. Clones share the reader and
/// what was carried over from the last window.
pub struct RowSource<R> {
    reader: Arc<R>,
    settings: Arc<RowSettings>,
    /// `source.models_file` then the shipped table.
    tables: Arc<PriceTable>,
    state: Arc<Mutex<State>>,
}

impl<R> Clone for RowSource<R> {
    fn clone(&self) -> Self {
        RowSource {
            reader: self.reader.clone(),
            settings: self.settings.clone(),
            tables: self.tables.clone(),
            state: self.state.clone(),
        }
    }
}

impl<R> std::fmt::Debug for RowSource<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowSource")
            .field("session_key", &self.settings.session_key.to_string())
            .finish_non_exhaustive()
    }
}

/// What one read leaves for the next.
#[derive(Default)]
struct State {
    /// The sessions open at the end of the last window read.
    carry: Option<Carry>,
    /// The prices the reader publishes, once read.
    published: Option<Arc<PriceTable>>,
    /// The prices of the models the last window read names
    /// ([`Source::window_models`]).
    window_models: Vec<ModelPrice>,
    /// Prices learned from reported costs, by model, the latest of each.
    learned: HashMap<String, ModelPrice>,
}

/// The open sessions by id: foldhash, seeded per process, as the
/// detectors' maps (SipHash showed in the LiteLLM path's profile).
type Sessions = HashMap<String, OpenSession, foldhash::fast::RandomState>;

struct Carry {
    /// End of the window they were read up to.
    end: DateTime<Utc>,
    sessions: Sessions,
    /// Calls kept across those sessions.
    kept: usize,
    /// The instrumentations that reported cache reads within the next
    /// window's lookback.
    reporters: Reporters,
}

impl<R: RowReader> RowSource<R> {
    /// A source over `reader`; calls it does not price are priced from the
    /// reader's own catalogue, then from `tables`.
    pub fn new(reader: R, settings: RowSettings, tables: PriceTable) -> RowSource<R> {
        RowSource {
            reader: Arc::new(reader),
            settings: Arc::new(settings),
            tables: Arc::new(tables),
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The reader underneath (for probes).
    pub fn reader(&self) -> &R {
        &self.reader
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reader's prices then the tables; the reader is asked once per
    /// process, and again after a failure (the tables serve meanwhile).
    async fn prices(&self) -> Arc<PriceTable> {
        if let Some(p) = self.lock().published.clone() {
            return p;
        }
        match self.reader.published().await {
            Ok(published) => {
                let mut table = match published {
                    Published::Listed(models) => PriceTable::new(models),
                    Published::Rules(rules) => PriceTable::with_rules(rules),
                };
                table.extend(self.tables.models().iter().cloned());
                let table = Arc::new(table);
                self.lock().published = Some(table.clone());
                table
            }
            Err(e) => {
                tracing::warn!(
                    source = self.reader.name(),
                    error = %e,
                    "cannot read the source's model prices; using the price table"
                );
                self.tables.clone()
            }
        }
    }

    /// `row` as a log tool returns it: `None` when `source.filter` leaves
    /// it out; a call without a session gets its session of one.
    fn labelled(&self, mut row: CallRow, prices: &PriceTable) -> Option<LabelledCall> {
        let filter = &self.settings.filter;
        if !filter.iter().all(|(k, v)| row.labels.get(k) == Some(v)) {
            return None;
        }
        if row.session_id.as_deref().is_none_or(str::is_empty) {
            row.session_id = Some(per_call_id(&row.request_id));
            row.labels
                .insert(PER_CALL_LABEL.to_owned(), PER_CALL_VALUE.to_owned());
        }
        let usd = match Cost::of(&row, prices) {
            Cost::Reported(c) | Cost::Computed(c) => c,
            Cost::Unknown => 0.0,
        };
        let labels = std::mem::take(&mut row.labels);
        let call = super::aggregate::request_record(row, usd);
        Some(LabelledCall { call, labels })
    }

    fn lookback(&self) -> TimeDelta {
        TimeDelta::from_std(self.settings.session_lookback).unwrap_or(TimeDelta::MAX)
    }

    /// Prices every model in `names` as of `at`, from `prices`, else from
    /// what `learner` (this read) or earlier windows learned; keeps what
    /// this read learned. Offers those, every model the source's rules
    /// list (as of `at`: their prices depend on the date), and every
    /// learned price.
    fn price_window(
        &self,
        prices: &PriceTable,
        names: &BTreeSet<&str>,
        at: DateTime<Utc>,
        learner: &Learner,
    ) {
        let mut state = self.lock();
        let mut out: Vec<ModelPrice> = prices
            .ruled_at(at)
            .into_iter()
            .filter(|m| !names.contains(m.id.as_str()))
            .collect();
        for &name in names {
            if let Some(p) = prices.price_at(name, at) {
                out.push(p);
            } else if let Some(p) = learner.price(name)
                && (state.learned.len() < MAX_LEARNED || state.learned.contains_key(name))
            {
                state.learned.insert(name.to_owned(), p);
            }
        }
        let mut learned: Vec<&ModelPrice> = state.learned.values().collect();
        learned.sort_by(|a, b| a.id.cmp(&b.id));
        out.extend(learned.into_iter().cloned());
        state.window_models = out;
    }
}

/// Folds calls into open sessions under the memory limits.
struct Fold<'a> {
    settings: &'a RowSettings,
    prices: &'a PriceTable,
    sessions: Sessions,
    kept: usize,
    reporters: Reporters,
    learner: Learner,
    stats: ReadStats,
}

impl Fold<'_> {
    fn add(&mut self, mut row: CallRow) -> Result<(), SourceError> {
        self.reporters.learn(&row);
        if let Some(cost) = row.cost_usd {
            self.learner.observe(&row.model, &billed(&row), cost);
        }
        if !self
            .settings
            .filter
            .iter()
            .all(|(k, v)| row.labels.get(k) == Some(v))
        {
            return Ok(());
        }
        let id = match row.session_id.take() {
            Some(id) if !id.is_empty() => id,
            _ => {
                self.stats.calls_without_session += 1;
                row.labels
                    .insert(PER_CALL_LABEL.to_owned(), PER_CALL_VALUE.to_owned());
                per_call_id(&row.request_id)
            }
        };
        row.session_id = Some(id.clone());
        let cost = Cost::of(&row, self.prices);
        match cost {
            Cost::Reported(_) => {}
            Cost::Computed(_) => self.stats.priced_calls += 1,
            Cost::Unknown => self.stats.unpriced_calls += 1,
        }
        let keep = self.kept < self.settings.max_kept_rows;
        match self.sessions.get_mut(&id) {
            Some(s) => {
                let before = s.kept();
                s.add(row, cost, keep);
                self.kept = self.kept.saturating_sub(before) + s.kept();
            }
            None => {
                if self.sessions.len() >= self.settings.max_open_sessions {
                    return Err(SourceError::Invalid(format!(
                        "more than {} sessions open in one read (source.max_open_sessions); \
                         make windows.size or source.session_lookback shorter",
                        self.settings.max_open_sessions
                    )));
                }
                let s = OpenSession::new(row, cost, keep);
                self.kept += s.kept();
                self.sessions.insert(id, s);
            }
        }
        Ok(())
    }
}

impl<R: RowReader> Source for RowSource<R> {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        Ok(self.prices().await.models().to_vec())
    }

    fn window_models(&self) -> Vec<ModelPrice> {
        self.lock().window_models.clone()
    }

    async fn sessions<F>(&self, window: Window, mut sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        let prices = self.prices().await;
        let lookback = self.lookback();
        // The carry is taken, not copied: a read that fails leaves none, and
        // the next one reads its full lookback.
        let carried = self.lock().carry.take().filter(|c| c.end == window.start);
        let lookback_from = window
            .start
            .checked_sub_signed(lookback)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let (sessions, kept, reporters, from) = match carried {
            Some(c) => (c.sessions, c.kept, c.reporters, window.start),
            None => (Sessions::default(), 0, Reporters::default(), lookback_from),
        };
        let mut fold = Fold {
            settings: &self.settings,
            prices: &prices,
            sessions,
            kept,
            reporters,
            learner: Learner::default(),
            stats: ReadStats::default(),
        };
        let read = self
            .reader
            .calls(from, window.end, |row| fold.add(row))
            .await?;
        let Fold {
            sessions,
            kept,
            mut reporters,
            learner,
            stats,
            ..
        } = fold;
        let stats = ReadStats {
            pages: read.pages,
            rows: read.rows,
            retries: read.retries,
            ..stats
        };
        let mut active: Vec<(&String, &OpenSession)> = sessions
            .iter()
            .filter(|(_, s)| s.last >= window.start)
            .collect();
        active.sort_by(|a, b| (a.1.first, a.0).cmp(&(b.1.first, b.0)));
        let names: BTreeSet<&str> = active
            .iter()
            .flat_map(|(_, s)| s.by_model.iter().map(|m| m.model.as_str()))
            .collect();
        let last_instant = window
            .end
            .checked_sub_signed(TimeDelta::nanoseconds(1))
            .unwrap_or(window.end);
        self.price_window(&prices, &names, last_instant, &learner);
        for (id, s) in active {
            sink(s.record(id, |by| reporters.reports(by, lookback_from)));
        }
        // Sessions that may still grow, and those just handed on (for
        // their drill-downs), stay.
        let horizon = window
            .end
            .checked_sub_signed(lookback)
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
            .min(window.start);
        // Kept in place: moving every open session into a new map each
        // window showed in the Langfuse path's profile.
        let mut kept = kept;
        let mut sessions = sessions;
        sessions.retain(|_, s| {
            let stay = s.last >= horizon;
            if !stay {
                kept -= s.kept().min(kept);
            }
            stay
        });
        // The next window's lookback starts here.
        let next_from = window
            .end
            .checked_sub_signed(lookback)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        if reporters.forget_before(next_from) {
            tracing::warn!(
                source = self.reader.name(),
                max = super::reporters::MAX_REPORTERS,
                "more instrumentations reported cache reads than costwatch remembers; \
                 the calls of the others without a cache-read count stay not reported"
            );
        }
        self.lock().carry = Some(Carry {
            end: window.end,
            sessions,
            kept,
            reporters,
        });
        Ok(stats)
    }

    async fn session_requests(&self, session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        let span = {
            let state = self.lock();
            let open = state
                .carry
                .as_ref()
                .and_then(|c| c.sessions.get(session_id));
            match open {
                Some(s) => match &s.calls {
                    Some(calls) => return Ok(sorted(calls.clone())),
                    None => (s.first, s.last),
                },
                None => {
                    return Err(SourceError::Invalid(format!(
                        "session {} was not in the last window read",
                        crate::printable::Printable(session_id)
                    )));
                }
            }
        };
        let prices = self.prices().await;
        let end = span.1 + TimeDelta::milliseconds(1);
        let rows = self.reader.session_calls(session_id, span.0, end).await?;
        let calls = rows
            .into_iter()
            .map(|mut row| {
                row.session_id = Some(session_id.to_owned());
                let usd = match Cost::of(&row, &prices) {
                    Cost::Reported(c) | Cost::Computed(c) => c,
                    Cost::Unknown => 0.0,
                };
                super::aggregate::request_record(row, usd)
            })
            .collect();
        Ok(sorted(calls))
    }

    async fn requests(&self, query: &RequestQuery) -> Result<FoundCalls, SourceError> {
        self.read_requests(query).await
    }
}

impl<R: RowReader> RowSource<R> {
    /// [`Source::requests`]: the reader's calls of the range, filtered by
    /// session on the server where the system can.
    async fn read_requests(&self, query: &RequestQuery) -> Result<FoundCalls, SourceError> {
        let prices = self.prices().await;
        let (start, end, max) = (query.range.start, query.range.end, query.max_calls);
        let mut found = FoundCalls::default();
        if let Some(id) = &query.session_id {
            for row in self.reader.session_calls(id, start, end).await? {
                let kept = self
                    .labelled(row, &prices)
                    .is_none_or(|c| found.push(c, max));
                if !kept {
                    break;
                }
            }
            return Ok(found.sorted());
        }
        let read = self
            .reader
            .calls(start, end, |row| {
                let kept = self
                    .labelled(row, &prices)
                    .is_none_or(|c| found.push(c, max));
                // Enough: an error stops the read, and `more` says why.
                if kept {
                    Ok(())
                } else {
                    Err(SourceError::Invalid("enough calls".into()))
                }
            })
            .await;
        match read {
            Err(e) if !found.more => Err(e),
            _ => Ok(found.sorted()),
        }
    }
}

/// Calls in time order, then by id.
fn sorted(mut calls: Vec<RequestRecord>) -> Vec<RequestRecord> {
    calls.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then(a.request_id.cmp(&b.request_id))
    });
    calls
}
