//! Server-side apply's merge of an apply configuration into a live object,
//! ported from structured-merge-diff (`typed.Merge` with the
//! "keep right-hand side" rule, which the API server's
//! MutatingAdmissionPolicy uses for `patchType: ApplyConfiguration`):
//! granular objects merge field by field, list-maps by their keys and sets
//! by value, keeping the live order and placing new items as the
//! structured merge does; atomic lists and maps, and scalars, are replaced.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::schema::{ListType, Schemas, Shape};

/// What to do with an apply configuration that sets an atomic list, map or
/// struct (a container's `args`, `nodeSelector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub enum Atomics {
    /// Refuse it, as the API server's MutatingAdmissionPolicy does (setting
    /// part of an atomic value would silently drop the rest).
    Refuse,
    /// Replace the atomic value with the configuration's, whole.
    Replace,
}

/// Why an apply configuration could not be merged; `path` in the API
/// server's field path notation (`.spec.containers[0].args`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// It sets atomic values (under [`Atomics::Refuse`]).
    #[error("may not mutate atomic arrays, maps or structs: {}", .0.join(", "))]
    Atomic(Vec<String>),
    /// A field the schema does not declare.
    #[error("{0}: field not declared in schema")]
    Undeclared(String),
    /// An object where the schema has a list or a value, or the reverse.
    #[error("{path}: expected {expected}, got {found}")]
    Conflict {
        /// Where.
        path: String,
        /// What the schema says.
        expected: &'static str,
        /// What the configuration has.
        found: &'static str,
    },
    /// Two items of an apply configuration's list with the same key.
    #[error("{path}: duplicate entries for key {key}")]
    Duplicate {
        /// The list.
        path: String,
        /// The key.
        key: String,
    },
    /// An item of a list-map without one of the keys (and no default).
    #[error("{path}: element {index}: associative list with keys has an element that omits key field {field:?}")]
    MissingKey {
        /// The list.
        path: String,
        /// The item.
        index: usize,
        /// The key field.
        field: String,
    },
    /// A set item that is not a scalar.
    #[error("{path}: element {index}: a set's items must be scalars")]
    NotScalar {
        /// The list.
        path: String,
        /// The item.
        index: usize,
    },
}

/// Merges `config` into `live` in place, both objects of shape `shape`;
/// whether `live` changed. Only what `config` sets is visited, so the cost
/// follows the configuration, not the object. On an error `live` may be
/// partly merged: a caller that needs it as it was keeps a copy (atomic
/// values under [`Atomics::Refuse`] are found before anything changes).
pub fn apply(
    schemas: &Schemas,
    shape: Shape<'_>,
    live: &mut Value,
    config: &Value,
    atomics: Atomics,
) -> Result<bool, MergeError> {
    if atomics == Atomics::Refuse {
        let mut found = Vec::new();
        find_atomics(schemas, shape, config, &mut String::new(), &mut found);
        if !found.is_empty() {
            return Err(MergeError::Atomic(found));
        }
    }
    let mut merger = Merger { schemas, changed: false };
    match merger.merge(shape, Some(live), config, &mut String::new())? {
        Merged::Into => {}
        Merged::New(value) => merger.put(live, value),
        Merged::Absent => merger.put(live, Value::Null),
    }
    Ok(merger.changed)
}

/// Where `value` sets atomic lists, maps or structs (`findAtomics` of the
/// API server): only declared fields and list items are searched.
fn find_atomics(schemas: &Schemas, shape: Shape<'_>, value: &Value, path: &mut String, found: &mut Vec<String>) {
    match value {
        Value::Object(map) if shape.is_object() => {
            if shape.atomic_map() {
                found.push(path.clone());
            }
            let Shape::Typed { .. } = shape else { return };
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                if let Some(field) = schemas.declared(shape, key) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    find_atomics(schemas, field, &map[key.as_str()], path, found);
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) if matches!(shape, Shape::Typed { .. }) => {
            if shape.list_type() == ListType::Atomic {
                found.push(path.clone());
            }
            let item_shape = schemas.items(shape);
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                find_atomics(schemas, item_shape, item, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

struct Merger<'s> {
    schemas: &'s Schemas,
    /// Whether anything has changed so far.
    changed: bool,
}

/// A list [`Merger::merge_list`] rebuilds in place: its live items, each
/// moved out once, the items built so far, and the live index the next
/// item must have for the order to be unchanged (a change when another
/// comes).
struct Rebuilt<'s, 'o> {
    /// The items' shape.
    shape: Shape<'s>,
    live: Vec<Option<Value>>,
    in_order: usize,
    out: &'o mut Vec<Value>,
}

/// What the merge of a configuration value with a live one (or none)
/// leaves in the live value's place.
enum Merged {
    /// The live value, merged into in place.
    Into,
    /// A value that replaces it.
    New(Value),
    /// Nothing: the field is absent from the result.
    Absent,
}

impl Merger<'_> {
    /// The merge of `lhs` (live, absent when `None`) and `rhs`
    /// (configuration) at `path`.
    fn merge(
        &mut self,
        shape: Shape<'_>,
        lhs: Option<&mut Value>,
        rhs: &Value,
        path: &mut String,
    ) -> Result<Merged, MergeError> {
        if matches!(shape, Shape::Untyped) {
            return Ok(Merged::New(rhs.clone()));
        }
        // A live value of another kind is replaced, as the structured merge
        // does when the two sides' types differ.
        let lhs = lhs.filter(|l| same_kind(l, rhs));
        match rhs {
            Value::Object(r) => {
                if !shape.is_object() {
                    return Err(conflict(path, shape, "an object"));
                }
                let l = lhs.and_then(Value::as_object_mut);
                if shape.atomic_map() || (l.as_ref().is_none_or(|l| l.is_empty()) && r.is_empty()) {
                    return Ok(Merged::New(rhs.clone()));
                }
                match l {
                    Some(l) => {
                        self.merge_map(shape, l, r, path)?;
                        Ok(if l.is_empty() { Merged::Absent } else { Merged::Into })
                    }
                    None => {
                        let mut fresh = Map::new();
                        self.merge_map(shape, &mut fresh, r, path)?;
                        Ok(if fresh.is_empty() { Merged::Absent } else { Merged::New(Value::Object(fresh)) })
                    }
                }
            }
            Value::Array(r) => {
                if shape.is_object() || matches!(shape, Shape::Typed { node, .. } if !node.is_list()) {
                    return Err(conflict(path, shape, "a list"));
                }
                let l = lhs.and_then(Value::as_array_mut);
                let list_type = shape.list_type();
                if list_type == ListType::Atomic || (l.as_ref().is_none_or(|l| l.is_empty()) && r.is_empty()) {
                    return Ok(Merged::New(rhs.clone()));
                }
                match l {
                    Some(l) => {
                        self.merge_list(shape, &list_type, l, r, path)?;
                        Ok(if l.is_empty() { Merged::Absent } else { Merged::Into })
                    }
                    None => {
                        let mut fresh = Vec::new();
                        self.merge_list(shape, &list_type, &mut fresh, r, path)?;
                        Ok(if fresh.is_empty() { Merged::Absent } else { Merged::New(Value::Array(fresh)) })
                    }
                }
            }
            Value::Null => Ok(Merged::New(Value::Null)),
            _ if shape.is_object() => Err(conflict(path, shape, "a value")),
            _ => Ok(Merged::New(rhs.clone())),
        }
    }

    /// Sets `slot` to `value`, noting a change.
    fn put(&mut self, slot: &mut Value, value: Value) {
        if *slot != value {
            self.changed = true;
            *slot = value;
        }
    }

    /// Each field `rhs` sets, merged into `lhs`: those `lhs` has first,
    /// then the new ones (the order in which the first error is found);
    /// the fields only `lhs` has are left as they are.
    fn merge_map(
        &mut self,
        shape: Shape<'_>,
        lhs: &mut Map<String, Value>,
        rhs: &Map<String, Value>,
        path: &mut String,
    ) -> Result<(), MergeError> {
        let (shared, new): (Vec<_>, Vec<_>) = rhs.iter().partition(|(key, _)| lhs.contains_key(*key));
        for (key, r) in shared.into_iter().chain(new) {
            let len = path.len();
            path.push('.');
            path.push_str(key);
            // A live field the schema does not know is kept; the
            // configuration may not set one.
            let Some(field) = self.schemas.field(shape, key) else {
                return Err(MergeError::Undeclared(path.clone()));
            };
            match self.merge(field, lhs.get_mut(key), r, path)? {
                Merged::Into => {}
                Merged::New(value) => match lhs.get_mut(key) {
                    Some(slot) => self.put(slot, value),
                    None => {
                        self.changed = true;
                        lhs.insert(key.clone(), value);
                    }
                },
                Merged::Absent => self.changed |= lhs.remove(key).is_some(),
            }
            path.truncate(len);
        }
        Ok(())
    }

    /// `visitListItems` of structured-merge-diff: items in the live order,
    /// each configuration item merged with the live item of the same key;
    /// a new item goes after the live items before the next shared one.
    /// The live items are moved, not copied.
    fn merge_list(
        &mut self,
        shape: Shape<'_>,
        list_type: &ListType,
        lhs: &mut Vec<Value>,
        rhs: &[Value],
        path: &mut String,
    ) -> Result<(), MergeError> {
        let item_shape = self.schemas.items(shape);
        let rhs_keys = self.keys(item_shape, list_type, rhs, path)?;
        let lhs_keys = self.keys(item_shape, list_type, lhs, path)?;
        let mut observed_rhs = HashMap::with_capacity(rhs.len());
        for (key, item) in rhs_keys.iter().zip(rhs) {
            if observed_rhs.insert(key.as_str(), item).is_some() {
                return Err(MergeError::Duplicate { path: path.clone(), key: key.clone() });
            }
        }
        // The live object may have duplicates; a duplicated key merges
        // with nothing of the live side.
        let mut observed_lhs: HashMap<&str, Option<usize>> = HashMap::with_capacity(lhs.len());
        for (index, key) in lhs_keys.iter().enumerate() {
            observed_lhs.entry(key.as_str()).and_modify(|seen| *seen = None).or_insert(Some(index));
        }
        let live: Vec<Option<Value>> = std::mem::take(lhs).into_iter().map(Some).collect();
        let mut shared = rhs_keys.iter().filter(|k| observed_lhs.contains_key(k.as_str()));
        let mut next_shared = shared.next();
        let mut merged_rhs = HashSet::with_capacity(rhs.len());
        lhs.reserve(live.len().max(rhs.len()));
        let mut list = Rebuilt { shape: item_shape, live, in_order: 0, out: lhs };
        let (mut li, mut ri) = (0, 0);
        while li < list.live.len() || ri < rhs.len() {
            if li < list.live.len() && ri < rhs.len() {
                let key = lhs_keys[li].as_str();
                if key == rhs_keys[ri] {
                    merged_rhs.insert(key);
                    let l = observed_lhs.get(key).copied().flatten();
                    self.item(&mut list, l, observed_rhs.get(key).copied(), li, path)?;
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if observed_rhs.contains_key(key) && next_shared.is_some_and(|n| n != key) {
                    li += 1;
                    continue;
                }
            }
            if li < list.live.len() {
                let key = lhs_keys[li].as_str();
                if !observed_rhs.contains_key(key) {
                    self.item(&mut list, Some(li), None, li, path)?;
                    li += 1;
                    continue;
                } else if merged_rhs.contains(key) {
                    li += 1;
                }
            }
            if ri < rhs.len() {
                let key = rhs_keys[ri].as_str();
                merged_rhs.insert(key);
                let l = observed_lhs.get(key).copied().flatten();
                self.item(&mut list, l, observed_rhs.get(key).copied(), ri, path)?;
                ri += 1;
                if next_shared.is_some_and(|n| n == key) {
                    next_shared = shared.next();
                }
            }
        }
        self.changed |= list.in_order != list.live.len();
        Ok(())
    }

    /// The live item at `lhs` (moved out of `list`'s live items) merged
    /// with `rhs` (the configuration's item at `index`), pushed onto the
    /// rebuilt list unless the merge leaves nothing.
    fn item(
        &mut self,
        list: &mut Rebuilt<'_, '_>,
        lhs: Option<usize>,
        rhs: Option<&Value>,
        index: usize,
        path: &mut String,
    ) -> Result<(), MergeError> {
        match lhs {
            Some(i) if i == list.in_order => list.in_order += 1,
            _ => {
                self.changed = true;
                list.in_order = usize::MAX;
            }
        }
        let mut lhs = lhs.and_then(|i| list.live.get_mut(i)).and_then(Option::take);
        let Some(rhs) = rhs else {
            list.out.extend(lhs);
            return Ok(());
        };
        let len = path.len();
        path.push_str(&format!("[{index}]"));
        let merged = self.merge(list.shape, lhs.as_mut(), rhs, path)?;
        path.truncate(len);
        match merged {
            Merged::Into => list.out.extend(lhs),
            Merged::New(value) => {
                self.changed |= lhs.as_ref() != Some(&value);
                list.out.push(value);
            }
            Merged::Absent => self.changed = true,
        }
        Ok(())
    }

    /// Each item's identity in a set or list-map, as a string.
    fn keys(
        &self,
        item: Shape<'_>,
        list_type: &ListType,
        items: &[Value],
        path: &str,
    ) -> Result<Vec<String>, MergeError> {
        items
            .iter()
            .enumerate()
            .map(|(index, value)| match list_type {
                ListType::Set | ListType::Atomic => match value {
                    Value::Object(_) | Value::Array(_) => Err(MergeError::NotScalar { path: path.to_owned(), index }),
                    scalar => Ok(scalar.to_string()),
                },
                ListType::Map(fields) => {
                    let mut key = Vec::with_capacity(fields.len());
                    for field in fields {
                        let found = value.get(field).or_else(|| {
                            self.schemas.field(item, field).and_then(|shape| self.schemas.default_of(shape))
                        });
                        let Some(found) = found else {
                            return Err(MergeError::MissingKey { path: path.to_owned(), index, field: field.clone() });
                        };
                        key.push(format!("{field}={found}"));
                    }
                    Ok(key.join(","))
                }
            })
            .collect()
    }
}

fn same_kind(a: &Value, b: &Value) -> bool {
    matches!((a, b), (Value::Object(_), Value::Object(_)) | (Value::Array(_), Value::Array(_)))
        || !(a.is_object() || a.is_array() || b.is_object() || b.is_array())
}

fn conflict(path: &str, shape: Shape<'_>, found: &'static str) -> MergeError {
    let expected = if shape.is_object() {
        "an object"
    } else if matches!(shape, Shape::Typed { node, .. } if node.is_list()) {
        "a list"
    } else {
        "a value"
    };
    MergeError::Conflict { path: path.to_owned(), expected, found }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apply::BUILTIN;

    fn pod_apply(mut live: Value, config: Value, atomics: Atomics) -> Result<Value, MergeError> {
        let pod = BUILTIN.kind("", "v1", "Pod").unwrap();
        apply(&BUILTIN, pod, &mut live, &config, atomics).map(|_| live)
    }

    fn pod(containers: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"containers": containers}})
    }

    #[test]
    fn containers_merge_by_name_and_new_ones_go_last() {
        let live = pod(json!([{"name": "app", "image": "app:1"}, {"name": "log", "image": "log:1"}]));
        let config = json!({"metadata": {"labels": {"b": "2"}}, "spec": {"containers": [
            {"name": "sidecar", "image": "s:1"}, {"name": "app", "image": "app:2"}]}});
        let merged = pod_apply(live, config, Atomics::Refuse).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        // structured-merge-diff: the new item before the shared one it
        // precedes in the configuration, the live order otherwise.
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "sidecar", "image": "s:1"}, {"name": "app", "image": "app:2"}, {"name": "log", "image": "log:1"}])
        );
    }

    #[test]
    fn atomic_values_are_refused_or_replaced_as_asked() {
        let live = pod(json!([{"name": "app", "image": "app:1", "args": ["a", "b"]}]));
        let config = json!({"spec": {"nodeSelector": {"x": "y"}, "containers": [{"name": "app", "args": ["c"]}]}});
        let refused = pod_apply(live.clone(), config.clone(), Atomics::Refuse).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "may not mutate atomic arrays, maps or structs: .spec.containers[0].args, .spec.nodeSelector"
        );
        let replaced = pod_apply(live, config, Atomics::Replace).unwrap();
        assert_eq!(replaced["spec"]["containers"], json!([{"name": "app", "image": "app:1", "args": ["c"]}]));
    }

    #[test]
    fn list_map_keys_take_their_defaults_and_sets_merge_by_value() {
        let live = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [
            {"name": "app", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}});
        let config = json!({"metadata": {"finalizers": ["b", "a"]}, "spec": {"containers": [
            {"name": "app", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81}]}]}});
        let merged = pod_apply(live, config, Atomics::Refuse).unwrap();
        assert_eq!(merged["metadata"]["finalizers"], json!(["b", "a"]));
        assert_eq!(
            merged["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 81}])
        );
    }

    #[test]
    fn bad_configurations_name_the_field() {
        let live = pod(json!([{"name": "app"}]));
        let undeclared = pod_apply(live.clone(), json!({"spec": {"nope": 1}}), Atomics::Refuse).unwrap_err();
        assert_eq!(undeclared, MergeError::Undeclared(".spec.nope".into()));
        let conflict = pod_apply(live.clone(), json!({"spec": {"containers": {"a": 1}}}), Atomics::Refuse).unwrap_err();
        assert!(matches!(conflict, MergeError::Conflict { path, .. } if path == ".spec.containers"));
        let duplicate =
            pod_apply(live, json!({"spec": {"containers": [{"name": "x"}, {"name": "x"}]}}), Atomics::Refuse);
        assert!(matches!(duplicate, Err(MergeError::Duplicate { .. })));
    }
}
