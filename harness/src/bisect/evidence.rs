//! The evidence behind a bisection's answer: the differential kernel
//! profile of a culprit's arm against the good end (the measurement's
//! `base`), from the latest measurement that booted it (the narrowest
//! segment), where its boots were profiled (icount, docs/profiles.md).

use std::path::Path;

use anyhow::{bail, Result};

use super::{describe, io, runs_of};
use crate::report::profiles;
use crate::store::Run;

/// The differential profile of `point` against the good end as text (the
/// first `top` functions), headed by what it compares; an error says why
/// there is none (no measurement booted it, its boots were not profiled).
pub fn profile_of(dir: &Path, point: &str, top: usize) -> Result<String> {
    let st = io::load(dir)?;
    let Some((run, variant)) = runs_of(dir, point)?.into_iter().next() else {
        bail!("no measurement booted {point}");
    };
    let events = Run::open(&run)?.events()?;
    let mut notes = vec![];
    let d = profiles::cell(&run, &events, variant, st.vcpus, &st.bench, &mut notes)?;
    Ok(format!(
        "{} against the good end, {} at {} vCPUs ({}):\n{}",
        describe(dir, point),
        st.bench,
        st.vcpus,
        run.display(),
        crate::report::render::compact::diff_text(&d, top)
    ))
}

/// [`profile_of`] as printed: the profile, or why there is none.
pub fn profile_or_why(dir: &Path, point: &str, top: usize) -> String {
    profile_of(dir, point, top).unwrap_or_else(|e| format!("no differential profile: {e:#}"))
}
