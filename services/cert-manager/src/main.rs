#![forbid(unsafe_code)]

use clap::Parser as _;
use portcullis_cert_manager::cli::{Cli, Command};

/// mimalloc: under load, glibc's malloc and free were a quarter of the
/// injector's time (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ready(args) => {
            if portcullis_server::admin::probe(args.admin_listen).await {
                Ok(())
            } else {
                anyhow::bail!("not ready")
            }
        }
        Command::Request(args) => {
            // A refusal is an answer, not a crash: its message, exit 1.
            if let Err(err) = portcullis_cert_manager::request::run(*args).await {
                eprintln!("{err:#}");
                std::process::exit(1);
            }
            Ok(())
        }
        Command::RotateCa(args) => {
            portcullis_cert_manager::store::request_rotation(&args.ca_dir)?;
            println!("rotation requested; the cert-manager logs each step as \"CA rotation: ...\"");
            Ok(())
        }
        Command::Serve(args) => {
            let telemetry = portcullis_telemetry::init("portcullis-cert-manager", &cli.log)?;
            let result = portcullis_cert_manager::serve::run(*args).await;
            telemetry.shutdown();
            result
        }
    }
}
