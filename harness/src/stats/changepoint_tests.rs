//! The tests of [`super`] (`stats::changepoint`), seeded.

use super::*;

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

/// The best split of `x` where the shuffle alone (the nights taken as
/// independent) finds it significant at `p.alpha`.
fn shuffle_split(x: &[f64], p: &Params) -> Option<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    best_split(x, p.min_size)
        .filter(|&(_, q)| permutation_p(x, q, p, &mut rng).is_some_and(|pv| pv <= p.alpha))
        .map(|(t, _)| t)
}

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
    eprintln!(
        "3% step after night 20 in 1% noise: found in 20/20, placed at night 20–21 (index 19–21) in {close}/20: {at:?}"
    );
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
    let old = |x: &[f64]| shuffle_split(x, &p).is_some();
    let new = |x: &[f64]| !significant_splits(x, &p).is_empty();
    let rows: Vec<(f64, usize, usize)> = [0.0, 0.3, 0.5]
        .iter()
        .map(|&phi| (phi, flat_splits(phi, old), flat_splits(phi, new)))
        .collect();
    assert!(
        rows.iter().all(|r| r.2 <= 4),
        "each φ at the level, at most 4/200: {rows:?}"
    );
    assert!(
        rows[2].1 >= 40,
        "shuffling autocorrelated nights splits far more: {rows:?}"
    );
    let table: Vec<String> = rows
        .iter()
        .map(|(phi, old, new)| format!("| {phi} | {old}/200 | {new}/200 |"))
        .collect();
    crate::testutil::assert_doc_table(
        "history.md",
        "| lag-1 autocorrelation φ | nights taken as independent | AR(1) bootstrap |",
        &table,
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
    let d = e_divisive(&x, &Params::default());
    eprintln!("eight nights: {c:?}; at the defaults (alpha 0.001, 2% floor): {d:?}");
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
    eprintln!("3% step after night 30 in AR(1) φ = 0.5 noise (innovation sd 0.5%): found at night 29–33 in {found}/20");
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
    eprintln!(
        "3% step after night 20 of 40 in AR(1) φ = 0.3 noise (innovation sd 0.5%): found at night 19–23 in {step}/20"
    );
    eprintln!("3% bump over nights 21–40 of 60 in AR(1) φ = 0.3 noise (innovation sd 0.5%): both ends found within 2 nights in {bump}/20");
    assert!(step >= 18 && bump >= 18, "step {step}/20, bump {bump}/20");
}

/// The figures docs/history.md gives beyond the suite's (on demand, about
/// a minute in a debug build): flat 40-night AR(1) histories over 1000
/// series at alpha 0.01, and the power the bootstrap costs on
/// independent nights (the table's rows checked against the docs).
/// `cargo test --lib changepoint_level_and_power_over_more_series -- --ignored --nocapture`
#[test]
#[ignore = "on demand: the wider simulation docs/history.md quotes"]
fn changepoint_level_and_power_over_more_series() {
    let at = |alpha: f64| Params {
        alpha,
        min_magnitude: 0.0,
        ..Params::default()
    };
    let flat: Vec<String> = [0.0, 0.3, 0.5, 0.7]
        .iter()
        .map(|&phi| {
            (0..1000)
                .filter(|&s| !significant_splits(&ar1(5000 + s, 40, phi, 0.01), &at(0.01)).is_empty())
                .count()
                .to_string()
        })
        .collect();
    crate::testutil::assert_doc_says(
        "history.md",
        &format!(
            "the AR(1) bootstrap split {}, {}, {} and {} of 1000 at φ = 0, 0.3, 0.5 and 0.7",
            flat[0], flat[1], flat[2], flat[3]
        ),
    );
    let rows = step_power_rows(&at);
    crate::testutil::assert_doc_table(
        "history.md",
        "| step, nights, alpha | AR(1) bootstrap | shuffle alone |",
        &rows,
    );
}

/// The rows of docs/history.md's step table: for each (step, nights,
/// alpha), a step after the middle night in independent 1% noise found
/// within 2 nights of it by the AR(1) bootstrap and by the shuffle alone,
/// 40 seeded series each; `at` gives the test's parameters at an alpha.
fn step_power_rows(at: &dyn Fn(f64) -> Params) -> Vec<String> {
    // (step, nights, alpha): a step after the middle night in independent 1% noise
    // ... and by the shuffle alone, as if the nights were known to be independent
    let mut rows = vec![];
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
            by_shuffle += usize::from(shuffle_split(&x, &at(alpha)).is_some_and(|t| t.abs_diff(nights / 2) <= 2));
        }
        let default = if alpha == Params::default().alpha {
            " (the default)"
        } else {
            ""
        };
        rows.push(format!(
            "| {}% after night {} of {nights}, alpha {alpha}{default} | {found} of 40 | {by_shuffle} of 40 |",
            step * 100.0,
            nights / 2
        ));
    }
    rows
}

/// Issue 29: a segment under 16 nights (a nightly's first two weeks)
/// was shuffled as independent nights, and 15 flat AR(1) nights at
/// φ = 0.7 split 22 times in 300 at alpha 0.001. Drawn with φ at least
/// [`SHORT_PHI`], 300 such series split at most 2 times (the level is
/// 0.3 of 300; P(X ≥ 3) = 0.004 for a test at its level). Seeded:
/// 0/300 today.
#[test]
fn short_autocorrelated_flat_histories_rarely_split() {
    let p = Params {
        min_magnitude: 0.0,
        ..Params::default()
    };
    let split = (0..300u64)
        .filter(|&s| !significant_splits(&ar1(20000 + s, 15, 0.7, 0.01), &p).is_empty())
        .count();
    let shuffled = (0..300u64)
        .filter(|&s| shuffle_split(&ar1(20000 + s, 15, 0.7, 0.01), &p).is_some())
        .count();
    eprintln!("flat 15-night AR(1) histories, φ = 0.7: split at alpha 0.001 in {split}/300 ({shuffled}/300 shuffled as independent)");
    assert!(split <= 2, "{split}/300 flat 15-night histories split");
    assert!(shuffled >= 10, "the shuffle splits far more: {shuffled}/300");
}

/// The short-segment rule's level over lengths 6–15 and φ 0–0.7, 300
/// flat series each, as docs/history.md quotes it: `cargo test
/// --release --lib short_segment_level_over_lengths -- --ignored --nocapture`.
#[test]
#[ignore = "on demand: the level docs/history.md quotes for short segments"]
fn short_segment_level_over_lengths() {
    // the most splits of 300 over lengths and φ at each alpha, and over
    // lengths on independent nights (φ 0) at either
    let (mut most, mut independent) = ([0usize; 2], 0usize);
    for (a, alpha) in [0.001, 0.01].into_iter().enumerate() {
        let p = Params {
            alpha,
            min_magnitude: 0.0,
            ..Params::default()
        };
        for n in [6, 8, 10, 12, 15] {
            for phi in [0.0, 0.5, 0.7] {
                let k = (0..300u64)
                    .filter(|&s| !significant_splits(&ar1(20000 + s, n, phi, 0.01), &p).is_empty())
                    .count();
                eprintln!("flat {n} nights, φ = {phi}: split at alpha {alpha} in {k}/300");
                most[a] = most[a].max(k);
                if phi == 0.0 {
                    independent = independent.max(k);
                }
            }
        }
    }
    let says = |s: String| crate::testutil::assert_doc_says("history.md", &s);
    says(format!(
        "at most {} of 300 split at alpha 0.001, and at most {} of 300",
        most[0], most[1]
    ));
    says(format!("conservative, {independent} of 300 at every length"));
}
