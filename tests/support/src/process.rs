//! Servers under test, started as users start them but with `127.0.0.1:0`
//! for every listener: nothing picks a port in advance (a port chosen,
//! released and bound later can be taken in between). The addresses a
//! server bound are read from its startup log line, and its log is kept so
//! that a test can wait for a line with a deadline instead of sleeping.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A position in a process's log.
#[derive(Debug, Clone, Copy)]
pub struct LogMark(usize);

/// A child process, killed when dropped, with its log (stdout) kept.
#[derive(Debug)]
pub struct Process {
    /// The process.
    pub child: Child,
    log: Arc<Log>,
}

#[derive(Debug, Default)]
struct Log {
    lines: Mutex<Lines>,
    grew: Condvar,
}

/// The newest lines of the log, at most [`KEPT_LINES`] (a server under
/// load in a benchmark may log for every request).
#[derive(Debug, Default)]
struct Lines {
    kept: std::collections::VecDeque<String>,
    dropped: usize,
}

const KEPT_LINES: usize = 100_000;

impl Lines {
    fn push(&mut self, line: String) {
        if self.kept.len() == KEPT_LINES {
            self.kept.pop_front();
            self.dropped += 1;
        }
        self.kept.push_back(line);
    }

    /// The kept lines from absolute position `from` on.
    fn since(&self, from: usize) -> impl Iterator<Item = &String> {
        self.kept.iter().skip(from.saturating_sub(self.dropped))
    }
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
        self.wait_for_log_since(LogMark(0), text, within)
    }

    /// Where the log is now: [`Process::wait_for_log_since`] looks only at
    /// lines written after it (take it before the action whose line you
    /// wait for).
    pub fn log_mark(&self) -> LogMark {
        let lines = self.log.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        LogMark(lines.dropped + lines.kept.len())
    }

    /// Waits until a line written after `mark` contains `text`.
    ///
    /// # Panics
    /// When no such line comes `within`.
    pub fn wait_for_log_since(&self, mark: LogMark, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let found = {
                let lines = self.log.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                lines.since(mark.0).find(|line| line.contains(text)).cloned()
            };
            if let Some(line) = found {
                return line;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no log line with {text:?} within {within:?}");
            self.wait_for_more(left);
        }
    }

    fn find_line<T>(&self, mut pick: impl FnMut(&str) -> Option<T>) -> Option<T> {
        let lines = self.log.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        lines.since(0).find_map(|line| pick(line))
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

/// Runs `command` to completion with `stdin` written to its standard input
/// (`None`: closed at once) and its output captured, as a shell pipe feeds
/// a CLI. The input is written from a thread of its own, so a child that
/// writes more than a pipe holds before it has read all of its input cannot
/// deadlock the test.
pub fn run_with_stdin(command: &mut Command, stdin: Option<&str>) -> std::io::Result<Output> {
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let pipe = child.stdin.take();
    let writer = stdin.zip(pipe).map(|(input, mut pipe)| {
        let input = input.to_owned();
        // A child that exits before reading everything closes the pipe:
        // its exit status and output tell the test what happened.
        std::thread::spawn(move || drop(pipe.write_all(input.as_bytes())))
    });
    let output = child.wait_with_output();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    output
}
