//! `portcullis-cert-manager`: `serve` (the issuer and its gRPC API),
//! `request` (one certificate request by hand, as a webhook makes it),
//! `rotate-ca` (standalone CA rotation) and `ready` (the container
//! healthcheck). Parses the flags and hands over to the library.

#![forbid(unsafe_code)]

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;
use portcullis_cert_manager::cli::{Cli, Command};
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
        Command::Request(args) => portcullis_cert_manager::request::run(*args).await,
        Command::RotateCa(args) => {
            portcullis_cert_manager::store::request_rotation(&args.ca_dir)?;
            writeln!(std::io::stdout(), "rotation requested; the cert-manager logs each step as \"CA rotation: ...\"")?;
            Ok(Answer::Yes)
        }
        Command::Serve(args) => traced("portcullis-cert-manager", &cli.log, portcullis_cert_manager::serve::run(*args))
            .await
            .map(Answer::from),
    }
}
