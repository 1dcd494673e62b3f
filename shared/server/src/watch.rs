//! Reloading mounted files.
//!
//! A ConfigMap or Secret volume changes by an atomic swap of the `..data`
//! symlink, which inotify watches on the file itself miss. Polling the
//! content through the path is immune to that and costs one small read per
//! interval, so it is the only mechanism here (controller-runtime's
//! certwatcher falls back to the same).

use std::path::{Path, PathBuf};
use std::time::Duration;

use portcullis_telemetry::error_chain;
use tokio_util::sync::CancellationToken;

/// The contents of a set of files: `(path, bytes)` in a stable order.
pub type Contents = Vec<(PathBuf, Vec<u8>)>;

/// Reads `paths`: a file is read as is; a directory contributes every
/// `*.yaml`, `*.yml`, `*.json`, `*.pem`, `*.crt` or `*.key` file directly in
/// it (hidden entries such as `..data` skipped), sorted by name.
pub fn read_all(paths: &[PathBuf]) -> std::io::Result<Contents> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| wanted(p))
                .collect();
            files.sort();
            for file in files {
                let bytes = std::fs::read(&file)?;
                out.push((file, bytes));
            }
        } else {
            let bytes =
                std::fs::read(path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            out.push((path.clone(), bytes));
        }
    }
    Ok(out)
}

fn wanted(path: &Path) -> bool {
    let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
    !hidden && path.is_file() && matches!(ext, "yaml" | "yml" | "json" | "pem" | "crt" | "key")
}

/// Polls `paths` every `interval` until `shutdown`, calling `on_change` with
/// the new contents whenever they differ from the last ones seen (starting
/// from `initial`). A read error is logged and retried at the next tick;
/// `on_change` decides whether new contents are good enough to use.
pub fn spawn_poll<F>(
    what: &'static str,
    paths: Vec<PathBuf>,
    interval: Duration,
    initial: Contents,
    shutdown: CancellationToken,
    mut on_change: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(&Contents) + Send + 'static,
{
    tokio::spawn(async move {
        let mut last = initial;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            match read_all(&paths) {
                Ok(contents) => {
                    failing = false;
                    if contents != last {
                        on_change(&contents);
                        last = contents;
                    }
                }
                Err(err) if !failing => {
                    failing = true;
                    tracing::warn!(what, error = %error_chain(&err), "cannot read watched files; keeping what was loaded");
                }
                Err(_) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sees_a_symlink_swap_like_the_kubelets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let v1 = root.join("..v1");
        let v2 = root.join("..v2");
        std::fs::create_dir(&v1).expect("mkdir");
        std::fs::create_dir(&v2).expect("mkdir");
        std::fs::write(v1.join("config.yaml"), "one").expect("write");
        std::fs::write(v2.join("config.yaml"), "two").expect("write");
        std::os::unix::fs::symlink("..v1", root.join("..data")).expect("symlink");
        std::os::unix::fs::symlink("..data/config.yaml", root.join("config.yaml")).expect("symlink");

        let paths = vec![root.to_path_buf()];
        let initial = read_all(&paths).expect("read");
        assert_eq!(initial.len(), 1, "only config.yaml, not the ..data entries");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let task = spawn_poll("test", paths, Duration::from_millis(20), initial, shutdown.clone(), move |c| {
            let _ = tx.send(c[0].1.clone());
        });
        // The swap: a new symlink renamed over ..data, as the kubelet does.
        std::os::unix::fs::symlink("..v2", root.join("..data_tmp")).expect("symlink");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("rename");
        let seen = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("in time");
        assert_eq!(seen.as_deref(), Some(&b"two"[..]));
        shutdown.cancel();
        task.await.expect("task ends on shutdown");
    }
}
