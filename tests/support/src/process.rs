//! Servers under test, started as users start them but with `127.0.0.1:0`
//! for every listener: nothing picks a port in advance (a port chosen,
//! released and bound later can be taken in between). The addresses a
//! server bound are read from its startup log line, and its log is kept so
//! that a test can wait for a line with a deadline instead of sleeping.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A child process, killed when dropped, with its log (stdout) kept.
#[derive(Debug)]
pub struct Process {
    /// The process.
    pub child: Child,
    log: Arc<Log>,
}

#[derive(Debug, Default)]
struct Log {
    lines: Mutex<Vec<String>>,
    grew: Condvar,
}

impl Process {
    /// Starts `command` and returns it with the addresses it bound, read
    /// from the first log line that names each of `keys` (`key=ADDR`, e.g.
    /// `webhook`, `admin`). Its log lines are kept, and copied to this
    /// process's stderr when `echo`.
    ///
    /// # Panics
    /// When the process exits, or names no address within 30 s.
    pub fn spawn_reporting(mut command: Command, keys: &[&str], echo: bool) -> (Self, Vec<SocketAddr>) {
        use std::io::BufRead as _;
        let mut child = command.stdout(Stdio::piped()).spawn().expect("starting the process");
        let stdout = child.stdout.take().expect("stdout is piped");
        let log = Arc::new(Log::default());
        let writer = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if echo {
                    eprintln!("{line}");
                }
                writer.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
                writer.grew.notify_all();
            }
        });
        let mut process = Self { child, log };
        let keys: Vec<String> = keys.iter().map(|k| format!("{k}=")).collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let addrs = process.find_line(|line| {
                keys.iter()
                    .map(|key| {
                        let at = line.find(key.as_str())? + key.len();
                        line[at..].split_whitespace().next()?.parse().ok()
                    })
                    .collect::<Option<Vec<SocketAddr>>>()
            });
            if let Some(addrs) = addrs {
                return (process, addrs);
            }
            assert!(
                process.child.try_wait().ok().flatten().is_none(),
                "the process exited before it reported its addresses"
            );
            assert!(Instant::now() < deadline, "no address line in the process's log within 30 s");
            process.wait_for_more(Duration::from_millis(100));
        }
    }

    /// A process started otherwise (its output read by the caller), killed
    /// when dropped; it has no log to wait on.
    pub fn from_child(child: Child) -> Self {
        Self { child, log: Arc::default() }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits until a log line contains `text` and returns it.
    ///
    /// # Panics
    /// When no such line comes `within`.
    pub fn wait_for_log(&self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.find_line(|line| line.contains(text).then(|| line.to_owned())) {
                return line;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no log line with {text:?} within {within:?}");
            self.wait_for_more(left);
        }
    }

    fn find_line<T>(&self, mut pick: impl FnMut(&str) -> Option<T>) -> Option<T> {
        let lines = self.log.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        lines.iter().find_map(|line| pick(line))
    }

    fn wait_for_more(&self, at_most: Duration) {
        let lines = self.log.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = self.log.grew.wait_timeout(lines, at_most);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
