//! Change points in a nightly series: E-divisive means (Matteson & James
//! 2014, as MongoDB's signal-processing-algorithms and Apache Otava/hunter use
//! it) with a permutation or AR(1) bootstrap test, then a minimum-magnitude filter.
//!
//! * **Split** — for a segment, the split `τ` maximising the energy statistic
//!   `q(τ, κ) = m·k/(m+k) · (2·mean|x−y| − mean|x−x'| − mean|y−y'|)` between the
//!   `m` values before `τ` and the `k` values from `τ` to a free end `κ` (each
//!   side at least [`Params::min_size`] long).
//! * **Significance** — [`Params::permutations`] null series are drawn and
//!   the statistic recomputed on each; `p = (1 + #null ≥ observed)/(1 + P)`.
//!   A segment of at least [`BOOTSTRAP_FROM`] nights is tested against an AR(1)
//!   (sieve) bootstrap: null series with the segment's lag-1
//!   autocorrelation (raised to an upper bound) from its resampled
//!   innovations, the statistic the best split's `q` over the spread around
//!   the best pieces (see `split_p`); a shorter one by shuffling its
//!   values, the best split's `q` recomputed on each shuffle.
//!   A split is kept when `p ≤ alpha`, and both halves are searched again
//!   (each segment's test is at level `alpha`). Drawing stops early once
//!   `p ≤ alpha` is out of reach.
//! * **Magnitude** — a kept split whose segment medians (before/after,
//!   between the neighbouring change points) differ by less than
//!   [`Params::min_magnitude`] is dropped, the smallest first, until every
//!   remaining change is at least that large.
//!
//! Pure: the only randomness is a `ChaCha8Rng` seeded from [`Params::seed`].

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::median;

/// How change points are searched for.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Params {
    /// Significance level of each split's test.
    pub alpha: f64,
    /// Null draws (permutations or bootstrap series) per test (the smallest
    /// p is `1/(permutations + 1)`).
    pub permutations: usize,
    /// Fewest nights on each side of a change.
    pub min_size: usize,
    /// Smallest relative change in medians reported (0.02 = 2%).
    pub min_magnitude: f64,
    /// Seed of the null draws.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            alpha: 0.001,
            permutations: 999,
            min_size: 3,
            min_magnitude: 0.02,
            seed: 0x5EED_C4A9,
        }
    }
}

/// One change.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ChangePoint {
    /// Index of the first value after the change.
    pub index: usize,
    /// Median of the segment before it.
    pub before: f64,
    /// Median of the segment after it.
    pub after: f64,
    /// `after / before − 1`.
    pub change: f64,
    /// p of the split when it was found (permutation or AR(1) bootstrap).
    pub p: f64,
}

/// The best split of `x` and its statistic, or None when `x` is too short.
/// As Matteson & James, the values after `τ` are compared up to a free end
/// `κ` (so a bump between two changes shows as strongly as a step); with a
/// prefix table of pairwise distances every `(τ, κ)` costs O(1).
pub fn best_split(x: &[f64], min_size: usize) -> Option<(usize, f64)> {
    best_split_with_end(x, min_size).map(|(t, _, q)| (t, q))
}

/// [`best_split`] with the free end `κ` of the best statistic: `(τ, κ, q)`.
fn best_split_with_end(x: &[f64], min_size: usize) -> Option<(usize, usize, f64)> {
    let n = x.len();
    let min_size = min_size.max(2);
    if n < 2 * min_size {
        return None;
    }
    // c[i * (n + 1) + j] = Σ_{i' < i, j' < j} |x_i' − x_j'|
    let w = n + 1;
    let mut c = vec![0.0; w * w];
    for i in 0..n {
        for j in 0..n {
            c[(i + 1) * w + j + 1] = (x[i] - x[j]).abs() + c[i * w + j + 1] + c[(i + 1) * w + j] - c[i * w + j];
        }
    }
    // sum of |x_i − x_j| over pairs i < j within [a, b)
    let within = |a: usize, b: usize| (c[b * w + b] - 2.0 * c[a * w + b] + c[a * w + a]) / 2.0;
    let pairs = |m: f64| m * (m - 1.0) / 2.0;
    let mut best: Option<(usize, usize, f64)> = None;
    for t in min_size..=n - min_size {
        let (left, m) = (within(0, t), t as f64);
        for kappa in t + min_size..=n {
            let (right, k) = (within(t, kappa), (kappa - t) as f64);
            let between = within(0, kappa) - left - right;
            let q = m * k / (m + k) * (2.0 * between / (m * k) - left / pairs(m) - right / pairs(k));
            if best.is_none_or(|(_, _, b)| q > b) {
                best = Some((t, kappa, q));
            }
        }
    }
    best
}

/// `p = (1 + #exceeding)/(1 + P)` over [`Params::permutations`] draws, each
/// `exceeds()` telling whether a draw's statistic reaches the observed one;
/// None when `p ≤ alpha` became out of reach (the drawing stopped early).
fn monte_carlo_p(p: &Params, mut exceeds: impl FnMut() -> bool) -> Option<f64> {
    let allowed = (p.alpha * (p.permutations + 1) as f64 - 1.0).floor().max(0.0) as usize;
    let mut at_least = 0usize;
    for _ in 0..p.permutations {
        if exceeds() {
            at_least += 1;
            if at_least > allowed {
                return None;
            }
        }
    }
    Some((1 + at_least) as f64 / (1 + p.permutations) as f64)
}

/// `x` less the mean of each of its pieces cut at `cuts`.
fn around_pieces(x: &[f64], cuts: &[usize]) -> Vec<f64> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(x.len()))
        .collect();
    let mut r = Vec::with_capacity(x.len());
    for w in bounds.windows(2).filter(|w| w[1] > w[0]) {
        let piece = &x[w[0]..w[1]];
        let m = piece.iter().sum::<f64>() / piece.len() as f64;
        r.extend(piece.iter().map(|v| v - m));
    }
    r
}

/// Lag-1 autocorrelation of the residuals `r` (around zero).
fn lag1(r: &[f64]) -> f64 {
    let var: f64 = r.iter().map(|v| v * v).sum();
    if var <= 0.0 {
        return 0.0;
    }
    r.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / var
}

/// The best split's statistic over the spread of `x` around its pieces
/// (`q / s`, `s` the root mean square of `x` around the means of `[0, τ)`,
/// `[τ, κ)`, `[κ, n)`), and those residuals. The ratio is free of the
/// nights' scale, and a history that wanders by chance into a large `q`
/// shows a small `s` around its pieces, in `x` as in each bootstrap series.
fn studentised(x: &[f64], min_size: usize) -> Option<(f64, Vec<f64>)> {
    let (t, kappa, q) = best_split_with_end(x, min_size)?;
    let r = around_pieces(x, &[t, kappa]);
    let s = (r.iter().map(|v| v * v).sum::<f64>() / r.len() as f64).sqrt();
    let stat = if q <= 0.0 {
        0.0
    } else if s <= 0.0 {
        f64::INFINITY
    } else {
        q / s
    };
    Some((stat, r))
}

/// The fewest nights whose autocorrelation [`split_p`] estimates.
pub const BOOTSTRAP_FROM: usize = 16;

/// The lag-1 autocorrelation the null series of `n` nights are drawn with,
/// from the estimate `raw` around the best split's pieces: Kendall's
/// small-sample bias `(1 + 3φ)/n` added back, then two standard errors
/// `√((1 − φ²)/n)` above (a one-sided 97.7% bound), at most 0.9.
fn null_phi(raw: f64, n: usize) -> f64 {
    let n = n as f64;
    let phi = (raw + (1.0 + 3.0 * raw) / n).clamp(0.0, 0.9);
    (phi + 2.0 * ((1.0 - phi * phi) / n).sqrt()).min(0.9)
}

/// Nights drawn before a bootstrap series starts (its first value already
/// has the stationary spread).
const BURN_IN: usize = 10;

/// The lag-1 autocorrelation a segment of fewer than [`BOOTSTRAP_FROM`]
/// nights is drawn with at least: a few nights cannot tell 0.7 from 0, so
/// the null assumes as much autocorrelation as the level is held for.
pub const SHORT_PHI: f64 = 0.7;

/// The p of the best split of the segment `x`, statistic `q`.
///
/// Nights are not independent — a lab's load, a firmware update, a cache
/// drift over days — and shuffling autocorrelated nights as if they were
/// exchangeable splits flat histories far more often than `alpha` (a
/// third of them at lag-1 autocorrelation 0.5 and alpha 0.01). So the null
/// is an AR(1) bootstrap (a sieve bootstrap) instead of a shuffle: the
/// residuals of `x` around the best split's pieces give the lag-1
/// autocorrelation `φ` (its estimate raised to an upper bound, see
/// [`null_phi`]: the estimate from a few dozen nights runs low, lowest on
/// exactly the flat histories that wander into a large `q`) and the
/// innovations `r[i] − φ·r[i−1]`; each null series is AR(1) with that `φ`
/// from innovations drawn with replacement, and the *same* statistic — the
/// best split's `q`, over the spread around that series' own best pieces
/// ([`studentised`]) — is recomputed on it. Fewer than [`BOOTSTRAP_FROM`]
/// nights cannot estimate `φ`: they are drawn with `φ` at least
/// [`SHORT_PHI`] (issue 29: shuffled as independent nights, 15 flat nights
/// at φ = 0.7 split 22 times in 300 at alpha 0.001).
fn split_p(x: &[f64], p: &Params, rng: &mut ChaCha8Rng) -> Option<f64> {
    let (observed, r) = studentised(x, p.min_size)?;
    let mut phi = null_phi(lag1(&r), x.len());
    if x.len() < BOOTSTRAP_FROM {
        phi = phi.max(SHORT_PHI);
    }
    let mut e: Vec<f64> = r.windows(2).map(|w| w[1] - phi * w[0]).collect();
    let mean = e.iter().sum::<f64>() / e.len() as f64;
    e.iter_mut().for_each(|v| *v -= mean);
    let mut y = vec![0.0; x.len()];
    monte_carlo_p(p, || {
        let mut prev = e[rng.random_range(0..e.len())] / (1.0 - phi * phi).sqrt();
        for _ in 0..BURN_IN {
            prev = phi * prev + e[rng.random_range(0..e.len())];
        }
        for v in &mut y {
            prev = phi * prev + e[rng.random_range(0..e.len())];
            *v = prev;
        }
        studentised(&y, p.min_size).is_some_and(|(s, _)| s >= observed)
    })
}

/// Significant splits of `x`: (index, p), in index order.
fn significant_splits(x: &[f64], p: &Params) -> Vec<(usize, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut found = Vec::new();
    let mut todo = vec![(0, x.len())];
    while let Some((a, b)) = todo.pop() {
        let Some((t, _)) = best_split(&x[a..b], p.min_size) else {
            continue;
        };
        let Some(pv) = split_p(&x[a..b], p, &mut rng).filter(|&pv| pv <= p.alpha) else {
            continue;
        };
        found.push((a + t, pv));
        todo.push((a + t, b));
        todo.push((a, a + t));
    }
    found.sort_by_key(|f| f.0);
    found
}

/// The changes between neighbouring segments cut at `cuts`.
fn changes_at(x: &[f64], cuts: &[(usize, f64)]) -> Vec<ChangePoint> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().map(|c| c.0))
        .chain(std::iter::once(x.len()))
        .collect();
    cuts.iter()
        .enumerate()
        .map(|(i, &(index, p))| {
            let before = median(&x[bounds[i]..index]).unwrap_or(f64::NAN);
            let after = median(&x[index..bounds[i + 2]]).unwrap_or(f64::NAN);
            ChangePoint {
                index,
                before,
                after,
                change: after / before - 1.0,
                p,
            }
        })
        .collect()
}

/// The change points of `x`, in order: significant splits of at least the
/// minimum magnitude.
pub fn e_divisive(x: &[f64], p: &Params) -> Vec<ChangePoint> {
    let mut cuts = significant_splits(x, p);
    loop {
        let changes = changes_at(x, &cuts);
        let weakest = changes
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.change.abs().total_cmp(&b.1.change.abs()));
        match weakest {
            Some((i, c)) if c.change.is_nan() || c.change.abs() < p.min_magnitude => {
                cuts.remove(i);
            }
            _ => return changes,
        }
    }
}

#[cfg(test)]
#[path = "changepoint_tests.rs"]
mod tests;
