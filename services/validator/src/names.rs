//! Kubernetes' rules for names that both kinds of policy obey: the native
//! field checks ([`crate::native::fields`]) and a `ValidatorPolicy`'s CEL
//! ([`crate::cel`]), which refuse the same audit annotation keys. Rules
//! only; the API server's words for them are the field checks'.

/// The API server's limit on a qualified name's name part (a label key
/// without its prefix), and on a label value, in bytes.
pub(crate) const NAME_PART_MAX_LEN: usize = 63;

/// Whether `name` has the characters of a qualified name's name part (a
/// label key's, without prefix; a label value's, when not empty):
/// alphanumerics, `-`, `_` and `.`, between alphanumerics. Its length is
/// the caller's to check.
pub(crate) fn is_name_part(name: &str) -> bool {
    let edge = |c: char| c.is_ascii_alphanumeric();
    name.starts_with(edge)
        && name.ends_with(edge)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    #[rstest]
    #[case("a", true)]
    #[case("My.name_1-x", true)]
    #[case("123", true)]
    #[case("", false)]
    #[case("-a", false)]
    #[case("a_", false)]
    #[case("a/b", false)]
    #[case("a b", false)]
    #[case("é", false)]
    fn a_name_part_is_alphanumerics_with_inner_dashes_underscores_and_dots(#[case] name: &str, #[case] valid: bool) {
        assert_eq!(super::is_name_part(name), valid, "{name:?}");
    }
}
