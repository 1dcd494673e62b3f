//! Patch carried by Portcullis: `matches()` reads a pattern's `\Q...\E`
//! as Go's RE2 syntax does, which cel-go uses: the text between them (or
//! to the pattern's end, without `\E`) is literal. The `regex` crate has
//! no such quoting, so it is rewritten into escaped text before compiling;
//! inside a character class it is left alone, where Go refuses it too.

use std::borrow::Cow;

/// `pattern` with each `\Q...\E` outside a character class rewritten as
/// escaped literal text.
pub(crate) fn unquoted(pattern: &str) -> Cow<'_, str> {
    if !pattern.contains("\\Q") {
        return Cow::Borrowed(pattern);
    }
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut rest = pattern;
    let mut in_class = false;
    while let Some(c) = rest.chars().next() {
        if !in_class && rest.starts_with("\\Q") {
            let quoted = &rest[2..];
            let (literal, after) = match quoted.find("\\E") {
                Some(end) => (&quoted[..end], &quoted[end + 2..]),
                None => (quoted, ""),
            };
            out.push_str(&regex::escape(literal));
            rest = after;
            continue;
        }
        let taken = match c {
            // An escape is two characters, whatever the second is.
            '\\' => rest.char_indices().nth(2).map_or(rest.len(), |(at, _)| at),
            // A POSIX class inside a class: `[:alpha:]`.
            '[' if in_class && rest.starts_with("[:") => rest.find(":]").map_or(rest.len(), |end| end + 2),
            '[' if !in_class => {
                in_class = true;
                // A `]` first (after a `^`) is literal.
                let opening = if rest[1..].starts_with('^') { 2 } else { 1 };
                opening + usize::from(rest[opening..].starts_with(']'))
            }
            ']' if in_class => {
                in_class = false;
                1
            }
            c => c.len_utf8(),
        };
        out.push_str(&rest[..taken]);
        rest = &rest[taken..];
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::unquoted;

    #[test]
    fn quoted_text_is_literal_as_in_go() {
        let cases = [
            ("a.b", "a.b"),
            ("\\Qa.b\\E", "a\\.b"),
            ("x\\Q*+\\Ey*", "x\\*\\+y*"),
            ("\\Q(unclosed", "\\(unclosed"),
            ("\\\\Q.", "\\\\Q."),
            ("[\\Q]\\Q.\\E", "[\\Q]\\."),
            ("[]\\Q]\\Q.\\E", "[]\\Q]\\."),
            ("[[:alpha:]\\Q]\\Q.\\E", "[[:alpha:]\\Q]\\."),
            ("é\\Qé.\\E", "éé\\."),
        ];
        for (pattern, expected) in cases {
            assert_eq!(unquoted(pattern), expected, "{pattern}");
        }
        let go = regex::Regex::new(&unquoted("^\\Qa.b\\E$")).expect("compiles");
        assert!(go.is_match("a.b") && !go.is_match("axb"));
    }
}
