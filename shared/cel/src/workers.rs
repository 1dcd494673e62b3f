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

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// The default number of workers: evaluations that may run at once before
/// requests queue.
pub const DEFAULT_THREADS: usize = 64;

/// A fixed pool of evaluation threads.
#[derive(Debug)]
pub struct Workers {
    jobs: Mutex<Sender<Job>>,
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
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let threads = threads.max(1);
        for i in 0..threads {
            let queue = queue.clone();
            std::thread::Builder::new().name(format!("evaluate-{i}")).spawn(move || work(&queue))?;
        }
        Ok(Self { jobs: Mutex::new(jobs) })
    }

    /// Runs `job` on a worker; the caller awaits its result without
    /// blocking its own thread.
    pub async fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> Result<T, WorkerError> {
        let (reply, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            // A caller that went away (its request timed out) while the job
            // waited is not worked for; one that goes away later gets
            // nothing.
            if !reply.is_closed() {
                let _ = reply.send(job());
            }
        });
        self.jobs.lock().map_err(|_| WorkerError::Failed)?.send(job).map_err(|_| WorkerError::Failed)?;
        result.await.map_err(|_| WorkerError::Failed)
    }
}

/// A worker: takes jobs until the pool is dropped.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A panicking job drops its reply (the caller sees `Failed`); the
        // worker lives on.
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
}
