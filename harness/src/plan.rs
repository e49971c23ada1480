//! From a matrix to work: the cells (variant × vCPUs × benchmark) and the
//! boot jobs that fill them, in an interleaved, randomised order drawn from
//! the matrix seed (never all of one variant, then all of another), with
//! stable ids so a resumed run skips what is done.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::config::Matrix;

/// One boot of one variant at one vCPU count, running that variant's
/// benchmarks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BootJob {
    /// Variant.
    pub variant: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Boot index within (variant, vCPUs).
    pub boot: u32,
    /// Benchmarks run in this boot, in order.
    pub benchmarks: Vec<String>,
}

impl BootJob {
    /// Stable id, also the log directory name.
    pub fn id(&self) -> String {
        format!("{}-{}cpu-b{}", self.variant, self.vcpus, self.boot)
    }
}

/// The boot jobs in run order: round after round (one boot of every
/// variant at every vCPU count per round), each round's variant order
/// shuffled with the matrix seed.
pub fn boot_jobs(m: &Matrix) -> Vec<BootJob> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(m.sampling.seed);
    let mut out = Vec::new();
    for round in 0..m.sampling.boots {
        for &vcpus in &m.vcpus {
            let mut vs: Vec<&crate::config::Variant> = m.variants.iter().collect();
            vs.shuffle(&mut rng);
            for v in vs {
                out.push(BootJob { variant: v.name.clone(), vcpus, boot: round, benchmarks: v.benchmarks.clone() });
            }
        }
    }
    out
}

/// Number of (variant, vCPUs, benchmark) cells.
pub fn cell_count(m: &Matrix) -> usize {
    m.variants.iter().map(|v| v.benchmarks.len()).sum::<usize>() * m.vcpus.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(boots: u32, seed: u64) -> Matrix {
        let y = format!(
            "variants:\n  - name: base\n  - name: a\n  - name: b\nvcpus: [2, 4]\n\
             benchmarks:\n  - name: s\n    kind: doexec\nsampling: {{boots: {boots}, seed: {seed}}}\n"
        );
        crate::config::parse(&y, std::path::Path::new("/nonexistent/m.yaml"), None).unwrap()
    }

    #[test]
    fn every_round_has_each_variant_once_per_vcpus() {
        let jobs = boot_jobs(&matrix(3, 7));
        assert_eq!(jobs.len(), 3 * 2 * 3);
        for round in jobs.chunks(3) {
            let mut names: Vec<&str> = round.iter().map(|j| j.variant.as_str()).collect();
            names.sort();
            assert_eq!(names, vec!["a", "b", "base"]);
            assert!(round.iter().all(|j| j.vcpus == round[0].vcpus && j.boot == round[0].boot));
        }
    }

    #[test]
    fn order_is_seeded_and_randomised() {
        let order = |seed| boot_jobs(&matrix(4, seed)).iter().map(|j| j.variant.clone()).collect::<Vec<_>>();
        assert_eq!(order(1), order(1));
        let distinct: std::collections::BTreeSet<Vec<String>> = (0..8).map(order).collect();
        assert!(distinct.len() > 1, "the seed does not change the order");
        // not the same permutation in every round
        let o = order(3);
        let rounds: std::collections::BTreeSet<&[String]> = o.chunks(3).collect();
        assert!(rounds.len() > 1, "{o:?}");
    }
}
