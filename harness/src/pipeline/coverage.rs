//! A run's coverage step, after its boots: for each variant that applies or
//! reverts series, the functions they change against the kernel profiles
//! of the run's boots, written to the run directory's `coverage.json`,
//! which the report shows; each base benchmark's calls per op is also kept
//! in the coverage cache ([`crate::coverage::cache`]), for `check`.

use std::collections::BTreeMap;

use anyhow::Result;

use crate::config::{Matrix, Variant};
use crate::coverage::{
    self, base_identity, changed_functions, kernel_symbols, remember, source_files, CallsPerOp, Coverage,
};
use crate::records::Event;
use crate::report::profiles;
use crate::store::Run;
use crate::workdir::WorkDir;

/// Writes `coverage.json` of `run` (matrix `m`): one entry per variant
/// with series, from the profiles of the boots at the run's smallest vCPU
/// count. Nothing is written when base has no profiles there (a wall-clock
/// run without profile boots).
pub fn write(run: &Run, m: &Matrix, work: &WorkDir) -> Result<Vec<Coverage>> {
    let Some(&vcpus) = m.vcpus.iter().min() else {
        return Ok(Vec::new());
    };
    let events = run.events()?;
    let keys = kernel_keys(m, &events);
    let (dir, events, _) = profiles::source(run, events)?;
    let arm = |v: &Variant| -> BTreeMap<String, CallsPerOp> {
        let mut notes = Vec::new();
        v.benchmarks
            .iter()
            .filter_map(|b| {
                let boots = profiles::boots(&dir, &events, &v.name, vcpus, b, &mut notes);
                (!boots.is_empty()).then(|| (b.clone(), coverage::mean_calls(&boots)))
            })
            .collect()
    };
    let Some(base_v) = m.variants.iter().find(|v| v.name == "base") else {
        return Ok(Vec::new());
    };
    let base = arm(base_v);
    if base.is_empty() {
        return Ok(Vec::new());
    }
    let base_symbols = keys.get("base").and_then(|k| kernel_symbols(work, k));
    remember(work, &base_identity(m)?, vcpus, &base, base_symbols.as_ref())?;
    let mut out = Vec::new();
    for v in m
        .variants
        .iter()
        .filter(|v| !v.apply.is_empty() || !v.revert.is_empty())
    {
        let changed = changed_functions(m, v, &source_files(m, work)?, &run.log("coverage.log"));
        let symbols = keys.get(&v.name).and_then(|k| kernel_symbols(work, k));
        // the variant's own benchmarks: base's profiles of those it runs
        let base_of: BTreeMap<String, CallsPerOp> = base
            .iter()
            .filter(|(b, _)| v.benchmarks.contains(b))
            .map(|(b, c)| (b.clone(), c.clone()))
            .collect();
        out.push(coverage::table(
            &v.name,
            vcpus,
            &changed?,
            symbols.as_ref(),
            &base_of,
            &arm(v),
        ));
    }
    let path = run.dir.join(coverage::FILE);
    crate::util::write_whole(&path, &serde_json::to_vec_pretty(&out)?)?;
    Ok(out)
}

/// Each variant's kernel cache key, as its build event says.
fn kernel_keys(m: &Matrix, events: &[Event]) -> BTreeMap<String, String> {
    m.variants
        .iter()
        .filter_map(|v| kernel_key(events, &v.name).map(|k| (v.name.clone(), k)))
        .collect()
}

/// The kernel cache key `variant` was built or found under.
fn kernel_key(events: &[Event], variant: &str) -> Option<String> {
    events.iter().find_map(|e| match e {
        Event::Build { variant: v, key, .. } if v == variant => key.clone(),
        _ => None,
    })
}
