//! The overloads of the standard functions and operators that cel-go's
//! checker resolves in Kubernetes' environment, for arguments whose types
//! are certain: which overload a call picks and what it gives, or the
//! API server's words when none takes the arguments (`found no matching
//! overload for '_+_' applied to '(string, int)'`).
//!
//! Only what is certain is said. A `dyn` argument matches any parameter,
//! and `null` a timestamp, a duration, an opaque type or an object
//! (cel-go's legacy nullable types); an argument holding an object typed
//! by a schema, whose name Portcullis does not give, or a function
//! outside this table is never refused here, so where in doubt a call is
//! taken. The API server's own object types (`request.userInfo`, a list
//! of `namespaceObject`'s conditions) are named, and judged.

use crate::types::DeclType;

/// What a call of a function in the table gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// An overload takes the arguments; the result's type where certain.
    Gives(Option<DeclType>),
    /// No overload takes them: cel-go's message.
    NoOverload(String),
}

const SCALARS_ADDED: [&str; 5] = ["int", "uint", "double", "string", "bytes"];
const NUMBERS: [&str; 3] = ["int", "uint", "double"];
const INTEGERS: [&str; 2] = ["int", "uint"];
/// The conversions, each a function of one argument named by the type it
/// gives.
pub(crate) const CONVERSIONS: [&str; 9] =
    ["string", "int", "uint", "double", "bool", "bytes", "timestamp", "duration", "dyn"];
const ORDERED: [&str; 8] = ["int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration"];

/// The call of `function` (on `target` when it is a method) with `args`,
/// each of a certain type; `None` when the table does not model it.
pub(crate) fn resolve(function: &str, target: Option<&DeclType>, args: &[&DeclType]) -> Option<Resolved> {
    // cel-go names every object type; Portcullis only the API server's
    // own (`kubernetes.UserInfo`), not a schema's.
    if target.into_iter().chain(args.iter().copied()).any(|t| t.cel_name().is_none()) {
        return None;
    }
    let results = results(function, target, args)?;
    Some(match results.split_first() {
        None => Resolved::NoOverload(no_overload(function, target, args)),
        // Several overloads with different results: `dyn`.
        Some((first, rest)) if rest.iter().all(|r| r == first) => Resolved::Gives(first.clone()),
        Some(_) => Resolved::Gives(Some(DeclType::Dyn)),
    })
}

/// What the call of `function` gives whatever the types of the arguments
/// given as `None` (not certain, or an object's, which cel-go names):
/// the result every overload that could take the call agrees on, when it
/// does not depend on those arguments (no `dyn` in it, which a type
/// parameter bound to them would be; `dyn()` itself gives `dyn`). Never a
/// refusal: the call's real types may be ones no overload takes, which
/// cel-go says and this does not.
pub(crate) fn whatever<'t>(
    function: &str,
    target: Option<Option<&'t DeclType>>,
    args: &[Option<&'t DeclType>],
) -> Option<DeclType> {
    fn as_dyn(t: Option<&DeclType>) -> &DeclType {
        t.filter(|t| t.cel_name().is_some()).unwrap_or(&DeclType::Dyn)
    }
    let args: Vec<&DeclType> = args.iter().map(|a| as_dyn(*a)).collect();
    let results = results(function, target.map(as_dyn), &args)?;
    let (first, rest) = results.split_first()?;
    let agreed = first.clone().filter(|_| rest.iter().all(|r| r == first))?;
    (function == "dyn" || !agreed.holds_dyn()).then_some(agreed)
}

/// The results of the overloads of `function` that take `args` (on
/// `target`), each where certain; `None` when the table does not model
/// the call.
fn results(function: &str, target: Option<&DeclType>, args: &[&DeclType]) -> Option<Vec<Option<DeclType>>> {
    Some(match (function, target, args) {
        ("_+_" | "_-_" | "_*_" | "_/_" | "_%_", None, [left, right]) => arithmetic(function, left, right),
        ("_<_" | "_<=_" | "_>_" | "_>=_", None, [left, right]) => {
            let same = ORDERED.iter().any(|t| takes(t, left) && takes(t, right));
            let numbers = NUMBERS.iter().any(|t| takes(t, left)) && NUMBERS.iter().any(|t| takes(t, right));
            if same || numbers { vec![Some(boolean())] } else { Vec::new() }
        }
        ("_==_" | "_!=_", None, [left, right]) => {
            if unify(left, right) {
                vec![Some(boolean())]
            } else {
                Vec::new()
            }
        }
        ("@in", None, [item, collection]) => {
            let taken = match collection {
                DeclType::Dyn | DeclType::Error => true,
                DeclType::List(items) => unify(item, items),
                DeclType::Map(keys, _) => unify(item, keys),
                _ => false,
            };
            if taken { vec![Some(boolean())] } else { Vec::new() }
        }
        // `_?_:_(bool, A, A) -> A`: `A` bound by the first branch and
        // widened by the second, as cel-go's substitutions do (`null`
        // then a duration: `null`).
        ("_?_:_", None, [condition, yes, no]) => {
            if takes("bool", condition) && unify(yes, no) {
                vec![Some(crate::types::most_general((*no).clone(), yes))]
            } else {
                Vec::new()
            }
        }
        ("!_", None, [operand]) => {
            if takes("bool", operand) {
                vec![Some(boolean())]
            } else {
                Vec::new()
            }
        }
        ("-_", None, [operand]) => {
            ["int", "double"].iter().filter(|t| takes(t, operand)).map(|t| Some(DeclType::Scalar(t))).collect()
        }
        ("_[_]" | "_[?_]", None, [collection, key]) => index(collection, key, function == "_[?_]"),
        (_, None, [argument]) if CONVERSIONS.contains(&function) => conversion(function, argument),
        ("size", None, [sized]) => size(sized),
        ("size", Some(sized), []) => size(sized),
        ("size", None, _) => Vec::new(),
        ("startsWith" | "endsWith" | "matches", Some(text), [pattern]) => {
            if takes("string", text) && takes("string", pattern) { vec![Some(boolean())] } else { Vec::new() }
        }
        // Other libraries may add `contains` to other types: only a
        // string's is modelled.
        ("contains", Some(DeclType::Scalar("string")), [part]) => {
            if takes("string", part) {
                vec![Some(boolean())]
            } else {
                Vec::new()
            }
        }
        // Kubernetes' libraries, or not modelled.
        _ => crate::libraries::results(function, target, args)?,
    })
}

/// The results of the overloads of an arithmetic operator that take
/// `left` and `right`.
fn arithmetic(operator: &str, left: &DeclType, right: &DeclType) -> Vec<Option<DeclType>> {
    let same: &[&'static str] = match operator {
        "_+_" => &SCALARS_ADDED,
        "_-_" | "_*_" | "_/_" => &NUMBERS,
        _ => &INTEGERS,
    };
    let mut results: Vec<Option<DeclType>> =
        same.iter().filter(|t| takes(t, left) && takes(t, right)).map(|t| Some(DeclType::Scalar(t))).collect();
    let times: &[(&str, &str, &'static str)] = match operator {
        "_+_" => &[
            ("timestamp", "duration", "timestamp"),
            ("duration", "timestamp", "timestamp"),
            ("duration", "duration", "duration"),
        ],
        "_-_" => &[
            ("timestamp", "timestamp", "duration"),
            ("timestamp", "duration", "timestamp"),
            ("duration", "duration", "duration"),
        ],
        _ => &[],
    };
    results.extend(
        times.iter().filter(|(l, r, _)| takes(l, left) && takes(r, right)).map(|(_, _, t)| Some(DeclType::Scalar(t))),
    );
    // Lists concatenate when their items unify; what the result holds is
    // not followed.
    let list = |t: &DeclType| matches!(t, DeclType::List(_) | DeclType::Dyn | DeclType::Error);
    if operator == "_+_" && list(left) && list(right) {
        let items_unify = match (left, right) {
            (DeclType::List(a), DeclType::List(b)) => unify(a, b),
            _ => true,
        };
        if items_unify {
            results.push(None);
        }
    }
    results
}

fn boolean() -> DeclType {
    DeclType::Scalar("bool")
}

/// Whether an argument of type `arg` is taken by a parameter of the
/// scalar type `param`.
pub(crate) fn takes(param: &str, arg: &DeclType) -> bool {
    match arg {
        DeclType::Dyn | DeclType::Error => true,
        DeclType::Scalar(name) => *name == param || (*name == "null_type" && nullable(param)),
        _ => false,
    }
}

/// Whether `null` stands for a value of type `name`, as cel-go's legacy
/// nullable types let it: timestamps and durations (the protobuf
/// well-known types they are) and the opaque types of Kubernetes'
/// libraries (`kubernetes.Quantity`, `net.IP`), named with a dot.
fn nullable(name: &str) -> bool {
    matches!(name, "timestamp" | "duration") || name.contains('.')
}

/// `collection[key]`, or `collection[?key]` when `optional`: a list's
/// item by an `int`, a map's value by a `string` (by `[?k]` an optional
/// of it), anything of a `dyn` (by `[?k]`, every overload takes it, each
/// with a type of its own: `dyn`), something of a `null`; of an optional
/// list or map, an optional item (the optional library's overloads).
fn index(collection: &DeclType, key: &DeclType, optional_index: bool) -> Vec<Option<DeclType>> {
    match collection {
        DeclType::Dyn | DeclType::Error => vec![Some(DeclType::Dyn)],
        // `null` stands for an optional list or map, whose index is an
        // optional of what nothing says.
        DeclType::Scalar("null_type") => vec![None],
        DeclType::List(_) | DeclType::Map(..) => {
            let item = item(collection, key);
            item.map(|t| if optional_index { optional(t) } else { t }).into_iter().map(Some).collect()
        }
        DeclType::Optional(inner) => optional_item(inner, key),
        _ => Vec::new(),
    }
}

/// An item of an optional list or map (`object.?items[0]`, `[?0]` alike):
/// an optional of it. Of an optional `dyn`, `dyn` by an `int` (the list's
/// and the map's overloads both take it, each with a type of its own)
/// and otherwise an optional of what nothing says ([`leaves_variable`]).
fn optional_item(inner: &DeclType, key: &DeclType) -> Vec<Option<DeclType>> {
    match inner {
        DeclType::Dyn if takes("int", key) => vec![Some(DeclType::Dyn)],
        DeclType::Dyn => vec![Some(optional(DeclType::Dyn))],
        DeclType::List(_) | DeclType::Map(..) => item(inner, key).map(optional).into_iter().map(Some).collect(),
        _ => Vec::new(),
    }
}

/// A list's item by an `int` or a map's value by its key type, when
/// `key` is one.
fn item(collection: &DeclType, key: &DeclType) -> Option<DeclType> {
    let (taken, item) = match collection {
        DeclType::List(items) => (takes("int", key), items),
        DeclType::Map(keys, values) => (unify(keys, key), values),
        _ => return None,
    };
    taken.then(|| (**item).clone())
}

fn optional(value: DeclType) -> DeclType {
    DeclType::Optional(Box::new(value))
}

/// Whether the call's result holds a type variable nothing bound, which
/// cel-go binds to what the result meets later (`[optional.none(),
/// optional.of(1)]` is a `list(optional_type(int))`) and [`resolve`]
/// gives as `dyn`: an optional library's overload whose type parameter
/// no argument binds (`optional.none()`), or an item of an optional `dyn`
/// by a key that is not an `int`.
pub(crate) fn leaves_variable(function: &str, target: Option<&DeclType>, args: &[&DeclType]) -> bool {
    match (function, args) {
        ("_[_]" | "_[?_]", [DeclType::Optional(inner), key]) => **inner == DeclType::Dyn && !takes("int", key),
        _ => crate::libraries::leaves_variable(function, target, args),
    }
}

/// The conversion `function` of `argument`: the types each takes, as
/// cel-go declares them (and Kubernetes' IPs and CIDRs to a string).
fn conversion(function: &str, argument: &DeclType) -> Vec<Option<DeclType>> {
    let (result, taken): (&'static str, &[&str]) = match function {
        "dyn" => return vec![Some(DeclType::Dyn)],
        "string" => (
            "string",
            &["string", "int", "uint", "double", "bool", "bytes", "timestamp", "duration", "net.IP", "net.CIDR"],
        ),
        "int" => ("int", &["int", "uint", "double", "string", "timestamp", "duration"]),
        "uint" => ("uint", &["uint", "int", "double", "string"]),
        "double" => ("double", &["double", "int", "uint", "string"]),
        "bool" => ("bool", &["bool", "string"]),
        "bytes" => ("bytes", &["bytes", "string"]),
        "timestamp" => ("timestamp", &["timestamp", "string", "int"]),
        _ => ("duration", &["duration", "string", "int"]),
    };
    if taken.iter().any(|t| takes(t, argument)) { vec![Some(DeclType::Scalar(result))] } else { Vec::new() }
}

/// `size` of `t`: an `int` of a string, bytes, a list or a map.
fn size(t: &DeclType) -> Vec<Option<DeclType>> {
    let sizable = match t {
        DeclType::Dyn | DeclType::Error | DeclType::List(_) | DeclType::Map(..) => true,
        DeclType::Scalar(name) => matches!(*name, "string" | "bytes"),
        DeclType::Optional(_) | DeclType::Object { .. } => false,
    };
    if sizable { vec![Some(DeclType::Scalar("int"))] } else { Vec::new() }
}

/// Whether `a` and `b` can be one type (`dyn` is any): a generic
/// parameter's two uses, as in `_==_(A, A)`. `null` stands for an object
/// too, as for cel-go's messages.
pub(crate) fn unify(a: &DeclType, b: &DeclType) -> bool {
    match (a, b) {
        (DeclType::Dyn | DeclType::Error, _) | (_, DeclType::Dyn | DeclType::Error) => true,
        (DeclType::Scalar(x), DeclType::Scalar(y)) => {
            x == y || (*x == "null_type" && nullable(y)) || (*y == "null_type" && nullable(x))
        }
        (DeclType::List(x), DeclType::List(y)) | (DeclType::Optional(x), DeclType::Optional(y)) => unify(x, y),
        (DeclType::Map(k, x), DeclType::Map(l, y)) => unify(k, l) && unify(x, y),
        (DeclType::Object { name: Some(x), .. }, DeclType::Object { name: Some(y), .. }) => x == y,
        // An optional is an opaque type, which `null` stands for too.
        (DeclType::Scalar("null_type"), DeclType::Object { .. } | DeclType::Optional(_))
        | (DeclType::Object { .. } | DeclType::Optional(_), DeclType::Scalar("null_type")) => true,
        _ => false,
    }
}

/// cel-go's words: `'_+_' applied to '(string, int)'`, or for a method
/// `'startsWith' applied to 'dyn.(int)'`.
fn no_overload(function: &str, target: Option<&DeclType>, args: &[&DeclType]) -> String {
    let args: Vec<String> = args.iter().map(|t| name(t)).collect();
    let applied = match target {
        Some(target) => format!("{}.({})", name(target), args.join(", ")),
        None => format!("({})", args.join(", ")),
    };
    format!("found no matching overload for '{function}' applied to '{applied}'")
}

/// A type as cel-go prints an argument's: `null` for `null_type`.
pub(crate) fn name(t: &DeclType) -> String {
    match t {
        DeclType::Scalar("null_type") => "null".to_owned(),
        DeclType::List(items) => format!("list({})", name(items)),
        DeclType::Map(keys, values) => format!("map({}, {})", name(keys), name(values)),
        DeclType::Optional(value) => format!("optional_type({})", name(value)),
        other => other.cel_name().unwrap_or_else(|| "dyn".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &'static str) -> DeclType {
        DeclType::Scalar(name)
    }

    fn list(items: DeclType) -> DeclType {
        DeclType::List(Box::new(items))
    }

    #[test]
    fn what_no_overload_takes_is_said_in_cel_gos_words() {
        // kube-apiserver 1.36's words, dry run.
        let no = |f: &str, target: Option<&DeclType>, args: &[&DeclType]| match resolve(f, target, args) {
            Some(Resolved::NoOverload(message)) => message,
            other => panic!("{f}: {other:?}"),
        };
        let prefix = "found no matching overload for ";
        assert_eq!(no("_+_", None, &[&s("string"), &s("int")]), format!("{prefix}'_+_' applied to '(string, int)'"));
        assert_eq!(no("_==_", None, &[&s("int"), &s("null_type")]), format!("{prefix}'_==_' applied to '(int, null)'"));
        assert_eq!(
            no("_+_", None, &[&list(s("int")), &list(s("string"))]),
            format!("{prefix}'_+_' applied to '(list(int), list(string))'")
        );
        assert_eq!(
            no("startsWith", Some(&DeclType::Dyn), &[&s("int")]),
            format!("{prefix}'startsWith' applied to 'dyn.(int)'")
        );
        assert_eq!(no("size", Some(&s("int")), &[]), format!("{prefix}'size' applied to 'int.()'"));
        assert_eq!(no("-_", None, &[&s("uint")]), format!("{prefix}'-_' applied to '(uint)'"));
        assert_eq!(
            no("_<_", None, &[&s("timestamp"), &s("duration")]),
            format!("{prefix}'_<_' applied to '(timestamp, duration)'")
        );
        assert_eq!(
            no("@in", None, &[&s("string"), &list(s("int"))]),
            format!("{prefix}'@in' applied to '(string, list(int))'")
        );
    }

    #[test]
    fn what_an_overload_takes_gives_its_type() {
        let gives = |f: &str, args: &[&DeclType]| match resolve(f, None, args) {
            Some(Resolved::Gives(t)) => t.and_then(|t| t.cel_name()),
            other => panic!("{f}: {other:?}"),
        };
        assert_eq!(gives("_+_", &[&DeclType::Dyn, &s("int")]).as_deref(), Some("int"));
        assert_eq!(gives("_+_", &[&DeclType::Dyn, &DeclType::Dyn]).as_deref(), Some("dyn"));
        assert_eq!(gives("_-_", &[&s("timestamp"), &s("timestamp")]).as_deref(), Some("duration"));
        assert_eq!(gives("_<_", &[&s("int"), &s("double")]).as_deref(), Some("bool"));
        assert_eq!(gives("_==_", &[&list(s("int")), &list(DeclType::Dyn)]).as_deref(), Some("bool"));
        assert_eq!(gives("_+_", &[&list(s("string")), &list(s("string"))]), None);
        assert_eq!(resolve("f", None, &[&s("int")]), None, "not modelled");
        // `null` stands for a timestamp or a duration.
        assert_eq!(gives("_==_", &[&s("timestamp"), &s("null_type")]).as_deref(), Some("bool"));
        assert_eq!(gives("_!=_", &[&s("null_type"), &s("duration")]).as_deref(), Some("bool"));
    }
}
