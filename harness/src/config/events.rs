//! A pass over a matrix file's YAML events, before serde_yaml reads it,
//! with libyaml (`unsafe-libyaml`, the parser serde_yaml itself runs): the
//! aliases and the nesting are counted in the events that deserialisation
//! would replay, so no way of writing the text can hide one. An alias is
//! expanded in full each time it is used (1,000 aliases of a 1 MiB string
//! took 3.1 GB), and a 100,000-deep nesting took 20 s before its error.

use unsafe_libyaml as unsafe_y;

/// The most aliases a matrix may use (the shipped one uses none).
pub const MAX_ALIASES: usize = 256;

/// The deepest nesting of sequences and mappings a matrix may have (the
/// shipped one nests 5 deep).
pub const MAX_DEPTH: usize = 64;

/// What the pass refuses, at its 1-based line and column.
#[derive(Debug, PartialEq)]
pub enum Excess {
    /// The alias past [`MAX_ALIASES`].
    Aliases { line: usize, column: usize },
    /// The sequence or mapping past [`MAX_DEPTH`].
    Depth { line: usize, column: usize },
}

/// The first excess of `text`'s events, if any. A syntax error ends the
/// pass early with `None`: serde_yaml reports it with its location.
pub fn excess(text: &str) -> Option<Excess> {
    let mut parser = Parser::new(text)?;
    let (mut aliases, mut depth) = (0usize, 0usize);
    while let Some((kind, line, column)) = parser.next() {
        match kind {
            unsafe_y::YAML_ALIAS_EVENT => {
                aliases += 1;
                if aliases > MAX_ALIASES {
                    return Some(Excess::Aliases { line, column });
                }
            }
            unsafe_y::YAML_SEQUENCE_START_EVENT | unsafe_y::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(Excess::Depth { line, column });
                }
            }
            unsafe_y::YAML_SEQUENCE_END_EVENT | unsafe_y::YAML_MAPPING_END_EVENT => depth = depth.saturating_sub(1),
            unsafe_y::YAML_STREAM_END_EVENT => return None,
            _ => {}
        }
    }
    None
}

/// A libyaml parser over borrowed text, deleted when dropped.
struct Parser<'a> {
    raw: Box<std::mem::MaybeUninit<unsafe_y::yaml_parser_t>>,
    _text: &'a str,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Option<Parser<'a>> {
        let mut raw = Box::new(std::mem::MaybeUninit::<unsafe_y::yaml_parser_t>::uninit());
        // SAFETY: initialize fills the parser it is given; on failure it
        // owns nothing and is not used again.
        if !unsafe { unsafe_y::yaml_parser_initialize(raw.as_mut_ptr()) }.ok {
            return None;
        }
        // SAFETY: the parser was initialised; the input outlives it (the
        // borrow of `text` is kept in the returned value).
        unsafe { unsafe_y::yaml_parser_set_input_string(raw.as_mut_ptr(), text.as_ptr(), text.len() as _) };
        Some(Parser { raw, _text: text })
    }

    /// The next event's kind and 1-based line and column; `None` at a
    /// syntax error.
    fn next(&mut self) -> Option<(unsafe_y::yaml_event_type_t, usize, usize)> {
        let mut event = std::mem::MaybeUninit::<unsafe_y::yaml_event_t>::uninit();
        // SAFETY: the parser is initialised; parse fills `event` when it
        // succeeds, and only then is it read and deleted.
        unsafe {
            if !unsafe_y::yaml_parser_parse(self.raw.as_mut_ptr(), event.as_mut_ptr()).ok {
                return None;
            }
            let e = event.as_mut_ptr();
            let at = (
                (*e).type_,
                (*e).start_mark.line as usize + 1,
                (*e).start_mark.column as usize + 1,
            );
            unsafe_y::yaml_event_delete(e);
            Some(at)
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: the parser was initialised in `new` and is deleted once.
        unsafe { unsafe_y::yaml_parser_delete(self.raw.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_counted_in_the_events_however_the_text_is_written() {
        let n = MAX_ALIASES + 1;
        let texts = [
            format!("a: &x v\nb:\n{}", "  - *x\n".repeat(n)),
            // a plain scalar holding a quote before the aliases hid them from a scan of the text
            format!("a: &x v\nb: [x \"y{}]\n", ", *x".repeat(n)),
            format!("a: &x v\nb:\n{}", "  - [*x, *x]\n".repeat(n / 2 + 1)),
        ];
        for text in &texts {
            let got = excess(text);
            assert!(
                matches!(got, Some(Excess::Aliases { line: 2.., .. })),
                "{text:.60}: {got:?}"
            );
        }
        assert_eq!(
            excess(&format!("a: &x v\nb: [x \"y{}]\n", ", *x".repeat(MAX_ALIASES))),
            None
        );
        // stars in quotes, comments and words are no aliases
        let fine: String = (0..n)
            .map(|i| format!("a{i}: '*x'\nb{i}: \"*y\" # *z\nc{i}: x*y\n"))
            .collect();
        assert_eq!(excess(&fine), None);
    }

    #[test]
    fn nesting_past_the_cap_is_refused_at_once() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert_eq!(
            excess(&deep),
            Some(Excess::Depth {
                line: 1,
                column: MAX_DEPTH + 1
            })
        );
        let shallow = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert_eq!(excess(&shallow), None);
    }

    #[test]
    fn a_syntax_error_is_left_to_serde_yaml() {
        assert_eq!(excess("a: [\n"), None);
    }
}
