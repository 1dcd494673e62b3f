//! A CEL result as the JSON it stands for: what a mutation's expression
//! returns (an apply configuration, a JSON Patch's value) becomes part of
//! an object, so it must be data JSON can hold.

use cel::Value;
use cel::objects::Key;

/// A value JSON cannot hold, with where it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {what} has no JSON form")]
pub struct NotJson {
    /// Where in the result, as a JSON Pointer (`""`: the result itself).
    pub path: String,
    /// What was found there.
    pub what: String,
}

/// The JSON form of `value`, as cel-go converts a result to
/// `structpb.Value`: bytes as base64, timestamps in RFC 3339; a map needs
/// string keys, and functions, types, optionals and non-finite numbers
/// have no form.
pub fn to_json(value: &Value) -> Result<serde_json::Value, NotJson> {
    at(value, &mut String::new())
}

fn at(value: &Value, path: &mut String) -> Result<serde_json::Value, NotJson> {
    let not = |path: &String, what: String| Err(NotJson { path: path.clone(), what });
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => (*i).into(),
        Value::UInt(u) => (*u).into(),
        Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => serde_json::Value::Number(n),
            None => return not(path, format!("the number {f}")),
        },
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine as _;
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        Value::Timestamp(t) => serde_json::Value::String(t.to_rfc3339()),
        Value::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                out.push(at(item, path)?);
                path.truncate(len);
            }
            serde_json::Value::Array(out)
        }
        Value::Map(map) => {
            let mut out = serde_json::Map::with_capacity(map.map.len());
            for (key, item) in map.map.iter() {
                let Key::String(name) = key else {
                    return not(path, format!("a map with the key {key:?}"));
                };
                let len = path.len();
                path.push('/');
                path.push_str(&name.replace('~', "~0").replace('/', "~1"));
                out.insert(name.to_string(), at(item, path)?);
                path.truncate(len);
            }
            serde_json::Value::Object(out)
        }
        Value::Duration(_) | Value::Function(..) | Value::Opaque(_) => {
            return not(path, format!("a value of type {:?}", value.type_of()));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Environment, LoadBounds, compile_in};

    fn run(source: &str) -> Value {
        let expression = compile_in(Environment::Mutation, source, LoadBounds::ApiServer).unwrap();
        expression.program.execute(&cel::Context::default()).unwrap()
    }

    #[test]
    fn messages_become_objects() {
        let value =
            run("Object{metadata: Object.metadata{labels: {'a/b': 'c'}}, spec: Object.spec{?x: optional.none()}}");
        assert_eq!(to_json(&value).unwrap(), serde_json::json!({"metadata": {"labels": {"a/b": "c"}}, "spec": {}}));
        let patch = run("[JSONPatch{op: 'add', path: '/a', value: [1, 2.5, b'hi', null]}]");
        assert_eq!(
            to_json(&patch).unwrap(),
            serde_json::json!([{"op": "add", "path": "/a", "value": [1, 2.5, "aGk=", null]}])
        );
    }

    #[test]
    fn what_json_cannot_hold_is_named_with_its_place() {
        let error = to_json(&run("{'a/b': [{1: 2}]}")).unwrap_err();
        assert_eq!(error.path, "/a~1b/0");
        assert!(to_json(&run("duration('1s')")).is_err());
    }
}
