//! Names the matrix gives things (variants, benchmarks, metrics, profiles).

/// Lowercase letters, digits, '.', '_' or '-', not starting with '.' or
/// '-', at most 64 characters.
pub(super) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        && !s.starts_with(['.', '-'])
}
