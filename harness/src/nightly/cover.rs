//! Whether an earlier bisection answers a change already (pure). An
//! earlier bisection is of the same change when its nights overlap the
//! change's, or when the change point moved by a night (the change's
//! nights are next to the earlier one's) and the change's cell shows no
//! change point at the earlier place any more (if it still does, this is a
//! second change). Of those, one still running or that named a culprit
//! covers the change; one that ended undecided or failed covers nothing,
//! so the change is bisected again, unless the new bisection would bisect
//! the very same two commits (it would end the same way).

use super::{Bisection, KeyChange, Status};

/// Why a change for the worse is not bisected now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Bisection #N (running, or it named a culprit) covers its nights.
    Covered(i64),
    /// Bisection #N of the same two commits ended undecided (false) or
    /// failed (true).
    Repeat(i64, bool),
}

/// How an earlier bisection ended, for covering.
fn answered(b: &Bisection) -> bool {
    match b.status {
        Status::Pending | Status::Running => true,
        Status::Failed => false,
        Status::Done => b.result.as_ref().is_some_and(|r| !r.culprits.is_empty()),
    }
}

/// Decides change `c` (between `commits`, good then bad) against the
/// nightly's `earlier` bisections (`order` gives a run's night number;
/// `tonight`: every change point tonight's series show): None when none
/// answers it, so it is bisected.
pub fn decide(
    c: &KeyChange,
    commits: (&str, &str),
    earlier: &[Bisection],
    order: &dyn Fn(&str) -> Option<i64>,
    tonight: &[KeyChange],
) -> Option<Claim> {
    let (g, b) = (order(&c.good_run), order(&c.bad_run));
    let overlaps = |e: &KeyChange| {
        (e.good_run == c.good_run && e.bad_run == c.bad_run)
            || matches!((g, b, order(&e.good_run), order(&e.bad_run)), (Some(g), Some(b), Some(og), Some(ob)) if g < ob && og < b)
    };
    let still_there = |e: &KeyChange| {
        tonight.iter().any(|k| {
            (&k.bench, &k.metric, k.vcpus) == (&c.bench, &c.metric, c.vcpus)
                && (&k.good_run, &k.bad_run) == (&e.good_run, &e.bad_run)
        })
    };
    let moved = |e: &KeyChange| (c.good_run == e.bad_run || c.bad_run == e.good_run) && !still_there(e);
    let related: Vec<&Bisection> = earlier
        .iter()
        .filter(|e| overlaps(&e.change) || moved(&e.change))
        .collect();
    if let Some(e) = related.iter().find(|e| answered(e)) {
        return Some(Claim::Covered(e.id));
    }
    related
        .iter()
        .find(|e| {
            (e.good_commit == commits.0 && e.bad_commit == commits.1)
                || e.widened.iter().any(|w| (w.good.as_str(), w.bad.as_str()) == commits)
        })
        .map(|e| Claim::Repeat(e.id, e.status == Status::Failed))
}
