//! The webhook-level load generator (`portcullis-bench load`), built to
//! cost as little per request as a client can, so that it is not what a
//! fast server's figure measures: one thread (a current-thread runtime),
//! one raw tokio-rustls connection per worker, the request's bytes (headers
//! and body) made once and written whole, the answer read by its
//! `Content-Length` (or its chunks) into a buffer kept for the connection,
//! and checked (status 200, `"allowed":true`, the request's uid) without
//! parsing its JSON. No HTTP client library, no pool, no per-request
//! allocation but the latency kept, and, on a core of its own, no sleep
//! while it loads (so that no answer pays to wake it). Whether it keeps up
//! is not assumed: `portcullis-bench run` measures it against the bare
//! server first.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::task::AbortOnDropHandle;

use crate::load::Summary;

/// Where to send what, and what a right answer holds.
pub(crate) struct Target {
    addr: SocketAddr,
    name: ServerName<'static>,
    connector: TlsConnector,
    request: Vec<u8>,
    uid: Vec<u8>,
}

impl Target {
    /// `url` is `https://IP:PORT/PATH` (the contenders listen on loopback
    /// and their certificates name the IP); `ca` signed the server's
    /// certificate; `body` is the AdmissionReview, whose uid the answer must
    /// carry.
    pub(crate) fn new(url: &str, ca: &[u8], body: &[u8]) -> anyhow::Result<Self> {
        let rest = url.strip_prefix("https://").context("the URL must be https://IP:PORT/PATH")?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let addr: SocketAddr = authority.parse().with_context(|| format!("{authority}: not IP:PORT"))?;
        let name = ServerName::from(addr.ip());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca) {
            roots.add(cert?)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let path = if path.is_empty() { "/" } else { path };
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        let uid = crate::servers::uid(body).context("the review has no uid")?.as_bytes().to_vec();
        Ok(Self { addr, name, connector: TlsConnector::from(Arc::new(config)), request, uid })
    }

    /// A new keep-alive connection, handshake done.
    async fn connect(&self) -> std::io::Result<Connection> {
        let tcp = TcpStream::connect(self.addr).await?;
        tcp.set_nodelay(true)?;
        let stream = self.connector.connect(self.name.clone(), tcp).await?;
        Ok(Connection { stream, buf: Vec::with_capacity(16 * 1024) })
    }
}

/// One keep-alive connection and what it has read ahead.
struct Connection {
    stream: TlsStream<TcpStream>,
    buf: Vec<u8>,
}

impl Connection {
    /// Sends the request and reads its answer: whether it was right.
    async fn exchange(&mut self, target: &Target) -> std::io::Result<bool> {
        self.stream.write_all(&target.request).await?;
        self.stream.flush().await?;
        loop {
            match parse(&self.buf, &target.uid) {
                Parsed::Complete { len, right } => {
                    self.buf.drain(..len);
                    return Ok(right);
                }
                Parsed::Unsupported => return Err(std::io::Error::other("an answer without a length")),
                Parsed::Incomplete => {
                    self.buf.reserve(16 * 1024);
                    if self.stream.read_buf(&mut self.buf).await? == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                }
            }
        }
    }
}

/// What the bytes read so far hold.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// Not a whole answer yet.
    Incomplete,
    /// A whole answer of `len` bytes; `right`: status 200, an allow, the uid.
    Complete { len: usize, right: bool },
    /// An answer whose end cannot be known (neither a length nor chunks).
    Unsupported,
}

/// Reads one HTTP/1.1 answer at the start of `buf`.
fn parse(buf: &[u8], uid: &[u8]) -> Parsed {
    let Some(head_len) = find(buf, b"\r\n\r\n").map(|at| at + 4) else { return Parsed::Incomplete };
    let head = &buf[..head_len];
    let status = head.starts_with(b"HTTP/1.1 200 ");
    let mut length = None;
    let mut chunked = false;
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            length = std::str::from_utf8(value).ok().and_then(|v| v.parse::<usize>().ok());
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = find(&value.to_ascii_lowercase(), b"chunked").is_some();
        }
    }
    let right = |body: &[u8]| status && find(body, b"\"allowed\":true").is_some() && find(body, uid).is_some();
    if let Some(length) = length.filter(|_| !chunked) {
        return match buf.get(head_len..head_len + length) {
            Some(body) => Parsed::Complete { len: head_len + length, right: right(body) },
            None => Parsed::Incomplete,
        };
    }
    if !chunked {
        return Parsed::Unsupported;
    }
    // Chunks: HEX-SIZE[;ext]\r\n DATA \r\n ... 0\r\n\r\n (no trailers sent by the peers).
    let (mut at, mut body) = (head_len, Vec::new());
    loop {
        let Some(line_len) = find(&buf[at..], b"\r\n") else { return Parsed::Incomplete };
        let size = std::str::from_utf8(&buf[at..at + line_len])
            .ok()
            .and_then(|l| usize::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size else { return Parsed::Unsupported };
        at += line_len + 2;
        let Some(chunk) = buf.get(at..at + size + 2) else { return Parsed::Incomplete };
        if size == 0 {
            return Parsed::Complete { len: at + 2, right: right(&body) };
        }
        body.extend_from_slice(&chunk[..size]);
        at += size + 2;
    }
}

/// Where `needle` first occurs in `haystack` (`None` for an empty needle).
/// Scans for the first byte and compares only there: an answer's base64
/// patch holds no `"`, so checking a 2.7 KB answer costs a fraction of a µs,
/// where comparing a window at every offset cost several.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut at = 0;
    loop {
        let start = at + haystack.get(at..)?.iter().position(|&b| b == first)?;
        if haystack[start + 1..].starts_with(rest) {
            return Some(start);
        }
        at = start + 1;
    }
}

/// Keeps the generator's thread from sleeping until the task is aborted: a
/// task that always yields makes the runtime poll its sockets
/// without blocking. A generator that sleeps between answers makes every
/// answer wake it, and that wake-up (an inter-processor interrupt to the
/// idle core, which on a virtual machine is an exit to the hypervisor) is
/// done by the kernel in the server's `writev` and counted as the server's
/// CPU time: on the 2-core development VM it was a fifth of the injector's
/// CPU per request, and it grows as the server slows down (the slower the
/// server, the more often the generator waits for it), so it inflated the
/// slow servers' figures most (docs/BENCHMARKS.md, "the generator stays
/// awake"). Only when the core is the generator's alone (`--stay-awake`,
/// which `portcullis-bench run` passes when it pins the load with
/// `taskset`), so that spinning on it takes nothing from the server.
async fn keep_awake() {
    loop {
        tokio::task::yield_now().await;
    }
}

/// `concurrency` workers, each on its own connection with one request in
/// flight, for `duration` after every worker's untimed first request (which
/// opens its connection). A connection that fails is counted and opened
/// again.
pub(crate) async fn run(target: Target, concurrency: usize, duration: Duration, stay_awake: bool) -> Summary {
    let target = Arc::new(target);
    let barrier = Arc::new(tokio::sync::Barrier::new(concurrency));
    // Aborted when the load ends, however it ends.
    let _awake = stay_awake.then(|| AbortOnDropHandle::new(tokio::spawn(keep_awake())));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (target, barrier) = (target.clone(), barrier.clone());
            tokio::spawn(async move {
                let mut connection = target.connect().await.ok();
                if let Some(c) = connection.as_mut()
                    && c.exchange(&target).await.is_err()
                {
                    connection = None;
                }
                barrier.wait().await;
                let end = Instant::now() + duration;
                let (mut latencies, mut failures) = (Vec::with_capacity(1 << 16), 0u64);
                while Instant::now() < end {
                    let started = Instant::now();
                    let answered = match connection.as_mut() {
                        Some(c) => c.exchange(&target).await,
                        None => match target.connect().await {
                            Ok(c) => connection.insert(c).exchange(&target).await,
                            Err(err) => Err(err),
                        },
                    };
                    match answered {
                        Ok(true) => latencies.push(started.elapsed().as_micros() as u32),
                        Ok(false) => failures += 1,
                        Err(_) => {
                            failures += 1;
                            connection = None;
                            // A server that refuses connections is not hammered.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
                (latencies, failures)
            })
        })
        .collect();
    crate::load::gather(workers, duration).await
}

#[cfg(test)]
mod tests {
    use super::{Parsed, parse};

    const UID: &[u8] = b"u-1";

    #[test]
    fn reads_an_answer_by_its_length_and_checks_it() {
        let body = r#"{"response":{"uid":"u-1","allowed":true}}"#;
        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}NEXT", body.len());
        let len = answer.len() - 4;
        assert_eq!(parse(answer.as_bytes(), UID), Parsed::Complete { len, right: true });
        assert_eq!(parse(&answer.as_bytes()[..len - 1], UID), Parsed::Incomplete);
        let denied = answer.replace("true", "fals");
        assert_eq!(parse(denied.as_bytes(), UID), Parsed::Complete { len, right: false });
        let other = answer.replace("u-1", "u-2");
        assert_eq!(parse(other.as_bytes(), UID), Parsed::Complete { len, right: false });
        let error = answer.replace("200 OK", "500 Internal Server Error");
        assert!(matches!(parse(error.as_bytes(), UID), Parsed::Complete { right: false, .. }));
    }

    #[test]
    fn reads_a_chunked_answer() {
        let mut answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned();
        for chunk in [r#"{"response":{"uid":""#, r#"u-1","allowed""#, ":true}}"] {
            answer.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
        }
        answer.push_str("0\r\n\r\n");
        let answer = answer.as_bytes();
        assert_eq!(parse(answer, UID), Parsed::Complete { len: answer.len(), right: true });
        assert_eq!(parse(&answer[..answer.len() - 2], UID), Parsed::Incomplete);
    }

    #[test]
    fn finds_the_first_occurrence() {
        assert_eq!(super::find(b"abcabd", b"abd"), Some(3));
        assert_eq!(super::find(b"abcab", b"abd"), None);
        assert_eq!(super::find(b"ab", b""), None);
        assert_eq!(super::find(b"", b"a"), None);
    }

    #[test]
    fn refuses_an_answer_without_a_length() {
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n\r\n{}", UID), Parsed::Unsupported);
    }
}
