//! Go's printing of the values in the API server's field errors: `%q`
//! ([`quoted`]) for a plain string, `json.Marshal` ([`json`]) for a value
//! of a named type or a list.

use std::sync::LazyLock;

use regex::Regex;

/// The runes Go prints as they are in `%q` (`strconv.IsPrint`): letters,
/// marks, numbers, punctuation and symbols (and the ASCII space, said
/// apart), by the `regex` crate's Unicode tables, limited to the runes of
/// Unicode 15.0.0, the version of Go's tables (Go 1.21 to 1.26): a rune
/// assigned since is escaped, as Go escapes it. Compared with Go 1.26's
/// `strconv.Quote` over every Unicode scalar value when written: the same.
static PRINTABLE: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern, compiled by every unit test of `quoted`.
    Regex::new(r"^[\p{L}\p{M}\p{N}\p{P}\p{S}&&\p{Age=15.0}]$").expect("a valid pattern")
});

/// `value` as Go's `%q` (`strconv.Quote`) prints it: in double quotes,
/// with `"` and `\`, the C escapes (`\n`, `\t`, ...), and every rune Go
/// does not print as it is (controls, spaces other than U+0020, format
/// runes such as U+200B and U+FEFF, unassigned runes) escaped.
pub(super) fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    let mut buffer = [0; 4];
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' ' => out.push(' '),
            c if PRINTABLE.is_match(c.encode_utf8(&mut buffer)) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// `value` as Go's `json.Marshal` writes it: serde_json's JSON with `<`,
/// `>` and `&` escaped, as Go escapes them for HTML, and U+2028 and
/// U+2029, which Go escapes for JavaScript.
pub(super) fn json(value: &(impl serde::Serialize + ?Sized)) -> String {
    let json = serde_json::to_string(value).unwrap_or_default();
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    /// Each case as Go 1.26 prints it (`fmt.Sprintf("%q", value)`).
    #[rstest]
    #[case::plain("Replicas", r#""Replicas""#)]
    #[case::quotes_and_backslashes(r#"a"b\c"#, r#""a\"b\\c""#)]
    #[case::c_escapes("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#)]
    #[case::other_ascii_controls("\u{0}\u{1b}\u{7f}", r#""\x00\x1b\x7f""#)]
    #[case::c1_control("\u{85}", r#""\u0085""#)]
    #[case::ascii_space_kept("a b", r#""a b""#)]
    #[case::no_break_space("a\u{a0}b", r#""a\u00a0b""#)]
    #[case::ideographic_space("\u{3000}", r#""\u3000""#)]
    #[case::line_and_paragraph_separators("\u{2028}\u{2029}", r#""\u2028\u2029""#)]
    #[case::soft_hyphen("\u{ad}", r#""\u00ad""#)]
    #[case::zero_width_space("\u{200b}", r#""\u200b""#)]
    #[case::byte_order_mark("\u{feff}", r#""\ufeff""#)]
    #[case::private_use("\u{e000}", r#""\ue000""#)]
    #[case::unassigned("\u{378}", r#""\u0378""#)]
    #[case::tag_outside_the_bmp("\u{e0001}", r#""\U000e0001""#)]
    #[case::unassigned_outside_the_bmp("\u{10ffff}", r#""\U0010ffff""#)]
    #[case::assigned_after_unicode_15("\u{1c89}", r#""\u1c89""#)]
    #[case::letters_marks_numbers("é\u{301}ß漢٣", "\"é\u{301}ß漢٣\"")]
    #[case::punctuation_and_symbols("¡«»€©", "\"¡«»€©\"")]
    #[case::emoji_outside_the_bmp("😀", "\"😀\"")]
    fn a_string_is_quoted_as_go_quotes_it(#[case] value: &str, #[case] go: &str) {
        assert_eq!(super::quoted(value), go);
    }

    #[rstest]
    #[case::html(vec!["<a>&"], r#"["\u003ca\u003e\u0026"]"#)]
    #[case::javascript_separators(vec!["\u{2028}\u{2029}"], r#"["\u2028\u2029"]"#)]
    #[case::controls(vec!["\n\u{1}"], r#"["\n\u0001"]"#)]
    fn json_is_written_as_go_writes_it(#[case] value: Vec<&str>, #[case] go: &str) {
        assert_eq!(super::json(&value), go);
    }
}
