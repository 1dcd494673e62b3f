//! cel-go's string format validator (`ext/formatting.go`, which
//! Kubernetes' strings library turns on): a `format` call on a string
//! literal with a list literal of arguments has its format string parsed
//! when the policy is created, and each clause's argument checked by the
//! kind of its type (`'%d'.format(['a'])`: `error during formatting:
//! decimal clause can only be used on integers, was given string`). The
//! first error of each call is said, at the argument it is about or at
//! the call, in cel-go's words. An argument whose type is not certain
//! here is taken, as `dyn` is there.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::types::DeclType;

/// The first error cel-go's validator finds in `call` (the node
/// `call_id`), with `type_of` the certain types of the nodes of its
/// arguments: the node it is reported at and its words. `None` where the
/// call is not a format string's with a list literal, or nothing is
/// wrong that is certain.
pub(crate) fn check<'t>(
    call: &CallExpr,
    call_id: u64,
    type_of: impl Fn(u64) -> Option<&'t DeclType>,
) -> Option<(u64, String)> {
    let Some(Expr::Literal(LiteralValue::String(format))) = call.target.as_deref().map(|t| &t.expr) else {
        return None;
    };
    let [argument] = call.args.as_slice() else { return None };
    let Expr::List(list) = &argument.expr else { return None };
    let at_call = |message: String| Some((call_id, message));
    let bytes = format.as_bytes();
    let (mut at, mut index, mut requested) = (0, 0, 0);
    while at < bytes.len() {
        if bytes[at] != b'%' {
            at += 1;
            continue;
        }
        if bytes.get(at + 1) == Some(&b'%') {
            at += 2;
            continue;
        }
        requested += 1;
        if at + 1 >= bytes.len() {
            return at_call("unexpected end of string".to_owned());
        }
        let Some(element) = list.elements.get(index) else {
            return at_call(format!("index {index} out of range"));
        };
        let (read, verb) = match clause(&bytes[at + 1..]) {
            Ok(parsed) => parsed,
            Err(why) => return at_call(format!("could not parse formatting clause: {why}")),
        };
        if let Some((id, why)) = verify(verb, element, &type_of) {
            return Some((id, format!("error during formatting: {why}")));
        }
        at += 1 + read;
        index += 1;
    }
    let given = list.elements.len();
    (given > requested)
        .then(|| (call_id, format!("too many arguments supplied to string.format (expected {requested}, got {given})")))
}

/// The clause after a `%`: how many bytes it takes and its verb, or
/// cel-go's words on why it cannot be read.
fn clause(text: &[u8]) -> Result<(usize, u8), String> {
    let mut at = 0;
    if text.first() == Some(&b'.') {
        at = 1;
        loop {
            match text.get(at) {
                None => return Err("error while parsing precision: could not find end of precision specifier".into()),
                Some(digit) if digit.is_ascii_digit() => at += 1,
                Some(_) => break,
            }
        }
        // Go's `strconv.Atoi` of the digits (an `int` of 64 bits).
        let digits = String::from_utf8_lossy(&text[1..at]);
        if digits.parse::<i64>().is_err() {
            let why = if digits.is_empty() { "invalid syntax" } else { "value out of range" };
            return Err(format!(
                "error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \
                 \"{digits}\": {why}"
            ));
        }
    }
    match text[at] {
        verb @ (b's' | b'd' | b'f' | b'e' | b'b' | b'x' | b'X' | b'o') => Ok((at + 1, verb)),
        // Go prints the byte as a rune, as `char::from` reads it.
        other => Err(format!("unrecognized formatting clause \"{}\"", char::from(other))),
    }
}

/// What is wrong with `element` as the argument of `verb`: the node and
/// cel-go's words, where that is certain.
fn verify<'t>(verb: u8, element: &IdedExpr, type_of: &impl Fn(u64) -> Option<&'t DeclType>) -> Option<(u64, String)> {
    let (kinds, words): (&[&str], &str) = match verb {
        b's' => return string(element, type_of),
        b'd' => (&["int", "uint"], "decimal clause can only be used on integers"),
        b'f' => (&["double", "string"], "fixed-point clause can only be used on doubles"),
        b'e' => (&["double", "string"], "scientific clause can only be used on doubles"),
        b'b' => (&["int", "uint", "bool"], "only integers and bools can be formatted as binary"),
        b'x' | b'X' => {
            (&["int", "uint", "string", "bytes"], "only integers, byte buffers, and strings can be formatted as hex")
        }
        _ => (&["int", "uint"], "octal clause can only be used on integers"),
    };
    refused(element, type_of, kinds).map(|given| (element.id, format!("{words}, was given {given}")))
}

/// What `%s` refuses in `element`, or in the items of a list or map
/// literal it is, checked item by item as cel-go does.
fn string<'t>(element: &IdedExpr, type_of: &impl Fn(u64) -> Option<&'t DeclType>) -> Option<(u64, String)> {
    const KINDS: [&str; 12] = [
        "list",
        "map",
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "timestamp",
        "bytes",
        "duration",
        "type",
        "null_type",
    ];
    if let Some(given) = refused(element, type_of, &KINDS) {
        let words = "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, \
                     durations, and timestamps";
        return Some((element.id, format!("{words}, was given {given}")));
    }
    match &element.expr {
        Expr::List(list) => list.elements.iter().find_map(|item| string(item, type_of)),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => string(&e.key, type_of).or_else(|| string(&e.value, type_of)),
            EntryExpr::StructField(_) => None,
        }),
        _ => None,
    }
}

/// The name cel-go gives `element`'s type (its `TypeName`) where its
/// kind is none of `kinds`; `None` where it is one of them, is `dyn`, or
/// is not certain here.
fn refused<'t>(element: &IdedExpr, type_of: &impl Fn(u64) -> Option<&'t DeclType>, kinds: &[&str]) -> Option<String> {
    let (kind, name) = match type_of(element.id) {
        Some(DeclType::Dyn | DeclType::Error) => return None,
        // Kubernetes' opaque types (`kubernetes.Quantity`) are of one kind.
        Some(DeclType::Scalar(name)) if name.contains('.') => ("opaque", *name),
        Some(DeclType::Optional(_)) => ("opaque", "optional_type"),
        Some(DeclType::Scalar("duration")) => ("duration", "google.protobuf.Duration"),
        Some(DeclType::Scalar("timestamp")) => ("timestamp", "google.protobuf.Timestamp"),
        Some(DeclType::Scalar(name)) => (*name, *name),
        Some(DeclType::List(_)) => ("list", "list"),
        Some(DeclType::Map(..)) => ("map", "map"),
        Some(DeclType::Object { name, .. }) => ("struct", (*name)?),
        // Of a type not followed here, the kind may still be certain.
        None => built(element)?,
    };
    (!kinds.contains(&kind)).then(|| name.to_owned())
}

/// The kind of what `element` builds, whatever its items: a list or a map
/// literal, or a loop that returns the list or map it accumulates
/// (`map`, `filter`, `transformList`, `transformMap`).
fn built(element: &IdedExpr) -> Option<(&'static str, &'static str)> {
    let built = match &element.expr {
        Expr::Comprehension(c) if matches!(&c.result.expr, Expr::Ident(name) if *name == c.accu_var) => &c.accu_init,
        _ => element,
    };
    match built.expr {
        Expr::List(_) => Some(("list", "list")),
        Expr::Map(_) => Some(("map", "map")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clause_is_read_as_cel_go_reads_it() {
        assert_eq!(clause(b"s"), Ok((1, b's')));
        assert_eq!(clause(b".2f rest"), Ok((3, b'f')));
        assert_eq!(clause(b"q").unwrap_err(), "unrecognized formatting clause \"q\"");
        assert_eq!(clause(&[0xc3, 0xa9]).unwrap_err(), "unrecognized formatting clause \"\u{c3}\"");
        assert!(clause(b".3").unwrap_err().ends_with("could not find end of precision specifier"));
        assert!(clause(b".s").unwrap_err().ends_with("strconv.Atoi: parsing \"\": invalid syntax"));
        assert!(clause(b".99999999999999999999f").unwrap_err().ends_with("value out of range"));
    }
}
