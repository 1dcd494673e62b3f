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
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de};
use serde_json::{Map, Number, Value};

/// Which parts of a JSON value to build.
#[derive(Debug)]
pub enum Parts {
    /// The whole value.
    All,
    /// Of an object, only these fields, each with its own parts. A value
    /// that is not an object is built whole.
    Fields(&'static [(&'static str, Parts)]),
    /// Of an array, each item with these parts. A value that is not an
    /// array is built whole.
    Items(&'static Parts),
}

/// A set of [`Parts`] known when the program is built, so that a typed
/// decoder (`decode_parts::<P>`) can carry it as a type.
pub trait ObjectParts {
    /// The parts of `request.object` and `request.oldObject` to build.
    const PARTS: Parts;
}

/// Every part: the object as sent.
#[derive(Debug)]
pub struct Whole;

impl ObjectParts for Whole {
    const PARTS: Parts = Parts::All;
}

/// A JSON value read with the parts `P` names.
pub(crate) struct Read<P>(pub(crate) Value, PhantomData<P>);

impl<'de, P: ObjectParts> Deserialize<'de> for Read<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Read(Parts::seed(&P::PARTS).deserialize(deserializer)?, PhantomData))
    }
}

impl Parts {
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
                    out.insert((*name).to_owned(), value);
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
struct FieldSeed(&'static [(&'static str, Parts)]);

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Option<&'static (&'static str, Parts)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = Option<&'static (&'static str, Parts)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().find(|(name, _)| *name == key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CONTAINER: Parts = Parts::Fields(&[("name", Parts::All), ("image", Parts::All)]);
    const POD: Parts = Parts::Fields(&[
        ("kind", Parts::All),
        ("spec", Parts::Fields(&[("containers", Parts::Items(&CONTAINER)), ("volumes", Parts::All)])),
    ]);

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
        assert_eq!(read(&POD, &pod.to_string()), expected);
        assert_eq!(read(&Parts::All, &pod.to_string()), pod);
    }

    #[test]
    fn values_of_another_shape_are_kept_whole() {
        for value in [json!("a pod"), json!(null), json!(1.5), json!([1, {"x": 2}]), json!({"spec": {"containers": 3}})]
        {
            let text = value.to_string();
            assert_eq!(read(&POD, &text), value, "{text}");
        }
        assert_eq!(read(&POD, "[1, -2, 3.5, true, null]"), json!([1, -2, 3.5, true, null]));
    }

    #[test]
    fn escaped_keys_are_matched_and_skipped_parts_must_still_be_json() {
        assert_eq!(read(&POD, r#"{"ki\u006ed": "Pod", "x\"y": {"deep": [1, 2]}}"#), json!({"kind": "Pod"}));
        let broken = POD.seed().deserialize(&mut serde_json::Deserializer::from_str(r#"{"other": [1, }"#));
        assert!(broken.is_err());
    }
}
