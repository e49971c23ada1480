//! From a matrix to work: the cells (variant × vCPUs × benchmark) and the
//! boot jobs that fill them, in an interleaved, randomised order drawn from
//! the matrix seed (never all of one variant, then all of another), with
//! stable ids so a resumed run skips what is done; and which of those jobs
//! a shard (`--shard K/N`) runs.

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

    /// Which job this is: variant, vCPUs, boot.
    pub fn job_id(&self) -> JobId {
        JobId {
            variant: self.variant.clone(),
            vcpus: self.vcpus,
            boot: self.boot,
        }
    }
}

/// A boot job's identity: one boot of a variant at a vCPU count. It
/// serialises as its three fields, flat where a record embeds it
/// (`#[serde(flatten)]`), as the run files spell them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId {
    /// Variant.
    pub variant: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Boot index within the cell.
    pub boot: u32,
}

impl JobId {
    /// The cell the job boots for.
    pub fn cell(&self) -> CellKey {
        CellKey {
            variant: self.variant.clone(),
            vcpus: self.vcpus,
        }
    }
}

/// A cell's identity across benchmarks: a variant at a vCPU count. It
/// serialises as its two fields, flat where a record embeds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CellKey {
    /// Variant.
    pub variant: String,
    /// vCPUs.
    pub vcpus: u32,
}

impl CellKey {
    /// The cell of `variant` at `vcpus`.
    pub fn new(variant: &str, vcpus: u32) -> CellKey {
        CellKey {
            variant: variant.to_string(),
            vcpus,
        }
    }
}

impl std::fmt::Display for CellKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {} vCPUs", self.variant, self.vcpus)
    }
}

impl BootJob {
    /// Variant `v`'s boot `boot` at `vcpus`, running its benchmarks.
    fn of(v: &crate::config::Variant, vcpus: u32, boot: u32) -> BootJob {
        BootJob {
            variant: v.name.clone(),
            vcpus,
            boot,
            benchmarks: v.benchmarks.clone(),
        }
    }
}

/// The boot jobs in run order: round after round (one boot of every
/// variant at every vCPU count per round), each round's variant order
/// shuffled with the matrix seed, except that the first boot at each vCPU
/// count is base's: the bound of every later wait for SSH there is then
/// measured on the kernel every variant is compared with, so a variant that
/// hangs costs minutes whatever the seed (and a base that hangs is found
/// before anything else is booted).
pub fn boot_jobs(m: &Matrix) -> Vec<BootJob> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(m.sampling.seed);
    let mut out = Vec::new();
    for round in 0..m.sampling.boots {
        for &vcpus in &m.vcpus {
            let mut vs: Vec<&crate::config::Variant> = m.variants.iter().collect();
            vs.shuffle(&mut rng);
            if round == 0 {
                if let Some(i) = vs.iter().position(|v| v.name == "base") {
                    let base = vs.remove(i);
                    vs.insert(0, base);
                }
            }
            out.extend(vs.into_iter().map(|v| BootJob::of(v, vcpus, round)));
        }
    }
    out
}

/// The gate's second stage: `statistics.second_stage_boots` more rounds
/// (boot indices after the first stage's, so their ids are new and a
/// resumed run skips the ones done) at each vCPU count where a cell was
/// sent, booting base and the sent variants only, each round's order
/// shuffled with a seed drawn from the matrix seed, as the first stage's.
pub fn second_stage_jobs(m: &Matrix, sent: &[CellKey]) -> Vec<BootJob> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(m.sampling.seed ^ 0x5EC0_5D00);
    let first = m.sampling.boots;
    let mut out = Vec::new();
    for round in first..first + m.statistics.second_stage_boots {
        for &vcpus in m.vcpus.iter().filter(|&&n| sent.iter().any(|s| s.vcpus == n)) {
            let mut vs: Vec<&crate::config::Variant> = m
                .variants
                .iter()
                .filter(|v| v.name == "base" || sent.contains(&CellKey::new(&v.name, vcpus)))
                .collect();
            vs.shuffle(&mut rng);
            out.extend(vs.into_iter().map(|v| BootJob::of(v, vcpus, round)));
        }
    }
    out
}

/// The boot index of a boot id (`<variant>-<N>cpu-b<K>`, or a retried
/// attempt's `….<a>`); `None` for another form.
pub fn boot_index(boot_id: &str) -> Option<u32> {
    let (_, k) = boot_id.rsplit_once("-b")?;
    k.split('.').next()?.parse().ok()
}

/// One share of a run's boot jobs: shard `k` of `n` (`k` counts from 0, as
/// Slurm's `SLURM_ARRAY_TASK_ID` and CI matrix indices do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard, `0..n`.
    pub k: u32,
    /// How many shards share the run.
    pub n: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// Parses `K/N`.
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not a shard: write K/N with 0 <= K < N (e.g. 0/4)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || k >= n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// The jobs of `shard`, in run order. The plan is cut into blocks — one
/// boot of every variant at one vCPU count, as [`boot_jobs`] lays them
/// out — and block `b` goes to shard `b mod n`. Every variant of a block
/// is booted by the same shard (the same host), so a difference between
/// hosts never passes for a difference between variants; the shards
/// together hold every job once, each in the seeded order.
pub fn shard_jobs(m: &Matrix, jobs: &[BootJob], shard: Shard) -> Vec<BootJob> {
    let block = m.variants.len().max(1);
    jobs.iter()
        .enumerate()
        .filter(|(i, _)| (i / block) as u32 % shard.n == shard.k)
        .map(|(_, j)| j.clone())
        .collect()
}

/// How many blocks a run has: more shards than this leaves some idle.
pub fn block_count(m: &Matrix) -> usize {
    m.sampling.boots as usize * m.vcpus.len()
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
            assert!(round
                .iter()
                .all(|j| j.vcpus == round[0].vcpus && j.boot == round[0].boot));
        }
    }

    /// Issue 30: whatever the seed, the first boot at each vCPU count is
    /// base's (a hung variant's first boot never runs before a bound was
    /// measured); the later rounds keep their seeded order.
    #[test]
    fn the_first_boot_at_each_vcpu_count_is_bases() {
        let mut later_first = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let jobs = boot_jobs(&matrix(3, seed));
            for n in [2, 4] {
                let first = jobs.iter().find(|j| j.vcpus == n).unwrap();
                assert_eq!(
                    (first.variant.as_str(), first.boot),
                    ("base", 0),
                    "seed {seed} at {n} vCPUs"
                );
            }
            later_first.extend(jobs.chunks(3).skip(2).map(|r| r[0].variant.clone()));
        }
        assert_eq!(later_first.len(), 3, "later rounds are still shuffled: {later_first:?}");
    }

    /// The seed of the real-QEMU hang test (tests/it/qemu/hang.rs): seed 6
    /// shuffles a two-variant matrix's first round to [hang, base] (the
    /// order that waited on a hung kernel for 20 minutes before issue 30)
    /// and its later rounds to [base, hang], so that one run shows both a
    /// hung variant scheduled first and a hung variant booted last.
    #[test]
    fn the_hang_test_seed_puts_hang_first_then_last() {
        let y = "variants:\n  - name: base\n  - name: hang\nvcpus: [2]\n\
                 benchmarks:\n  - {name: s, kind: doexec}\nsampling: {boots: 3, seed: 6}\n";
        let m = crate::config::parse(y, std::path::Path::new("/nonexistent/m.yaml"), None).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
        let mut unforced = vec!["base", "hang"];
        unforced.shuffle(&mut rng);
        assert_eq!(unforced, ["hang", "base"], "the seed no longer schedules hang first");
        let order: Vec<String> = boot_jobs(&m).iter().map(BootJob::id).collect();
        assert_eq!(
            order,
            [
                "base-2cpu-b0",
                "hang-2cpu-b0",
                "base-2cpu-b1",
                "hang-2cpu-b1",
                "base-2cpu-b2",
                "hang-2cpu-b2"
            ]
        );
    }

    /// Issue 14: for N = 1..8 the shards together hold every job exactly
    /// once, each shard keeps the plan's seeded order, and each shard holds
    /// whole blocks (every variant once per vCPU count and round).
    #[test]
    fn shards_cover_the_plan_once_in_order() {
        for (boots, seed) in [(1, 3), (3, 7), (5, 11), (8, 20261130)] {
            let m = matrix(boots, seed);
            let jobs = boot_jobs(&m);
            for n in 1..=8 {
                let shards: Vec<Vec<BootJob>> = (0..n).map(|k| shard_jobs(&m, &jobs, Shard { k, n })).collect();
                let mut seen: Vec<String> = shards.iter().flatten().map(BootJob::id).collect();
                assert_eq!(seen.len(), jobs.len(), "n={n} boots={boots}");
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), jobs.len(), "a job in two shards (n={n} boots={boots})");
                for (k, s) in shards.iter().enumerate() {
                    let at: Vec<usize> = s.iter().map(|j| jobs.iter().position(|x| x == j).unwrap()).collect();
                    assert!(
                        at.windows(2).all(|w| w[0] < w[1]),
                        "shard {k}/{n} is out of the seeded order: {at:?}"
                    );
                    for b in s.chunks(3) {
                        let mut names: Vec<&str> = b.iter().map(|j| j.variant.as_str()).collect();
                        names.sort();
                        assert_eq!(names, vec!["a", "b", "base"], "shard {k}/{n} splits a block");
                    }
                }
                let sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 3, "unbalanced shards {sizes:?}");
                assert_eq!(
                    shards.iter().filter(|s| !s.is_empty()).count(),
                    (n as usize).min(block_count(&m))
                );
            }
        }
    }

    #[test]
    fn shard_parses_k_of_n() {
        assert_eq!("1/4".parse::<Shard>(), Ok(Shard { k: 1, n: 4 }));
        assert_eq!("0/1".parse::<Shard>().unwrap().to_string(), "0/1");
        for bad in ["4/4", "1/0", "1", "a/2", "-1/2"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("is not a shard: write K/N"), "{e}");
        }
    }

    /// A job's and a cell's identity serialise as the run files spell them:
    /// flat fields where a record embeds them, and a job knows its cell.
    #[test]
    fn job_and_cell_identities_serialise_flat() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Rec {
            #[serde(flatten)]
            job: JobId,
            error: Option<String>,
        }
        let job = BootJob {
            variant: "v".into(),
            vcpus: 2,
            boot: 1,
            benchmarks: vec![],
        };
        let rec = Rec {
            job: job.job_id(),
            error: None,
        };
        let text = serde_json::to_string(&rec).unwrap();
        assert_eq!(text, r#"{"variant":"v","vcpus":2,"boot":1,"error":null}"#);
        assert_eq!(serde_json::from_str::<Rec>(&text).unwrap(), rec);
        assert_eq!(job.job_id().cell(), CellKey::new("v", 2));
        assert_eq!(CellKey::new("v", 2).to_string(), "v at 2 vCPUs");
    }

    #[test]
    fn the_second_stage_boots_base_and_the_sent_variants_only_after_the_first() {
        let mut m = matrix(3, 7);
        m.statistics.second_stage_boots = 2;
        let sent = [CellKey::new(&m.variants[1].name, m.vcpus[0])];
        let jobs = second_stage_jobs(&m, &sent);
        let ids: Vec<String> = jobs.iter().map(BootJob::id).collect();
        assert_eq!(
            jobs.len(),
            4,
            "2 rounds × (base + the sent variant) at one vCPU count: {ids:?}"
        );
        assert!(
            jobs.iter()
                .all(|j| j.vcpus == m.vcpus[0] && (j.variant == "base" || j.variant == sent[0].variant)),
            "{ids:?}"
        );
        assert_eq!(
            jobs.iter().map(|j| j.boot).collect::<Vec<_>>(),
            [3, 3, 4, 4],
            "after the first stage's boots 0..3"
        );
        assert!(
            ids.iter().all(|id| !boot_jobs(&m).iter().any(|j| &j.id() == id)),
            "ids new to the run"
        );
        assert_eq!(second_stage_jobs(&m, &sent), jobs, "seeded: the same plan when resumed");
        assert!(second_stage_jobs(&m, &[]).is_empty());
        assert_eq!(
            (boot_index("v-2cpu-b7"), boot_index("v-2cpu-b7.2"), boot_index("x")),
            (Some(7), Some(7), None)
        );
    }

    #[test]
    fn order_is_seeded_and_randomised() {
        let order = |seed| {
            boot_jobs(&matrix(4, seed))
                .iter()
                .map(|j| j.variant.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(order(1), order(1));
        let distinct: std::collections::BTreeSet<Vec<String>> = (0..8).map(order).collect();
        assert!(distinct.len() > 1, "the seed does not change the order");
        // not the same permutation in every round
        let o = order(3);
        let rounds: std::collections::BTreeSet<&[String]> = o.chunks(3).collect();
        assert!(rounds.len() > 1, "{o:?}");
    }
}
