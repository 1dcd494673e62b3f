//! Opt-in capture of admission requests for offline replay: a request that
//! matches the kind and namespace filters and the size cap is written, as
//! the AdmissionReview it was, to `--capture-dir` (files 0600, the trace id
//! in the name), with Secret and ConfigMap data redacted. `portcullis-injector
//! mutate -f FILE` and `portcullis-validator check -f FILE` replay it.
//!
//! Nothing of it runs on the request path but a filter and a bounded
//! channel send (the body is reference-counted, not copied): parsing,
//! redaction and the write happen on a writer task, and when it falls behind
//! requests are dropped from the capture, never delayed.

use std::collections::VecDeque;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use portcullis_admission::Request;
use portcullis_telemetry::error_chain;
use serde_json::Value;
use tokio::sync::mpsc;

/// What replaces redacted values.
pub const REDACTED: &str = "REDACTED";
/// Requests waiting for the writer; more are dropped from the capture.
const QUEUE: usize = 64;

/// Capture flags (`#[clap(flatten)]` into the webhooks' `serve`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CaptureArgs {
    /// Write each matching AdmissionReview to this directory (created 0700,
    /// files 0600; Secret and ConfigMap data redacted), to replay it with
    /// `mutate -f` / `check -f`. Off when unset.
    #[arg(long, env = "PORTCULLIS_CAPTURE_DIR")]
    pub capture_dir: Option<PathBuf>,
    /// Capture only these kinds (`Pod,Deployment`); empty: all.
    #[arg(long, env = "PORTCULLIS_CAPTURE_KINDS", value_delimiter = ',')]
    pub capture_kinds: Vec<String>,
    /// Capture only these namespaces; empty: all.
    #[arg(long, env = "PORTCULLIS_CAPTURE_NAMESPACES", value_delimiter = ',')]
    pub capture_namespaces: Vec<String>,
    /// Requests with a larger body are not captured.
    #[arg(long, env = "PORTCULLIS_CAPTURE_MAX_BYTES", default_value_t = 1 << 20)]
    pub capture_max_bytes: usize,
    /// Files kept in the directory; past it the oldest this process wrote
    /// are removed.
    #[arg(long, env = "PORTCULLIS_CAPTURE_MAX_FILES", default_value_t = 100)]
    pub capture_max_files: usize,
}

struct Captured {
    body: Bytes,
    uid: String,
    trace_id: Option<String>,
}

/// A running capture.
pub struct Capture {
    args: CaptureArgs,
    sender: mpsc::Sender<Captured>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("args", &self.args).finish_non_exhaustive()
    }
}

impl Capture {
    /// Starts the writer when `--capture-dir` is set; `None` when it is not.
    pub fn start(args: &CaptureArgs) -> std::io::Result<Option<Arc<Self>>> {
        let Some(dir) = args.capture_dir.clone() else { return Ok(None) };
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        let (sender, receiver) = mpsc::channel(QUEUE);
        tokio::spawn(write_all(receiver, dir.clone(), args.capture_max_files.max(1)));
        tracing::warn!(dir = %dir.display(), kinds = ?args.capture_kinds, namespaces = ?args.capture_namespaces,
            "capturing admission requests (Secret and ConfigMap data redacted); turn off when done");
        Ok(Some(Arc::new(Self { args: args.clone(), sender, dropped: AtomicU64::new(0) })))
    }

    /// Hands `body` (the request `req` was decoded from) to the writer if
    /// it passes the filters. Never waits.
    pub fn offer(&self, req: &Request, body: &Bytes, trace_id: Option<&str>) {
        let inner = &req.inner;
        let namespace = inner.namespace.as_deref().unwrap_or_default();
        let wanted = |list: &[String], value: &str| list.is_empty() || list.iter().any(|x| x == value);
        if body.len() > self.args.capture_max_bytes
            || !wanted(&self.args.capture_kinds, &inner.kind.kind)
            || !wanted(&self.args.capture_namespaces, namespace)
        {
            return;
        }
        let captured = Captured { body: body.clone(), uid: inner.uid.clone(), trace_id: trace_id.map(str::to_owned) };
        if self.sender.try_send(captured).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(dropped, "capture writer behind: request not captured");
        }
    }
}

async fn write_all(mut receiver: mpsc::Receiver<Captured>, dir: PathBuf, max_files: usize) {
    let mut written: VecDeque<PathBuf> = VecDeque::new();
    while let Some(captured) = receiver.recv().await {
        let dir = dir.clone();
        match tokio::task::spawn_blocking(move || write_one(&dir, captured)).await {
            Ok(Ok(path)) => {
                tracing::info!(path = %path.display(), "admission request captured");
                written.push_back(path);
                while written.len() > max_files {
                    if let Some(old) = written.pop_front() {
                        let _ = std::fs::remove_file(old);
                    }
                }
            }
            Ok(Err(err)) => tracing::warn!(error = %error_chain(&err), "cannot write a captured request"),
            Err(err) => tracing::warn!(error = %error_chain(&err), "capture writer failed"),
        }
    }
}

/// `<unix ms>-<trace id>-<uid>.json`, redacted, mode 0600.
fn write_one(dir: &Path, captured: Captured) -> std::io::Result<PathBuf> {
    let mut review: Value = serde_json::from_slice(&captured.body)?;
    redact(&mut review);
    let millis = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    let safe = |s: &str| s.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect::<String>();
    let trace = captured.trace_id.as_deref().map_or_else(|| "no-trace".to_owned(), safe);
    let path = dir.join(format!("{millis}-{trace}-{}.json", safe(&captured.uid)));
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    file.write_all(&serde_json::to_vec_pretty(&review)?)?;
    Ok(path)
}

/// Replaces the values of a Secret's `data` and `stringData` and a
/// ConfigMap's `data` and `binaryData` in `request.object` and
/// `request.oldObject` with [`REDACTED`] (keys stay, so the shape is
/// kept), and drops their `kubectl.kubernetes.io/last-applied-configuration`
/// annotation, which repeats them.
pub fn redact(review: &mut Value) {
    let kind = review.pointer("/request/kind/kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    for field in ["object", "oldObject"] {
        let Some(object) = review.pointer_mut(&format!("/request/{field}")) else { continue };
        let own_kind = object.get("kind").and_then(Value::as_str).unwrap_or(&kind).to_owned();
        let fields: &[&str] = match (kind.as_str(), own_kind.as_str()) {
            ("Secret", _) | (_, "Secret") => &["data", "stringData"],
            ("ConfigMap", _) | (_, "ConfigMap") => &["data", "binaryData"],
            _ => continue,
        };
        for name in fields {
            if let Some(Value::Object(values)) = object.get_mut(*name) {
                values.values_mut().for_each(|v| *v = Value::String(REDACTED.into()));
            }
        }
        if let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secret_and_config_map_data_is_redacted_and_the_shape_kept() {
        let mut review = json!({"request": {
            "kind": {"group": "", "version": "v1", "kind": "Secret"},
            "object": {"kind": "Secret", "metadata": {"name": "db", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"aHVudGVyMg==\"}}",
                "team": "shop"}},
                "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}},
            "oldObject": {"kind": "Secret", "data": {"password": "b2xk"}}
        }});
        redact(&mut review);
        let text = review.to_string();
        for secret in ["aHVudGVyMg==", "admin", "b2xk", "last-applied"] {
            assert!(!text.contains(secret), "{secret} left in {text}");
        }
        assert_eq!(review["request"]["object"]["data"]["password"], REDACTED);
        assert_eq!(review["request"]["object"]["metadata"]["annotations"]["team"], "shop");
        let mut config_map = json!({"request": {"kind": {"kind": "ConfigMap"}, "object": {"data": {"k": "v"}, "binaryData": {"b": "AA=="}}}});
        redact(&mut config_map);
        assert_eq!(config_map["request"]["object"], json!({"data": {"k": REDACTED}, "binaryData": {"b": REDACTED}}));
        let mut pod = json!({"request": {"kind": {"kind": "Pod"}, "object": {"data": {"k": "v"}}}});
        redact(&mut pod);
        assert_eq!(pod["request"]["object"]["data"]["k"], "v", "other kinds are kept as they are");
    }
}
