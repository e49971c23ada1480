//! Where to look next: the commit graph chooses, as `git bisect` does.
//! [`Git`] asks git itself (`git rev-list --bisect-all BAD --not GOOD...`:
//! every commit that may be the first bad one, best halving first), so a
//! merge-containing history is bisected on its graph, topic branches
//! included; [`Linear`] is a list (a series' prefixes, the simulations).

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::proc::Cmd;

/// The next commit to test, or the end of a segment.
#[derive(Debug, Clone, PartialEq)]
pub enum Mid {
    /// Test this commit.
    Test(String),
    /// Nothing left to test: `first_bad` is the first bad commit, unless
    /// one of `maybe` (skipped, untestable) is.
    Found {
        /// The first bad commit.
        first_bad: String,
        /// Skipped commits that could be it instead.
        maybe: Vec<String>,
    },
}

/// A history to bisect.
pub trait Graph {
    /// The next commit to test between `bad` and the `goods` (commits known
    /// like good), never one of `skip`.
    fn midpoint(&self, bad: &str, goods: &[String], skip: &[String]) -> Result<Mid>;
}

/// Picks the best candidate of `ranked` (best first) not skipped, or the end.
fn pick(bad: &str, ranked: Vec<String>, skip: &[String]) -> Mid {
    let (skipped, open): (Vec<String>, Vec<String>) =
        ranked.into_iter().filter(|c| c != bad).partition(|c| skip.contains(c));
    match open.into_iter().next() {
        Some(c) => Mid::Test(c),
        None => Mid::Found {
            first_bad: bad.to_string(),
            maybe: skipped,
        },
    }
}

/// A git tree's history, as git bisects it.
#[derive(Debug, Clone)]
pub struct Git {
    /// The tree.
    pub tree: PathBuf,
}

impl Graph for Git {
    fn midpoint(&self, bad: &str, goods: &[String], skip: &[String]) -> Result<Mid> {
        let f = Cmd::new("git")
            .arg("-C")
            .arg(&self.tree)
            .args(["rev-list", "--bisect-all", bad, "--not"])
            .args(goods)
            .capture()
            .run_ok()
            .context("ask git for the next commit to test")?;
        let ranked = f
            .output
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect();
        Ok(pick(bad, ranked, skip))
    }
}

/// A linear history, oldest first (the good end first, the bad end last).
#[derive(Debug, Clone)]
pub struct Linear(pub Vec<String>);

impl Graph for Linear {
    fn midpoint(&self, bad: &str, goods: &[String], skip: &[String]) -> Result<Mid> {
        let at = |c: &str| {
            self.0
                .iter()
                .position(|x| x == c)
                .with_context(|| format!("{c} is not in the history"))
        };
        let hi = at(bad)?;
        let lo = goods
            .iter()
            .map(|g| at(g))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .max()
            .unwrap_or(0);
        let mid = (lo + hi) / 2;
        // nearest the middle first, the earlier one of two equally near
        let mut ranked: Vec<usize> = (lo + 1..hi).collect();
        ranked.sort_by_key(|&i| (i.abs_diff(mid), i));
        Ok(pick(bad, ranked.into_iter().map(|i| self.0[i].clone()).collect(), skip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_history_halves_and_steps_around_skipped_commits() {
        let h = Linear((0..=8).map(|i| format!("c{i}")).collect());
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(h.midpoint("c8", &s(&["c0"]), &[]).unwrap(), Mid::Test("c4".into()));
        assert_eq!(
            h.midpoint("c8", &s(&["c0"]), &s(&["c4"])).unwrap(),
            Mid::Test("c3".into())
        );
        assert_eq!(
            h.midpoint("c5", &s(&["c0", "c4"]), &[]).unwrap(),
            Mid::Found {
                first_bad: "c5".into(),
                maybe: vec![]
            }
        );
        assert_eq!(
            h.midpoint("c6", &s(&["c4"]), &s(&["c5"])).unwrap(),
            Mid::Found {
                first_bad: "c6".into(),
                maybe: s(&["c5"])
            }
        );
    }
}
