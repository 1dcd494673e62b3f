//! The runtime side of CEL's cost bound: every evaluation counts its work
//! as it goes (one unit per expression node the interpreter evaluates, loop
//! bodies once per pass, as the API server counts) and stops at the first
//! of three limits: the per-expression limit, the policy's budget for all
//! its expressions, and the request's deadline. Once stopped, every further
//! step fails at once, so nothing keeps running after its request.
//!
//! Costly evaluations also take turns: one that has spent [`COSTLY_UNITS`]
//! goes on only while it holds one of a few permits (half the cores), and
//! waits for one, deadline running, otherwise. Cheap evaluations never
//! wait, so however many costly requests arrive, the others keep the rest
//! of the machine and are answered at once.

use std::cell::Cell;
use std::sync::{Condvar, LazyLock, Mutex};
use std::time::Instant;

use cel::ExecutionError;
use prometheus_client::metrics::gauge::Gauge;

/// Kubernetes' `PerCallLimit`: the most one expression may spend.
pub const DEFAULT_PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' `RuntimeCELCostBudget`: the most all of one policy's
/// expressions may spend on one request.
pub const DEFAULT_POLICY_BUDGET: u64 = 10_000_000;

/// How often (in units) the clock is read: a unit takes tens of
/// nanoseconds, so the deadline is noticed within about 0.1 ms.
const CLOCK_EVERY: u64 = 4096;

/// Units after which an evaluation counts as costly and needs a permit to
/// go on: about a millisecond of work.
pub const COSTLY_UNITS: u64 = 20_000;

/// The permits of costly evaluations: half the cores, at least one.
static COSTLY: LazyLock<Permits> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Permits::new((cores / 2).max(1))
});

/// Costly evaluations waiting for a permit, for the metrics.
pub fn costly_waiting() -> Gauge {
    COSTLY.waiting.clone()
}

struct Permits {
    free: Mutex<usize>,
    returned: Condvar,
    waiting: Gauge,
}

impl Permits {
    fn new(permits: usize) -> Self {
        Self { free: Mutex::new(permits), returned: Condvar::new(), waiting: Gauge::default() }
    }

    /// Takes a permit, waiting up to `deadline`; `false` when none came.
    fn take(&self, deadline: Instant) -> bool {
        self.waiting.inc();
        let taken = self.wait_for_one(deadline);
        self.waiting.dec();
        taken
    }

    fn wait_for_one(&self, deadline: Instant) -> bool {
        let Ok(mut free) = self.free.lock() else { return false };
        while *free == 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
            free = match self.returned.wait_timeout(free, left) {
                Ok((free, _)) => free,
                Err(_) => return false,
            };
        }
        *free -= 1;
        true
    }

    fn give_back(&self) {
        if let Ok(mut free) = self.free.lock() {
            *free += 1;
            self.returned.notify_one();
        }
    }
}

/// The runtime limits of a policy's evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Units one expression may spend (`--cel-per-call-limit`).
    pub per_call: u64,
    /// Units all of one policy's expressions may spend together
    /// (`--cel-policy-budget`).
    pub per_policy: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { per_call: DEFAULT_PER_CALL_LIMIT, per_policy: DEFAULT_POLICY_BUDGET }
    }
}

/// Which limit stopped an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// One expression spent `per_call`.
    PerCall,
    /// The policy spent `per_policy`.
    Policy,
    /// The request's deadline (`--cel-timeout`) passed.
    Deadline,
}

impl Limit {
    /// For metric labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerCall => "per_call",
            Self::Policy => "policy",
            Self::Deadline => "deadline",
        }
    }
}

/// Counts one policy's evaluation on one request (one thread).
///
/// The interpreter charges every node it evaluates, so the common charge is
/// one decrement: `fuel` is the number of units that can pass before any
/// limit, permit or clock reading is due, and only when it runs out are the
/// counters brought up to date and checked (the checkpoint).
#[derive(Debug)]
pub(crate) struct Meter {
    limits: Limits,
    deadline: Instant,
    /// Units that pass without a check.
    fuel: Cell<u64>,
    /// `fuel` as the last checkpoint granted it.
    granted: Cell<u64>,
    /// The counters as of the last checkpoint.
    call_left: Cell<u64>,
    policy_left: Cell<u64>,
    until_clock: Cell<u64>,
    stopped: Cell<Option<Limit>>,
    /// Units left before the evaluation needs a costly permit; `None` once
    /// it holds one.
    until_costly: Cell<Option<u64>>,
}

impl Meter {
    /// A fresh count for one policy.
    pub(crate) fn new(limits: Limits, deadline: Instant) -> Self {
        Self {
            limits,
            deadline,
            fuel: Cell::new(0),
            granted: Cell::new(0),
            call_left: Cell::new(limits.per_call),
            policy_left: Cell::new(limits.per_policy),
            until_clock: Cell::new(0),
            stopped: Cell::new(None),
            until_costly: Cell::new(Some(COSTLY_UNITS)),
        }
    }

    /// Starts the count of the next expression.
    pub(crate) fn next_expression(&self) {
        self.settle();
        self.call_left.set(self.limits.per_call);
    }

    /// The limit that stopped the evaluation, if one did.
    pub(crate) fn stopped(&self) -> Option<Limit> {
        self.stopped.get()
    }

    /// Units spent by the policy so far.
    pub(crate) fn spent(&self) -> u64 {
        self.limits.per_policy - self.policy_left.get() + self.used()
    }

    fn used(&self) -> u64 {
        self.granted.get() - self.fuel.get()
    }

    /// Brings the counters up to date with the units spent since the last
    /// checkpoint; the next charge is a checkpoint.
    fn settle(&self) {
        let used = self.used();
        let less = |cell: &Cell<u64>| cell.set(cell.get() - used);
        less(&self.call_left);
        less(&self.policy_left);
        less(&self.until_clock);
        if let Some(n) = self.until_costly.get() {
            self.until_costly.set(Some(n - used));
        }
        self.fuel.set(0);
        self.granted.set(0);
    }

    /// Charges one unit with every check, then grants the units that can
    /// pass before the next check is due.
    fn checkpoint(&self) -> Result<(), ExecutionError> {
        self.settle();
        if let Some(limit) = self.stopped.get() {
            return self.stop(limit);
        }
        let (call, policy) = (self.call_left.get(), self.policy_left.get());
        if call == 0 {
            return self.stop(Limit::PerCall);
        }
        if policy == 0 {
            return self.stop(Limit::Policy);
        }
        self.call_left.set(call - 1);
        self.policy_left.set(policy - 1);
        match self.until_costly.get() {
            Some(0) => {
                if !COSTLY.take(self.deadline) {
                    return self.stop(Limit::Deadline);
                }
                self.until_costly.set(None);
            }
            Some(n) => self.until_costly.set(Some(n - 1)),
            None => {}
        }
        match self.until_clock.get() {
            0 => {
                self.until_clock.set(CLOCK_EVERY);
                if Instant::now() >= self.deadline {
                    return self.stop(Limit::Deadline);
                }
            }
            n => self.until_clock.set(n - 1),
        }
        let grant = [self.call_left.get(), self.policy_left.get(), self.until_clock.get()]
            .into_iter()
            .chain(self.until_costly.get())
            .min()
            .unwrap_or_default();
        self.fuel.set(grant);
        self.granted.set(grant);
        Ok(())
    }

    fn stop(&self, limit: Limit) -> Result<(), ExecutionError> {
        self.stopped.set(Some(limit));
        Err(ExecutionError::function_error("cost", "CEL evaluation stopped: cost limit reached"))
    }
}

impl cel::context::Meter for Meter {
    fn charge(&self) -> Result<(), ExecutionError> {
        match self.fuel.get() {
            0 => self.checkpoint(),
            fuel => {
                self.fuel.set(fuel - 1);
                Ok(())
            }
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        if self.until_costly.get().is_none() {
            COSTLY.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cel::context::Meter as _;

    use super::*;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn an_expression_stops_at_the_per_call_limit_and_stays_stopped() {
        let meter = Meter::new(Limits { per_call: 3, per_policy: 100 }, far());
        assert!((0..3).all(|_| meter.charge().is_ok()));
        assert!(meter.charge().is_err());
        assert_eq!(meter.stopped(), Some(Limit::PerCall));
        meter.next_expression();
        assert!(meter.charge().is_err(), "a stopped evaluation does not start again");
    }

    #[test]
    fn the_policy_budget_is_shared_by_its_expressions() {
        let meter = Meter::new(Limits { per_call: 3, per_policy: 5 }, far());
        assert!((0..3).all(|_| meter.charge().is_ok()));
        meter.next_expression();
        assert!((0..2).all(|_| meter.charge().is_ok()));
        assert_eq!(meter.spent(), 5);
        assert!(meter.charge().is_err());
        assert_eq!(meter.stopped(), Some(Limit::Policy));
    }

    #[test]
    fn a_costly_evaluation_waits_for_a_permit_until_its_deadline() {
        let permits = Permits::new(1);
        assert!(permits.take(far()));
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!permits.take(soon), "no permit is free");
        assert!(Instant::now() >= soon, "it waited for the deadline");
        permits.give_back();
        assert!(permits.take(Instant::now() + Duration::from_millis(20)));
    }

    #[test]
    fn a_passed_deadline_stops_at_the_first_charge() {
        let meter = Meter::new(Limits::default(), Instant::now());
        assert!(meter.charge().is_err());
        assert_eq!(meter.stopped(), Some(Limit::Deadline));
    }
}
