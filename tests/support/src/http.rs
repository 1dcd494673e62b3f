//! Plain-HTTP reads of a server under test: its admin port (`/readyz`,
//! `/metrics`) and Jaeger's query API. Synchronous, so that a test can call
//! them from the closures it polls with; each runs reqwest's blocking
//! client on a thread of its own, as that client must not run on an async
//! runtime's thread.

use std::net::SocketAddr;
use std::time::Duration;

/// What a server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// `GET url`, within 10 s; `None` when nothing answers (not listening yet,
/// gone, too slow).
pub fn get(url: &str) -> Option<Answer> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().ok()?;
        let response = client.get(url).send().ok()?;
        let status = response.status().as_u16();
        Some(Answer { status, body: response.text().ok()? })
    })
    .join()
    .ok()
    .flatten()
}

/// The body of `GET url` when it answers 2xx; `None` otherwise.
pub fn get_ok(url: &str) -> Option<String> {
    get(url).filter(|a| (200..300).contains(&a.status)).map(|a| a.body)
}

/// The value of `series` (a name with its labels, exactly as exposed) in
/// the `/metrics` of the admin port at `admin`; `None` when the series is
/// absent or the port does not answer.
pub fn metric(admin: SocketAddr, series: &str) -> Option<f64> {
    let text = get_ok(&format!("http://{admin}/metrics"))?;
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')).and_then(|n| n.trim().parse().ok())
}
