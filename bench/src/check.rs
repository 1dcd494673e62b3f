//! The generator check and the injector's cost by layer, at the webhook
//! level (docs/BENCHMARKS.md, "the generator check").
//!
//! The load generator runs on one core; a server that answers more than it
//! can send measures the generator, not the server. So, in every round, the
//! bare hyper + rustls server is measured first: its requests/s is the
//! generator's capacity G in that round. A contender's requests/s is
//! reported only if it was at most G/2 in every round (the generator could
//! have driven it twice as fast); otherwise it is marked generator-bound,
//! and a requests/s ratio with it is not printed. CPU time per request,
//! measured on the server's process, does not depend on the generator, and
//! every ceiling, layer and goal is also given that way.

use serde::Serialize;

use crate::report::{Row, Spread};

/// The bare server's name in the report.
pub(crate) const BARE: &str = "bare hyper + rustls (generator check)";
/// The no-op server's name in the report.
pub(crate) const NOOP: &str = "no-op TLS server (ceiling)";
/// The floor's name in the report.
pub(crate) const FLOOR: &str = "floor: precomputed patch";
/// The injector's name in the report.
pub(crate) const INJECTOR: &str = "portcullis-injector";
/// The controller-runtime peer's name in the report.
pub(crate) const PEER: &str = "controller-runtime injector (Go)";

/// A contender's requests/s is reported when at most this share of G.
pub(crate) const MAX_SHARE: f64 = 0.5;

/// What the check found.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GeneratorCheck {
    /// G, round by round: the bare server's requests/s.
    pub capacity: Vec<f64>,
    /// Every other contender's verdict.
    pub contenders: Vec<Verdict>,
}

/// One contender against the generator.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Verdict {
    /// The contender.
    pub name: &'static str,
    /// Its requests/s ÷ G, the largest over the rounds.
    pub share: f64,
    /// Whether that is above [`MAX_SHARE`]: its requests/s is not reported.
    pub generator_bound: bool,
}

impl GeneratorCheck {
    /// The check, from the webhook rows; `None` if the bare server was not
    /// measured in every round or answered nothing in one.
    pub(crate) fn of(rows: &[Row]) -> Option<Self> {
        let bare = rows.iter().find(|r| r.name == BARE)?;
        let capacity: Vec<f64> = bare.rounds.iter().map(|s| s.rate).collect();
        let rounds = rows.iter().map(|r| r.rounds.len()).max().unwrap_or(0);
        if capacity.len() != rounds || capacity.iter().any(|&g| g <= 0.0) {
            return None;
        }
        let contenders = rows
            .iter()
            .filter(|r| r.name != BARE)
            .map(|row| {
                let share = row.rounds.iter().zip(&capacity).map(|(s, g)| s.rate / g).fold(0.0, f64::max);
                Verdict { name: row.name, share, generator_bound: share > MAX_SHARE }
            })
            .collect();
        Some(Self { capacity, contenders })
    }

    /// Whether `name`'s requests/s may be reported (`false` for the bare
    /// server itself and for a contender the check did not see).
    pub(crate) fn reported(&self, name: &str) -> bool {
        self.contenders.iter().any(|v| v.name == name && !v.generator_bound)
    }
}

/// Per round, `f` of the named rows' CPU µs per request, then median and
/// range; `None` if a row is missing or a round lacks its CPU time.
pub(crate) fn by_cpu<const N: usize>(rows: &[Row], names: [&str; N], f: impl Fn([f64; N]) -> f64) -> Option<Spread> {
    let mut cpus = Vec::with_capacity(N);
    for name in names {
        cpus.push(rows.iter().find(|r| r.name == name)?.cpu_rounds()?);
    }
    let rounds = cpus.iter().map(Vec::len).min()?;
    Some(Spread::of((0..rounds).map(|r| f(std::array::from_fn(|i| cpus[i][r]))).collect()))
}

/// Prints the three ceilings side by side, the injector's cost by layer and
/// the targets (#34), all by CPU per request, from the same run.
pub(crate) fn print_ceilings_and_layers(rows: &[Row], check: Option<&GeneratorCheck>) {
    println!("\nceilings (one core; \"ceiling by CPU\" = 1,000,000 ÷ server CPU µs per request)\n");
    println!(
        "{:<40} {:>32} {:>22} {:>22} {:>18}",
        "server", "requests/s", "CPU µs/request", "ceiling by CPU", "bare CPU ÷ its, %"
    );
    for name in [BARE, NOOP, FLOOR] {
        let Some(row) = rows.iter().find(|r| r.name == name) else { continue };
        let rate = match check {
            _ if name == BARE => format!("{} = G", row.rate()),
            Some(check) if check.reported(name) => row.rate().to_string(),
            _ => format!("{} generator-bound", row.rate().median.round()),
        };
        let ceiling = by_cpu(rows, [name], |[c]| 1e6 / c.max(f64::MIN_POSITIVE));
        let share = by_cpu(rows, [BARE, name], |[bare, c]| 100.0 * bare / c.max(f64::MIN_POSITIVE));
        println!("{:<40} {:>32} {:>22} {:>22} {:>18}", name, rate, shown(row.cpu()), shown(ceiling), shown(share));
    }
    println!("\nthe injector's CPU per request by layer, µs (per round, then median [range])\n");
    for (what, spread) in [
        ("transport = no-op", by_cpu(rows, [NOOP], |[n]| n)),
        ("handler = floor − no-op", by_cpu(rows, [FLOOR, NOOP], |[f, n]| f - n)),
        ("decision = injector − floor", by_cpu(rows, [INJECTOR, FLOOR], |[i, f]| i - f)),
        ("handler + decision = injector − no-op", by_cpu(rows, [INJECTOR, NOOP], |[i, n]| i - n)),
    ] {
        println!("{what:<60} {}", shown(spread));
    }
    println!("\ntargets (#34), by CPU per request\n");
    let targets = [
        ("transport ≥ 85% of bare: bare CPU ÷ no-op CPU", by_cpu(rows, [BARE, NOOP], |[b, n]| b / n), 0.85, true),
        (
            "injector ≥ 50% of no-op: no-op CPU ÷ injector CPU",
            by_cpu(rows, [NOOP, INJECTOR], |[n, i]| n / i),
            0.5,
            true,
        ),
        ("handler + decision ≤ 10 µs: injector − no-op", by_cpu(rows, [INJECTOR, NOOP], |[i, n]| i - n), 10.0, false),
        (
            "injector ≥ 5x controller-runtime: its CPU ÷ injector's",
            by_cpu(rows, [PEER, INJECTOR], |[p, i]| p / i),
            5.0,
            true,
        ),
    ];
    for (what, spread, goal, at_least) in targets {
        match spread {
            Some(spread) => crate::report::goal_line(what, spread, goal, at_least),
            None => println!("{what:<60} not measured"),
        }
    }
}

fn shown(spread: Option<Spread>) -> String {
    spread.map(|s| s.to_string()).unwrap_or_else(|| "-".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Summary;

    fn row(name: &'static str, rates: &[f64], cpus: &[f64]) -> Row {
        let mut row = Row::new(name);
        row.rounds = rates
            .iter()
            .zip(cpus)
            .map(|(&rate, &cpu)| Summary { requests: 1, rate, server_cpu_us: Some(cpu), ..Summary::default() })
            .collect();
        row
    }

    #[test]
    fn a_contender_above_half_the_generator_in_any_round_is_generator_bound() {
        let rows = [
            row(BARE, &[140_000.0, 100_000.0], &[7.0, 7.0]),
            row(NOOP, &[105_000.0, 104_000.0], &[9.6, 9.6]),
            row(INJECTOR, &[33_000.0, 51_000.0], &[30.0, 30.0]),
            row(PEER, &[4_100.0, 4_200.0], &[240.0, 240.0]),
        ];
        let check = GeneratorCheck::of(&rows).expect("checked");
        assert_eq!(check.capacity, [140_000.0, 100_000.0]);
        assert!(!check.reported(NOOP));
        assert!(!check.reported(INJECTOR), "51k is more than half of the second round's 100k");
        assert!(check.reported(PEER));
        assert!(!check.reported(BARE));
    }

    #[test]
    fn no_check_without_the_bare_server_in_every_round() {
        assert!(GeneratorCheck::of(&[row(NOOP, &[1.0], &[1.0])]).is_none());
        assert!(GeneratorCheck::of(&[row(BARE, &[1.0], &[1.0]), row(NOOP, &[1.0, 1.0], &[1.0, 1.0])]).is_none());
        assert!(GeneratorCheck::of(&[row(BARE, &[0.0], &[1.0])]).is_none());
    }

    #[test]
    fn layers_are_differences_of_cpu_per_request_round_by_round() {
        let rows = [row(NOOP, &[1.0, 1.0], &[10.0, 12.0]), row(INJECTOR, &[1.0, 1.0], &[30.0, 31.0])];
        let spread = by_cpu(&rows, [INJECTOR, NOOP], |[i, n]| i - n).expect("both measured");
        assert_eq!((spread.median, spread.min, spread.max), (19.5, 19.0, 20.0));
        assert!(by_cpu(&rows, [FLOOR], |[f]| f).is_none());
    }
}
