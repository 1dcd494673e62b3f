//! Reading plain JSON without building strings: the decision paths look
//! fields up by name on every request.

use serde_json::Value;

/// The value at `path` (object keys, outermost first) under `value`.
///
/// `Value::pointer` would do, but it allocates two strings per step to
/// unescape `~0` and `~1`; field names known in advance need none of that.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, key| value.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn follows_object_keys() {
        let v = json!({"spec": {"template": {"spec": {"hostNetwork": true}}}, "list": [1]});
        assert_eq!(at(&v, &["spec", "template", "spec", "hostNetwork"]), Some(&json!(true)));
        assert_eq!(at(&v, &[]), Some(&v));
        assert_eq!(at(&v, &["spec", "missing"]), None);
        assert_eq!(at(&v, &["list", "0"]), None, "keys name object fields only");
    }
}
