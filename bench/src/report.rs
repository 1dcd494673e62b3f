//! The report: tables on stdout, `bench.json` for machines, `bench.svg`
//! for docs/BENCHMARKS.md. Every figure is the median over the rounds with
//! the range beside it; every comparison is a ratio of figures measured in
//! the same run.

use std::fmt::Write as _;

use serde::Serialize;

use crate::check::{self, GeneratorCheck};
use crate::load::Summary;
use crate::podsecurity::PodSecurityReport;

/// Where a set of rows was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Level {
    /// HTTPS load on the webhook alone.
    Webhook,
    /// Pod creates with `dryRun=All` through the API server.
    DryRun,
    /// Pod creates stored in etcd through the API server.
    Create,
}

impl Level {
    /// A heading for it.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Self::Webhook => "webhook level (server on one core, load on the other)",
            Self::DryRun => "through the API server, dry-run pod creates",
            Self::Create => "through the API server, pod creates",
        }
    }
}

/// One contender's measurements, a summary per round.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    /// The contender.
    pub name: &'static str,
    /// Each round's summary, in order.
    pub rounds: Vec<Summary>,
    /// The size of its answer to the benchmark review (webhook level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<usize>,
}

/// Median and range.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The median and range of `values`.
    pub(crate) fn of(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Self {
            median,
            min: values.first().copied().unwrap_or_default(),
            max: values.last().copied().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = if self.median.abs() < 10.0 { 2 } else { 0 };
        write!(f, "{:.digits$} [{:.digits$}, {:.digits$}]", self.median, self.min, self.max)
    }
}

impl Row {
    /// An empty row for `name`.
    pub(crate) fn new(name: &'static str) -> Self {
        Self { name, rounds: Vec::new(), response_bytes: None }
    }

    fn spread(&self, f: impl Fn(&Summary) -> f64) -> Spread {
        Spread::of(self.rounds.iter().map(f).collect())
    }

    /// Requests/s, median and range.
    pub(crate) fn rate(&self) -> Spread {
        self.spread(|s| s.rate)
    }

    /// The server's CPU time per request, when every round measured it.
    pub(crate) fn cpu(&self) -> Option<Spread> {
        self.cpu_rounds().map(Spread::of)
    }

    /// [`Row::cpu`] round by round.
    pub(crate) fn cpu_rounds(&self) -> Option<Vec<f64>> {
        let rounds: Option<Vec<f64>> = self.rounds.iter().map(|s| s.server_cpu_us).collect();
        rounds.filter(|r| !r.is_empty())
    }

    fn failures(&self) -> u64 {
        self.rounds.iter().map(|s| s.failures).sum()
    }

    /// Per round, `f(self, other)`, then median and range: ratios of
    /// figures from the same round.
    fn paired(&self, other: &Row, f: impl Fn(&Summary, &Summary) -> f64) -> Spread {
        Spread::of(self.rounds.iter().zip(&other.rounds).map(|(a, b)| f(a, b)).collect())
    }

    /// Per round, the time each create costs more than in `baseline`, µs
    /// (1/rate − 1/baseline rate).
    fn added_costs(&self, baseline: &Row) -> Vec<f64> {
        self.rounds.iter().zip(&baseline.rounds).map(|(s, b)| s.added_cost_us(b)).collect()
    }

    /// [`Row::added_costs`] as median and range.
    fn added_cost(&self, baseline: &Row) -> Spread {
        Spread::of(self.added_costs(baseline))
    }
}

/// What was measured, and how.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    machine: Machine,
    settings: Settings,
    webhook: Vec<Row>,
    /// The generator check of the webhook level (`None`: the bare server
    /// was not measured in every round, and no requests/s is reported).
    generator_check: Option<GeneratorCheck>,
    dry_run: Vec<Row>,
    create: Vec<Row>,
    /// The Pod Security Standards through the API server, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<PodSecurityReport>,
}

#[derive(Debug, Serialize)]
struct Machine {
    cpus: usize,
    cpu_model: String,
}

/// How the run was made (`portcullis-bench run`'s settings), as the
/// report records them.
#[derive(Debug, Serialize)]
pub(crate) struct Settings {
    pub smoke: bool,
    pub rounds: usize,
    pub webhook_seconds: f64,
    pub webhook_concurrency: usize,
    pub api_seconds: f64,
    pub api_concurrency: usize,
    pub containers: usize,
    /// Only the Pod Security Standards were measured (`--pss-only`).
    pub pss_only: bool,
    /// Clients at the pod-security scale.
    pub pss_clients: Vec<usize>,
    /// Seconds per pod-security setup, clients and round.
    pub pss_seconds: f64,
}

impl Report {
    /// An empty report of a run made with `settings`.
    pub(crate) fn new(settings: Settings) -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines().find_map(|l| Some(l.strip_prefix("model name")?.split(':').nth(1)?.trim().to_owned()))
            })
            .unwrap_or_default();
        Self {
            machine: Machine { cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1), cpu_model },
            settings,
            webhook: Vec::new(),
            generator_check: None,
            dry_run: Vec::new(),
            create: Vec::new(),
            pod_security: None,
        }
    }

    /// Adds the rows measured at `level`.
    pub(crate) fn add(&mut self, level: Level, rows: Vec<Row>) {
        match level {
            Level::Webhook => {
                self.generator_check = GeneratorCheck::of(&rows);
                self.webhook = rows;
            }
            Level::DryRun => self.dry_run = rows,
            Level::Create => self.create = rows,
        }
    }

    fn row<'a>(rows: &'a [Row], name: &str) -> Option<&'a Row> {
        rows.iter().find(|r| r.name == name)
    }

    fn chart_name(&self, row: &Row) -> String {
        match &self.generator_check {
            _ if row.name == check::BARE => format!("{} G", row.name),
            Some(c) if c.reported(row.name) => row.name.to_owned(),
            _ => format!("{} *", row.name),
        }
    }

    /// The webhook-level table.
    pub(crate) fn print_webhook(&self) {
        println!("\n{} ({} rounds)\n", Level::Webhook.title(), self.settings.rounds);
        println!(
            "{:<36} {:>26} {:>22} {:>22} {:>22} {:>9} {:>15}",
            "server", "requests/s", "p50 µs", "p99 µs", "server CPU µs/request", "failures", "answer bytes"
        );
        for row in &self.webhook {
            let (p50, p99) = (row.spread(|s| s.p50_us), row.spread(|s| s.p99_us));
            println!(
                "{:<36} {:>26} {:>22} {:>22} {:>22} {:>9} {:>15}",
                row.name,
                self.rate_shown(row),
                p50.to_string(),
                p99.to_string(),
                row.cpu().map(|c| c.to_string()).unwrap_or_else(|| "-".to_owned()),
                row.failures(),
                row.response_bytes.unwrap_or_default()
            );
        }
    }

    /// A webhook row's requests/s as the generator check allows it: the
    /// figure, G for the bare server, or the median marked generator-bound.
    fn rate_shown(&self, row: &Row) -> String {
        match &self.generator_check {
            _ if row.name == check::BARE => format!("{} = G", row.rate()),
            Some(c) if c.reported(row.name) => row.rate().to_string(),
            _ => format!("{:.0} generator-bound", row.rate().median),
        }
    }

    /// Says, loudly, what the generator check found; prints the ceilings,
    /// the injector's layers and the targets by CPU per request.
    pub(crate) fn print_generator_check(&self) {
        match &self.generator_check {
            None => loud("the bare server was not measured in every round: no requests/s figure or ratio is reported"),
            Some(c) => {
                let g = Spread::of(c.capacity.clone());
                println!(
                    "
generator check: the load generator drove the bare server at G = {g} requests/s"
                );
                for v in &c.contenders {
                    let verdict =
                        if v.generator_bound { "generator-bound: requests/s not reported" } else { "reported" };
                    println!("  {:<40} at most {:>4.0}% of G: {verdict}", v.name, v.share * 100.0);
                }
                if !c.reported(check::INJECTOR) {
                    loud(&format!(
                        "the load generator cannot drive the bare server twice as fast as {} (at most {:.0}% of G): \
                         requests/s ratios with it are not printed; compare by CPU per request",
                        check::INJECTOR,
                        c.contenders.iter().find(|v| v.name == check::INJECTOR).map_or(f64::NAN, |v| v.share * 100.0)
                    ));
                }
            }
        }
        check::print_ceilings_and_layers(&self.webhook, self.generator_check.as_ref());
    }

    /// The API-server tables, with the added cost per create.
    pub(crate) fn print_apiserver(&self) {
        for (level, rows) in [(Level::DryRun, &self.dry_run), (Level::Create, &self.create)] {
            println!("\n{} ({} rounds)\n", level.title(), self.settings.rounds);
            println!(
                "{:<52} {:>20} {:>20} {:>22} {:>24} {:>9}",
                "setup", "creates/s", "p50 µs", "p99 µs", "added µs per create", "failures"
            );
            let baseline = rows.first();
            for row in rows {
                let added = baseline.map(|b| row.added_cost(b).to_string()).unwrap_or_default();
                let (p50, p99) = (row.spread(|s| s.p50_us), row.spread(|s| s.p99_us));
                println!(
                    "{:<52} {:>20} {:>20} {:>22} {:>24} {:>9}",
                    row.name,
                    row.rate().to_string(),
                    p50.to_string(),
                    p99.to_string(),
                    added,
                    row.failures()
                );
            }
        }
    }

    /// The benchmark's goals, each as the measured ratio against its target.
    pub(crate) fn print_goals(&self) {
        println!("\ngoals (median of the per-round ratios [range])\n");
        // By requests/s only where the generator check allows both figures;
        // the same goals by CPU per request are in the targets above.
        let reported = |name| self.generator_check.as_ref().is_some_and(|c| c.reported(name));
        if let (Some(a), Some(b)) = (Self::row(&self.webhook, check::INJECTOR), Self::row(&self.webhook, check::PEER)) {
            if reported(check::INJECTOR) && reported(check::PEER) {
                let ratio = a.paired(b, |x, y| x.rate / y.rate.max(f64::MIN_POSITIVE));
                goal_line("injector requests/s ÷ controller-runtime's", ratio, 5.0, true);
            } else {
                println!(
                    "{:<60} not printed: generator-bound (see the generator check)",
                    "injector requests/s ÷ controller-runtime's"
                );
            }
        }
        for (level, rows) in [(Level::DryRun, &self.dry_run), (Level::Create, &self.create)] {
            let Some(baseline) = rows.first() else { continue };
            let cost = |name: &str| Self::row(rows, name).map(|r| r.added_costs(baseline));
            let ratio = |a: Option<Vec<f64>>, b: Option<Vec<f64>>| {
                Some(Spread::of(a?.iter().zip(b?.iter()).map(|(x, y)| x / y).collect()))
            };
            let short = if level == Level::DryRun { "dry-run" } else { "create" };
            if let Some(r) = ratio(cost("portcullis-injector"), cost("floor: precomputed patch")) {
                goal_line(&format!("{short}: injector's added cost ÷ the floor's"), r, 1.10, false);
            }
            if let Some(r) = ratio(cost("portcullis-validator"), cost("ValidatingAdmissionPolicy (in-process)")) {
                goal_line(&format!("{short}: validator's added cost ÷ in-process VAP's"), r, 1.0, false);
            }
        }
    }

    /// Fails unless every path answered and nothing failed, and unless the
    /// generator check ran: the bare server measured in every round with its
    /// CPU time, and a verdict for every other webhook-level contender. How
    /// fast anything was is not checked (debug binaries are slow).
    pub(crate) fn check_smoke(&self) -> anyhow::Result<()> {
        if let Some(pod_security) = &self.pod_security {
            pod_security.check_smoke()?;
        }
        if self.settings.pss_only {
            return Ok(());
        }
        let bare = Self::row(&self.webhook, check::BARE);
        anyhow::ensure!(
            bare.is_some_and(|b| b.rounds.len() == self.settings.rounds && b.cpu_rounds().is_some()),
            "GENERATOR CHECK MISSING: the bare server was not measured, with its CPU time, in every round"
        );
        let Some(generator) = &self.generator_check else {
            anyhow::bail!("GENERATOR CHECK MISSING: no capacity G was derived from the bare server");
        };
        for row in self.webhook.iter().filter(|r| r.name != check::BARE) {
            anyhow::ensure!(
                generator.contenders.iter().any(|v| v.name == row.name),
                "GENERATOR CHECK BROKEN: no verdict for {}",
                row.name
            );
        }
        for row in self.webhook.iter().chain(&self.dry_run).chain(&self.create) {
            let answered: u64 = row.rounds.iter().map(|s| s.requests).sum();
            anyhow::ensure!(
                answered > 0 && row.failures() == 0,
                "{}: {answered} answered, {} failed",
                row.name,
                row.failures()
            );
        }
        Ok(())
    }

    /// Bar charts (median with the range as a whisker) of the webhook
    /// level's requests/s and of each API-server level's added cost.
    pub(crate) fn svg(&self) -> String {
        let mut charts = vec![Chart {
            title: "webhook level: requests/s (one core; *: generator-bound, G: the generator's capacity)".to_owned(),
            bars: self.webhook.iter().map(|r| (self.chart_name(r), r.rate())).collect(),
        }];
        let cpu: Vec<_> = self.webhook.iter().filter_map(|r| Some((r.name.to_owned(), r.cpu()?))).collect();
        if !cpu.is_empty() {
            charts.push(Chart { title: "webhook level: server CPU µs per request".to_owned(), bars: cpu });
        }
        for (level, rows) in [(Level::DryRun, &self.dry_run), (Level::Create, &self.create)] {
            let Some(baseline) = rows.first() else { continue };
            charts.push(Chart {
                title: format!("{}: added µs per create", level.title()),
                bars: rows.iter().skip(1).map(|r| (r.name.to_owned(), r.added_cost(baseline))).collect(),
            });
        }
        let height: usize = charts.iter().map(Chart::height).sum::<usize>() + 20;
        let mut svg = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" font-family="sans-serif" font-size="12">"#
        );
        svg.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
        let mut y = 10;
        for chart in &charts {
            chart.draw(&mut svg, y);
            y += chart.height();
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// Prints a goal with its measured ratio and whether it was met in every round.
pub(crate) fn goal_line(what: &str, ratio: Spread, goal: f64, at_least: bool) {
    let met = if at_least { ratio.min >= goal } else { ratio.max <= goal };
    let sign = if at_least { "≥" } else { "≤" };
    let verdict = if met { "met in every round" } else { "not met in every round" };
    println!("{what:<60} {ratio}   goal {sign} {goal}: {verdict}");
}

struct Chart {
    title: String,
    bars: Vec<(String, Spread)>,
}

impl Chart {
    const BAR: usize = 22;
    const LEFT: f64 = 330.0;
    const WIDTH: f64 = 480.0;

    fn height(&self) -> usize {
        30 + self.bars.len() * Self::BAR + 20
    }

    fn draw(&self, svg: &mut String, top: usize) {
        let _ = write!(svg, r#"<text x="10" y="{}" font-weight="bold">{}</text>"#, top + 16, escape(&self.title));
        let scale = self.bars.iter().map(|(_, s)| s.max.max(s.median)).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
        let x = |v: f64| Self::LEFT + v.max(0.0) / scale * Self::WIDTH;
        for (i, (name, spread)) in self.bars.iter().enumerate() {
            let y = (top + 30 + i * Self::BAR) as f64;
            let _ = write!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                Self::LEFT - 8.0,
                y + 14.0,
                escape(name)
            );
            let _ = write!(
                svg,
                r##"<rect x="{}" y="{}" width="{:.1}" height="16" fill="#4a78b5"/>"##,
                Self::LEFT,
                y + 2.0,
                x(spread.median) - Self::LEFT
            );
            let _ = write!(
                svg,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{}" y2="{}" stroke="black"/>"#,
                x(spread.min),
                x(spread.max),
                y + 10.0,
                y + 10.0
            );
            let _ = write!(svg, r#"<text x="{:.1}" y="{}">{:.0}</text>"#, x(spread.max) + 6.0, y + 14.0, spread.median);
        }
    }
}

/// Prints `what` so that nobody misses it, on stdout and stderr.
fn loud(what: &str) {
    let line = "!".repeat(100);
    println!("\n{line}\n!!! {what}\n{line}");
    eprintln!("[bench] !!! {what}");
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(names: &[&'static str]) -> Report {
        let mut report = Report::new(Settings {
            smoke: true,
            rounds: 1,
            webhook_seconds: 1.0,
            webhook_concurrency: 2,
            api_seconds: 1.0,
            api_concurrency: 2,
            containers: 2,
            pss_only: false,
            pss_clients: vec![2],
            pss_seconds: 1.0,
        });
        let rows = names
            .iter()
            .map(|&name| {
                let mut row = Row::new(name);
                row.rounds.push(Summary { requests: 10, rate: 10.0, server_cpu_us: Some(50.0), ..Summary::default() });
                row
            })
            .collect();
        report.add(Level::Webhook, rows);
        report
    }

    #[test]
    fn smoke_fails_loudly_without_the_generator_check() {
        let error = report(&[check::INJECTOR, check::NOOP]).check_smoke().expect_err("no bare server");
        assert!(error.to_string().contains("GENERATOR CHECK MISSING"), "{error}");
    }

    #[test]
    fn smoke_passes_with_the_check_however_slow_the_generator() {
        // Every contender as fast as the generator: all generator-bound, which
        // debug binaries may well be; the smoke run does not fail for it.
        report(&[check::BARE, check::INJECTOR, check::NOOP]).check_smoke().expect("the check ran");
    }
}
