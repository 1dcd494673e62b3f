//! The threads CEL runs on: long-lived workers, so that a request pays for
//! no thread start (about 40 µs each), and a runaway evaluation is given up
//! at its deadline without holding up the request. A worker stuck with a
//! given-up evaluation is replaced at once, so other requests never wait
//! behind it; the extra worker retires when the pool is back to size.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// The pool every evaluation in this process shares.
static WORKERS: LazyLock<Workers> = LazyLock::new(|| {
    let size = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    Workers::new(size)
});

/// Runs `job` on a worker and waits for its result up to `deadline`.
pub fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static, deadline: Duration) -> Result<T, String> {
    WORKERS.run(job, deadline)
}

struct Workers {
    jobs: Mutex<Sender<Job>>,
    queue: Arc<Mutex<Receiver<Job>>>,
    size: usize,
    live: Arc<AtomicUsize>,
}

impl Workers {
    fn new(size: usize) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let pool = Self { jobs: Mutex::new(jobs), queue: Arc::new(Mutex::new(queue)), size, live: Arc::default() };
        for _ in 0..size {
            pool.add_worker();
        }
        pool
    }

    fn add_worker(&self) {
        let (queue, live, size) = (self.queue.clone(), self.live.clone(), self.size);
        live.fetch_add(1, Ordering::SeqCst);
        if let Err(err) = std::thread::Builder::new().name("cel".into()).spawn(move || work(&queue, &live, size)) {
            self.live.fetch_sub(1, Ordering::SeqCst);
            tracing::error!(error = %err, "cannot start a CEL worker");
        }
    }

    fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
        deadline: Duration,
    ) -> Result<T, String> {
        let (reply, result) = mpsc::sync_channel(1);
        let abandoned = Arc::new(AtomicBool::new(false));
        let skip = abandoned.clone();
        let job: Job = Box::new(move || {
            // Given up before it started: no one wants the answer.
            if !skip.load(Ordering::SeqCst) {
                let _ = reply.send(job());
            }
        });
        let sent = self.jobs.lock().map_err(|_| "the CEL workers are gone".to_owned())?.send(job);
        sent.map_err(|_| "the CEL workers are gone".to_owned())?;
        result.recv_timeout(deadline).map_err(|e| match e {
            RecvTimeoutError::Timeout => {
                abandoned.store(true, Ordering::SeqCst);
                // A worker may be stuck with it: keep the pool's size.
                self.add_worker();
                format!("CEL evaluation took longer than {} ms", deadline.as_millis())
            }
            RecvTimeoutError::Disconnected => "CEL evaluation failed".to_owned(),
        })
    }
}

/// A worker: takes jobs until the pool is dropped, or retires after a job
/// when the pool has more than `size` workers (a stuck one came back).
fn work(queue: &Mutex<Receiver<Job>>, live: &AtomicUsize, size: usize) {
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => break,
        };
        let Ok(job) = job else { break };
        // A panicking evaluation takes its job with it, not the worker.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        if live.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n > size).then(|| n - 1)).is_ok() {
            return;
        }
    }
    live.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stuck_job_is_given_up_does_not_hold_up_the_next_and_the_pool_shrinks_back() {
        let pool = Workers::new(1);
        let (release, stuck) = mpsc::channel::<()>();
        let given_up = pool.run(move || stuck.recv().is_ok(), Duration::from_millis(100));
        assert_eq!(given_up, Err("CEL evaluation took longer than 100 ms".to_owned()));
        // The only worker is stuck until released: without a replacement
        // this would time out too.
        assert_eq!(pool.run(|| 6 * 7, Duration::from_secs(2)), Ok(42));
        drop(release);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pool.live.load(Ordering::SeqCst) != 1 {
            assert!(std::time::Instant::now() < deadline, "the extra worker did not retire");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_panicking_job_is_reported_and_the_worker_lives_on() {
        let pool = Workers::new(1);
        let failed = pool.run(|| -> u8 { panic!("boom") }, Duration::from_secs(5));
        assert_eq!(failed, Err("CEL evaluation failed".to_owned()));
        assert_eq!(pool.run(|| 1, Duration::from_secs(5)), Ok(1), "the only worker still works");
    }
}
