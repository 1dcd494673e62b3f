//! `portcullis-injector`: `serve` (the mutating webhook), `mutate` (the same
//! decision offline, on files or stdin), `crds` (the CustomResourceDefinitions)
//! and `ready` (the container healthcheck). Parses the flags and hands over to the library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser as _;
use portcullis_injector::cli::{Cli, Command};
use portcullis_process::exit::{self, Answer};
use portcullis_telemetry::traced;

/// mimalloc: under load, glibc's malloc and free were a quarter of the
/// injector's time (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    portcullis_process::memory::keep_pages_small();
    exit::code(run(Cli::parse()))
}

#[tokio::main]
async fn run(cli: Cli) -> anyhow::Result<Answer> {
    match cli.command {
        Command::Ready(args) => Ok(portcullis_server::admin::probe(args.admin_listen).await.into()),
        Command::Mutate(args) => portcullis_injector::offline::run(&args).map(Answer::from),
        Command::Crds => {
            print!("{}", portcullis_injector::resources::crds_yaml()?);
            Ok(Answer::from(()))
        }
        Command::Serve(args) => {
            traced("portcullis-injector", &cli.log, portcullis_injector::serve::run(*args)).await.map(Answer::from)
        }
    }
}
