//! CEL that cannot take the service down, checked on the release binary
//! the image ships (static, musl): a policy that passes the cost estimate at load but exceeds the
//! runtime budget on a large object is stopped at the budget, the request
//! is answered by its failure policy, the validator's thread count does not
//! move, and an ordinary request is answered at once while fifty costly
//! ones run.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use portcullis_e2e::webhook::{Kind, Webhook};
use portcullis_e2e::{config_map_review, eventually, jaeger_traces};

use serde_json::{Value, json};

/// Linear in the object (accepted at load), about 80 units per entry: a
/// 2,000-entry ConfigMap needs 160,000, over the per-call limit the test
/// sets (100,000; the default of 1,000,000 needs a 20,000-entry object, the
/// same in ten times the time). The deadline is set far so that the cost
/// limit is what stops it.
const POLICY: &str = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: no-forbidden-values}
spec:
  failurePolicy: Fail
  match:
    resources: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  validations:
    - expression: "object.data.all(k, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(i, object.data[k] != 'forbidden-' + string(i)))"
      message: no value may be forbidden
"#;

fn review(entries: usize) -> Value {
    let data: serde_json::Map<String, Value> = (0..entries).map(|i| (format!("key-{i}"), json!("value"))).collect();
    config_map_review(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop"}, "data": data}),
    )
}

fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("reading or writing a test file");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .expect("the expected format")
        .trim()
        .parse()
        .expect("a number")
}

async fn metric(client: &reqwest::Client, admin: std::net::SocketAddr, series: &str) -> Option<f64> {
    let text = client.get(format!("http://{admin}/metrics")).send().await.ok()?.text().await.ok()?;
    text.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn a_costly_policy_is_stopped_at_its_budget_and_ordinary_requests_are_not_held_up() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let limits = ["--cel-per-call-limit", "100000", "--cel-timeout", "20s"];
    let validator = Webhook::start_release_with(Kind::Validator, dir.path(), &limits).await;
    let client = validator.client();
    let plain = reqwest::Client::new();
    let (pid, url) = (validator.pid(), validator.url());
    let post_with = |client: &reqwest::Client, body: Vec<u8>| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let started = Instant::now();
            let response = client.post(url).header("content-type", "application/json").body(body).send().await;
            let answer: Value = response.unwrap().json().await.unwrap();
            (answer, started.elapsed())
        }
    };
    let post = |body: Vec<u8>| post_with(&client, body);
    // The ordinary requests come on a connection of their own, opened
    // before the flood, as the API server keeps its connections alive:
    // what is measured is evaluation, not TLS handshakes.
    let ordinary = serde_json::to_vec(&review(3)).unwrap();
    let steady = validator.client();
    let (answer, _) = post_with(&steady, ordinary.clone()).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    // One costly request: denied by its failure policy, saying why.
    let costly = review(2_000);
    let uid = costly["request"]["uid"].as_str().unwrap().to_owned();
    let costly = serde_json::to_vec(&costly).unwrap();
    let (answer, took) = post(costly.clone()).await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], false, "{answer}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("[no-forbidden-values] policy could not be evaluated"), "{message}");
    assert!(message.contains("CEL evaluation exceeded its cost budget"), "{message}");
    assert!(message.contains("spent more than 100000 units (--cel-per-call-limit)"), "{message}");
    assert!(took < Duration::from_secs(2), "the costly request took {took:?}");
    let series = r#"portcullis_validator_cel_budget_exceeded_total{policy="no-forbidden-values",limit="per_call"}"#;
    assert_eq!(metric(&plain, validator.admin, series).await, Some(1.0));
    // And in the request's trace, as an event on its admission span.
    let query = format!("service=portcullis-validator&lookback=1h&limit=5&tags=%7B%22uid%22%3A%22{uid}%22%7D");
    let event = eventually("the budget event is in Jaeger", Duration::from_secs(30), || {
        let traces = jaeger_traces(&query);
        let logs: Vec<Value> = traces
            .iter()
            .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
            .flat_map(|span| span["logs"].as_array().cloned().unwrap_or_default())
            .collect();
        logs.into_iter().find(|log| log.to_string().contains("CEL budget exceeded"))
    })
    .await;
    assert!(event.to_string().contains("no-forbidden-values"), "{event}");
    let fixed = threads(pid);

    // Fifty at once, and ordinary requests among them.
    let answered = Arc::new(AtomicUsize::new(0));
    // Each costly request on a connection of its own, opened beforehand as
    // the API server's are.
    let connections: Vec<reqwest::Client> = (0..50).map(|_| validator.client()).collect();
    for connection in &connections {
        let (answer, _) = post_with(connection, ordinary.clone()).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    let flood: Vec<_> = connections
        .iter()
        .map(|connection| {
            let (request, answered) = (post_with(connection, costly.clone()), answered.clone());
            tokio::spawn(async move {
                let answer = request.await;
                answered.fetch_add(1, Ordering::SeqCst);
                answer
            })
        })
        .collect();
    // Evidence that the flood is running and past its first steps: every
    // costly request is answered, or has spent its first 20,000 units and
    // waits for its turn, but for the one evaluating. (Before that, each
    // one's decoding and first units are ordinary work, and share the
    // cores with the ordinary requests as they should.)
    let waiting = "portcullis_validator_cel_costly_waiting ";
    let mut settled = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !settled {
        assert!(Instant::now() < deadline, "the costly requests never queued for their turn");
        let queued = metric(&plain, validator.admin, waiting).await.unwrap_or_default() as usize;
        settled = queued > 0 && queued + answered.load(Ordering::SeqCst) >= 49;
        if !settled {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let mut slowest = Duration::ZERO;
    let mut health = Duration::ZERO;
    for _ in 0..5 {
        let (answer, took) = post_with(&steady, ordinary.clone()).await;
        assert!(answered.load(Ordering::SeqCst) < 50, "the flood was over before the ordinary requests");
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        slowest = slowest.max(took);
        let started = Instant::now();
        assert!(plain.get(format!("http://{}/readyz", validator.admin)).send().await.unwrap().status().is_success());
        health = health.max(started.elapsed());
    }
    let mut denied = 0;
    for answer in flood {
        let (answer, _) = answer.await.unwrap();
        denied += usize::from(answer["response"]["allowed"] == false);
    }
    assert_eq!(denied, 50);
    println!("ordinary requests during the flood: slowest {slowest:?}; /readyz slowest {health:?}");
    // The issue's bound, on the release binary, on a 2-core machine shared
    // with the control plane this test starts; without the permits it was
    // 2.5 s.
    let bound = Duration::from_millis(50);
    assert!(slowest < bound, "an ordinary request took {slowest:?} during the flood");
    assert!(health < bound, "/readyz took {health:?} during the flood");

    // Nothing outlives its request: the thread count never moved, and the
    // process is idle once the last answer is in.
    assert_eq!(threads(pid), fixed, "the validator's thread count changed");
    assert_eq!(metric(&plain, validator.admin, series).await, Some(51.0));
    let cpu = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<u64> =
            stat.rsplit(')').next().unwrap().split_whitespace().skip(11).take(2).map(|f| f.parse().unwrap()).collect();
        fields[0] + fields[1]
    };
    let before = cpu(pid);
    // A measurement window, not synchronisation: the CPU the process uses
    // in the second after its last answer (in ticks of 10 ms).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let spent = cpu(pid) - before;
    assert!(spent <= 10, "the validator spent {spent} ticks of CPU after its last answer");
}
