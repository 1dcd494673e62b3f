//! An RFC 6902 applier written for the tests, independent of the
//! `json-patch` crate that produces the patches, so that a bug in one is
//! not hidden by the same bug in the other.

use serde_json::Value;

/// Why a patch does not apply: the operation's path (or the patch as a
/// whole, with an empty path) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path:?}: {problem}")]
pub struct PatchError {
    /// The JSON Pointer of the failing operation.
    pub path: String,
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong with one operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The patch is not a JSON array of operation objects.
    #[error("the patch is not an array of operations")]
    NotAnArray,
    /// An operation lacks `path`, or a move or copy lacks `from`.
    #[error("the operation has no {0:?}")]
    Missing(&'static str),
    /// An `op` that RFC 6902 does not define.
    #[error("unknown op {0:?}")]
    UnknownOp(Option<String>),
    /// A pointer that does not start with `/`.
    #[error("does not start with /")]
    NotAPointer,
    /// A step of the pointer names nothing.
    #[error("nothing at {0:?}")]
    Nothing(String),
    /// An array index that is not a number.
    #[error("bad index")]
    BadIndex,
    /// An array index past the end.
    #[error("index out of range")]
    OutOfRange,
    /// The parent is a string, number, bool or null.
    #[error("parent is not a container")]
    NotAContainer,
    /// A `test` operation found another value.
    #[error("test failed")]
    TestFailed,
}

fn fail(path: &str, problem: Problem) -> PatchError {
    PatchError { path: path.to_owned(), problem }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split(path: &str) -> Result<(Vec<String>, String), PatchError> {
    let rest = path.strip_prefix('/').ok_or_else(|| fail(path, Problem::NotAPointer))?;
    let mut tokens: Vec<String> = rest.split('/').map(unescape).collect();
    let last = tokens.pop().unwrap_or_default();
    Ok((tokens, last))
}

fn parent<'a>(doc: &'a mut Value, tokens: &[String], path: &str) -> Result<&'a mut Value, PatchError> {
    let mut here = doc;
    for token in tokens {
        here = match here {
            Value::Object(map) => map.get_mut(token),
            Value::Array(list) => token.parse::<usize>().ok().and_then(|i| list.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| fail(path, Problem::Nothing(token.clone())))?;
    }
    Ok(here)
}

fn get(doc: &Value, path: &str) -> Result<Value, PatchError> {
    if path.is_empty() {
        return Ok(doc.clone());
    }
    let mut here = doc;
    for token in path.trim_start_matches('/').split('/').map(unescape) {
        here = match here {
            Value::Object(map) => map.get(&token),
            Value::Array(list) => token.parse::<usize>().ok().and_then(|i| list.get(i)),
            _ => None,
        }
        .ok_or_else(|| fail(path, Problem::Nothing(token.clone())))?;
    }
    Ok(here.clone())
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (tokens, last) = split(path)?;
    match parent(doc, &tokens, path)? {
        Value::Object(map) => {
            map.insert(last, value);
        }
        Value::Array(list) if last == "-" => list.push(value),
        Value::Array(list) => {
            let i: usize = last.parse().map_err(|_| fail(path, Problem::BadIndex))?;
            if i > list.len() {
                return Err(fail(path, Problem::OutOfRange));
            }
            list.insert(i, value);
        }
        _ => return Err(fail(path, Problem::NotAContainer)),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (tokens, last) = split(path)?;
    match parent(doc, &tokens, path)? {
        Value::Object(map) => map.remove(&last).ok_or_else(|| fail(path, Problem::Nothing(last.clone()))),
        Value::Array(list) => {
            let i: usize = last.parse().map_err(|_| fail(path, Problem::BadIndex))?;
            if i >= list.len() {
                return Err(fail(path, Problem::OutOfRange));
            }
            Ok(list.remove(i))
        }
        _ => Err(fail(path, Problem::NotAContainer)),
    }
}

/// Applies `patch` (a JSON array of operations) to `doc`.
pub fn apply(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    for op in patch.as_array().ok_or_else(|| fail("", Problem::NotAnArray))? {
        let path = op["path"].as_str().ok_or_else(|| fail("", Problem::Missing("path")))?;
        match op["op"].as_str() {
            Some("add") => add(doc, path, op["value"].clone())?,
            Some("remove") => {
                remove(doc, path)?;
            }
            Some("replace") if path.is_empty() => *doc = op["value"].clone(),
            Some("replace") => {
                remove(doc, path)?;
                add(doc, path, op["value"].clone())?;
            }
            Some("move") => {
                let from = op["from"].as_str().ok_or_else(|| fail(path, Problem::Missing("from")))?;
                let value = remove(doc, from)?;
                add(doc, path, value)?;
            }
            Some("copy") => {
                let from = op["from"].as_str().ok_or_else(|| fail(path, Problem::Missing("from")))?;
                let value = get(doc, from)?;
                add(doc, path, value)?;
            }
            Some("test") => {
                if get(doc, path)? != op["value"] {
                    return Err(fail(path, Problem::TestFailed));
                }
            }
            other => return Err(fail(path, Problem::UnknownOp(other.map(str::to_owned)))),
        }
    }
    Ok(())
}
