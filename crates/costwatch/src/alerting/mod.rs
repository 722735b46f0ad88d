//! Alerting over the state database: evaluating incidents into stored
//! notifications ([`evaluate()`]) and delivering the outbox ([`deliver_due`]);
//! what silences held back ([`silences`]), and the dry run of the next
//! evaluation ([`preview`]).
//!
//! `incidents` (the pure decisions) and `notify` (the alert model, its
//! rendering and the channels) know nothing of the store; this module is
//! where they meet it, so no two modules depend on each other.

pub mod deliver;
pub mod evaluate;
pub mod preview;
pub mod silences;

pub use deliver::{DELIVERY_INTERVAL, DeliveryReport, deliver_due, valid_for};
pub use evaluate::{Plan, evaluate, plan};
