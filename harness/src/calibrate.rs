//! `harness calibrate`: the base kernel run as two identical arms (A/A), to
//! measure this host's noise floor per benchmark metric and the rate at which
//! the decision rule calls a change where there is none. The result is
//! stored in the work directory and raises the effect floor of later reports
//! on the same host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::{Matrix, Variant};
use crate::report::Report;
use crate::stats::{self, Verdict};

/// Name of the second arm.
pub const ARM_B: &str = "base-again";

/// A stored calibration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    /// Host it was measured on (hostname and CPU count).
    pub host: String,
    /// The A/A run.
    pub run_id: String,
    /// When.
    pub created: String,
    /// `benchmark.metric` → 95th percentile of |A/A median ratio − 1|.
    pub noise: BTreeMap<String, f64>,
    /// The largest of them: the floor reports use.
    pub noise_floor: f64,
    /// Fraction of A/A cells called regressed or improved.
    pub false_positive_rate: f64,
    /// A/A cells compared.
    pub cells: usize,
}

/// The A/A matrix: base, and base again as a second arm, with every
/// benchmark base runs. Both arms share one kernel (same cache key).
pub fn aa_matrix(m: &Matrix) -> Matrix {
    let mut aa = m.clone();
    let base = m.variants[0].clone();
    aa.variants = vec![base.clone(), Variant { name: ARM_B.into(), ..base }];
    aa
}

/// Computes the calibration from an A/A run's report.
pub fn compute(r: &Report, host: &str) -> Calibration {
    let mut per: BTreeMap<String, Vec<(Vec<f64>, Vec<f64>)>> = BTreeMap::new();
    let mut flagged = 0;
    let mut cells = 0;
    for row in &r.rows {
        let (Some(a), Some(b)) = (row.cells.iter().find(|c| c.variant == "base"), row.cells.iter().find(|c| c.variant == ARM_B)) else {
            continue;
        };
        per.entry(format!("{}.{}", row.benchmark, row.metric)).or_default().push((a.values.clone(), b.values.clone()));
        if let Some(d) = &b.decision {
            if d.verdict != Verdict::Insufficient {
                cells += 1;
                if matches!(d.verdict, Verdict::Regressed | Verdict::Improved) {
                    flagged += 1;
                }
            }
        }
    }
    let noise: BTreeMap<String, f64> = per.into_iter().map(|(k, pairs)| (k, stats::noise_floor(&pairs, 4))).collect();
    Calibration {
        host: host.to_string(),
        run_id: r.run_id.clone(),
        created: crate::store::now_rfc3339(),
        noise_floor: noise.values().cloned().fold(0.0, f64::max),
        noise,
        false_positive_rate: if cells == 0 { 0.0 } else { flagged as f64 / cells as f64 },
        cells,
    }
}

/// Where the calibration lives.
pub fn path(work: &Path) -> PathBuf {
    work.join("calibration.json")
}

/// This host's identity for calibrations.
pub fn host_id() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{} ({} CPUs)", h.trim(), crate::pipeline::host_cpus())
}

/// Stores a calibration.
pub fn save(work: &Path, c: &Calibration) -> Result<()> {
    std::fs::create_dir_all(work).with_context(|| format!("create {}", work.display()))?;
    std::fs::write(path(work), serde_json::to_vec_pretty(c)?).with_context(|| format!("write {}", path(work).display()))
}

/// The stored calibration of this host, if any.
pub fn load(work: &Path) -> Option<Calibration> {
    let c: Calibration = serde_json::from_slice(&std::fs::read(path(work)).ok()?).ok()?;
    (c.host == host_id()).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aa_matrix_has_two_identical_arms() {
        let y = "variants:\n  - name: base\n  - name: v\n    benchmarks: [s]\nvcpus: [2]\nbenchmarks:\n  - {name: s, kind: doexec}\n";
        let m = crate::config::parse(y, Path::new("/x/m.yaml"), None).unwrap();
        let aa = aa_matrix(&m);
        assert_eq!(aa.variants.len(), 2);
        assert_eq!(aa.variants[1].name, ARM_B);
        assert!(aa.variants[1].is_plain());
        assert_eq!(aa.variants[0].benchmarks, aa.variants[1].benchmarks);
    }
}
