//! Exit codes: one per meaning, chosen from outcome types (a gate, a
//! bisection's end, a variant's failed step), never from message text.

use std::process::ExitCode;

/// How a command ended. Every code the harness exits with:
///
/// | code | meaning |
/// |---|---|
/// | 0 | done: the command finished (no gate failed; `bisect` found the first bad commit) |
/// | 1 | `--gate`: a key metric regressed, fails more, shows a kernel fault base does not, or matched no cell (with `--strict`, also a gate warning) |
/// | 2 | bad input or a failure that stopped the harness (the message names the file, line or item); `check` found an error; `try`: the series does not apply, or a variant could not be patched, configured or built |
/// | 3 | `bisect`: undecided, no commit could be named (the ends do not differ, or every segment stayed open) |
/// | 1 | `nightly`: tonight found a change for the worse no earlier bisection answers, or a bisection it tells named a culprit |
/// | 2 | `nightly`: a bisection failed tonight (tried again by the next nightly; given up after 3 attempts) |
/// | 4 | `bisect`: the first bad commit is one of several: a skipped commit next to it (not built, booted or measured) could be it instead |
/// | 130 | interrupted by SIGINT, SIGTERM or SIGHUP (results so far are saved; resume with `--resume`) |
///
/// `try`'s refusals and failed variants share code 2 with bad input, as
/// they always did: each is its own variant here, so they can be given
/// codes of their own without touching a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command finished; no gate failed.
    Done,
    /// `--gate` failed: a key metric regressed or fails more (or, with
    /// `--strict`, a gate warning).
    Regressed,
    /// Bad input, an error `check` found, or a failure that stopped the harness.
    Error,
    /// `try`: the series does not apply to the base (nothing was built).
    DoesNotApply,
    /// `try`: a variant could not be patched, configured or built.
    VariantFailed,
    /// `nightly`: tonight found a change for the worse, or a bisection it
    /// tells named a culprit.
    NightRegressed,
    /// `nightly`: a bisection failed tonight.
    NightFailed,
    /// `bisect`: no commit could be named.
    Undecided,
    /// `bisect`: a culprit is one of several commits: skipped commits next
    /// to it could carry its share instead.
    OneOf,
    /// Interrupted by a signal; the results so far are saved.
    Interrupted,
}

impl Exit {
    /// Every outcome, in the order of the table of codes.
    pub const ALL: [Exit; 10] = [
        Exit::Done,
        Exit::Regressed,
        Exit::NightRegressed,
        Exit::Error,
        Exit::DoesNotApply,
        Exit::VariantFailed,
        Exit::NightFailed,
        Exit::Undecided,
        Exit::OneOf,
        Exit::Interrupted,
    ];

    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::Regressed | Exit::NightRegressed => 1,
            Exit::Error | Exit::DoesNotApply | Exit::VariantFailed | Exit::NightFailed => 2,
            Exit::Undecided => 3,
            Exit::OneOf => 4,
            Exit::Interrupted => 130,
        }
    }

    /// The outcome in a few words, for the table in `harness --help`.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Done => "done: the command finished (no gate failed; `bisect` found the first bad commit)",
            Exit::Regressed => "`--gate`: a key metric regressed, fails more, shows a kernel fault base does not, or matched no cell (with `--strict`, also a gate warning)",
            Exit::NightRegressed => "`nightly`: tonight found a change for the worse, or a bisection it tells named a culprit",
            Exit::NightFailed => "`nightly`: a bisection failed tonight (tried again by the next nightly)",
            Exit::Error => "bad input or a failure that stopped the harness; `check` found an error",
            Exit::DoesNotApply => "`try`: the series does not apply (nothing was built)",
            Exit::VariantFailed => "`try`: a variant could not be patched, configured or built",
            Exit::Undecided => "`bisect`: undecided, no commit could be named",
            Exit::OneOf => "`bisect`: the first bad commit is one of several (a skipped commit next to it could be it)",
            Exit::Interrupted => "interrupted (results so far are saved; resume with `--resume`)",
        }
    }

    /// The table of codes printed after `harness --help`.
    pub fn table() -> String {
        let mut s = String::from("Exit codes:\n");
        for e in Exit::ALL {
            s.push_str(&format!("  {:>3}  {}\n", e.code(), e.meaning()));
        }
        s.trim_end().to_string()
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_its_documented_code() {
        let codes: Vec<(Exit, u8)> = Exit::ALL.iter().map(|e| (*e, e.code())).collect();
        assert_eq!(
            codes,
            [
                (Exit::Done, 0),
                (Exit::Regressed, 1),
                (Exit::NightRegressed, 1),
                (Exit::Error, 2),
                (Exit::DoesNotApply, 2),
                (Exit::VariantFailed, 2),
                (Exit::NightFailed, 2),
                (Exit::Undecided, 3),
                (Exit::OneOf, 4),
                (Exit::Interrupted, 130)
            ]
        );
        // the enum's doc comment lists every code, and the help table too
        let doc = include_str!("exit.rs");
        let table = Exit::table();
        for e in Exit::ALL {
            assert!(
                doc.contains(&format!("/// | {} | ", e.code())),
                "{e:?} is not in the doc comment's table"
            );
            assert!(table.contains(&format!("{:>3}  {}", e.code(), e.meaning())), "{table}");
        }
        assert_ne!(
            Exit::Undecided.code(),
            Exit::Regressed.code(),
            "undecided is not a gate failure"
        );
    }
}
