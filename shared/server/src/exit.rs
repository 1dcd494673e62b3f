//! How the three binaries end, one convention for all: exit 0 when the
//! command did its work (or when the reader of its output went away, as
//! `| head` does: that is not an error); 1 when its answer is "no" (`check`
//! found a denial, `ready` is not ready, a certificate request was
//! refused); 2 on an error, printed once on stderr with its causes.

use std::process::ExitCode;

/// A command's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Done, or "yes".
    Yes,
    /// "No": a denial, not ready, a refusal; what was said is on stdout or
    /// stderr already.
    No,
}

/// A command that returns nothing did its work.
impl From<()> for Answer {
    fn from((): ()) -> Self {
        Self::Yes
    }
}

impl From<bool> for Answer {
    fn from(yes: bool) -> Self {
        if yes { Self::Yes } else { Self::No }
    }
}

/// The exit code for `result`, printing an error (`error: a: b: c`).
pub fn code(result: anyhow::Result<Answer>) -> ExitCode {
    match result {
        Ok(Answer::Yes) => ExitCode::SUCCESS,
        Ok(Answer::No) => ExitCode::from(1),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_not_an_error_and_causes_are_kept() {
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&pipe));
        assert_eq!(code(Err(pipe)), ExitCode::SUCCESS);
        assert_eq!(code(Ok(Answer::No)), ExitCode::from(1));
        assert_eq!(code(Err(anyhow::anyhow!("bad"))), ExitCode::from(2));
    }
}
