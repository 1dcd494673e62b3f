//! `portcullis-validator`: `serve` (the validating webhook), `check` (the same
//! decision offline), `audit` (violations among existing objects), `crds`
//! (the CustomResourceDefinitions) and `ready` (the container healthcheck). Parses the flags and hands over to
//! the library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser as _;
use portcullis_process::exit::{self, Answer};
use portcullis_telemetry::traced;
use portcullis_validator::cli::{Cli, Command};

/// mimalloc: under load, glibc's malloc and free were a quarter of the
/// injector's time (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SERVICE: &str = "portcullis-validator";

fn main() -> ExitCode {
    portcullis_process::memory::keep_pages_small();
    exit::code(run(Cli::parse()))
}

#[tokio::main]
async fn run(cli: Cli) -> anyhow::Result<Answer> {
    match cli.command {
        Command::Ready(args) => Ok(portcullis_server::admin::probe(args.admin_listen).await.into()),
        Command::Check(args) => Ok(portcullis_validator::offline::run(&args)?.into()),
        Command::Vap(args) => Ok(portcullis_validator::offline::vap(&args)?.into()),
        Command::Crds => {
            print!("{}", portcullis_validator::resources::crds_yaml()?);
            Ok(Answer::from(true))
        }
        Command::Audit(args) => {
            traced(SERVICE, &cli.log, portcullis_validator::audit::run(*args)).await.map(Answer::from)
        }
        Command::Serve(args) => {
            traced(SERVICE, &cli.log, portcullis_validator::serve::run(*args)).await.map(Answer::from)
        }
    }
}
