//! Times comprehensions that grow an accumulator (`map`, `filter`,
//! `transformMap`) over a list of N elements, N given (default 20,000):
//! third_party/cel/src/accumulate.rs makes them linear. The numbers are in
//! docs/BENCHMARKS.md, with the command:
//!
//! ```sh
//! cargo run --release -p portcullis-cel --example accumulate -- 2000 20000
//! ```

use std::time::{Duration, Instant};

use portcullis_admission::manifest::as_review;
use portcullis_cel::budget::Limits;
use portcullis_cel::reads::DataReads;
use portcullis_cel::{Bindings, compile, evaluate};
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let sizes: Vec<u64> = std::env::args().skip(1).map(|n| n.parse()).collect::<Result<_, _>>()?;
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let review = serde_json::to_vec(&as_review(object)?)?;
    let req = portcullis_admission::decode(&review)?;
    let bindings = Bindings::of(&req, None, &DataReads::default());
    let unbounded = Limits { per_call: u64::MAX, per_policy: u64::MAX };
    for n in if sizes.is_empty() { vec![20_000] } else { sizes } {
        for source in [
            format!("lists.range({n}).map(x, x).size() == {n}"),
            format!("lists.range({n}).filter(x, x >= 0).size() == {n}"),
            format!("lists.range({n}).transformMap(i, x, x).size() == {n}"),
        ] {
            let expression = compile(&source, u64::MAX)?;
            let start = Instant::now();
            let deadline = start + Duration::from_secs(600);
            let answer = evaluate(&bindings, None, unbounded, deadline, |scope| scope.execute(&expression));
            println!("{source}: {:?} in {:.1} ms", answer.map(|a| a.ok()), start.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(())
}
