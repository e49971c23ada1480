//! What making a variant records, as the run files hold it: a series'
//! [`State`] against the base, the [`Failure`] of a patch that did not
//! apply, the config symbols that were [`Lost`]. Owned here and made from
//! `kernel`'s own values where the variant's events are written, so an edit
//! of `kernel` cannot change the files; their words are `kernel`'s.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::kernel::{kconfig, patch};

/// Where a patch did not apply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct Failure {
    /// The patch file.
    pub patch: PathBuf,
    /// `(file, failed hunk numbers)` pairs, from patch's output.
    pub files: Vec<(String, Vec<u32>)>,
    /// patch's own words, trimmed.
    pub output: String,
}

/// A series' state against a tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// Applies forward: the tree does not contain it.
    Applies,
    /// Reverse-applies: the tree already contains it.
    Contained,
    /// Neither.
    Conflicts {
        /// Why the forward application failed.
        forward: Failure,
        /// Why the reverse application failed.
        reverse: Failure,
    },
}

/// A requested symbol that `olddefconfig` changed (a missing dependency, a
/// typo, a symbol that does not exist in this tree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lost {
    /// The symbol.
    pub symbol: String,
    /// What a fragment asked for.
    pub requested: String,
    /// What the final config has (`n` when absent).
    pub actual: String,
}

impl From<patch::Failure> for Failure {
    fn from(f: patch::Failure) -> Failure {
        let patch::Failure { patch, files, output } = f;
        Failure { patch, files, output }
    }
}

impl From<Failure> for patch::Failure {
    fn from(f: Failure) -> patch::Failure {
        let Failure { patch, files, output } = f;
        patch::Failure { patch, files, output }
    }
}

impl From<patch::State> for State {
    fn from(s: patch::State) -> State {
        match s {
            patch::State::Applies => State::Applies,
            patch::State::Contained => State::Contained,
            patch::State::Conflicts { forward, reverse } => State::Conflicts {
                forward: forward.into(),
                reverse: reverse.into(),
            },
        }
    }
}

impl From<State> for patch::State {
    fn from(s: State) -> patch::State {
        match s {
            State::Applies => patch::State::Applies,
            State::Contained => patch::State::Contained,
            State::Conflicts { forward, reverse } => patch::State::Conflicts {
                forward: forward.into(),
                reverse: reverse.into(),
            },
        }
    }
}

impl From<kconfig::Lost> for Lost {
    fn from(l: kconfig::Lost) -> Lost {
        let kconfig::Lost {
            symbol,
            requested,
            actual,
        } = l;
        Lost {
            symbol,
            requested,
            actual,
        }
    }
}

impl From<Lost> for kconfig::Lost {
    fn from(l: Lost) -> kconfig::Lost {
        let Lost {
            symbol,
            requested,
            actual,
        } = l;
        kconfig::Lost {
            symbol,
            requested,
            actual,
        }
    }
}

/// In `kernel`'s words.
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        patch::Failure::from(self.clone()).fmt(f)
    }
}

/// In `kernel`'s words.
impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        patch::State::from(self.clone()).fmt(f)
    }
}

/// In `kernel`'s words.
impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        kconfig::Lost::from(self.clone()).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record of each value serialises as `kernel`'s own does today and
    /// reads in the same words.
    #[test]
    fn a_variant_record_keeps_kernel_shape_and_words() {
        let failure = patch::Failure {
            patch: "0001-x.patch".into(),
            files: vec![("mm/vmalloc.c".into(), vec![2, 3])],
            output: "Hunk #2 FAILED".into(),
        };
        let states = [
            patch::State::Applies,
            patch::State::Contained,
            patch::State::Conflicts {
                forward: failure.clone(),
                reverse: patch::Failure::default(),
            },
        ];
        for s in states {
            let r = State::from(s.clone());
            assert_eq!(serde_json::to_value(&r).unwrap(), serde_json::to_value(&s).unwrap());
            assert_eq!(r.to_string(), s.to_string());
        }
        let lost = kconfig::Lost {
            symbol: "KASAN".into(),
            requested: "y".into(),
            actual: "n".into(),
        };
        let r = Lost::from(lost.clone());
        assert_eq!(serde_json::to_value(&r).unwrap(), serde_json::to_value(&lost).unwrap());
        assert_eq!(r.to_string(), "CONFIG_KASAN=y became n");
        assert_eq!(Failure::from(failure.clone()).to_string(), failure.to_string());
    }
}
