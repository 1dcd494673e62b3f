//! The JSON Patch (RFC 6902) from one JSON value to another, computed by
//! diff and written straight into the bytes the response carries.
//!
//! The operations are those of `json_patch::diff` (object keys in order,
//! then removed keys; arrays position by position, extra items added or
//! removed at the end), but nothing is cloned and no intermediate patch is
//! built: equal subtrees are walked without building a pointer, and an
//! operation's pointer and value are serialized where they are found.

use serde_json::{Map, Value};

/// A JSON Patch as the bytes of its JSON array, with its count of
/// operations. Never empty: equal values have no patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPatch {
    json: Vec<u8>,
    operations: usize,
}

impl JsonPatch {
    /// The patch as JSON text (a JSON array of operations).
    pub fn as_bytes(&self) -> &[u8] {
        &self.json
    }

    /// The patch as JSON text, moved out.
    pub fn into_bytes(self) -> Vec<u8> {
        self.json
    }

    /// How many operations the patch holds (at least one).
    pub fn operations(&self) -> usize {
        self.operations
    }

    /// Applies the patch to `target` (the value it was computed from, or
    /// one with the same paths), as the API server will: for showing the
    /// result offline, never on the admission path.
    pub fn apply_to(&self, target: &mut Value) -> Result<(), ApplyError> {
        let operations: json_patch::Patch = serde_json::from_slice(&self.json).map_err(ApplyError::Read)?;
        json_patch::patch(target, &operations).map_err(ApplyError::Apply)
    }
}

/// Why a [`JsonPatch`] did not apply.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The patch's text is not a JSON Patch (it always is when made by
    /// [`diff`]).
    #[error("the patch is not a JSON Patch")]
    Read(#[source] serde_json::Error),
    /// An operation's path or test does not hold for the target.
    #[error("the patch does not apply")]
    Apply(#[source] json_patch::PatchError),
}

/// The RFC 6902 patch that turns `original` into `mutated`, or `None` when
/// they are equal. Keys with `/` or `~` are escaped, and a map that exists
/// on both sides is edited key by key, never replaced wholesale.
pub fn diff(original: &Value, mutated: &Value) -> Option<JsonPatch> {
    // A typical pod's patch is 1 to 3 KB: one allocation instead of a
    // series of doublings and copies.
    let mut writer = Writer { json: Vec::with_capacity(4096), path: Vec::new(), operations: 0 };
    writer.value(original, mutated);
    if writer.operations == 0 {
        return None;
    }
    writer.json.push(b']');
    Some(JsonPatch { json: writer.json, operations: writer.operations })
}

/// One step of the JSON Pointer to where the walk is.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

#[derive(Debug)]
struct Writer<'a> {
    json: Vec<u8>,
    path: Vec<Step<'a>>,
    operations: usize,
}

impl<'a> Writer<'a> {
    fn value(&mut self, left: &'a Value, right: &'a Value) {
        match (left, right) {
            (Value::Object(left), Value::Object(right)) => self.object(left, right),
            (Value::Array(left), Value::Array(right)) => self.array(left, right),
            _ if left == right => {}
            _ => self.operation("replace", Some(right)),
        }
    }

    /// Both maps are sorted by key, so one merged pass finds the keys that
    /// changed, were added and were removed; removals are written after the
    /// rest, as `json_patch::diff` does.
    fn object(&mut self, left: &'a Map<String, Value>, right: &'a Map<String, Value>) {
        let mut removed = Vec::new();
        let mut old = left.iter().peekable();
        for (key, new_value) in right {
            while let Some((gone, _)) = old.next_if(|(k, _)| k.as_str() < key.as_str()) {
                removed.push(gone.as_str());
            }
            self.path.push(Step::Key(key));
            match old.next_if(|(k, _)| *k == key) {
                Some((_, old_value)) => self.value(old_value, new_value),
                None => self.operation("add", Some(new_value)),
            }
            self.path.pop();
        }
        removed.extend(old.map(|(k, _)| k.as_str()));
        for key in removed {
            self.path.push(Step::Key(key));
            self.operation("remove", None);
            self.path.pop();
        }
    }

    fn array(&mut self, left: &'a [Value], right: &'a [Value]) {
        let common = left.len().min(right.len());
        for (index, (old, new)) in left.iter().zip(right).enumerate() {
            self.path.push(Step::Index(index));
            self.value(old, new);
            self.path.pop();
        }
        for (index, new) in right.iter().enumerate().skip(common) {
            self.path.push(Step::Index(index));
            self.operation("add", Some(new));
            self.path.pop();
        }
        // Each removal shifts what follows, so all are at the same index.
        for _ in common..left.len() {
            self.path.push(Step::Index(common));
            self.operation("remove", None);
            self.path.pop();
        }
    }

    fn operation(&mut self, op: &str, value: Option<&Value>) {
        self.json.push(if self.operations == 0 { b'[' } else { b',' });
        self.operations += 1;
        self.json.extend_from_slice(br#"{"op":""#);
        self.json.extend_from_slice(op.as_bytes());
        self.json.extend_from_slice(br#"","path":""#);
        for step in &self.path {
            self.json.push(b'/');
            match step {
                Step::Key(key) => pointer_token(&mut self.json, key),
                Step::Index(index) => self.json.extend_from_slice(itoa::Buffer::new().format(*index).as_bytes()),
            }
        }
        self.json.push(b'"');
        if let Some(value) = value {
            self.json.extend_from_slice(br#","value":"#);
            write_value(&mut self.json, value);
        }
        self.json.push(b'}');
    }
}

/// A map key as a JSON Pointer token (`~` as `~0`, `/` as `~1`), escaped
/// for a JSON string, in one pass: the runs between escapes are copied
/// whole.
fn pointer_token(out: &mut Vec<u8>, key: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = key.as_bytes();
    let mut run = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let control;
        let escaped: &[u8] = match byte {
            b'~' => b"~0",
            b'/' => b"~1",
            b'"' => br#"\""#,
            b'\\' => br"\\",
            0..0x20 => {
                control = [b'\\', b'u', b'0', b'0', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
                &control
            }
            // Multi-byte UTF-8 needs no escaping in JSON.
            _ => continue,
        };
        out.extend_from_slice(&bytes[run..at]);
        out.extend_from_slice(escaped);
        run = at + 1;
    }
    out.extend_from_slice(&bytes[run..]);
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    // Writing a `Value` into a `Vec` cannot fail: its keys are strings and
    // its numbers finite.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(original: &Value, mutated: &Value) -> Value {
        diff(original, mutated).map(|p| serde_json::from_slice(p.as_bytes()).unwrap_or_default()).unwrap_or_default()
    }

    #[test]
    fn escapes_pointer_keys_and_keeps_existing_annotations() {
        let original = json!({"metadata": {"annotations": {"a/b~c": "1", "q\"x": "1"}}});
        let mutated = json!({"metadata": {"annotations": {"a/b~c": "2", "q\"x": "2", "portcullis.dev/status": "{}"}}});
        let patch = ops(&original, &mutated);
        let paths: Vec<&str> = patch.as_array().into_iter().flatten().filter_map(|op| op["path"].as_str()).collect();
        assert_eq!(
            paths,
            [
                "/metadata/annotations/a~1b~0c",
                "/metadata/annotations/portcullis.dev~1status",
                "/metadata/annotations/q\"x"
            ]
        );
    }

    #[test]
    fn gives_the_operations_of_json_patch_diff() {
        let original = json!({"a": 1, "b": [1, 2, 3], "c": {"x": 1}, "e": [1], "z": null});
        let mutated = json!({"a": 2, "b": [1], "c": {"y": 2}, "d": [], "e": [1, {"k": "v"}]});
        let expected = serde_json::to_value(json_patch::diff(&original, &mutated)).unwrap_or_default();
        assert_eq!(ops(&original, &mutated), expected);
        assert_eq!(diff(&original, &mutated).map(|p| p.operations()), expected.as_array().map(Vec::len));
    }

    #[test]
    fn escapes_control_characters_in_keys() {
        let patch = ops(&json!({}), &json!({"a\u{1}b\n": 1}));
        assert_eq!(patch[0]["path"], "/a\u{1}b\n");
    }

    #[test]
    fn equal_values_have_no_patch() {
        let v = json!({"spec": {"containers": [{"name": "a"}]}});
        assert!(diff(&v, &v.clone()).is_none());
    }

    #[test]
    fn a_different_root_is_replaced() {
        assert_eq!(ops(&json!([1]), &json!({"a": 1})), json!([{"op": "replace", "path": "", "value": {"a": 1}}]));
    }
}
