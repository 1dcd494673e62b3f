//! The functions Kubernetes' CEL libraries add to cel-go's standard ones
//! in kube-apiserver 1.36's admission environment (quantities, semantic
//! versions, URLs, IPs and CIDRs, regular expressions, lists, sets,
//! strings, formats, optionals), each overload as cel-go declares it, so
//! that a call none of them takes is refused in the API server's words
//! (`found no matching overload for 'isGreaterThan' applied to
//! 'kubernetes.Quantity.(string)'`) and what one gives is known
//! (`quantity(s).asInteger()` is an `int`).
//!
//! Where Kubernetes declares a function for fewer types than the
//! interpreter evaluates it for (`reverse` of a list, not of a string;
//! `sign` as `sign(q)`, not `q.sign()`), the table is Kubernetes'. Each
//! overload here was checked against the API server (`tests/libraries.rs`
//! keeps its words); an overload missing from the table would refuse what
//! the API server takes, so a function is listed whole or not at all.

use crate::types::DeclType;

/// A parameter's or a result's type in an overload.
#[derive(Debug, Clone, Copy)]
enum T {
    /// A type by its name in cel-go's messages: `int`, `string`,
    /// `kubernetes.Quantity`.
    Named(&'static str),
    /// The overload's type parameter (cel-go's `A`): every use is one type.
    A,
    /// A list of the given items.
    List(&'static T),
    /// A map from strings to the given values (`map(string, V)`).
    Map(&'static T),
    /// Any type (cel-go's `dyn` parameter): gives `dyn`.
    Any,
    /// An optional value of the given type (cel-go's
    /// `optional_type(T)`), which `null` stands for too.
    Optional(&'static T),
}

/// One overload: `receiver.function(params) -> result`, or a global
/// (`function(params)`, `sets.contains(a, b)`) without a receiver.
#[derive(Debug)]
struct Overload {
    function: &'static str,
    receiver: Option<T>,
    params: &'static [T],
    result: T,
}

const fn global(function: &'static str, params: &'static [T], result: T) -> Overload {
    Overload { function, receiver: None, params, result }
}

const fn member(receiver: T, function: &'static str, params: &'static [T], result: T) -> Overload {
    Overload { function, receiver: Some(receiver), params, result }
}

const INT: T = T::Named("int");
const UINT: T = T::Named("uint");
const DOUBLE: T = T::Named("double");
const STRING: T = T::Named("string");
const BYTES: T = T::Named("bytes");
const BOOL: T = T::Named("bool");
const DURATION: T = T::Named("duration");
const TIMESTAMP: T = T::Named("timestamp");
const QUANTITY: T = T::Named("kubernetes.Quantity");
const SEMVER: T = T::Named("kubernetes.Semver");
const URL: T = T::Named("kubernetes.URL");
const IP: T = T::Named("net.IP");
const CIDR: T = T::Named("net.CIDR");
const FORMAT: T = T::Named("kubernetes.NamedFormat");
const STRINGS: T = T::List(&STRING);
const LIST: T = T::List(&T::A);
const OPTIONAL: T = T::Optional(&T::A);

/// The overloads of `function` on lists of each type that `isSorted`,
/// `min`, `max` and `sort` take (those cel-go can order), giving a
/// `bool`, the `item` or the `list`.
macro_rules! on_ordered_lists {
    ($function:literal, $gives:ident) => {
        [
            on_ordered_lists!(@one $function, INT, $gives),
            on_ordered_lists!(@one $function, UINT, $gives),
            on_ordered_lists!(@one $function, DOUBLE, $gives),
            on_ordered_lists!(@one $function, BOOL, $gives),
            on_ordered_lists!(@one $function, STRING, $gives),
            on_ordered_lists!(@one $function, BYTES, $gives),
            on_ordered_lists!(@one $function, DURATION, $gives),
            on_ordered_lists!(@one $function, TIMESTAMP, $gives),
        ]
    };
    (@one $function:literal, $item:ident, bool) => {
        member(T::List(&$item), $function, &[], BOOL)
    };
    (@one $function:literal, $item:ident, item) => {
        member(T::List(&$item), $function, &[], $item)
    };
    (@one $function:literal, $item:ident, list) => {
        member(T::List(&$item), $function, &[], T::List(&$item))
    };
}

const QUANTITIES: [Overload; 13] = [
    global("quantity", &[STRING], QUANTITY),
    global("isQuantity", &[STRING], BOOL),
    global("sign", &[QUANTITY], INT),
    member(QUANTITY, "isGreaterThan", &[QUANTITY], BOOL),
    member(QUANTITY, "isLessThan", &[QUANTITY], BOOL),
    member(QUANTITY, "compareTo", &[QUANTITY], INT),
    member(QUANTITY, "add", &[QUANTITY], QUANTITY),
    member(QUANTITY, "add", &[INT], QUANTITY),
    member(QUANTITY, "sub", &[QUANTITY], QUANTITY),
    member(QUANTITY, "sub", &[INT], QUANTITY),
    member(QUANTITY, "isInteger", &[], BOOL),
    member(QUANTITY, "asInteger", &[], INT),
    member(QUANTITY, "asApproximateFloat", &[], DOUBLE),
];

const SEMVERS: [Overload; 10] = [
    global("semver", &[STRING], SEMVER),
    global("semver", &[STRING, BOOL], SEMVER),
    global("isSemver", &[STRING], BOOL),
    global("isSemver", &[STRING, BOOL], BOOL),
    member(SEMVER, "major", &[], INT),
    member(SEMVER, "minor", &[], INT),
    member(SEMVER, "patch", &[], INT),
    member(SEMVER, "isGreaterThan", &[SEMVER], BOOL),
    member(SEMVER, "isLessThan", &[SEMVER], BOOL),
    member(SEMVER, "compareTo", &[SEMVER], INT),
];

const URLS: [Overload; 8] = [
    global("url", &[STRING], URL),
    global("isURL", &[STRING], BOOL),
    member(URL, "getScheme", &[], STRING),
    member(URL, "getHost", &[], STRING),
    member(URL, "getHostname", &[], STRING),
    member(URL, "getPort", &[], STRING),
    member(URL, "getEscapedPath", &[], STRING),
    member(URL, "getQuery", &[], T::Map(&STRINGS)),
];

const IPS: [Overload; 18] = [
    global("ip", &[STRING], IP),
    global("isIP", &[STRING], BOOL),
    global("ip.isCanonical", &[STRING], BOOL),
    member(IP, "family", &[], INT),
    member(IP, "isUnspecified", &[], BOOL),
    member(IP, "isLoopback", &[], BOOL),
    member(IP, "isLinkLocalMulticast", &[], BOOL),
    member(IP, "isLinkLocalUnicast", &[], BOOL),
    member(IP, "isGlobalUnicast", &[], BOOL),
    global("cidr", &[STRING], CIDR),
    global("isCIDR", &[STRING], BOOL),
    member(CIDR, "containsIP", &[STRING], BOOL),
    member(CIDR, "containsIP", &[IP], BOOL),
    member(CIDR, "containsCIDR", &[STRING], BOOL),
    member(CIDR, "containsCIDR", &[CIDR], BOOL),
    member(CIDR, "ip", &[], IP),
    member(CIDR, "masked", &[], CIDR),
    member(CIDR, "prefixLength", &[], INT),
];

const REGEX: [Overload; 3] = [
    member(STRING, "find", &[STRING], STRING),
    member(STRING, "findAll", &[STRING], STRINGS),
    member(STRING, "findAll", &[STRING, INT], STRINGS),
];

/// cel-go's strings extension at the version Kubernetes enables (2: no
/// `reverse` of a string), with `indexOf` and `lastIndexOf` of a list
/// from Kubernetes' lists library beside those of a string.
const STRINGS_EXT: [Overload; 20] = [
    member(STRING, "charAt", &[INT], STRING),
    member(STRING, "indexOf", &[STRING], INT),
    member(STRING, "indexOf", &[STRING, INT], INT),
    member(LIST, "indexOf", &[T::A], INT),
    member(STRING, "lastIndexOf", &[STRING], INT),
    member(STRING, "lastIndexOf", &[STRING, INT], INT),
    member(LIST, "lastIndexOf", &[T::A], INT),
    member(STRING, "lowerAscii", &[], STRING),
    member(STRING, "upperAscii", &[], STRING),
    member(STRING, "replace", &[STRING, STRING], STRING),
    member(STRING, "replace", &[STRING, STRING, INT], STRING),
    member(STRING, "split", &[STRING], STRINGS),
    member(STRING, "split", &[STRING, INT], STRINGS),
    member(STRING, "substring", &[INT], STRING),
    member(STRING, "substring", &[INT, INT], STRING),
    member(STRING, "trim", &[], STRING),
    member(STRINGS, "join", &[], STRING),
    member(STRINGS, "join", &[STRING], STRING),
    global("strings.quote", &[STRING], STRING),
    member(STRING, "format", &[T::List(&T::Any)], STRING),
];

/// Kubernetes' lists library and cel-go's lists extension.
const LISTS: [Overload; 12] = [
    member(T::List(&INT), "sum", &[], INT),
    member(T::List(&UINT), "sum", &[], UINT),
    member(T::List(&DOUBLE), "sum", &[], DOUBLE),
    member(T::List(&DURATION), "sum", &[], DURATION),
    global("lists.range", &[INT], T::List(&INT)),
    member(LIST, "slice", &[INT, INT], LIST),
    member(LIST, "distinct", &[], LIST),
    member(LIST, "reverse", &[], LIST),
    member(LIST, "first", &[], OPTIONAL),
    member(LIST, "last", &[], OPTIONAL),
    member(T::List(&LIST), "flatten", &[], LIST),
    member(T::List(&T::Any), "flatten", &[INT], T::List(&T::Any)),
];

const ORDERED_LISTS: [[Overload; 8]; 4] = [
    on_ordered_lists!("isSorted", bool),
    on_ordered_lists!("min", item),
    on_ordered_lists!("max", item),
    on_ordered_lists!("sort", list),
];

const SETS: [Overload; 3] = [
    global("sets.contains", &[LIST, LIST], BOOL),
    global("sets.equivalent", &[LIST, LIST], BOOL),
    global("sets.intersects", &[LIST, LIST], BOOL),
];

/// Kubernetes' named formats of OpenAPI and of its own names.
const FORMATS: [Overload; 15] = [
    global("format.byte", &[], FORMAT),
    global("format.date", &[], FORMAT),
    global("format.datetime", &[], FORMAT),
    global("format.dns1035Label", &[], FORMAT),
    global("format.dns1035LabelPrefix", &[], FORMAT),
    global("format.dns1123Label", &[], FORMAT),
    global("format.dns1123LabelPrefix", &[], FORMAT),
    global("format.dns1123Subdomain", &[], FORMAT),
    global("format.dns1123SubdomainPrefix", &[], FORMAT),
    global("format.labelValue", &[], FORMAT),
    global("format.qualifiedName", &[], FORMAT),
    global("format.uri", &[], FORMAT),
    global("format.uuid", &[], FORMAT),
    global("format.named", &[STRING], T::Optional(&FORMAT)),
    member(FORMAT, "validate", &[STRING], T::Optional(&STRINGS)),
];

/// The optional library (version 2 and later: `first`, `last` and
/// `optional.unwrap` of lists). `optional.none()`'s value is an
/// `optional_type(A)` whose `A` nothing binds: `dyn` here, though cel-go
/// binds it to what it meets ([`crate::output`] does not compare it).
const OPTIONALS: [Overload; 9] = [
    global("optional.of", &[T::A], OPTIONAL),
    global("optional.ofNonZeroValue", &[T::A], OPTIONAL),
    global("optional.none", &[], OPTIONAL),
    global("optional.unwrap", &[T::List(&OPTIONAL)], LIST),
    member(T::List(&OPTIONAL), "unwrapOpt", &[], LIST),
    member(OPTIONAL, "hasValue", &[], BOOL),
    member(OPTIONAL, "value", &[], T::A),
    member(OPTIONAL, "orValue", &[T::A], T::A),
    member(OPTIONAL, "or", &[OPTIONAL], OPTIONAL),
];

/// Every overload of the table, looked up by function name.
fn overloads() -> impl Iterator<Item = &'static Overload> {
    QUANTITIES
        .iter()
        .chain(&SEMVERS)
        .chain(&URLS)
        .chain(&IPS)
        .chain(&REGEX)
        .chain(&STRINGS_EXT)
        .chain(&LISTS)
        .chain(ORDERED_LISTS.iter().flatten())
        .chain(&SETS)
        .chain(&FORMATS)
        .chain(&OPTIONALS)
}

/// What the call of `function` on `target` (a method) with `args` gives,
/// each of a certain type: the results of the overloads that take them,
/// in the table's order (none: no overload takes them); `None` when no
/// library declares the function.
pub(crate) fn results(function: &str, target: Option<&DeclType>, args: &[&DeclType]) -> Option<Vec<Option<DeclType>>> {
    let mut named = overloads().filter(|o| o.function == function).peekable();
    named.peek()?;
    // A method call finds only methods, a global call only globals.
    let results = named.filter(|o| o.receiver.is_some() == target.is_some()).filter_map(|o| o.takes(target, args));
    Some(results.collect())
}

/// Whether an overload of `function` that takes the arguments gives a
/// type holding its type parameter while no argument bound it
/// (`optional.none()`, `object.x.value()`): see
/// [`crate::overloads::leaves_variable`].
pub(crate) fn leaves_variable(function: &str, target: Option<&DeclType>, args: &[&DeclType]) -> bool {
    overloads().filter(|o| o.function == function && o.receiver.is_some() == target.is_some()).any(|o| {
        let mut a = Binding::default();
        o.binds(&mut a, target, args) && a.a.is_none() && o.result.holds_a()
    })
}

/// Whether what a call of `function` gives may depend on the real types
/// of the arguments marked in `unsure` (the receiver first, for a
/// method), which bind nothing here: an overload of it gives a type
/// holding its type parameter, and the parameter of one of those
/// arguments holds it nested (`optional_type(A)`, `list(A)`; a bare `A`
/// is bound by whatever it is given).
pub(crate) fn binds_through(function: &str, method: bool, unsure: &[bool]) -> bool {
    overloads().filter(|o| o.function == function && o.receiver.is_some() == method).any(|o| {
        let params: Vec<&T> = o.receiver.iter().chain(o.params).collect();
        let nested = |p: &T| !matches!(p, T::A) && p.holds_a();
        o.result.holds_a() && params.len() == unsure.len() && params.iter().zip(unsure).any(|(p, u)| *u && nested(p))
    })
}

impl T {
    fn holds_a(self) -> bool {
        match self {
            T::A => true,
            T::List(inner) | T::Map(inner) | T::Optional(inner) => inner.holds_a(),
            T::Named(_) | T::Any => false,
        }
    }
}

impl Overload {
    /// The result when this overload takes the arguments: its type,
    /// `None` where not certain.
    fn takes(&self, target: Option<&DeclType>, args: &[&DeclType]) -> Option<Option<DeclType>> {
        let mut a = Binding::default();
        self.binds(&mut a, target, args).then(|| a.result(self.result))
    }

    /// Whether this overload takes the arguments, binding `A` in `a`.
    fn binds(&self, a: &mut Binding, target: Option<&DeclType>, args: &[&DeclType]) -> bool {
        let receiver = match (self.receiver, target) {
            (Some(param), Some(arg)) => a.bind(param, arg),
            _ => true,
        };
        self.params.len() == args.len()
            && receiver
            && self.params.iter().zip(args).all(|(param, arg)| a.bind(*param, arg))
    }
}

/// What the type parameter `A` stands for in one call.
#[derive(Debug, Default)]
struct Binding {
    a: Option<DeclType>,
}

impl Binding {
    /// Whether an argument of type `arg` is taken by `param`, binding `A`.
    fn bind(&mut self, param: T, arg: &DeclType) -> bool {
        match (param, arg) {
            // As cel-go's substitutions: the first argument binds `A` (a
            // `dyn` too), a later one it unifies with widens it.
            (T::A, arg) => match self.a.take() {
                None => {
                    self.a = Some(arg.clone());
                    true
                }
                Some(bound) => {
                    let taken = crate::overloads::unify(&bound, arg);
                    // cel-go's `mostGeneral(arg, bound)`: of two kinds
                    // (`null` and a duration), the one bound first.
                    self.a = Some(if taken { crate::types::most_general(arg.clone(), &bound) } else { bound });
                    taken
                }
            },
            (_, DeclType::Dyn | DeclType::Error) | (T::Any, _) | (T::Optional(_), DeclType::Scalar("null_type")) => {
                true
            }
            (T::Named(name), found @ DeclType::Scalar(_)) => crate::overloads::takes(name, found),
            (T::List(items), DeclType::List(found)) | (T::Optional(items), DeclType::Optional(found)) => {
                self.bind(*items, found)
            }
            (T::Map(values), DeclType::Map(keys, found)) => {
                crate::overloads::takes("string", keys) && self.bind(*values, found)
            }
            _ => false,
        }
    }

    /// `result` with `A` as bound (`dyn` where nothing bound it).
    fn result(&self, result: T) -> Option<DeclType> {
        Some(match result {
            T::Named(name) => DeclType::Scalar(name),
            T::Any => DeclType::Dyn,
            T::A => self.a.clone().unwrap_or(DeclType::Dyn),
            T::List(items) => DeclType::List(Box::new(self.result(*items)?)),
            T::Map(values) => DeclType::string_map(self.result(*values)?),
            T::Optional(value) => DeclType::Optional(Box::new(self.result(*value)?)),
        })
    }
}
