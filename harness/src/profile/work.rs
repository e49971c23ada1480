//! Work per op: whether the two arms of a cell did the same amount of their
//! benchmark's unit of work per op. A benchmark names the kernel functions
//! that are its unit of work (`bench::unit_of_work`: fork-prlimit's three
//! syscall handlers, doexec's `bprm_execve`); their calls per op, summed,
//! are compared across the arms' boots with the differential profile's
//! per-function noise model ([`super::diff`]): a side's noise is its boots'
//! max − min, the larger side's (and an A/A pair's change and ranges when
//! given), and a change is called only past [`WORK_SPREAD`] × noise (not
//! the diff's `spread_factor`), with the two sides' boot ranges apart and
//! `min_boots` a side.
//!
//! Why: fork-prlimit's op is a process iteration whose child loops on its
//! syscalls until the parent's sleep ends. Under the instruction-counting
//! clock a sleep ends after a fixed number of instructions, so a costlier
//! syscall means fewer of them per op, and the rate and the instructions
//! per op measure how the sleep was filled, not what the code costs.

use super::diff::{Options, Stat};
use super::PerOp;

/// A change smaller than this fraction of base's unit-of-work calls per op
/// is not called, whatever the noise: a benchmark with a fixed unit of work
/// (one `bprm_execve` an exec) repeats its calls per op exactly, so its
/// noise is 0; a window edge or a stray exec moves them by far less than 1%.
pub const WORK_FLOOR: f64 = 0.01;

/// The noise factor of the work rule: |Δ median| above the larger side's
/// range, the ranges apart. A time-filled op spreads its calls per op by
/// ±7% across boots (seed 003's base at 26 vCPUs: 488 to 560), so the
/// diff's 3 × range would let a 32% change with ranges far apart go
/// unlabelled. The false-label rate of the rule with identical arms is at
/// most that of the ranges being apart, 2·(n!)²/(2n)! for n boots a side
/// whatever the distribution: 10% at 3, 2.9% at 4, 0.8% at 5 — and a false
/// label withholds a verdict, it never gives a wrong one.
pub const WORK_SPREAD: f64 = 1.0;

/// The unit of work's calls per op on both sides.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkPerOp {
    /// The functions summed.
    pub functions: Vec<String>,
    /// Base's calls per op across boots.
    pub base: Stat,
    /// The variant's.
    pub variant: Stat,
    /// The noise the change is measured against.
    pub noise: f64,
    /// |Δ median| must exceed this.
    pub threshold: f64,
    /// The arms' work per op differs.
    pub differs: bool,
}

fn calls(boots: &[PerOp], unit: &[&str]) -> Vec<f64> {
    boots
        .iter()
        .map(|p| unit.iter().filter_map(|f| p.functions.get(*f)).map(|f| f.calls).sum())
        .collect()
}

/// The unit of work's calls per op of `base` and `variant` (one [`PerOp`]
/// a boot), with an optional A/A pair of base boots; None when the
/// benchmark names no unit of work or neither side calls it.
pub fn work_per_op(
    base: &[PerOp],
    variant: &[PerOp],
    aa: Option<(&[PerOp], &[PerOp])>,
    unit: &[&str],
    o: &Options,
) -> Option<WorkPerOp> {
    let (b, v) = (Stat::of(&calls(base, unit)), Stat::of(&calls(variant, unit)));
    if unit.is_empty() || (b.max <= 0.0 && v.max <= 0.0) {
        return None;
    }
    let mut noise = b.range().max(v.range());
    if let Some((a1, a2)) = aa {
        let (s1, s2) = (Stat::of(&calls(a1, unit)), Stat::of(&calls(a2, unit)));
        noise = noise.max((s2.median - s1.median).abs()).max(s1.range()).max(s2.range());
    }
    let threshold = (WORK_SPREAD * noise).max(WORK_FLOOR * b.median.abs());
    let enough = base.len() >= o.min_boots && variant.len() >= o.min_boots;
    let apart = !o.separated || v.min > b.max || v.max < b.min;
    Some(WorkPerOp {
        functions: unit.iter().map(|f| f.to_string()).collect(),
        base: b,
        variant: v,
        noise,
        threshold,
        differs: enough && apart && (v.median - b.median).abs() > threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::parse;

    /// A boot's per-op profile of fork-prlimit: `n` calls of each of the
    /// three syscall handlers over 10 ops.
    fn boot(n: [u64; 3]) -> PerOp {
        let text = format!(
            "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 10 missing 0\nvcpus 2\ntotal 9000 0 0 0\n\
             kernel 9000 0 0 0\nf __x64_sys_prlimit64 {} {} 0 0\nf __x64_sys_getpriority {} {} 0 0\n\
             f __x64_sys_setpriority {} {} 0 0\nf bprm_execve 10 10 0 0\n",
            n[0] * 30,
            n[0],
            n[1] * 20,
            n[1],
            n[2] * 25,
            n[2]
        );
        parse(&text).unwrap().per_op(None).unwrap()
    }

    const UNIT: &[&str] = &["__x64_sys_prlimit64", "__x64_sys_getpriority", "__x64_sys_setpriority"];

    #[test]
    fn calls_per_op_that_differ_beyond_their_spread_are_called() {
        let o = Options::default();
        // seed 003 at 26 vCPUs: ~180 against ~122 unit calls per op
        let base: Vec<PerOp> = [[600, 600, 600], [610, 595, 600], [590, 600, 605]].map(boot).to_vec();
        let var: Vec<PerOp> = [[410, 405, 410], [400, 410, 405], [415, 405, 405]].map(boot).to_vec();
        let w = work_per_op(&base, &var, None, UNIT, &o).unwrap();
        assert_eq!((w.base.median, w.variant.median), (180.0, 122.5));
        assert!(w.differs, "{w:?}");
        // the same boots against themselves: not called
        assert!(!work_per_op(&base, &base, None, UNIT, &o).unwrap().differs);
        // ranges that overlap: not called however far the medians are
        let wide: Vec<PerOp> = [[300, 300, 300], [410, 405, 410], [420, 400, 400]].map(boot).to_vec();
        assert!(!work_per_op(&wide, &var, None, UNIT, &o).unwrap().differs);
        // two boots a side: too few
        assert!(!work_per_op(&base[..2], &var[..2], None, UNIT, &o).unwrap().differs);
    }

    /// Seed 003's revert at 26 vCPUs under icount, 5 boots an arm (run
    /// 20261203-120233, the three handlers' calls / 320): 533 against 360
    /// calls per op, base's boots 488..560. The diff's 3 × range did not
    /// call it and the cell read "improved" by 12%.
    #[test]
    fn a_time_filled_op_with_ranges_far_apart_is_called() {
        let base: Vec<PerOp> = [
            [1806, 1809, 1810],
            [1777, 1779, 1781],
            [1724, 1726, 1728],
            [1867, 1869, 1871],
            [1625, 1627, 1629],
        ]
        .map(boot)
        .to_vec();
        let var: Vec<PerOp> = [
            [1170, 1172, 1175],
            [1153, 1155, 1158],
            [1201, 1203, 1206],
            [1257, 1258, 1261],
            [1263, 1264, 1267],
        ]
        .map(boot)
        .to_vec();
        let w = work_per_op(&base, &var, None, UNIT, &Options::default()).unwrap();
        assert!((w.noise - 72.6).abs() < 0.01, "{w:?}");
        assert!(w.differs, "{w:?}");
    }

    #[test]
    fn a_fixed_unit_of_work_or_none_is_not_called() {
        let o = Options::default();
        let a: Vec<PerOp> = [[1, 1, 1]; 3].map(boot).to_vec();
        // bprm_execve: once an op on both sides, noise 0
        let w = work_per_op(&a, &a, None, &["bprm_execve"], &o).unwrap();
        assert_eq!(
            (w.base.median, w.variant.median, w.noise, w.differs),
            (1.0, 1.0, 0.0, false)
        );
        assert_eq!(work_per_op(&a, &a, None, &[], &o), None, "no unit of work named");
        assert_eq!(work_per_op(&a, &a, None, &["nosuch"], &o), None, "never called");
    }

    #[test]
    fn an_aa_pair_widens_the_noise() {
        let o = Options::default();
        let base: Vec<PerOp> = [[600, 600, 600]; 3].map(boot).to_vec();
        let var: Vec<PerOp> = [[580, 580, 580]; 3].map(boot).to_vec();
        assert!(
            work_per_op(&base, &var, None, UNIT, &o).unwrap().differs,
            "6 calls/op, noise 0"
        );
        let aa2: Vec<PerOp> = [[570, 570, 570]; 3].map(boot).to_vec();
        let w = work_per_op(&base, &var, Some((&base, &aa2)), UNIT, &o).unwrap();
        assert_eq!(w.noise, 9.0);
        assert!(!w.differs, "base moves 9 calls/op against itself");
    }
}
