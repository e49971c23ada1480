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

/// Permutation p of the best split of `x` with statistic `q`, the nights
/// shuffled as if independent.
fn permutation_p(x: &[f64], q: f64, p: &Params, rng: &mut ChaCha8Rng) -> Option<f64> {
    let mut y = x.to_vec();
    monte_carlo_p(p, || {
        for i in (1..y.len()).rev() {
            y.swap(i, rng.random_range(0..=i));
        }
        best_split(&y, p.min_size).is_some_and(|(_, qp)| qp >= q)
    })
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
/// nights cannot estimate `φ`: they are shuffled as independent nights,
/// as a short history is (docs/history.md says so).
fn split_p(x: &[f64], q: f64, p: &Params, rng: &mut ChaCha8Rng) -> Option<f64> {
    if x.len() < BOOTSTRAP_FROM {
        return permutation_p(x, q, p, rng);
    }
    let (observed, r) = studentised(x, p.min_size)?;
    let phi = null_phi(lag1(&r), x.len());
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
        let Some((t, q)) = best_split(&x[a..b], p.min_size) else {
            continue;
        };
        let Some(pv) = split_p(&x[a..b], q, p, &mut rng).filter(|&pv| pv <= p.alpha) else {
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
mod tests {
    use super::*;

    fn noisy(seed: u64, n: usize, sd: f64, step_at: usize, step: f64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random::<f64>());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let level = if i >= step_at { 1.0 + step } else { 1.0 };
                1000.0 * level * (1.0 + sd * z)
            })
            .collect()
    }

    #[test]
    fn split_statistic_peaks_at_a_clean_step() {
        let x: Vec<f64> = (0..12).map(|i| if i < 5 { 1.0 } else { 2.0 }).collect();
        assert_eq!(best_split(&x, 3).map(|b| b.0), Some(5));
        assert_eq!(best_split(&x[..5], 3), None, "too short for two sides of 3");
    }

    /// Index 20 is night 21, the first night after the step; the figures
    /// are quoted in docs/history.md.
    #[test]
    fn finds_a_three_percent_step_after_night_20_in_one_percent_noise() {
        let mut at = Vec::new();
        for seed in 0..20 {
            let x = noisy(seed, 60, 0.01, 20, 0.03);
            let c = e_divisive(&x, &Params::default());
            assert_eq!(c.len(), 1, "seed {seed}: one change, {c:?}");
            assert!((c[0].change - 0.03).abs() < 0.01 && c[0].p <= 0.001, "{c:?}");
            at.push(c[0].index);
        }
        let close = at.iter().filter(|&&i| (19..=21).contains(&i)).count();
        eprintln!("3% step after night 20 in 1% noise: found in 20/20, placed at night 20–21 (index 19–21) in {close}/20: {at:?}");
        assert!(close >= 18 && at.iter().all(|i| (16..=24).contains(i)), "{at:?}");
        assert_eq!(at[0], 20, "seed 0 puts it exactly after night 20");
    }

    /// The false-alarm rate over 200 flat 60-night series with 1% noise; the
    /// figures are quoted in docs/history.md.
    #[test]
    fn flat_histories_raise_no_change_at_the_stated_rate() {
        let p = Params::default();
        let raw = Params {
            min_magnitude: 0.0,
            ..p
        };
        let (mut alarms, mut raw_alarms) = (0, 0);
        for seed in 0..200 {
            let x = noisy(1000 + seed, 60, 0.01, 60, 0.0);
            alarms += usize::from(!e_divisive(&x, &p).is_empty());
            raw_alarms += usize::from(!e_divisive(&x, &raw).is_empty());
        }
        eprintln!("flat 60 nights, 1% noise: {alarms}/200 with a change reported, {raw_alarms}/200 significant splits before the 2% floor");
        assert_eq!(alarms, 0, "no change of 2% or more in 200 flat histories");
        assert!(
            raw_alarms <= 2,
            "each test is at p ≤ 0.001: {raw_alarms}/200 flat histories split"
        );
        assert!(
            e_divisive(&noisy(7, 60, 0.01, 60, 0.0), &p).is_empty(),
            "one flat history of 60 nights"
        );
    }

    #[test]
    fn small_significant_shifts_are_not_reported_and_order_is_kept() {
        // a 1% shift in 0.1% noise is significant but below the 2% floor
        let x = noisy(3, 40, 0.001, 20, 0.01);
        assert!(!significant_splits(&x, &Params::default()).is_empty());
        assert!(e_divisive(&x, &Params::default()).is_empty());
        // two steps, up then down
        let mut y = noisy(4, 60, 0.005, 20, 0.05);
        for v in &mut y[40..] {
            *v /= 1.05;
        }
        let c = e_divisive(&y, &Params::default());
        assert_eq!(c.iter().map(|c| c.index).collect::<Vec<_>>(), vec![20, 40], "{c:?}");
        assert!(c[0].change > 0.04 && c[1].change < -0.04);
    }

    /// A stationary AR(1) series: `x[i] = φ·x[i−1] + e[i]` around 1000.
    fn ar1(seed: u64, n: usize, phi: f64, sd: f64) -> Vec<f64> {
        let e = noisy(seed, n + 50, sd, n + 50, 0.0);
        let mut x = Vec::with_capacity(n + 50);
        let mut prev = 0.0;
        for v in e {
            prev = phi * prev + (v - 1000.0);
            x.push(1000.0 + prev);
        }
        x.split_off(50)
    }

    /// Share of 200 flat 40-night AR(1) histories with a significant split
    /// at alpha 0.01 (no magnitude filter).
    fn flat_splits(phi: f64, test: impl Fn(&[f64]) -> bool) -> usize {
        (0..200).filter(|&s| test(&ar1(5000 + s, 40, phi, 0.01))).count()
    }

    /// Issue 21: autocorrelated flat histories split at no more than the
    /// test's level. At alpha 0.01, 200 flat histories split in 2 on
    /// average; a test exactly at its level splits more than 4 of 200 with
    /// probability 5% (binomial upper tail: P(X ≥ 5) = 0.052 for 200 trials
    /// at 0.01), so each φ is held to at most 4/200. A test at 3% would
    /// still pass with probability 0.28; the previous rule (whitened and
    /// block-shuffled, 14/200 at φ = 0.5) and shuffles of the nights as if
    /// independent (68/200, printed) fail. The figures are quoted in
    /// docs/history.md (`cargo test --release --lib changepoint --
    /// --nocapture`).
    #[test]
    fn autocorrelated_flat_histories_rarely_split() {
        let p = Params {
            alpha: 0.01,
            min_magnitude: 0.0,
            ..Params::default()
        };
        let old = |x: &[f64]| {
            let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
            best_split(x, p.min_size)
                .is_some_and(|(_, q)| permutation_p(x, q, &p, &mut rng).is_some_and(|pv| pv <= p.alpha))
        };
        let new = |x: &[f64]| !significant_splits(x, &p).is_empty();
        let rows: Vec<(f64, usize)> = [0.0, 0.3, 0.5]
            .iter()
            .map(|&phi| (phi, flat_splits(phi, new)))
            .collect();
        for (phi, n) in &rows {
            eprintln!("flat 40-night AR(1) histories, φ = {phi}: split at alpha 0.01 in {n}/200 (AR(1) bootstrap)");
        }
        let assumed_independent = flat_splits(0.5, old);
        eprintln!("flat 40-night AR(1) histories, φ = 0.5: split at alpha 0.01 in {assumed_independent}/200 assuming independent nights");
        assert!(
            rows.iter().all(|r| r.1 <= 4),
            "each φ at the level, at most 4/200: {rows:?}"
        );
        assert!(
            assumed_independent >= 40,
            "shuffling autocorrelated nights splits far more: {assumed_independent}"
        );
    }

    /// A few nights: the nightly e2e test's history (2026-12-01, icount,
    /// base static doexec, execs/Ginsn), four nights before the slow-exec
    /// commit and four after, a 0.75% step with no overlap. Too few nights
    /// to estimate their autocorrelation: the old rule read one from them
    /// (its bias terms alone are 0.6 at n = 8), whitened the step away and
    /// found nothing at alpha 0.05.
    #[test]
    fn a_clear_step_in_eight_nights_is_found() {
        let x = [2559.0, 2560.0, 2561.0, 2559.0, 2540.0, 2541.0, 2539.0, 2539.0];
        let p = Params {
            alpha: 0.05,
            min_magnitude: 0.005,
            ..Params::default()
        };
        let c = e_divisive(&x, &p);
        assert_eq!(c.iter().map(|c| c.index).collect::<Vec<_>>(), vec![4], "{c:?}");
    }

    /// The power the AR(1) bootstrap keeps: a 3% step in AR(1) noise is
    /// still found where it is.
    #[test]
    fn steps_in_autocorrelated_nights_are_still_found() {
        let mut found = 0;
        for seed in 0..20 {
            let mut x = ar1(7000 + seed, 60, 0.5, 0.005);
            for v in &mut x[30..] {
                *v *= 1.03;
            }
            let c = e_divisive(&x, &Params::default());
            found += usize::from(c.len() == 1 && (28..=32).contains(&c[0].index));
        }
        eprintln!(
            "3% step after night 30 in AR(1) φ = 0.5 noise (innovation sd 0.5%): found at night 29–33 in {found}/20"
        );
        assert!(found >= 18, "{found}/20");
    }

    /// Shorter and milder: a 3% step after night 20 of 40 in φ = 0.3 noise,
    /// and a 3% bump over nights 21–40 of 60 (found at both ends: the free
    /// end κ of the statistic, and the residuals around three pieces).
    #[test]
    fn a_step_in_forty_nights_and_a_bump_in_autocorrelated_nights_are_found() {
        let d = Params::default();
        let step = (0..20)
            .filter(|&seed| {
                let mut x = ar1(8000 + seed, 40, 0.3, 0.005);
                x[20..].iter_mut().for_each(|v| *v *= 1.03);
                let c = e_divisive(&x, &d);
                c.len() == 1 && (18..=22).contains(&c[0].index)
            })
            .count();
        let bump = (0..20)
            .filter(|&seed| {
                let mut x = ar1(9000 + seed, 60, 0.3, 0.005);
                x[20..40].iter_mut().for_each(|v| *v *= 1.03);
                let c: Vec<usize> = e_divisive(&x, &d).iter().map(|c| c.index).collect();
                c.len() == 2 && (18..=22).contains(&c[0]) && (38..=42).contains(&c[1])
            })
            .count();
        eprintln!("3% step after night 20 of 40 in AR(1) φ = 0.3 noise (innovation sd 0.5%): found at night 19–23 in {step}/20");
        eprintln!("3% bump over nights 21–40 of 60 in AR(1) φ = 0.3 noise (innovation sd 0.5%): both ends found within 2 nights in {bump}/20");
        assert!(step >= 18 && bump >= 18, "step {step}/20, bump {bump}/20");
    }

    /// The figures docs/history.md gives beyond the suite's (on demand, about
    /// a minute in a debug build): flat 40-night AR(1) histories over 1000
    /// series at alpha 0.01, and the power the bootstrap costs on
    /// independent nights. `cargo test --lib changepoint_level_and_power_over_more_series -- --ignored --nocapture`
    #[test]
    #[ignore = "on demand: the wider simulation docs/history.md quotes"]
    fn changepoint_level_and_power_over_more_series() {
        let at = |alpha: f64| Params {
            alpha,
            min_magnitude: 0.0,
            ..Params::default()
        };
        for phi in [0.0, 0.3, 0.5, 0.7] {
            let n = (0..1000)
                .filter(|&s| !significant_splits(&ar1(5000 + s, 40, phi, 0.01), &at(0.01)).is_empty())
                .count();
            eprintln!("flat 40 nights, φ = {phi}: split at alpha 0.01 in {n}/1000");
        }
        // (step, nights, alpha): a step after the middle night in independent 1% noise
        // ... and by the shuffle alone, as if the nights were known to be independent
        let shuffled = |x: &[f64], p: &Params| {
            let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
            best_split(x, p.min_size)
                .filter(|&(_, q)| permutation_p(x, q, p, &mut rng).is_some_and(|pv| pv <= p.alpha))
                .map(|(t, _)| t)
        };
        for (step, nights, alpha) in [
            (0.015, 40, 0.01),
            (0.02, 40, 0.01),
            (0.03, 40, 0.001),
            (0.02, 60, 0.001),
        ] {
            let (mut found, mut by_shuffle) = (0, 0);
            for s in 0..40 {
                let x = noisy(9000 + s, nights, 0.01, nights / 2, step);
                found += usize::from(
                    significant_splits(&x, &at(alpha))
                        .iter()
                        .any(|c| c.0.abs_diff(nights / 2) <= 2),
                );
                by_shuffle += usize::from(shuffled(&x, &at(alpha)).is_some_and(|t| t.abs_diff(nights / 2) <= 2));
            }
            eprintln!(
                "{:.1}% step after night {} of {nights}, independent 1% noise, alpha {alpha}: found within 2 nights in {found}/40 (by the shuffle alone {by_shuffle}/40)",
                step * 100.0,
                nights / 2
            );
        }
    }
}
