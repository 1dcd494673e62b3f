//! The plain log format's fields when there is no colour: what
//! tracing-subscriber's `DefaultFields` writes with ANSI off, byte for
//! byte but for escapes, without painting every field name through an
//! empty style.
//!
//! `DefaultFields` writes each name as `Style::paint(name)` and each `=` as
//! another, colour or not; as the admission span's fields are recorded
//! (tracing-subscriber formats a span's fields when they are recorded,
//! whether or not a line is logged), that was 13,100 of the injector
//! handler's 177,600 instructions per request. What it does for hostile
//! input is kept and extended: a `message` and an error's text have their
//! terminal control characters escaped (`\x1b`...), as tracing-subscriber
//! 0.3.20+ does, and so does every other value, where the default writes a
//! `%`-recorded (`Display`) one raw: an error chain or a policy's message
//! built from the object under review can carry them. `Debug` values (a
//! string recorded as is) come out as before, since `Debug` escapes them.

use std::error::Error;
use std::fmt::{self, Debug, Display, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

/// The fields of a span or an event as `name=value` pairs, space-separated
/// (`fmt::layer().fmt_fields(PlainFields)`), for a writer without colour.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlainFields;

impl<'a> MakeVisitor<Writer<'a>> for PlainFields {
    type Visitor = PlainVisitor<'a>;

    fn make_visitor(&self, writer: Writer<'a>) -> PlainVisitor<'a> {
        PlainVisitor { writer, is_empty: true, result: Ok(()) }
    }
}

/// Writes the fields [`PlainFields`] is given.
#[derive(Debug)]
pub(crate) struct PlainVisitor<'a> {
    writer: Writer<'a>,
    is_empty: bool,
    result: fmt::Result,
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else if is_plain(value) {
            // What `Debug` writes for it, without formatting it char by
            // char: the admission span's fields (a uid, a kind, a name)
            // are formatted on every request, logged or not.
            self.write_quoted(field.name(), value);
        } else {
            // `Debug` escapes a string's control characters itself.
            self.write(field.name(), &value, false);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.write(field.name(), &value, false);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.write(field.name(), &value, false);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.write(field.name(), &value, false);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.write(field.name(), &value, false);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn Error + 'static)) {
        let sanitize = self.writer.sanitizes_ansi_escapes();
        let text = Escaped { value, sanitize };
        match value.source() {
            Some(source) => self.record_debug(
                field,
                &format_args!("{text} {}.sources={}", field.name(), Sources { first: source, sanitize }),
            ),
            None => self.record_debug(field, &format_args!("{text}")),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.write(field.name(), value, true);
    }
}

impl PlainVisitor<'_> {
    /// Writes `name=value`, or a message's text alone, escaped when
    /// `escape` or a message.
    fn write(&mut self, name: &str, value: &dyn Debug, escape: bool) {
        let Some(name) = self.next_field(name) else { return };
        let sanitize = self.writer.sanitizes_ansi_escapes();
        self.result = self.result.and_then(|()| match name {
            "message" => write!(self.writer, "{:?}", Escaped { value, sanitize }),
            name => {
                self.writer.write_str(name)?;
                self.writer.write_char('=')?;
                if escape && sanitize {
                    write!(self.writer, "{:?}", Escaped { value, sanitize })
                } else {
                    write!(self.writer, "{value:?}")
                }
            }
        });
    }

    /// Writes `name="value"` for a `value` that `Debug` writes as it is
    /// between quotes ([`is_plain`]).
    fn write_quoted(&mut self, name: &str, value: &str) {
        let Some(name) = self.next_field(name) else { return };
        self.result = self.result.and_then(|()| {
            self.writer.write_str(name)?;
            self.writer.write_str("=\"")?;
            self.writer.write_str(value)?;
            self.writer.write_char('"')
        });
    }

    /// Starts the field `name`: its separator, and the name to write
    /// (without a raw identifier's `r#`); `None` when nothing is written
    /// (an earlier write failed, or tracing-log's metadata, which the
    /// line's header already carries).
    fn next_field<'n>(&mut self, name: &'n str) -> Option<&'n str> {
        if self.result.is_err() || name.starts_with("log.") {
            return None;
        }
        if !std::mem::take(&mut self.is_empty) {
            self.result = self.writer.write_char(' ');
        }
        Some(name.strip_prefix("r#").unwrap_or(name))
    }
}

/// Whether `Debug` writes `value` unchanged between quotes: printable
/// ASCII without a quote or a backslash (`str`'s `Debug` escapes those,
/// control characters and some non-ASCII characters).
fn is_plain(value: &str) -> bool {
    value.bytes().all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\')
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for PlainVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// `value` with the control characters a terminal acts on escaped, when
/// `sanitize` (tracing-subscriber's own list: ESC, BEL, BS, FF, DEL, C1).
struct Escaped<T> {
    value: T,
    sanitize: bool,
}

impl<T: Debug> Debug for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sanitize { write!(Escaping(f), "{:?}", self.value) } else { write!(f, "{:?}", self.value) }
    }
}

impl<T: Display> Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sanitize { write!(Escaping(f), "{}", self.value) } else { write!(f, "{}", self.value) }
    }
}

/// A writer that escapes as it writes.
struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl fmt::Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Control characters are ASCII or, for C1, start with 0xc2 in UTF-8.
        if !s.bytes().any(|b| matches!(b, 0x07 | 0x08 | 0x0c | 0x1b | 0x7f | 0xc2)) {
            return self.0.write_str(s);
        }
        for c in s.chars() {
            match c {
                '\x1b' => self.0.write_str("\\x1b")?,
                '\x07' => self.0.write_str("\\x07")?,
                '\x08' => self.0.write_str("\\x08")?,
                '\x0c' => self.0.write_str("\\x0c")?,
                '\x7f' => self.0.write_str("\\x7f")?,
                '\u{80}'..='\u{9f}' => write!(self.0, "\\u{{{:x}}}", u32::from(c))?,
                c => self.0.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// An error and its sources as a list, each escaped.
struct Sources<'a> {
    first: &'a (dyn Error + 'static),
    sanitize: bool,
}

impl Display for Sources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        let mut next = Some(self.first);
        while let Some(error) = next {
            list.entry(&Escaped { value: format_args!("{error}"), sanitize: self.sanitize });
            next = error.source();
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests;
