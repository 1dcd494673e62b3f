//! [`PlainFields`] against tracing-subscriber's `DefaultFields` without
//! colour: the same lines for the same spans and events, hostile ones
//! included.

use std::io;
use std::sync::{Arc, Mutex};

use tracing::field::Empty;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::DefaultFields;
use tracing_subscriber::layer::SubscriberExt as _;

use super::PlainFields;

/// An error with a cause, both with a terminal escape in their text.
#[derive(Debug, thiserror::Error)]
#[error("reading \x1b[2J the review")]
struct Outer(#[source] io::Error);

/// Spans and events of every shape the services log.
fn log() {
    tracing::info!("red \x1b[31m{}\x1b[0m and a C1 \u{9b}, a bell \x07", "text");
    tracing::info!(message = "a message given as a str \x1b]0;title\x07");
    tracing::warn!(name = "a\x1bb", uid = %"705ab4f5", count = 3_u64, ratio = 0.25, ok = true, "fields");
    tracing::info!(r#type = "Pod", "a raw field name");
    tracing::info!(plain = "a b~c!", quoted = "it's \"x\" \\ y", accent = "café", tab = "a\tb", "strings");
    let cause = Outer(io::Error::other("inner \x1b[1m cause"));
    tracing::error!(error = &cause as &dyn std::error::Error, "failed");
    let alone = io::Error::other("no source \u{85}");
    tracing::error!(error = &alone as &dyn std::error::Error, "failed alone");
    tracing::info!(a = 1, b = -2_i64, "log.target" = "skipped");
    let span = tracing::info_span!("admission", uid = Empty, kind = "Pod", trace_id = Empty, n = 3);
    span.record("uid", "705ab4f5");
    span.record("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
    let _inside = span.enter();
    let inner = tracing::info_span!("decide", rule = "sidecar", allowed = Empty);
    inner.record("allowed", false);
    let _deeper = inner.enter();
    tracing::info!(patch_ops = 4, "decided");
}

/// A value recorded with `Display` whose text comes from the object under
/// review (a CEL message, an error chain).
fn hostile_display() {
    tracing::warn!(detail = %"max \x1b]8;;http://evil\x1b\\ 3 keys", policy = "size", "denied");
}

fn lines(fields: impl for<'w> FormatFields<'w> + Send + Sync + 'static, log: fn()) -> String {
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .without_time()
        .with_writer(move || Sink(sink.clone()))
        .fmt_fields(fields);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), log);
    let bytes = out.lock().expect("the sink was not poisoned").clone();
    String::from_utf8(bytes).expect("the lines are UTF-8")
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().map_err(|_| io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_lines_are_the_default_formats_without_colour() {
    let default = lines(DefaultFields::new(), log);
    let plain = lines(PlainFields, log);
    assert_eq!(plain, default);
    assert_eq!(plain.lines().count(), 9, "{plain}");
}

#[test]
fn a_hostile_message_or_error_cannot_drive_the_terminal() {
    let plain = lines(PlainFields, log);
    assert!(plain.contains(r"red \x1b[31mtext\x1b[0m and a C1 \u{9b}, a bell \x07"), "{plain}");
    assert!(plain.contains(r"a message given as a str \x1b]0;title\x07"), "{plain}");
    assert!(plain.contains(r"error=reading \x1b[2J the review error.sources=[inner \x1b[1m cause]"), "{plain}");
    assert!(plain.contains(r"error=no source \u{85}"), "{plain}");
    assert!(plain.contains(r#"name="a\u{1b}b""#), "a str field is written with Debug: {plain}");
    assert!(plain.contains("admission{kind=\"Pod\" n=3 uid=\"705ab4f5\" trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"}:decide{rule=\"sidecar\" allowed=false}"), "{plain}");
    assert!(!plain.contains("log.target"), "{plain}");
    assert!(!plain.contains(['\x1b', '\x07', '\u{9b}', '\u{85}']), "{plain}");
}

#[test]
fn a_display_value_is_escaped_too_where_the_default_writes_it_raw() {
    let default = lines(DefaultFields::new(), hostile_display);
    let plain = lines(PlainFields, hostile_display);
    assert!(default.contains("detail=max \x1b]8;;"), "{default}");
    assert_eq!(plain.replace(r"\x1b", "\x1b"), default);
    assert!(plain.contains(r#"detail=max \x1b]8;;http://evil\x1b\ 3 keys policy="size""#), "{plain}");
}
