//! The threads policies are evaluated on: a fixed number, started once, so
//! the async runtime's workers never run policy code and a request pays for
//! no thread start. A job is a whole review; every CEL evaluation in it
//! stops itself at its cost budget or deadline ([`crate::budget`]), so a
//! worker is never held beyond its request and the pool never grows.
//! Cheap and costly requests share the workers by the operating system's
//! preemptive scheduling: with more workers than cores, a costly
//! evaluation cannot keep a cheap one waiting for its turn, and costly ones
//! take turns for half the cores ([`crate::budget`]), so the runtime still
//! accepts connections, reads requests and answers `/readyz` at once.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// The default number of workers: evaluations that may run at once before
/// requests queue.
pub const DEFAULT_THREADS: usize = 64;

/// A fixed pool of evaluation threads.
pub struct Workers {
    queue: Arc<Queue>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers").finish_non_exhaustive()
    }
}

/// The pool could not run a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// The job panicked (a bug), or the pool is gone.
    #[error("the evaluation failed unexpectedly")]
    Failed,
}

impl Workers {
    /// Starts `threads` workers (at least one).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let queue = Arc::new(Queue::default());
        for i in 0..threads.max(1) {
            let queue = queue.clone();
            std::thread::Builder::new().name(format!("evaluate-{i}")).spawn(move || work(&queue))?;
        }
        Ok(Self { queue })
    }

    /// Runs `job` on a worker; the caller awaits its result without
    /// blocking its own thread.
    pub async fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> Result<T, WorkerError> {
        let (reply, result) = oneshot::channel();
        self.queue.push(Box::new(move || {
            // A caller that went away (its request timed out) while the job
            // waited is not worked for; one that goes away later gets
            // nothing.
            if !reply.is_closed() {
                let _ = reply.send(job());
            }
        }))?;
        result.await.map_err(|_| WorkerError::Failed)
    }
}

impl Drop for Workers {
    /// The workers finish the jobs queued, then end.
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// The jobs waiting for a worker. A job wakes one idle worker, which takes
/// it at once: a worker waits on the condition variable, not behind the
/// others for a lock on a channel's receiver (where each job also woke
/// the next worker to wait for that lock).
#[derive(Default)]
struct Queue {
    waiting: Mutex<Waiting>,
    ready: Condvar,
}

#[derive(Default)]
struct Waiting {
    jobs: VecDeque<Job>,
    /// The pool is gone: no job comes after those queued.
    closed: bool,
}

impl Queue {
    fn push(&self, job: Job) -> Result<(), WorkerError> {
        self.waiting.lock().map_err(|_| WorkerError::Failed)?.jobs.push_back(job);
        self.ready.notify_one();
        Ok(())
    }

    /// The next job; `None` once the pool is gone and none is left.
    fn next(&self) -> Option<Job> {
        let waiting = self.waiting.lock().ok()?;
        let mut waiting = self.ready.wait_while(waiting, |w| w.jobs.is_empty() && !w.closed).ok()?;
        waiting.jobs.pop_front()
    }

    fn close(&self) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.closed = true;
        }
        self.ready.notify_all();
    }
}

/// A worker: takes jobs until the pool is dropped.
fn work(queue: &Queue) {
    while let Some(job) = queue.next() {
        // A panicking job drops its reply (the caller sees `Failed`); the
        // worker lives on. Jobs run outside the lock, so none poisons it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_off_the_caller_and_a_panic_is_an_error_not_a_lost_worker() {
        let pool = Workers::new(1).expect("a thread starts");
        let caller = std::thread::current().id();
        assert_ne!(pool.run(move || std::thread::current().id()).await, Ok(caller));
        assert_eq!(pool.run(|| -> u8 { panic!("boom") }).await, Err(WorkerError::Failed));
        assert_eq!(pool.run(|| 6 * 7).await, Ok(42), "the only worker still works");
    }

    #[tokio::test]
    async fn every_job_runs_when_more_come_than_workers_and_dropping_ends_them() {
        let pool = Arc::new(Workers::new(3).expect("threads start"));
        let jobs: Vec<_> = (0..200u32)
            .map(|i| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.run(move || i * 2).await })
            })
            .collect();
        for (i, job) in (0u32..).zip(jobs) {
            assert_eq!(job.await.expect("the task ends"), Ok(i * 2));
        }
        let queue = Arc::downgrade(&pool.queue);
        drop(pool);
        // Each worker holds the queue until it has ended.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while queue.strong_count() > 0 {
            assert!(std::time::Instant::now() < deadline, "the workers did not end");
            std::thread::yield_now();
        }
    }
}
