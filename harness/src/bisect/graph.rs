//! Where to look next: along the first-parent line of `good..bad` (the
//! main line, as `git log --first-parent` shows it), halving it; a merge on
//! that line that carries a share is opened by the search ([`Graph::branch`]):
//! its merged branch is bisected as a segment of its own, against its merge
//! base with the line. [`Git`] asks git itself; [`Linear`] is a list (a
//! series' prefixes, the simulations); [`Dag`] a graph in memory (tests).

#[cfg(test)]
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::proc::Cmd;

/// The next commit to test, or the end of a segment.
#[derive(Debug, Clone, PartialEq)]
pub enum Mid {
    /// Test this commit.
    Test(String),
    /// Nothing left to test: `first_bad` is the first bad commit, unless
    /// one of `maybe` (skipped, untestable; oldest first) is.
    Found {
        /// The first bad commit.
        first_bad: String,
        /// Skipped commits that could be it instead.
        maybe: Vec<String>,
    },
}

/// A history to bisect.
pub trait Graph {
    /// The first-parent line from `bad` back to the first commit reachable
    /// from one of `goods` (which is left out): oldest first, `bad` last.
    fn line(&self, bad: &str, goods: &[String]) -> Result<Vec<String>>;

    /// The branch a merge commit merged: the merge base of its first and
    /// second parents, and its second parent; None for a commit with one parent.
    fn branch(&self, c: &str) -> Result<Option<(String, String)>>;

    /// The next commit to test on the first-parent line between `bad` and
    /// the `goods` (commits known like good), never one of `skip`: the
    /// middle of the line first, then outwards (the earlier of two equally near).
    fn midpoint(&self, bad: &str, goods: &[String], skip: &[String]) -> Result<Mid> {
        let line = self.line(bad, goods)?;
        let n = line.len();
        let mid = (n / 2) as isize - 1;
        let mut ranked: Vec<usize> = (0..n.saturating_sub(1)).collect();
        ranked.sort_by_key(|&j| ((j as isize - mid).unsigned_abs(), j));
        let mut m = pick(bad, ranked.into_iter().map(|j| line[j].clone()).collect(), skip);
        if let Mid::Found { maybe, .. } = &mut m {
            maybe.sort_by_key(|c| line.iter().position(|x| x == c));
        }
        Ok(m)
    }
}

/// Picks the best candidate of `ranked` (best first) not skipped, or the
/// end; the skipped ones next to `bad` on the line could be it instead.
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

/// A git tree's history.
#[derive(Debug, Clone)]
pub struct Git {
    /// The tree.
    pub tree: PathBuf,
}

impl Git {
    fn git(&self, args: &[&str], what: &str) -> Result<String> {
        let f = Cmd::new("git")
            .arg("-C")
            .arg(&self.tree)
            .args(args)
            .capture()
            .run_ok()
            .with_context(|| format!("ask git for {what}"))?;
        Ok(f.output)
    }
}

impl Graph for Git {
    fn line(&self, bad: &str, goods: &[String]) -> Result<Vec<String>> {
        let mut args = vec!["rev-list", "--first-parent", "--reverse", bad, "--not"];
        args.extend(goods.iter().map(String::as_str));
        let out = self.git(&args, &format!("the first-parent line of {bad}"))?;
        Ok(out.split_whitespace().map(str::to_string).collect())
    }

    fn branch(&self, c: &str) -> Result<Option<(String, String)>> {
        let out = self.git(&["rev-list", "--parents", "-n", "1", c], &format!("the parents of {c}"))?;
        let ids: Vec<&str> = out.split_whitespace().collect();
        let [_, p1, p2, ..] = ids[..] else {
            return Ok(None);
        };
        let base = self.git(&["merge-base", p1, p2], &format!("the merge base of {c}'s parents"))?;
        Ok(Some((base.trim().to_string(), p2.to_string())))
    }
}

/// A linear history, oldest first (the good end first, the bad end last).
#[derive(Debug, Clone)]
pub struct Linear(pub Vec<String>);

impl Graph for Linear {
    fn line(&self, bad: &str, goods: &[String]) -> Result<Vec<String>> {
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
        Ok(self.0[(lo + 1).min(hi + 1)..=hi].to_vec())
    }

    fn branch(&self, _: &str) -> Result<Option<(String, String)>> {
        Ok(None)
    }
}

/// A commit graph in memory: each commit's parents, the first parent first.
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub struct Dag(pub BTreeMap<String, Vec<String>>);

#[cfg(test)]
impl Dag {
    /// Adds commit `c` with its parents.
    pub fn add(&mut self, c: &str, parents: &[&str]) {
        self.0.insert(c.into(), parents.iter().map(|p| p.to_string()).collect());
    }

    /// `c` and every commit reachable from it.
    pub fn ancestors(&self, c: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![c.to_string()];
        while let Some(x) = todo.pop() {
            if seen.insert(x.clone()) {
                todo.extend(self.0.get(&x).into_iter().flatten().cloned());
            }
        }
        seen
    }
}

#[cfg(test)]
impl Graph for Dag {
    fn line(&self, bad: &str, goods: &[String]) -> Result<Vec<String>> {
        anyhow::ensure!(self.0.contains_key(bad), "{bad} is not in the history");
        let known: BTreeSet<String> = goods.iter().flat_map(|g| self.ancestors(g)).collect();
        let mut line = vec![];
        let mut at = Some(bad.to_string());
        while let Some(c) = at.filter(|c| !known.contains(c)) {
            at = self.0.get(&c).and_then(|p| p.first().cloned());
            line.push(c);
        }
        line.reverse();
        Ok(line)
    }

    fn branch(&self, c: &str) -> Result<Option<(String, String)>> {
        let ps = self.0.get(c).with_context(|| format!("{c} is not in the history"))?;
        let [p1, p2, ..] = &ps[..] else {
            return Ok(None);
        };
        let a1 = self.ancestors(p1);
        // the merge base: the common ancestor reached first from the second parent
        let base = self
            .line(p2, &[])?
            .into_iter()
            .rev()
            .chain(self.ancestors(p2))
            .find(|x| a1.contains(x))
            .with_context(|| format!("{c}'s parents have no common ancestor"))?;
        Ok(Some((base, p2.clone())))
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
        // the skipped commits that could be it instead, oldest first
        assert_eq!(
            h.midpoint("c8", &s(&["c3"]), &s(&["c6", "c5", "c7", "c4"])).unwrap(),
            Mid::Found {
                first_bad: "c8".into(),
                maybe: s(&["c4", "c5", "c6", "c7"])
            }
        );
    }
}
