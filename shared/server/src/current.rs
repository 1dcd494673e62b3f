//! The configuration in force, read on every request and swapped on reload.

use std::sync::{Arc, RwLock};

/// A value read by many requests and replaced as a whole by a reload.
/// Readers get an `Arc` and never wait on a reload for longer than the
/// pointer swap.
#[derive(Debug, Default)]
pub struct Current<T>(RwLock<Arc<T>>);

impl<T> Current<T> {
    /// Starts with `value`.
    pub fn new(value: T) -> Self {
        Self(RwLock::new(Arc::new(value)))
    }

    /// The value in force.
    pub fn get(&self) -> Arc<T> {
        match self.0.read() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Puts `value` in force for the next reader.
    pub fn set(&self, value: T) {
        let value = Arc::new(value);
        match self.0.write() {
            Ok(mut slot) => *slot = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }
}
