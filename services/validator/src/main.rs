#![forbid(unsafe_code)]

use clap::Parser as _;
use portcullis_validator::cli::{Cli, Command};

/// mimalloc: under load, glibc's malloc and free were a quarter of the
/// injector's time (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ready(args) => {
            let ready = portcullis_server::admin::probe(args.admin_listen).await;
            Ok(if ready { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE })
        }
        Command::Check(args) => {
            let allowed = portcullis_validator::offline::run(&args)?;
            Ok(if allowed { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE })
        }
        Command::Audit(args) => {
            let telemetry = portcullis_telemetry::init("portcullis-validator", &cli.log)?;
            let result = portcullis_validator::audit::run(*args).await;
            telemetry.shutdown();
            result.map(|()| std::process::ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let telemetry = portcullis_telemetry::init("portcullis-validator", &cli.log)?;
            let result = portcullis_validator::serve::run(*args).await;
            telemetry.shutdown();
            result.map(|()| std::process::ExitCode::SUCCESS)
        }
    }
}
