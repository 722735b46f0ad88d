//! Sessions before they become rows: each call with what the request rows
//! do not show (the prefix it shares with the previous call on its model,
//! which logical request it sends, the model the group's design meant for
//! it), the situation the session was made for, and how the application
//! uses the prompt cache.
//!
//! No wire format here: `rows` turns a [`Draft`] into the request rows of
//! gateway-api.md section 1.

use super::catalogue::{is_premium, is_tiny};
use serde::Serialize;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Ok,
    RateLimited,
    Timeout,
    Unavailable,
}

impl Outcome {
    /// HTTP status and `error_type`, `None` on success.
    pub(super) fn error(self) -> Option<(u16, &'static str)> {
        match self {
            Outcome::Ok => None,
            Outcome::RateLimited => Some((429, "RateLimitError")),
            Outcome::Timeout => Some((504, "Timeout")),
            Outcome::Unavailable => Some((503, "ServiceUnavailableError")),
        }
    }
}

/// How the application uses the prompt cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CachePolicy {
    /// Reads whatever the cache can hold (with rare misses).
    Works,
    /// Never reads: something changes at the top of every prompt.
    Broken,
}

/// What a session was made to be. Never visible through the API; the truth
/// comes from the rows and the notes (`definition`), not from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Situation {
    /// A conversation whose prompts grow past the cache minimum.
    CachedConversation,
    /// A conversation that starts below the cache minimum and crosses it.
    LateCacheStart,
    /// A conversation whose prompts stay below the cache minimum, or reach
    /// it only on the last call.
    BelowMinimum,
    /// A conversation with pauses longer than the cache lives.
    PausedConversation,
    /// A conversation whose application breaks the cached prefix.
    BrokenCache,
    /// Independent calls sharing a template shorter than the cache minimum.
    FanOut,
    /// An agent's tool loop: heavy-tailed call counts, a growing prompt.
    AgentRun,
    /// An agent whose context is cut to a fixed budget: prompts of the
    /// same size, each a new step.
    ContextPlateau,
    /// The same call resent, successful every time, seconds apart.
    ValidationLoop,
    /// Two calls resent in turn.
    CycleLoop,
    /// A blocked tool call: the model asks for it again and again, each
    /// resend carrying the last answer and the error it got.
    BlockedTool,
    /// The same call resent after failures, many times.
    FailureLoop,
    /// A call retried a bounded number of times, then given up.
    BoundedRetry,
    /// Short calls, maybe one or two retries after a rate limit.
    ShortCalls,
    /// A sub-agent's tiny calls on the small model.
    SubAgent,
    /// Tiny sub-tasks sent to a premium model.
    PremiumSubtask,
    /// One large call handed to a premium model on purpose.
    Escalation,
    /// Calls moved to another small model after a rate limit.
    Failover,
    /// Small-model steps, a premium planning call and a cacheless model.
    MixedRouter,
    /// A group's calls after it moved to a premium model on purpose.
    ModelMigration,
    /// A group whose design is a premium model on short prompts.
    PremiumNorm,
    /// A new service's first conversation, its group's only session.
    FirstConversation,
    /// A new service's batch of unrelated prompts, its group's only session.
    UnrelatedBatch,
    /// A sub-step's tiny calls sent to a premium model for hours, in all
    /// or part of the group's sessions, the rest of each session as it
    /// was: a move nobody declared.
    ModelMove,
}

impl Situation {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Situation::CachedConversation => "cached_conversation",
            Situation::LateCacheStart => "late_cache_start",
            Situation::BelowMinimum => "below_minimum",
            Situation::PausedConversation => "paused_conversation",
            Situation::BrokenCache => "broken_cache",
            Situation::FanOut => "fan_out",
            Situation::AgentRun => "agent_run",
            Situation::ContextPlateau => "context_plateau",
            Situation::ValidationLoop => "validation_loop",
            Situation::CycleLoop => "cycle_loop",
            Situation::BlockedTool => "blocked_tool",
            Situation::FailureLoop => "failure_loop",
            Situation::BoundedRetry => "bounded_retry",
            Situation::ShortCalls => "short_calls",
            Situation::SubAgent => "sub_agent",
            Situation::PremiumSubtask => "premium_subtask",
            Situation::Escalation => "escalation",
            Situation::Failover => "failover",
            Situation::MixedRouter => "mixed_router",
            Situation::ModelMigration => "model_migration",
            Situation::PremiumNorm => "premium_norm",
            Situation::ModelMove => "model_move",
            Situation::FirstConversation => "first_conversation",
            Situation::UnrelatedBatch => "unrelated_batch",
        }
    }
}

/// What the rows do not show about one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallNote {
    /// The thread of prompts the call belongs to (a conversation, a
    /// template, a planner): prompts of different threads share nothing.
    pub thread: u8,
    /// Tokens the prompt's design shares with the previous call of its
    /// thread on the same model (the conversation so far, a template, the
    /// same prompt when resent): what a working prompt cache could serve.
    pub prefix: u64,
    /// The logical request: a resend carries the id of what it resends.
    pub request: u32,
    /// The model the group's design meant for this call.
    pub norm: &'static str,
}

/// One call before ids, times and costs.
#[derive(Debug, Clone)]
pub(super) struct Step {
    pub(super) model: &'static str,
    pub(super) input: u64,
    pub(super) output: u64,
    pub(super) outcome: Outcome,
    /// Pause after the previous call ended, in milliseconds.
    pub(super) gap_ms: i64,
    pub(super) note: CallNote,
}

/// A session's calls, its situation and its cache policy.
#[derive(Debug, Clone)]
pub(super) struct Draft {
    pub(super) situation: Situation,
    pub(super) cache: CachePolicy,
    pub(super) steps: Vec<Step>,
    next_request: u32,
}

impl Draft {
    /// An empty session made for `situation`, its cache working.
    pub(super) fn new(situation: Situation) -> Draft {
        Draft {
            situation,
            cache: CachePolicy::Works,
            steps: Vec::new(),
            next_request: 0,
        }
    }

    /// Appends a new request; returns its position.
    pub(super) fn call(&mut self, c: NewCall) -> usize {
        let request = self.next_request;
        self.next_request += 1;
        self.steps.push(Step {
            model: c.model,
            input: c.input,
            output: c.output,
            outcome: Outcome::Ok,
            gap_ms: c.gap_ms.max(1),
            note: CallNote {
                thread: c.thread,
                prefix: c.prefix.min(c.input),
                request,
                norm: c.norm,
            },
        });
        self.steps.len() - 1
    }

    /// Appends a resend of the call at `of`, `gap_ms` after the previous
    /// call ended. Its prompt is the same as the original's, so it shares
    /// with the last call of its thread on its model what the original
    /// shares with that call: all of it when that call is the original or
    /// another send of it, else the least prefix along the calls between
    /// them (in a two-call cycle A, B, A, the second A shares with B all of
    /// A, which B extended).
    pub(super) fn resend(&mut self, of: usize, outcome: Outcome, output: u64, gap_ms: i64) {
        let Some(original) = self.steps.get(of).cloned() else {
            return;
        };
        let prefix = self.steps[of + 1..]
            .iter()
            .filter(|s| s.model == original.model && s.note.thread == original.note.thread)
            .map(|s| s.note.prefix)
            .fold(original.input, u64::min);
        let output = if outcome == Outcome::Ok { output } else { 0 };
        self.steps.push(Step {
            outcome,
            output,
            gap_ms: gap_ms.max(1),
            note: CallNote {
                prefix,
                ..original.note
            },
            ..original
        });
    }

    /// Appends a resend of the call at `of` that carries the transcript
    /// since: the previous call's prompt plus `appended` tokens (its answer
    /// and the error it got), `gap_ms` after the previous call ended. It
    /// shares the whole previous prompt; the logical request is the one it
    /// resends.
    pub(super) fn resend_appended(&mut self, of: usize, appended: u64, output: u64, gap_ms: i64) {
        let (Some(original), Some(last)) = (self.steps.get(of).cloned(), self.steps.last()) else {
            return;
        };
        let input = last.input + appended;
        let prefix = last.input;
        self.steps.push(Step {
            input,
            output,
            outcome: Outcome::Ok,
            gap_ms: gap_ms.max(1),
            note: CallNote {
                prefix,
                ..original.note
            },
            ..original
        });
    }

    /// Sends the session's sub-step, its first `calls` requests whose every
    /// send is a successful tiny call on a small model, meant for a small
    /// one, to `model`; the design stays as it was, and at least one such
    /// request stays where it was. Returns how many moved.
    pub(super) fn move_substep(&mut self, model: &'static str, calls: usize) -> usize {
        let mut movable: Vec<u32> = Vec::new();
        for s in &self.steps {
            let r = s.note.request;
            if !movable.contains(&r) && self.sends_stay_small(r) {
                movable.push(r);
            }
        }
        let n = calls.min(movable.len().saturating_sub(1));
        let moved = &movable[..n];
        for s in &mut self.steps {
            if moved.contains(&s.note.request) {
                s.model = model;
            }
        }
        n
    }

    /// Whether every send of `request` is a successful tiny call on a
    /// small model, meant for a small one.
    fn sends_stay_small(&self, request: u32) -> bool {
        self.steps
            .iter()
            .filter(|s| s.note.request == request)
            .all(|s| {
                s.outcome == Outcome::Ok
                    && !is_premium(s.model)
                    && !is_premium(s.note.norm)
                    && is_tiny(s.input, s.output)
            })
    }

    /// Marks the call at `at` as failed with `outcome`.
    pub(super) fn fail(&mut self, at: usize, outcome: Outcome) {
        if let Some(s) = self.steps.get_mut(at) {
            s.outcome = outcome;
            s.output = 0;
        }
    }
}

/// A new request for [`Draft::call`].
#[derive(Debug, Clone, Copy)]
pub(super) struct NewCall {
    pub(super) model: &'static str,
    pub(super) thread: u8,
    pub(super) input: u64,
    pub(super) output: u64,
    pub(super) prefix: u64,
    pub(super) norm: &'static str,
    pub(super) gap_ms: i64,
}

/// What the rows do not show about one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionNotes {
    /// What the session was made to be.
    pub situation: Situation,
    /// One note per call, in the order of the session's request rows.
    pub calls: Vec<CallNote>,
}

/// The notes of every session of a generated dataset, by session id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Notes {
    /// Session id -> its notes.
    pub sessions: std::collections::BTreeMap<String, SessionNotes>,
}

impl Notes {
    /// The notes of one session.
    pub fn of(&self, session_id: &str) -> Option<&SessionNotes> {
        self.sessions.get(session_id)
    }
}
