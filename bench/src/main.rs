//! `portcullis-bench`, run by `scripts/bench`: where Portcullis stands end
//! to end, as ratios measured in one run on one machine.
//!
//! Two levels. At the webhook, the injector answers keep-alive HTTPS load on
//! one core while the load runs on the other, side by side with a Go
//! controller-runtime webhook doing the same injection
//! (`bench/peers/injector-go`), a server answering a precomputed patch
//! without reading the request (the floor) and a server answering a fixed
//! allow (the transport ceiling). Through the real kube-apiserver of
//! `scripts/control-plane.sh`, pod creates (server dry-run and real) with
//! no webhook, with the Portcullis validator, with the same policies as
//! in-process ValidatingAdmissionPolicy, with each injector and with the
//! floor; and the Pod Security Standards' restricted profile as Kubernetes'
//! built-in PodSecurity admission, as 17 ValidatingAdmissionPolicies (by
//! hand and pushed down) and by the validator's webhook at 1 and 3
//! replicas, up to 500 concurrent clients (`podsecurity.rs`). Rounds are
//! interleaved and repeated; every figure is the median
//! of the rounds with their range. The servers under test are subcommands
//! of this binary or real service binaries, each its own process.

#![forbid(unsafe_code)]

mod apiserver;
mod bare;
mod check;
mod fixtures;
mod generator;
mod load;
mod podsecurity;
mod pss;
mod report;
mod run;
mod servers;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "portcullis-bench", about = "Benchmarks Portcullis against its peers (scripts/bench)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the whole benchmark and writes the report.
    Run(run::Args),
    /// Serves a reference webhook (the floor, the no-op ceiling or the bare server).
    Serve(servers::Args),
    /// Sends keep-alive HTTPS load to one URL and prints the result as JSON.
    Load(load::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => tokio::runtime::Runtime::new()?.block_on(run::run(args)),
        Command::Serve(args) => tokio::runtime::Runtime::new()?.block_on(servers::serve(args)),
        // One thread: the generator's core does nothing but the load.
        Command::Load(args) => {
            tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(load::main(args))
        }
    }
}

/// The repository root (the fixtures and the scripts are read from it).
fn repo() -> PathBuf {
    portcullis_e2e::repo()
}
