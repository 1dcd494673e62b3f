//! The types the API server's CEL type checker gives what an admission
//! expression reads: an object of a kind by its OpenAPI schema (read in
//! [`crate::schemas`]), and the fixed types of `request` and
//! `namespaceObject`. Only what finding an undefined field needs is kept:
//! which fields an object has, and what lists, maps and fields hold.

use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The type of a value, as far as the checker follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclType {
    /// Anything (`x-kubernetes-int-or-string`, `options`): never checked.
    Dyn,
    /// cel-go's error type, what a call no overload takes gives: any
    /// parameter takes it, as `dyn`, and cel-go names it `!error!` in the
    /// errors of the calls around it.
    Error,
    /// A string, number, boolean, bytes, timestamp or duration, or an
    /// opaque value of Kubernetes' libraries, by its name in cel-go's
    /// messages (`bool`, `timestamp`, `kubernetes.Quantity`, `net.IP`).
    Scalar(&'static str),
    /// A list of the given items.
    List(Box<DeclType>),
    /// A map from keys of the first type to values of the second: a
    /// schema's maps and the API server's are keyed by strings
    /// ([`DeclType::string_map`]), a literal's by what its keys are
    /// (`{1: 'a'}` is a `map(int, string)`, `{}` a `map(dyn, dyn)`).
    Map(Box<DeclType>, Box<DeclType>),
    /// An optional value of the given type (`object.?spec`,
    /// `optional.of(1)`), cel-go's `optional_type(T)`.
    Optional(Box<DeclType>),
    /// An object with exactly these fields, by their CEL names (escaped:
    /// `__namespace__`, `x__dash__y`), and the name cel-go gives its type
    /// where Portcullis gives it too (`kubernetes.UserInfo`): the API
    /// server's own types of `request` and `namespaceObject` have one, an
    /// object typed by a schema has none here.
    Object {
        /// cel-go's name of the type, where given.
        name: Option<&'static str>,
        /// The fields.
        fields: BTreeMap<String, DeclType>,
    },
}

impl DeclType {
    /// The type of field `name` of an object, `None` when it has no such
    /// field. A CEL keyword names its escaped field (`namespace` is
    /// `__namespace__`), as Kubernetes' environment recognises keywords as
    /// field names.
    pub fn field<'t>(fields: &'t BTreeMap<String, DeclType>, name: &str) -> Option<&'t DeclType> {
        fields.get(name).or_else(|| RESERVED.contains(&name).then(|| fields.get(&format!("__{name}__"))).flatten())
    }

    /// The type as cel-go prints it (`int`, `list(string)`,
    /// `map(string, int)`, `kubernetes.UserInfo`), `None` for an object
    /// type whose name Portcullis does not give, or a list or map of them.
    pub fn cel_name(&self) -> Option<String> {
        match self {
            Self::Dyn => Some("dyn".to_owned()),
            Self::Error => Some("!error!".to_owned()),
            Self::Scalar(name) => Some((*name).to_owned()),
            Self::List(items) => Some(format!("list({})", items.cel_name()?)),
            Self::Map(keys, values) => Some(format!("map({}, {})", keys.cel_name()?, values.cel_name()?)),
            Self::Optional(value) => Some(format!("optional_type({})", value.cel_name()?)),
            Self::Object { name, .. } => name.map(str::to_owned),
        }
    }

    /// Whether `dyn` is, or is in, this type (a named object's type is
    /// exact, whatever its fields hold).
    pub(crate) fn holds_dyn(&self) -> bool {
        match self {
            Self::Dyn | Self::Error => true,
            Self::Scalar(_) | Self::Object { name: Some(_), .. } => false,
            Self::List(items) | Self::Optional(items) => items.holds_dyn(),
            Self::Map(keys, values) => keys.holds_dyn() || values.holds_dyn(),
            Self::Object { name: None, fields } => fields.values().any(Self::holds_dyn),
        }
    }

    /// The API server's object type `name` with these fields.
    fn named<const N: usize>(name: &'static str, fields: [(&str, DeclType); N]) -> Self {
        let fields = fields.into_iter().map(|(field, t)| (field.to_owned(), t)).collect();
        Self::Object { name: Some(name), fields }
    }

    /// An object typed by a schema, with these fields.
    pub(crate) fn unnamed(fields: BTreeMap<String, DeclType>) -> Self {
        Self::Object { name: None, fields }
    }

    fn strings() -> Self {
        Self::List(Box::new(STRING))
    }

    /// A map from strings to `values`.
    pub(crate) fn string_map(values: DeclType) -> Self {
        Self::Map(Box::new(STRING), Box::new(values))
    }
}

/// The type cel-go's checker gives items of types `a` and `b` of one
/// literal (its `joinTypes`): the more general where one is assignable to
/// the other, `dyn` where neither is (`null` is assignable to an object,
/// a duration, a timestamp or an opaque type). `None` where an object
/// whose name Portcullis does not give is joined, which this does not
/// follow.
pub(crate) fn join(a: &DeclType, b: &DeclType) -> Option<DeclType> {
    if !follows(a) || !follows(b) {
        return None;
    }
    Some(if crate::overloads::unify(a, b) { most_general(a.clone(), b) } else { DeclType::Dyn })
}

/// Of two assignable types, the more general (cel-go's `mostGeneral`):
/// `a` where it is as general as `b`.
pub(crate) fn most_general(a: DeclType, b: &DeclType) -> DeclType {
    if less_specific(&a, b) { a } else { b.clone() }
}

/// Whether [`join`] follows `t`: no object whose name Portcullis does not
/// give in it.
fn follows(t: &DeclType) -> bool {
    match t {
        DeclType::Dyn | DeclType::Error | DeclType::Scalar(_) | DeclType::Object { name: Some(_), .. } => true,
        DeclType::List(items) | DeclType::Optional(items) => follows(items),
        DeclType::Map(keys, values) => follows(keys) && follows(values),
        DeclType::Object { name: None, .. } => false,
    }
}

/// Whether `a` is as general as `b`, or more (cel-go's
/// `isEqualOrLessSpecific`), between assignable types.
fn less_specific(a: &DeclType, b: &DeclType) -> bool {
    match (a, b) {
        (DeclType::Dyn, _) => true,
        (_, DeclType::Dyn) => false,
        (DeclType::List(a), DeclType::List(b)) | (DeclType::Optional(a), DeclType::Optional(b)) => less_specific(a, b),
        (DeclType::Map(a, x), DeclType::Map(b, y)) => less_specific(a, b) && less_specific(x, y),
        // Of two kinds (`null` and what it stands for), the second.
        _ => a == b,
    }
}

pub(crate) const STRING: DeclType = DeclType::Scalar("string");
pub(crate) const INT: DeclType = DeclType::Scalar("int");
pub(crate) const BOOL: DeclType = DeclType::Scalar("bool");
pub(crate) const TIMESTAMP: DeclType = DeclType::Scalar("timestamp");

/// A list's indexes, as a two-variable comprehension binds them.
pub(crate) static INDEX: DeclType = INT;

/// `request`, as the API server declares it
/// (`k8s.io/apiserver/pkg/admission/plugin/cel.BuildRequestType`).
pub static REQUEST: LazyLock<DeclType> = LazyLock::new(|| {
    let gvk =
        || DeclType::named("kubernetes.GroupVersionKind", [("group", STRING), ("version", STRING), ("kind", STRING)]);
    let gvr = || {
        DeclType::named(
            "kubernetes.GroupVersionResource",
            [("group", STRING), ("version", STRING), ("resource", STRING)],
        )
    };
    let user = DeclType::named(
        "kubernetes.UserInfo",
        [
            ("username", STRING),
            ("uid", STRING),
            ("groups", DeclType::strings()),
            ("extra", DeclType::string_map(DeclType::strings())),
        ],
    );
    DeclType::named(
        "kubernetes.AdmissionRequest",
        [
            ("kind", gvk()),
            ("resource", gvr()),
            ("subResource", STRING),
            ("requestKind", gvk()),
            ("requestResource", gvr()),
            ("requestSubResource", STRING),
            ("name", STRING),
            ("namespace", STRING),
            ("operation", STRING),
            ("userInfo", user),
            ("dryRun", BOOL),
            ("options", DeclType::Dyn),
        ],
    )
});

/// `namespaceObject`, as the API server declares it (`BuildNamespaceType`:
/// the parts of a Namespace a policy may read).
pub static NAMESPACE: LazyLock<DeclType> = LazyLock::new(|| {
    let strings = || DeclType::string_map(STRING);
    let condition = DeclType::named(
        "kubernetes.NamespaceCondition",
        [
            ("status", STRING),
            ("type", STRING),
            ("lastTransitionTime", TIMESTAMP),
            ("message", STRING),
            ("reason", STRING),
        ],
    );
    let metadata = DeclType::named(
        "kubernetes.NamespaceMetadata",
        [
            ("name", STRING),
            ("generateName", STRING),
            ("namespace", STRING),
            ("labels", strings()),
            ("annotations", strings()),
            ("UID", STRING),
            ("creationTimestamp", TIMESTAMP),
            ("deletionGracePeriodSeconds", INT),
            ("deletionTimestamp", TIMESTAMP),
            ("generation", INT),
            ("resourceVersion", STRING),
            ("finalizers", DeclType::strings()),
        ],
    );
    let spec = DeclType::named("kubernetes.NamespaceSpec", [("finalizers", DeclType::strings())]);
    let status = DeclType::named(
        "kubernetes.NamespaceStatus",
        [("conditions", DeclType::List(Box::new(condition))), ("phase", STRING)],
    );
    DeclType::named("kubernetes.Namespace", [("metadata", metadata), ("spec", spec), ("status", status)])
});

/// CEL's reserved words, which Kubernetes escapes as field names
/// (`k8s.io/apiserver/pkg/cel.Escape`) and a variable may not be named.
pub const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];
