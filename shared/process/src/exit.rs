//! How the three binaries end, one convention for all: exit 0 when the
//! command did its work (or when the reader of its output went away, as
//! `| head` does: that is not an error); 1 when its answer is "no" (`check`
//! found a denial, `ready` is not ready, a certificate request was
//! refused); 2 on an error, printed once on stderr with each of its causes
//! once, outermost first, and a hint on a line of its own where the code
//! that failed knew what the user can do about it ([`Hinted`]).

use std::fmt;
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

/// What every command that connects to the Kubernetes API tells a user
/// whose connection could not be configured: where kube looks, in order.
pub const KUBECONFIG_HINT: &str = "a kubeconfig is read from the files in $KUBECONFIG, else from \
                                   ~/.kube/config; in a pod, the service account's token and the \
                                   KUBERNETES_SERVICE_HOST/PORT variables are used instead";

/// An error context that knows what the user can do about the failure:
/// `anyhow`'s `.context(Hinted::new(what, hint))`. Its `what` is one cause
/// in the chain like any context; the outermost hint is printed after the
/// chain, as `hint: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hinted {
    what: String,
    hint: String,
}

impl Hinted {
    /// `what` was being done; `hint` is what the user can do when it fails.
    pub fn new(what: impl Into<String>, hint: impl Into<String>) -> Self {
        Self { what: what.into(), hint: hint.into() }
    }

    /// What the user can do.
    pub fn hint(&self) -> &str {
        &self.hint
    }
}

impl fmt::Display for Hinted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

/// The exit code for `result`, printing an error as [`report`] writes it.
pub fn code(result: anyhow::Result<Answer>) -> ExitCode {
    match result {
        Ok(Answer::Yes) => ExitCode::SUCCESS,
        Ok(Answer::No) => ExitCode::from(1),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", report(&err));
            ExitCode::from(2)
        }
    }
}

/// `error: a: b: c`, each cause once, outermost first, then `hint: ...`
/// when a context was [`Hinted`].
pub fn report(err: &anyhow::Error) -> String {
    let mut out = format!("error: {}", portcullis_telemetry::error_chain(err.as_ref()));
    if let Some(hinted) = err.downcast_ref::<Hinted>() {
        out.push_str("\nhint: ");
        out.push_str(hinted.hint());
    }
    out
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

    #[test]
    fn the_report_names_each_cause_once_and_ends_with_the_hint() {
        let err = anyhow::Error::from(std::io::Error::other("no such file"))
            .context("reading /x: no such file")
            .context(Hinted::new("connecting", "pass --offline"))
            .context("serving");
        assert_eq!(report(&err), "error: serving: connecting: reading /x: no such file\nhint: pass --offline");
    }
}
