#![forbid(unsafe_code)]

use clap::Parser as _;
use portcullis_injector::cli::{Cli, Command};

/// mimalloc: under load, glibc's malloc and free were a quarter of the
/// injector's time (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ready(args) => {
            let ready = portcullis_server::admin::probe(args.admin_listen).await;
            if ready { Ok(()) } else { anyhow::bail!("not ready") }
        }
        Command::Mutate(args) => portcullis_injector::offline::run(&args),
        Command::Serve(args) => {
            let telemetry = portcullis_telemetry::init("portcullis-injector", &cli.log)?;
            let result = portcullis_injector::serve::run(*args).await;
            telemetry.shutdown();
            result
        }
    }
}
