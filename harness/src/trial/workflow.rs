//! `try` from its request to its verdict: the two-variant matrix, the
//! apply check before any build, the run (started for this host, or at
//! the clock asked for), what failed in plain lines, and the finished
//! report ([`crate::finish`]). The caller prints and picks the exit code.

use std::path::Path;

use anyhow::Result;

use super::{failures, matrix, preflight, FailedStep, Request};
use crate::config::Matrix;
use crate::finish::{self, Ending, Finished};
use crate::pipeline::{self, Options};
use crate::store::Run;

/// How a `try` ended.
pub enum Tried {
    /// The series does not apply to the base (or the base holds it):
    /// nothing was built. Which patch and hunk, in words.
    DoesNotApply(String),
    /// `--per-patch`: the series applies; this matrix's series' prefixes
    /// are for a bisection to measure.
    PerPatch(Box<Matrix>),
    /// Measured: what failed, one line each, and the finished report.
    Measured {
        /// The failed steps (a variant not made, a boot cut).
        failures: Vec<FailedStep>,
        /// The report, its files, the gate.
        finished: Box<Finished>,
    },
}

/// Runs `try` for `req`: refuses a series that does not apply before any
/// build; with `per_patch` stops there and gives the matrix; otherwise
/// measures base against base + series (the profile made for this host,
/// or under the clock `req` asks for), boots the gate's second stage when
/// asked, and finishes the report. `options` gives the run's options for
/// the matrix file; `say` gets each line for the user as it happens.
pub fn run(
    req: &Request,
    per_patch: bool,
    options: &dyn Fn(&Path) -> Result<Options>,
    e: &Ending,
    say: &dyn Fn(&str),
) -> Result<Tried> {
    let m = matrix(req, &e.work_dir)?;
    let scratch = e.work_dir.try_preflight(std::process::id());
    if let Some(why) = preflight(&m, &scratch)? {
        return Ok(Tried::DoesNotApply(why));
    }
    if per_patch {
        return Ok(Tried::PerPatch(Box::new(m)));
    }
    let opts = options(&m.path)?;
    let dir = if req.clock.is_none() {
        // made again (for the substitute) only after a failed probe
        pipeline::start_for_this_host(m, || matrix(req, &e.work_dir), &opts)?
    } else {
        pipeline::start_fixed(m, &opts)?
    };
    let finished = finish::measured(&dir, &opts, e, false, say)?;
    Ok(Tried::Measured {
        failures: failures(&Run::open(&dir)?)?,
        finished: Box::new(finished),
    })
}
