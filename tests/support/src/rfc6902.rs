//! An RFC 6902 applier written for the tests, independent of the
//! `json-patch` crate that produces the patches, so that a bug in one is
//! not hidden by the same bug in the other.

use serde_json::Value;

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split(path: &str) -> Result<(Vec<String>, String), String> {
    let rest = path.strip_prefix('/').ok_or_else(|| format!("path {path:?} does not start with /"))?;
    let mut tokens: Vec<String> = rest.split('/').map(unescape).collect();
    let last = tokens.pop().unwrap_or_default();
    Ok((tokens, last))
}

fn parent<'a>(doc: &'a mut Value, tokens: &[String], path: &str) -> Result<&'a mut Value, String> {
    let mut here = doc;
    for token in tokens {
        here = match here {
            Value::Object(map) => map.get_mut(token),
            Value::Array(list) => token.parse::<usize>().ok().and_then(|i| list.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("{path}: no {token:?}"))?;
    }
    Ok(here)
}

fn get(doc: &Value, path: &str) -> Result<Value, String> {
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
        .ok_or_else(|| format!("{path}: nothing at {token:?}"))?;
    }
    Ok(here.clone())
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
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
            let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
            if i > list.len() {
                return Err(format!("{path}: index out of range"));
            }
            list.insert(i, value);
        }
        _ => return Err(format!("{path}: parent is not a container")),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (tokens, last) = split(path)?;
    match parent(doc, &tokens, path)? {
        Value::Object(map) => map.remove(&last).ok_or_else(|| format!("{path}: nothing to remove")),
        Value::Array(list) => {
            let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
            if i >= list.len() {
                return Err(format!("{path}: index out of range"));
            }
            Ok(list.remove(i))
        }
        _ => Err(format!("{path}: parent is not a container")),
    }
}

/// Applies `patch` (a JSON array of operations) to `doc`.
pub fn apply(doc: &mut Value, patch: &Value) -> Result<(), String> {
    for op in patch.as_array().ok_or("patch is not an array")? {
        let path = op["path"].as_str().ok_or("operation without path")?;
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
                let from = op["from"].as_str().ok_or("move without from")?;
                let value = remove(doc, from)?;
                add(doc, path, value)?;
            }
            Some("copy") => {
                let from = op["from"].as_str().ok_or("copy without from")?;
                let value = get(doc, from)?;
                add(doc, path, value)?;
            }
            Some("test") => {
                if get(doc, path)? != op["value"] {
                    return Err(format!("test failed at {path}"));
                }
            }
            other => return Err(format!("unknown op {other:?}")),
        }
    }
    Ok(())
}
