//! The formats of names and values the API server's validation checks,
//! each returning what is wrong in its words (none: the value is right).
//! Two generations of apimachinery's code meet here: the older
//! (`util/validation`) says a length in characters, the newer
//! (`api/validate/content`: label keys and values) in bytes; both count
//! bytes, as Go's `len` does.

use crate::names::{NAME_PART_MAX_LEN, is_name_part};

const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                             '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
                             used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS_1035_LABEL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
                              alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or \
                              'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                         with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                         validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_KEY: &str = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                         end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used \
                         for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain \
                         prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or \
                           '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
                           'my_value',  or '12345', regex used for validation is \
                           '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// What is wrong with `name` as a DNS subdomain (RFC 1123), its length
/// said in `unit` (an object's name and an API group in characters, a
/// label key's prefix in bytes).
pub(super) fn dns_subdomain(name: &str, unit: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 253 {
        problems.push(format!("must be no more than 253 {unit}"));
    }
    let label = |l: &str| {
        let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        l.starts_with(alphanumeric) && l.ends_with(alphanumeric) && l.chars().all(|c| alphanumeric(c) || c == '-')
    };
    if !name.split('.').all(label) {
        problems.push(DNS_SUBDOMAIN.to_owned());
    }
    problems
}

/// What is wrong with `name` as a DNS label (RFC 1035: a lowercase letter
/// first), as an API version and a kind must be.
pub(super) fn dns_1035_label(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters".to_owned());
    }
    let inner = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(inner)
        && name.chars().all(|c| inner(c) || c == '-');
    if !valid {
        problems.push(DNS_1035_LABEL.to_owned());
    }
    problems
}

/// What is wrong with `name` as a qualified name (a label key: an
/// optional DNS subdomain prefix and `/`, then a name part).
pub(super) fn qualified_name(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('/').collect();
    let (prefix, name) = match parts[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => return vec![LABEL_KEY.to_owned()],
    };
    let mut problems = Vec::new();
    match prefix {
        Some("") => problems.push("prefix part must be non-empty".to_owned()),
        Some(prefix) => problems.extend(dns_subdomain(prefix, "bytes").into_iter().map(|p| format!("prefix part {p}"))),
        None => {}
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > NAME_PART_MAX_LEN {
        problems.push(format!("name part must be no more than {NAME_PART_MAX_LEN} bytes"));
    }
    if !is_name_part(name) {
        problems.push(NAME_PART.to_owned());
    }
    problems
}

/// What is wrong with `value` as a label value: empty, or a name part.
pub(super) fn label_value(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > NAME_PART_MAX_LEN {
        problems.push(format!("must be no more than {NAME_PART_MAX_LEN} bytes"));
    }
    if !value.is_empty() && !is_name_part(value) {
        problems.push(LABEL_VALUE.to_owned());
    }
    problems
}

/// What is wrong with `name` as a path segment (a resource name).
pub(super) fn path_segment(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"].iter().filter(|c| name.contains(*c)).map(|c| format!("may not contain '{c}'")).collect()
}

/// Whether `name` is a CEL identifier that is not a reserved word.
pub(super) fn cel_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !portcullis_cel::types::RESERVED.contains(&name)
}
