//! What `check` says of an expression beside what the API server said.

use portcullis_cel::refusal::{Declarations, Returns, compilation_failed};

const ALL: Declarations<'static> =
    Declarations { params: true, authorizer: true, variables: Some(&[]), returns: Returns::Bool };

/// What `check` says of `source` as a validation, whole.
#[allow(dead_code)] // Not every test file that shares this module uses it.
pub(crate) fn refused(source: &str) -> Option<String> {
    compilation_failed(source, ALL)
}

/// The errors' first lines, as `ERROR: <input>:1:5: ...` joined by ` / `,
/// or a result-type refusal whole.
fn said(source: &str) -> Option<String> {
    let refused = compilation_failed(source, ALL)?;
    let Some(errors) = refused.strip_prefix("compilation failed: ") else { return Some(refused) };
    Some(errors.lines().filter(|l| l.starts_with("ERROR")).collect::<Vec<_>>().join(" / "))
}

/// Fails with every case (an expression as a validation, and the API
/// server's words, `None` where it takes it) where `check` says
/// otherwise; of those in `not_yet`, with every one where `check` refuses
/// what the API server takes, or says anything at all.
pub(crate) fn assert_said(cases: &[(&str, Option<&str>)], not_yet: &[&str]) {
    let mut differences = Vec::new();
    for &(source, theirs) in cases {
        let ours = said(source);
        let expected = if not_yet.contains(&source) { None } else { theirs };
        if ours.as_deref() != expected {
            differences.push(format!("{source}\n  API server: {theirs:?}\n  check:      {ours:?}"));
        }
    }
    assert!(differences.is_empty(), "{} differ:\n{}", differences.len(), differences.join("\n"));
}
