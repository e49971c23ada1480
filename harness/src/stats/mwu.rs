//! Two-sided Mann-Whitney U (Wilcoxon rank-sum) test.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// Largest `min(n1, n2)` for which the exact null distribution is used (scipy's rule).
const EXACT_MAX_MIN_N: usize = 8;

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U statistic of the first sample `a`: the number of pairs `(x in a, y in b)` with
    /// `x > y`, ties counting 1/2 (scipy's `statistic`). `u` of `b` is `n_a * n_b - u`.
    pub u: f64,
    /// Two-sided p-value, in `[0, 1]`.
    pub p: f64,
    /// `true` when `p` comes from the exact null distribution, `false` when it comes from
    /// the normal approximation.
    pub exact: bool,
}

/// Two-sided Mann-Whitney U test of `a` against `b`, replicating
/// `scipy.stats.mannwhitneyu(a, b, alternative='two-sided', method='auto')`.
///
/// * Exact null distribution when the smaller sample has at most 8 values (scipy's `auto`
///   rule; it therefore also covers e.g. 5 vs 12). Without ties the p-value is
///   `2 * P(U >= max(U1, U2))`, clipped to 1, as scipy's. With ties — likely under a
///   deterministic clock — it is the exact permutation distribution of the mid-rank sum
///   (every way to split the pooled mid-ranks into groups of `n1` and `n2`):
///   `P(|S - E[S]| >= |s - E[S]|)`. scipy switches to the normal approximation on any tie,
///   which is too liberal at these sizes: 3 against 3 boots, each arm on one value of its
///   own, gives 0.047 there and the exact 0.10 here.
/// * Otherwise (larger samples) the normal approximation: `z = (max(U1, U2) - n1*n2/2 - 0.5) / s`, with the
///   tie-corrected `s = sqrt(n1*n2/12 * ((n+1) - sum(t^3 - t)/(n(n-1))))` and a continuity
///   correction of 0.5; `p = 2 * (1 - Phi(z))`, clipped to 1. When every value is tied
///   (`s = 0`) the p-value is 1.
///
/// Returns `None` when either sample is empty or holds a non-finite value.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (ranks_a_sum, tie_sizes) = rank_sum_first(a, b);
    let u1 = ranks_a_sum - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let u = u1.max(u2);
    let has_ties = tie_sizes.iter().any(|&t| t > 1);
    let exact = n1.min(n2) <= EXACT_MAX_MIN_N;
    let p = match (exact, has_ties) {
        (true, false) => 2.0 * exact_sf(u.round() as usize, n1, n2),
        (true, true) => exact_tied_p(&tie_sizes, n1, 2.0 * ranks_a_sum),
        (false, _) => 2.0 * asymptotic_sf(u, n1, n2, &tie_sizes),
    };
    Some(MannWhitney {
        u: u1,
        p: p.clamp(0.0, 1.0),
        exact,
    })
}

/// Two-sided exact p-value of a mid-rank sum under ties: the share of all
/// `C(n, n1)` ways to pick `n1` of the pooled values whose doubled mid-rank
/// sum lies at least as far from its mean as `twice_sum` (the observed
/// doubled sum of the first sample). Ranks are doubled so that every
/// mid-rank is an integer and the counting is exact.
fn exact_tied_p(tie_sizes: &[usize], n1: usize, twice_sum: f64) -> f64 {
    let mut doubled = Vec::new();
    let mut start = 0;
    for &t in tie_sizes {
        // positions start+1 ..= start+t share the mid-rank (2*start + t + 1) / 2
        doubled.extend(std::iter::repeat_n(2 * start + t + 1, t));
        start += t;
    }
    let n = doubled.len();
    let max_sum: usize = doubled.iter().rev().take(n1).sum();
    // ways[k][s]: subsets of k of the values seen so far with doubled sum s
    let mut ways = vec![vec![0u128; max_sum + 1]; n1 + 1];
    ways[0][0] = 1;
    for &r in &doubled {
        for k in (1..=n1).rev() {
            for s in (r..=max_sum).rev() {
                ways[k][s] += ways[k - 1][s - r];
            }
        }
    }
    let mean = (n1 * (n + 1)) as f64; // doubled: n1 * (n + 1) / 2 * 2
    let far = (twice_sum - mean).abs() - 1e-9;
    let total: u128 = ways[n1].iter().sum();
    let tail: u128 = ways[n1]
        .iter()
        .enumerate()
        .filter(|(s, _)| (*s as f64 - mean).abs() >= far)
        .map(|(_, &w)| w)
        .sum();
    tail as f64 / total as f64
}

/// Sum of the mid-ranks (1-based, ties averaged) of `a` within `a ++ b`, and the sizes of
/// all tie groups (1 for an untied value).
fn rank_sum_first(a: &[f64], b: &[f64]) -> (f64, Vec<usize>) {
    let n1 = a.len();
    let mut idx: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    idx.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = idx.len();
    let mut sum_a = 0.0;
    let mut ties = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && idx[j].0 == idx[i].0 {
            j += 1;
        }
        // positions i..j (0-based) share the mid-rank ((i+1) + j) / 2
        let rank = (i + 1 + j) as f64 / 2.0;
        let in_a = idx[i..j].iter().filter(|e| e.1).count();
        sum_a += rank * in_a as f64;
        ties.push(j - i);
        i = j;
    }
    debug_assert!(ties.iter().sum::<usize>() == n && n >= n1);
    (sum_a, ties)
}

/// `P(U >= u)` under the null for sample sizes `n1`, `n2` without ties.
///
/// The null frequencies of U are the coefficients of the Gaussian binomial coefficient
/// `[n1+n2 choose m]_q = prod_{i=1..m} (1 - q^(N-m+i)) / (1 - q^i)` with `m = min(n1, n2)`;
/// each partial product is itself a Gaussian binomial, so integer arithmetic is exact.
fn exact_sf(u: usize, n1: usize, n2: usize) -> f64 {
    let m = n1.min(n2);
    let big = n1.max(n2);
    let max_u = m * big;
    if u > max_u {
        return 0.0;
    }
    // C(m + big, m) must fit comfortably in i128 (it always does for m <= 8 unless `big`
    // is astronomically large); otherwise the normal approximation is excellent anyway.
    let log10_total: f64 = (1..=m).map(|i| ((big + i) as f64 / i as f64).log10()).sum();
    if log10_total > 36.0 {
        return asymptotic_sf(u as f64, n1, n2, &vec![1; n1 + n2]);
    }
    let mut c: Vec<i128> = vec![0; max_u + 1];
    c[0] = 1;
    let mut deg = 0usize;
    for i in 1..=m {
        let a = big + i; // multiply by (1 - q^a)
        let new_deg = deg + a;
        for d in (a..=new_deg.min(max_u)).rev() {
            c[d] -= c[d - a];
        }
        // divide by (1 - q^i): c[d] += c[d - i], ascending
        let new_deg = deg + big; // degree of [big+i choose i]_q is i*big
        for d in i..=new_deg.min(max_u) {
            c[d] += c[d - i];
        }
        // the quotient has degree i*big: clear what is left of the dividend above it
        let stale_end = (deg + a).min(max_u);
        if new_deg < stale_end {
            c[new_deg + 1..=stale_end].fill(0);
        }
        deg = new_deg;
    }
    let total: i128 = c.iter().sum();
    // symmetric distribution: P(U >= u) = P(U <= max_u - u); sum the shorter side
    let tail: i128 = if u * 2 >= max_u {
        c[..=max_u - u].iter().sum()
    } else {
        c[u..].iter().sum()
    };
    tail as f64 / total as f64
}

/// Normal-approximation `P(U >= u)` with tie correction and continuity correction.
fn asymptotic_sf(u: f64, n1: usize, n2: usize, tie_sizes: &[usize]) -> f64 {
    let (n1, n2) = (n1 as f64, n2 as f64);
    let n = n1 + n2;
    let mu = n1 * n2 / 2.0;
    let tie_term: f64 = tie_sizes.iter().map(|&t| (t as f64).powi(3) - t as f64).sum();
    let var = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var.is_nan() || var <= 0.0 || var.is_infinite() {
        // all values tied (or n = 1 + 1 with a tie): no evidence of any difference
        return 1.0;
    }
    let z = (u - mu - 0.5) / var.sqrt();
    let std_normal = Normal::standard();
    std_normal.sf(z)
}

/// The smallest two-sided p-value the exact Mann-Whitney test can give for
/// samples of sizes `n1` and `n2` (complete separation, no ties):
/// `2 / C(n1 + n2, n1)`, capped at 1. With the boot as the unit this is set by
/// the number of boots alone: 3 vs 3 gives 0.10, 4 vs 4 0.029, 5 vs 5 0.0079,
/// 6 vs 6 0.0022. 1 when a side is empty.
pub fn smallest_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let ln_c = statrs::function::factorial::ln_binomial((n1 + n2) as u64, n1 as u64);
    (2.0 * (-ln_c).exp()).min(1.0)
}
