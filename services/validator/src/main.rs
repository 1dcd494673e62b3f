#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser as _;
use portcullis_server::exit::{self, Answer};
use portcullis_validator::cli::{Cli, Command};

/// mimalloc: under load, glibc's malloc and free were a quarter of the
/// injector's time (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    exit::code(run(Cli::parse()))
}

#[tokio::main]
async fn run(cli: Cli) -> anyhow::Result<Answer> {
    match cli.command {
        Command::Ready(args) => Ok(portcullis_server::admin::probe(args.admin_listen).await.into()),
        Command::Check(args) => Ok(portcullis_validator::offline::run(&args)?.into()),
        Command::Audit(args) => {
            let telemetry = portcullis_telemetry::init("portcullis-validator", &cli.log)?;
            let result = portcullis_validator::audit::run(*args).await;
            telemetry.shutdown();
            result.map(|()| Answer::Yes)
        }
        Command::Serve(args) => {
            let telemetry = portcullis_telemetry::init("portcullis-validator", &cli.log)?;
            let result = portcullis_validator::serve::run(*args).await;
            telemetry.shutdown();
            result.map(|()| Answer::Yes)
        }
    }
}
