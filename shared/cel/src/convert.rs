//! JSON into the interpreter's values, as far as the expressions read it
//! ([`crate::reads`]): `object`, `oldObject` and `request` once per
//! admission request, each parameter object once per policy.

use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt};
use cel::common::value::Val;
use portcullis_admission::{GroupVersionKind, GroupVersionResource, Request, operation_name};
use serde_json::Value;

use crate::reads::{DataReads, Reads};

/// A value converted for the interpreter, borrowed by every evaluation
/// that reads it.
pub struct Converted(pub(crate) Box<dyn Val>);

impl std::fmt::Debug for Converted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Converted").finish_non_exhaustive()
    }
}

impl Converted {
    /// `null`: what an expression sees of a variable it reads that has no
    /// value (an absent `oldObject`, `params` without a parameter object).
    pub fn null() -> Self {
        Self(Box::new(CelNull))
    }

    /// `value` as far as `reads` says (`null` when nothing reads it): the
    /// fields of an object that are read, a placeholder for one only tested
    /// with `has`, the rest whole. A parameter object is converted so, with
    /// what the expressions read of `params`.
    pub fn reading(value: &Value, reads: Option<&Reads>) -> Self {
        reads.map_or_else(Self::null, |reads| Self(to_cel_reading(value, reads)))
    }
}

/// `object`, `oldObject`, `request` and `namespaceObject` as CEL values,
/// converted once per admission request and borrowed by every evaluation.
/// A variable no expression reads is `None`: not bound at all, which costs
/// nothing per evaluation (an expression that named it would read it).
#[derive(Debug)]
pub struct Bindings {
    pub(crate) object: Option<Converted>,
    pub(crate) old_object: Option<Converted>,
    pub(crate) request: Option<Converted>,
    pub(crate) namespace_object: Option<Converted>,
    /// Whether an expression reads `params`, so that it is bound.
    pub(crate) params_read: bool,
}

impl Bindings {
    /// The objects and the request of an admission request, and
    /// `namespace` as `namespaceObject` (`None`: `null`, as for a
    /// cluster-scoped object), as far as `reads` says expressions read them.
    pub fn of(req: &Request, namespace: Option<&Value>, reads: &DataReads) -> Self {
        Self::with_object(req, req.object.as_ref(), namespace, reads)
    }

    /// As [`Bindings::of`], with `object` in place of the request's own (a
    /// mutation sees the object as the mutations before it left it).
    pub fn with_object(req: &Request, object: Option<&Value>, namespace: Option<&Value>, reads: &DataReads) -> Self {
        let part = |value: Option<&Value>, reads: &Option<Reads>| {
            let reads = reads.as_ref()?;
            Some(value.map_or_else(Converted::null, |value| Converted::reading(value, Some(reads))))
        };
        Self {
            object: part(object, &reads.object),
            old_object: part(req.old_object.as_ref(), &reads.old_object),
            request: reads.request.as_ref().map(|r| Converted(request(req, r))),
            namespace_object: part(namespace, &reads.namespace_object),
            params_read: reads.params.is_some(),
        }
    }
}

/// The `request` variable, made straight from the decoded request, with
/// the fields `reads` names (each whole). As in Kubernetes, where it is a
/// typed message, unset fields read as their zero value (`""`, `[]`, `{}`),
/// not as errors.
fn request(req: &Request, reads: &Reads) -> Box<dyn Val> {
    let r = &req.inner;
    let user = &r.user_info;
    let text = |s: &str| Box::new(CelString::from(s)) as Box<dyn Val>;
    let texts = |items: &[String]| -> Box<dyn Val> {
        Box::new(CelList::from(items.iter().map(|s| text(s)).collect::<Vec<_>>()))
    };
    let kind = |k: &GroupVersionKind| {
        record([("group", text(&k.group)), ("version", text(&k.version)), ("kind", text(&k.kind))])
    };
    let resource = |k: &GroupVersionResource| {
        record([("group", text(&k.group)), ("version", text(&k.version)), ("resource", text(&k.resource))])
    };
    let sub_resource = r.sub_resource.as_deref().unwrap_or_default();
    let extra = || {
        Box::new(user.extra.iter().flatten().map(|(k, v)| (CelMapKey::from(k.as_str()), texts(v))).collect::<CelMap>())
            as Box<dyn Val>
    };
    let user_info = || {
        record([
            ("username", text(user.username.as_deref().unwrap_or_default())),
            ("uid", text(user.uid.as_deref().unwrap_or_default())),
            ("groups", texts(user.groups.as_deref().unwrap_or_default())),
            ("extra", extra()),
        ])
    };
    let fields: [Field<'_>; 13] = [
        ("uid", &|| text(&r.uid)),
        ("kind", &|| kind(&r.kind)),
        ("resource", &|| resource(&r.resource)),
        ("subResource", &|| text(sub_resource)),
        ("requestKind", &|| kind(r.request_kind.as_ref().unwrap_or(&r.kind))),
        ("requestResource", &|| resource(r.request_resource.as_ref().unwrap_or(&r.resource))),
        ("requestSubResource", &|| text(r.request_sub_resource.as_deref().unwrap_or(sub_resource))),
        ("name", &|| text(&r.name)),
        ("namespace", &|| text(r.namespace.as_deref().unwrap_or_default())),
        ("operation", &|| text(operation_name(&r.operation))),
        ("userInfo", &user_info),
        ("dryRun", &|| Box::new(CelBool::from(r.dry_run))),
        ("options", &|| r.options.as_ref().map_or_else(|| record([]), |o| to_cel(&o.0))),
    ];
    let fields = fields.into_iter().filter(|(name, _)| reads.field(name).is_some());
    Box::new(fields.map(|(name, value)| (CelMapKey::from(name), value())).collect::<CelMap>())
}

/// A field of a record and how to make its value, when it is read.
type Field<'a> = (&'static str, &'a dyn Fn() -> Box<dyn Val>);

fn record<const N: usize>(fields: [(&str, Box<dyn Val>); N]) -> Box<dyn Val> {
    Box::new(fields.into_iter().map(|(k, v)| (CelMapKey::from(k), v)).collect::<CelMap>())
}

fn to_cel_reading(value: &Value, reads: &Reads) -> Box<dyn Val> {
    match (reads, value) {
        (Reads::Presence, _) => Box::new(CelNull),
        (Reads::Fields(fields), Value::Object(map)) => Box::new(
            fields
                .iter()
                .filter_map(|(name, reads)| {
                    map.get(name).map(|value| (CelMapKey::from(name.as_str()), to_cel_reading(value, reads)))
                })
                .collect::<CelMap>(),
        ),
        _ => to_cel(value),
    }
}

/// JSON to the interpreter's values, with Kubernetes' typing: integers are
/// `int`, other numbers `double`. Converted straight, in one pass.
fn to_cel(value: &Value) -> Box<dyn Val> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => Box::new(CelList::from(items.iter().map(to_cel).collect::<Vec<_>>())),
        Value::Object(map) => {
            Box::new(map.iter().map(|(k, v)| (CelMapKey::from(k.as_str()), to_cel(v))).collect::<CelMap>())
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The keys of a converted map, sorted.
    fn keys(value: &dyn Val) -> Vec<String> {
        let map = value.downcast_ref::<CelMap>().expect("a map");
        let mut keys: Vec<String> = map
            .inner()
            .keys()
            .map(|k| match k {
                CelMapKey::String(s) => s.inner().to_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn bindings_hold_only_what_the_expressions_read() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "shop", "managedFields": [{"manager": "kubectl"}],
                         "annotations": {"big": "x"}},
            "data": {"a": "1"}, "status": {"phase": "x"}});
        let review = portcullis_admission::manifest::as_review(object).unwrap();
        let req = portcullis_admission::decode(&serde_json::to_vec(&review).unwrap()).unwrap();
        let mut reads = DataReads::default();
        for source in ["object.metadata.name == 'c'", "has(object.metadata.annotations)", "request.operation != ''"] {
            reads.add(&crate::compile(source, u64::MAX).unwrap());
        }
        let bindings = Bindings::of(&req, None, &reads);
        let object = bindings.object.as_ref().expect("object is read");
        assert_eq!(keys(object.0.as_ref()), ["metadata"]);
        let metadata = object.0.downcast_ref::<CelMap>().unwrap().get_str("metadata").unwrap();
        assert_eq!(keys(metadata), ["annotations", "name"]);
        let annotations = metadata.downcast_ref::<CelMap>().unwrap().get_str("annotations").unwrap();
        assert!(annotations.downcast_ref::<CelNull>().is_some(), "only has() reads it: a placeholder");
        assert_eq!(keys(bindings.request.as_ref().expect("request is read").0.as_ref()), ["operation"]);
        assert!(bindings.old_object.is_none(), "oldObject is not read, so not bound");
        assert!(!bindings.params_read);
        let whole = Bindings::of(&req, None, &DataReads::everything());
        let object = whole.object.as_ref().expect("object is read");
        assert_eq!(keys(object.0.as_ref()), ["apiVersion", "data", "kind", "metadata", "status"]);
        assert!(whole.namespace_object.is_some_and(|n| n.0.downcast_ref::<CelNull>().is_some()), "read, absent: null");
    }
}
