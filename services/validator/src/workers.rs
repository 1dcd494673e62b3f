//! The threads CEL runs on: a few long-lived workers, so that a request
//! pays for no thread start (about 40 µs each) and a runaway evaluation is
//! given up at its deadline without holding up the request. The pool is
//! bounded: under a flood of pathological requests, evaluations wait for a
//! free worker and fail at their deadline (under the policies' failure
//! policy) instead of piling up threads.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// The pool every evaluation in this process shares.
static WORKERS: LazyLock<Workers> = LazyLock::new(|| {
    let count = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    Workers::new(count)
});

/// Runs `job` on a worker and waits for its result up to `deadline`.
pub fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static, deadline: Duration) -> Result<T, String> {
    WORKERS.run(job, deadline)
}

struct Workers {
    jobs: Mutex<Sender<Job>>,
}

impl Workers {
    fn new(count: usize) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..count {
            let queue = queue.clone();
            let started = std::thread::Builder::new().name(format!("cel-{n}")).spawn(move || work(&queue));
            if let Err(err) = started {
                tracing::error!(error = %err, "cannot start a CEL worker");
            }
        }
        Self { jobs: Mutex::new(jobs) }
    }

    fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
        deadline: Duration,
    ) -> Result<T, String> {
        let (reply, result) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = reply.send(job());
        });
        let sent = self.jobs.lock().map_err(|_| "the CEL workers are gone".to_owned())?.send(job);
        sent.map_err(|_| "the CEL workers are gone".to_owned())?;
        result.recv_timeout(deadline).map_err(|e| match e {
            RecvTimeoutError::Timeout => format!("CEL evaluation took longer than {} ms", deadline.as_millis()),
            RecvTimeoutError::Disconnected => "CEL evaluation failed".to_owned(),
        })
    }
}

/// A worker: takes jobs until the pool is dropped.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        match job {
            // A panicking evaluation takes its job with it, not the worker.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runaway_job_is_given_up_and_the_next_one_still_runs() {
        let pool = Workers::new(2);
        let slow = pool.run(|| std::thread::sleep(Duration::from_millis(300)), Duration::from_millis(20));
        assert_eq!(slow, Err("CEL evaluation took longer than 20 ms".to_owned()));
        assert_eq!(pool.run(|| 6 * 7, Duration::from_secs(5)), Ok(42), "the other worker answers");
    }

    #[test]
    fn a_panicking_job_is_reported_and_the_worker_lives_on() {
        let pool = Workers::new(1);
        let failed = pool.run(|| -> u8 { panic!("boom") }, Duration::from_secs(5));
        assert_eq!(failed, Err("CEL evaluation failed".to_owned()));
        assert_eq!(pool.run(|| 1, Duration::from_secs(5)), Ok(1), "the only worker still works");
    }
}
