//! `portcullis-bench run`: both levels, interleaved rounds, the report.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use portcullis_e2e::Process;

use crate::load::Summary;
use crate::report::{Level, Report, Row, Settings};
use crate::{apiserver, check, fixtures, podsecurity, pss};

/// `portcullis-bench run`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// A few seconds in all: every path answers and the report is written;
    /// the figures mean nothing (what CI runs so that the benchmark never
    /// rots).
    #[arg(long)]
    pub smoke: bool,
    /// Rounds; each runs every contender once, in turn.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Seconds of load per contender and round at the webhook level.
    #[arg(long, default_value_t = 5.0)]
    pub webhook_seconds: f64,
    /// Keep-alive connections at the webhook level.
    #[arg(long, default_value_t = 16)]
    pub webhook_concurrency: usize,
    /// Seconds of pod creates per setup, mode and round through the API server.
    #[arg(long, default_value_t = 8.0)]
    pub api_seconds: f64,
    /// Concurrent pod creates through the API server (one kube-rs client;
    /// its pool keeps a keep-alive connection for each).
    #[arg(long, default_value_t = 8)]
    pub api_concurrency: usize,
    /// Containers in the benchmark pod.
    #[arg(long, default_value_t = 2)]
    pub containers: usize,
    /// Only the webhook level (no control plane).
    #[arg(long)]
    pub webhook_only: bool,
    /// Only the Pod Security Standards through the API server (`podsecurity.rs`).
    #[arg(long, conflicts_with = "webhook_only")]
    pub pss_only: bool,
    /// Concurrent clients creating pods at the pod-security scale (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "100,200,500")]
    pub pss_clients: Vec<usize>,
    /// Seconds of pod creates per pod-security setup, clients and round.
    #[arg(long, default_value_t = 5.0)]
    pub pss_seconds: f64,
    /// The directory of the Portcullis binaries (`cargo build --release`).
    #[arg(long)]
    pub bin_dir: PathBuf,
    /// The controller-runtime peer (`bench/peers/injector-go`, built by `scripts/bench`).
    #[arg(long)]
    pub peer: PathBuf,
    /// Where to write `bench.json` and `bench.svg`.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
}

impl Args {
    fn effective(mut self) -> Self {
        if self.smoke {
            (self.rounds, self.webhook_seconds, self.api_seconds, self.pss_seconds) = (1, 1.0, 1.0, 1.0);
            (self.webhook_concurrency, self.api_concurrency, self.pss_clients) = (2, 2, vec![2]);
        }
        self
    }
}

/// Certificates and request files shared by every contender.
pub(crate) struct Files {
    dir: tempfile::TempDir,
    /// The CA that signed every contender's certificate, PEM.
    pub ca: String,
}

impl Files {
    fn new(containers: usize) -> anyhow::Result<Self> {
        let pki = portcullis_e2e::webhook::Pki::new();
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("tls.crt"), &pki.cert)?;
        std::fs::write(dir.path().join("tls.key"), &pki.key)?;
        std::fs::write(dir.path().join("ca.crt"), &pki.ca)?;
        std::fs::write(dir.path().join("review.json"), fixtures::review(&fixtures::pod(containers)))?;
        std::fs::write(dir.path().join("policy.json"), serde_json::to_vec(&fixtures::validator_policy())?)?;
        std::fs::write(dir.path().join("cel.json"), serde_json::to_vec(&fixtures::injector_cel_config())?)?;
        std::fs::write(dir.path().join("pushed.json"), serde_json::to_vec(&fixtures::validator_policy_for("pushed"))?)?;
        for (set, case) in [("pss", None), ("pss-pushed", Some("pss-pushed"))] {
            std::fs::create_dir(dir.path().join(set))?;
            for policy in pss::validator_policies(case) {
                let file = format!("{}.json", policy["metadata"]["name"].as_str().unwrap_or_default());
                std::fs::write(dir.path().join(set).join(file), serde_json::to_vec(&policy)?)?;
            }
        }
        Ok(Self { dir, ca: pki.ca })
    }

    /// A file of the set.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A server under test, as its own process.
pub(crate) struct Contender {
    /// Its name in the report.
    pub name: &'static str,
    /// Where it answers AdmissionReviews.
    pub url: String,
    process: Process,
}

impl Contender {
    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// The CPU time its process (every thread) has used so far, from
    /// `/proc/PID/stat` (`utime` + `stime`, in the kernel's fixed 100 ticks
    /// a second); `None` where that cannot be read. The launcher (`taskset`,
    /// `env`) execs the server, so the child's PID is the server's.
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // The command name, in parentheses, may hold spaces: count fields after it.
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
        let (utime, stime): (u64, u64) = (fields.nth(11)?.parse().ok()?, fields.next()?.parse().ok()?);
        Some(Duration::from_millis((utime + stime) * 10))
    }
}

/// Which server to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// portcullis-injector with the benchmark configuration.
    Injector,
    /// portcullis-injector with one CEL mutation and nothing else.
    InjectorCel,
    /// portcullis-validator with the benchmark pod policies.
    Validator,
    /// portcullis-validator with the Pod Security Standards set (`pss.rs`).
    ValidatorPss,
    /// The controller-runtime injector.
    Peer,
    /// The precomputed answer.
    Floor,
    /// The fixed allow.
    Noop,
    /// The fixed allow from hyper and rustls alone: the generator check.
    Bare,
}

impl Server {
    /// Its name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Injector => check::INJECTOR,
            Self::InjectorCel => "portcullis-injector (one CEL mutation)",
            Self::Validator => "portcullis-validator",
            Self::ValidatorPss => "portcullis-validator (the Pod Security Standards)",
            Self::Peer => check::PEER,
            Self::Floor => check::FLOOR,
            Self::Noop => check::NOOP,
            Self::Bare => check::BARE,
        }
    }

    /// Starts it on loopback port 0, pinned to `core` when given. With a
    /// `cluster`, the Portcullis services use its API server (the validator
    /// reads namespaces) and send spans to its Jaeger; the other servers
    /// trace nothing.
    pub(crate) fn start(
        self,
        args: &Args,
        files: &Files,
        core: Option<usize>,
        cluster: Option<&portcullis_e2e::Cluster>,
    ) -> anyhow::Result<Contender> {
        let mut command = launcher(core);
        let tls = |c: &mut Command| {
            c.arg("--tls-cert-file").arg(files.path("tls.crt")).arg("--tls-key-file").arg(files.path("tls.key"));
        };
        let (keys, path): (&[&str], &str) = match self {
            Self::Injector | Self::InjectorCel | Self::Validator | Self::ValidatorPss => {
                let (binary, flag, config, path) = match self {
                    Self::Injector => ("portcullis-injector", "--config", fixtures::injector_config(), "/mutate"),
                    Self::InjectorCel => ("portcullis-injector", "--config", files.path("cel.json"), "/mutate"),
                    Self::ValidatorPss => ("portcullis-validator", "--policy", files.path("pss"), "/validate"),
                    _ => ("portcullis-validator", "--policy", files.path("policy.json"), "/validate"),
                };
                command.arg(args.bin_dir.join(binary)).args(["serve", flag]).arg(config);
                command.args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]);
                tls(&mut command);
                command.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT").env("OTEL_SERVICE_NAME", binary);
                if let Some(cluster) = cluster {
                    command.env("KUBECONFIG", cluster.var("KUBECONFIG"));
                    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", cluster.var("PORTCULLIS_JAEGER_OTLP"));
                }
                (&["webhook", "admin"], path)
            }
            Self::Peer => {
                command.arg(&args.peer).args(["--listen", "127.0.0.1:0"]);
                tls(&mut command);
                (&["webhook"], "/mutate")
            }
            Self::Floor | Self::Noop | Self::Bare => {
                let reference = match self {
                    Self::Floor => "floor",
                    Self::Noop => "noop",
                    _ => "bare",
                };
                command.arg(std::env::current_exe()?).args(["serve", reference]);
                command.args(["--containers", &args.containers.to_string()]);
                tls(&mut command);
                (&["webhook"], "/mutate")
            }
        };
        let (process, addrs) = Process::spawn_reporting(command, keys, false);
        let addr: SocketAddr = addrs[0];
        Ok(Contender { name: self.name(), url: format!("https://{addr}{path}"), process })
    }
}

/// Runs the benchmark and writes the report.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let args = args.effective();
    let files = Files::new(args.containers)?;
    let mut report = Report::new(Settings {
        smoke: args.smoke,
        rounds: args.rounds,
        webhook_seconds: args.webhook_seconds,
        webhook_concurrency: args.webhook_concurrency,
        api_seconds: args.api_seconds,
        api_concurrency: args.api_concurrency,
        containers: args.containers,
        pss_only: args.pss_only,
        pss_clients: args.pss_clients.clone(),
        pss_seconds: args.pss_seconds,
    });
    if !args.pss_only {
        let webhook = webhook_level(&args, &files).await?;
        report.add(Level::Webhook, webhook);
        report.print_webhook();
        report.print_generator_check();
    }
    if !args.webhook_only && !args.pss_only {
        for (level, rows) in apiserver::run(&args, &files).await? {
            report.add(level, rows);
        }
        report.print_apiserver();
    }
    if !args.webhook_only {
        let pod_security = podsecurity::run(&args, &files).await?;
        pod_security.print();
        report.pod_security = Some(pod_security);
    }
    if !args.pss_only {
        report.print_goals();
    }
    std::fs::create_dir_all(&args.out)?;
    let json = args.out.join("bench.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(args.out.join("bench.svg"), report.svg())?;
    progress(&format!("report: {} and bench.svg", json.display()));
    if args.smoke {
        report.check_smoke()?;
    }
    Ok(())
}

/// The injector and its references under HTTPS load, one at a time: the
/// server on core 0, the load on core 1 (when there are two cores). In
/// every round the bare server comes first: the generator check.
async fn webhook_level(args: &Args, files: &Files) -> anyhow::Result<Vec<Row>> {
    let pinned = std::thread::available_parallelism().map(|n| n.get() >= 2).unwrap_or(false)
        && Command::new("taskset").arg("--version").output().is_ok_and(|o| o.status.success());
    let (server_core, load_core) = if pinned { (Some(0), Some(1)) } else { (None, None) };
    if !pinned {
        progress("webhook level: fewer than two cores or no taskset: server and load share the machine");
    }
    let servers = [Server::Bare, Server::Injector, Server::Peer, Server::Floor, Server::Noop];
    let contenders =
        servers.iter().map(|s| s.start(args, files, server_core, None)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut rows: Vec<Row> = contenders.iter().map(|c| Row::new(c.name)).collect();
    for (contender, row) in contenders.iter().zip(&mut rows) {
        row.response_bytes = Some(answer(files, &contender.url).await?.len());
    }
    for round in 1..=args.rounds {
        for (contender, row) in contenders.iter().zip(&mut rows) {
            progress(&format!("webhook level, round {round}/{}: {}", args.rounds, contender.name));
            let before = contender.cpu_time();
            let mut summary = load_process(args, files, &contender.url, load_core)
                .with_context(|| format!("load against {}", contender.name))?;
            if let (Some(before), Some(after)) = (before, contender.cpu_time()) {
                summary.server_cpu_us =
                    Some(after.saturating_sub(before).as_secs_f64() * 1e6 / summary.requests.max(1) as f64);
            }
            row.rounds.push(summary);
        }
    }
    Ok(rows)
}

/// One answer of the server at `url` to the benchmark review, as sent.
async fn answer(files: &Files, url: &str) -> anyhow::Result<Vec<u8>> {
    let client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(files.ca.as_bytes())?)
        .build()?;
    let body = std::fs::read(files.path("review.json"))?;
    let response = client.post(url).header("content-type", "application/json").body(body).send().await?;
    anyhow::ensure!(response.status().is_success(), "{url} answered {}", response.status());
    Ok(response.bytes().await?.to_vec())
}

/// A command that runs the program given as its first argument: pinned to
/// `core` when given (`taskset -c`), else as it is (`env`).
fn launcher(core: Option<usize>) -> Command {
    match core {
        Some(core) => {
            let mut command = Command::new("taskset");
            command.args(["-c", &core.to_string()]);
            command
        }
        None => Command::new("env"),
    }
}

/// Runs `portcullis-bench load` against `url` as a process of its own.
fn load_process(args: &Args, files: &Files, url: &str, core: Option<usize>) -> anyhow::Result<Summary> {
    let mut command = launcher(core);
    command
        .arg(std::env::current_exe()?)
        .args(["load", "--url", url])
        .arg("--ca")
        .arg(files.path("ca.crt"))
        .arg("--body")
        .arg(files.path("review.json"));
    command.args(["--seconds", &args.webhook_seconds.to_string()]);
    command.args(["--concurrency", &args.webhook_concurrency.to_string()]);
    if core.is_some() {
        command.arg("--stay-awake");
    }
    let out = command.output()?;
    anyhow::ensure!(out.status.success(), "load failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// One line of progress on stderr.
pub(crate) fn progress(what: &str) {
    eprintln!("[bench {}] {what}", clock());
}

fn clock() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    format!("{:02}:{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60, secs % 60)
}
