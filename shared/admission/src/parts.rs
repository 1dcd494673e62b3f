//! Reading only the parts of an object that a decision reads or changes.
//!
//! Building a `serde_json::Value` costs a string and a map node per key,
//! and freeing it as much again; a pod's ports, probes, env, resources and
//! managedFields are most of its keys, and the injector never looks at
//! them. [`Parts`] says which fields to build; the rest is read past (still
//! checked as JSON) and never allocated. The decision then works on that
//! smaller object, and its patch, being a diff of what it changed, is the
//! same as on the whole one, provided every field it reads or writes is
//! among the parts.

use std::fmt;
use std::sync::{Arc, LazyLock};

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de};
use serde_json::{Map, Number, Value};

/// Which parts of a JSON value to build. Built once, when a decision's
/// configuration is loaded, and shared by every request read with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parts {
    /// The whole value.
    All,
    /// Of an object, only these fields (each once, in order of name, as
    /// [`Parts::fields`] and [`Parts::merge`] keep them), each with its
    /// own parts. A value that is not an object is built whole. A list,
    /// not a map: an object's key is looked for among a few fields, and
    /// comparing lengths first rejects most keys at once.
    Fields(Vec<(String, Parts)>),
    /// Of an array, each item with these parts. A value that is not an
    /// array is built whole.
    Items(Box<Parts>),
}

/// Every part: the object as sent.
static WHOLE: LazyLock<Arc<Parts>> = LazyLock::new(|| Arc::new(Parts::All));

impl Parts {
    /// Every part, shared: what [`crate::decode`] reads with.
    pub fn whole() -> Arc<Parts> {
        Arc::clone(&WHOLE)
    }

    /// Of an object, the `fields` named, each with its parts (a field
    /// named twice with both).
    pub fn fields<'a>(fields: impl IntoIterator<Item = (&'a str, Parts)>) -> Self {
        let mut parts = Self::Fields(Vec::new());
        for (name, field) in fields {
            parts.merge(Self::Fields(vec![(name.to_owned(), field)]));
        }
        parts
    }

    /// Of an array, each item with `parts`.
    pub fn items(parts: Parts) -> Self {
        Self::Items(Box::new(parts))
    }

    /// Widens `self` to build what `other` builds too. A value read both
    /// as an object and as an array is built whole.
    pub fn merge(&mut self, other: Parts) {
        match (&mut *self, other) {
            (Parts::All, _) => {}
            (Parts::Fields(mine), Parts::Fields(theirs)) => {
                for (field, parts) in theirs {
                    // Kept in order of name, so that equal parts compare equal.
                    match mine.binary_search_by(|(name, _)| name.cmp(&field)) {
                        Ok(i) => mine[i].1.merge(parts),
                        Err(i) => mine.insert(i, (field, parts)),
                    }
                }
            }
            (Parts::Items(mine), Parts::Items(theirs)) => mine.merge(*theirs),
            _ => *self = Parts::All,
        }
    }

    /// Whether a value read with `self` holds everything one read with
    /// `other` holds.
    pub fn covers(&self, other: &Parts) -> bool {
        match (self, other) {
            (Parts::All, _) => true,
            (Parts::Fields(mine), Parts::Fields(theirs)) => {
                theirs.iter().all(|(field, parts)| mine.iter().any(|(name, m)| name == field && m.covers(parts)))
            }
            (Parts::Items(mine), Parts::Items(theirs)) => mine.covers(theirs),
            _ => false,
        }
    }

    /// Whether a value read with these parts holds the value at `path`
    /// (object keys from the top) whole.
    pub fn holds(&self, path: &[&str]) -> bool {
        match (self, path) {
            (Parts::All, _) => true,
            (Parts::Fields(fields), [first, rest @ ..]) => {
                fields.iter().find(|(name, _)| name == first).is_some_and(|(_, parts)| parts.holds(rest))
            }
            _ => false,
        }
    }

    /// A seed that reads a value with these parts.
    pub fn seed(&self) -> impl for<'de> DeserializeSeed<'de, Value = Value> + '_ {
        PartsVisitor(self)
    }
}

#[derive(Clone, Copy)]
struct PartsVisitor<'p>(&'p Parts);

impl<'de> DeserializeSeed<'de> for PartsVisitor<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            Parts::All => Value::deserialize(deserializer),
            _ => deserializer.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for PartsVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Parts::Items(item) = self.0 else {
            return Value::deserialize(SeqAccessDeserializer::new(seq));
        };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(value) = seq.next_element_seed(PartsVisitor(item))? {
            items.push(value);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Parts::Fields(fields) = self.0 else {
            return Value::deserialize(MapAccessDeserializer::new(map));
        };
        let mut out = Map::new();
        while let Some(field) = map.next_key_seed(FieldSeed(fields))? {
            match field {
                Some((name, parts)) => {
                    let value = map.next_value_seed(PartsVisitor(parts))?;
                    out.insert(name.clone(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// Reads a key and finds it among `fields`, without building it.
struct FieldSeed<'p>(&'p [(String, Parts)]);

impl<'de, 'p> DeserializeSeed<'de> for FieldSeed<'p> {
    type Value = Option<(&'p String, &'p Parts)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, 'p> Visitor<'de> for FieldSeed<'p> {
    type Value = Option<(&'p String, &'p Parts)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().find(|(name, _)| name == key).map(|(name, parts)| (name, parts)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_parts() -> Parts {
        let container = Parts::fields([("name", Parts::All), ("image", Parts::All)]);
        Parts::fields([
            ("kind", Parts::All),
            ("spec", Parts::fields([("containers", Parts::items(container)), ("volumes", Parts::All)])),
        ])
    }

    fn read(parts: &Parts, text: &str) -> Value {
        parts.seed().deserialize(&mut serde_json::Deserializer::from_str(text)).expect("valid JSON")
    }

    #[test]
    fn builds_only_the_parts_named() {
        let pod = json!({
            "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}], "env": []}, "odd"],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "restartPolicy": "Always"
            }
        });
        let expected = json!({
            "kind": "Pod",
            "spec": {"containers": [{"name": "app", "image": "nginx"}, "odd"], "volumes": [{"name": "v", "emptyDir": {}}]}
        });
        assert_eq!(read(&pod_parts(), &pod.to_string()), expected);
        assert_eq!(read(&Parts::All, &pod.to_string()), pod);
    }

    #[test]
    fn values_of_another_shape_are_kept_whole() {
        for value in [json!("a pod"), json!(null), json!(1.5), json!([1, {"x": 2}]), json!({"spec": {"containers": 3}})]
        {
            let text = value.to_string();
            assert_eq!(read(&pod_parts(), &text), value, "{text}");
        }
        assert_eq!(read(&pod_parts(), "[1, -2, 3.5, true, null]"), json!([1, -2, 3.5, true, null]));
    }

    #[test]
    fn escaped_keys_are_matched_and_skipped_parts_must_still_be_json() {
        assert_eq!(read(&pod_parts(), r#"{"ki\u006ed": "Pod", "x\"y": {"deep": [1, 2]}}"#), json!({"kind": "Pod"}));
        let broken = pod_parts().seed().deserialize(&mut serde_json::Deserializer::from_str(r#"{"other": [1, }"#));
        assert!(broken.is_err());
    }

    #[test]
    fn holds_says_what_is_read_whole() {
        let parts = pod_parts();
        assert!(parts.holds(&["kind"]) && parts.holds(&["spec", "volumes"]) && parts.holds(&["spec", "volumes", "x"]));
        assert!(!parts.holds(&["spec"]), "only some of it");
        assert!(!parts.holds(&["spec", "containers"]), "each item's parts, not the list");
        assert!(!parts.holds(&["metadata", "labels"]) && Parts::All.holds(&["metadata", "labels"]));
    }

    #[test]
    fn merged_parts_build_what_either_builds_and_cover_both() {
        let labels = Parts::fields([("metadata", Parts::fields([("labels", Parts::All)]))]);
        let mut both = pod_parts();
        both.merge(labels.clone());
        assert!(both.covers(&pod_parts()) && both.covers(&labels));
        assert!(!pod_parts().covers(&labels) && !labels.covers(&pod_parts()));
        let text = json!({"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}}).to_string();
        assert_eq!(read(&both, &text), json!({"kind": "Pod", "metadata": {"labels": {"a": "b"}}}));

        // Read as an object by one and as an array by the other: whole.
        let mut odd = Parts::fields([("spec", Parts::fields([("volumes", Parts::items(Parts::All))]))]);
        odd.merge(Parts::fields([("spec", Parts::fields([("volumes", Parts::fields([("x", Parts::All)]))]))]));
        assert_eq!(odd, Parts::fields([("spec", Parts::fields([("volumes", Parts::All)]))]));
        assert!(Parts::All.covers(&odd) && !odd.covers(&Parts::All));
    }
}
