//! The command-line flags that bound CEL at run time, defined once for
//! every service that evaluates it (clap derive, each with its
//! `PORTCULLIS_` variable): `#[clap(flatten)]` them.

use std::time::Duration;

use crate::budget::{DEFAULT_PER_CALL_LIMIT, DEFAULT_POLICY_BUDGET, Limits};

/// How much CEL one request may run.
#[derive(Debug, Clone, clap::Args)]
pub struct CelArgs {
    /// Bound on the wall time of all CEL evaluation for one request; past
    /// it, the policies' failure policy applies.
    #[arg(long, env = "PORTCULLIS_CEL_TIMEOUT", default_value = "250ms", value_parser = humantime::parse_duration)]
    pub cel_timeout: Duration,
    /// Runtime cost one CEL expression may spend on one request (one unit
    /// per expression node evaluated, loop bodies once per pass); past it
    /// the evaluation stops and the policy's failure policy applies. The
    /// default is Kubernetes' PerCallLimit.
    #[arg(long, env = "PORTCULLIS_CEL_PER_CALL_LIMIT", default_value_t = DEFAULT_PER_CALL_LIMIT)]
    pub cel_per_call_limit: u64,
    /// Runtime cost all of one policy's expressions may spend on one
    /// request together. The default is Kubernetes' RuntimeCELCostBudget.
    #[arg(long, env = "PORTCULLIS_CEL_POLICY_BUDGET", default_value_t = DEFAULT_POLICY_BUDGET)]
    pub cel_policy_budget: u64,
}

impl CelArgs {
    /// The runtime limits these flags set.
    pub fn limits(&self) -> Limits {
        Limits { per_call: self.cel_per_call_limit, per_policy: self.cel_policy_budget }
    }
}
