//! Unit tests: scipy/numpy reference fixtures, calibration by simulation, rule behaviour.

use super::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

const MWU_JSON: &str = include_str!("../../tests/fixtures/stats/mannwhitneyu.json");
const SUMMARY_JSON: &str = include_str!("../../tests/fixtures/stats/summary.json");
const BH_JSON: &str = include_str!("../../tests/fixtures/stats/bh.json");

#[derive(Deserialize)]
struct Fixture<T> {
    generator: serde_json::Value,
    cases: Vec<T>,
}

#[derive(Deserialize)]
struct MwuCase {
    name: String,
    a: Vec<f64>,
    b: Vec<f64>,
    u: f64,
    p: f64,
    method: String,
}

#[derive(Deserialize)]
struct SummaryCase {
    name: String,
    x: Vec<f64>,
    median: f64,
    mean: f64,
    stddev: f64,
    min: f64,
    max: f64,
    ci_lo: f64,
    ci_hi: f64,
    ci_exact: bool,
    ci_level: f64,
}

#[derive(Deserialize)]
struct BhCase {
    name: String,
    p: Vec<f64>,
    q: Vec<f64>,
}

/// `|got - want| <= rel * max(|want|, tiny)`.
fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
    let tol = rel * want.abs().max(1e-300);
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got:e}, want {want:e} (rel tol {rel:e})"
    );
}

fn normal(rng: &mut ChaCha8Rng, mean: f64, sd: f64) -> f64 {
    // Box-Muller; 1 - u keeps the logarithm finite.
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn normals(rng: &mut ChaCha8Rng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
    (0..n).map(|_| normal(rng, mean, sd)).collect()
}

// ---------------------------------------------------------------- reference fixtures

#[test]
fn fixtures_name_their_generator() {
    for json in [MWU_JSON, SUMMARY_JSON, BH_JSON] {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert!(v["generator"]["scipy"].is_string(), "fixture lacks the scipy version");
    }
}

#[test]
fn mann_whitney_matches_scipy() {
    let fx: Fixture<MwuCase> = serde_json::from_str(MWU_JSON).unwrap();
    assert!(fx.generator["scipy"].is_string());
    assert!(fx.cases.len() >= 10);
    let mut saw = (false, false);
    for c in &fx.cases {
        let r = mann_whitney_u(&c.a, &c.b).unwrap_or_else(|| panic!("{}: None", c.name));
        let tied =
            c.a.iter()
                .chain(&c.b)
                .any(|x| c.a.iter().chain(&c.b).filter(|y| *y == x).count() > 1);
        if tied && c.a.len().min(c.b.len()) <= 8 {
            // scipy approximates here; we count exactly (see exact_tied_mann_whitney_matches_brute_force)
            assert!(
                r.exact && (r.p - brute_force_p(&c.a, &c.b)).abs() < 1e-12,
                "{}: {r:?}",
                c.name
            );
            continue;
        }
        let exact = c.method == "exact";
        assert_eq!(r.exact, exact, "{}: method", c.name);
        assert_eq!(r.u, c.u, "{}: U", c.name);
        let tol = if exact { 1e-9 } else { 1e-6 };
        assert_close(r.p, c.p, tol, &format!("{}: p", c.name));
        if exact {
            saw.0 = true
        } else {
            saw.1 = true
        }
    }
    assert!(saw.0 && saw.1, "fixtures must cover both methods");
}

#[test]
fn summary_matches_numpy_and_order_statistic_rule() {
    let fx: Fixture<SummaryCase> = serde_json::from_str(SUMMARY_JSON).unwrap();
    for c in &fx.cases {
        let s = summarize(&c.x).unwrap();
        let what = |f: &str| format!("{}: {f}", c.name);
        assert_eq!(s.n, c.x.len());
        assert_close(s.median, c.median, 1e-9, &what("median"));
        assert_close(median(&c.x).unwrap(), c.median, 1e-9, &what("median()"));
        assert_close(s.mean, c.mean, 1e-9, &what("mean"));
        if c.stddev == 0.0 {
            assert_eq!(s.stddev, 0.0, "{}", what("stddev"));
        } else {
            assert_close(s.stddev, c.stddev, 1e-9, &what("stddev"));
        }
        assert_eq!(s.min, c.min, "{}", what("min"));
        assert_eq!(s.max, c.max, "{}", what("max"));
        assert_eq!(s.ci_lo, c.ci_lo, "{}", what("ci_lo"));
        assert_eq!(s.ci_hi, c.ci_hi, "{}", what("ci_hi"));
        assert_eq!(s.ci_exact, c.ci_exact, "{}", what("ci_exact"));
        assert_close(s.ci_level, c.ci_level, 1e-9, &what("ci_level"));
    }
}

#[test]
fn benjamini_hochberg_matches_scipy() {
    let fx: Fixture<BhCase> = serde_json::from_str(BH_JSON).unwrap();
    for c in &fx.cases {
        let q = benjamini_hochberg(&c.p);
        assert_eq!(q.len(), c.q.len());
        for (i, (&g, &w)) in q.iter().zip(&c.q).enumerate() {
            if w == 0.0 {
                assert_eq!(g, 0.0, "{}[{i}]", c.name);
            } else {
                assert_close(g, w, 1e-9, &format!("{}[{i}]", c.name));
            }
        }
    }
}

// ---------------------------------------------------------------- Mann-Whitney internals

#[test]
fn exact_p_matches_brute_force_enumeration() {
    // Enumerate every split of ranks 1..=n into sizes (n1, n2) and count U >= observed.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for &(n1, n2) in &[(3usize, 5usize), (4, 6), (6, 4), (5, 7), (2, 9)] {
        let a = normals(&mut rng, n1, 0.3, 1.0);
        let b = normals(&mut rng, n2, 0.0, 1.0);
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(r.exact);
        let n = n1 + n2;
        let u_obs = r.u.max((n1 * n2) as f64 - r.u);
        let (mut hit, mut total) = (0u64, 0u64);
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != n1 {
                continue;
            }
            let rank_sum: usize = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| i + 1).sum();
            let u = (rank_sum - n1 * (n1 + 1) / 2) as f64;
            if u >= u_obs {
                hit += 1;
            }
            total += 1;
        }
        let want = (2.0 * hit as f64 / total as f64).min(1.0);
        assert_close(r.p, want, 1e-12, &format!("{n1}x{n2}"));
    }
}

#[test]
fn mann_whitney_is_symmetric_and_rejects_bad_input() {
    let a = [1.0, 4.0, 2.5, 8.0, 3.0];
    let b = [5.0, 6.0, 7.5, 9.0, 10.0, 11.0];
    let ab = mann_whitney_u(&a, &b).unwrap();
    let ba = mann_whitney_u(&b, &a).unwrap();
    assert_eq!(ab.u + ba.u, 30.0);
    assert_eq!(ab.p, ba.p);
    assert!(mann_whitney_u(&[], &b).is_none());
    assert!(mann_whitney_u(&a, &[1.0, f64::NAN]).is_none());
    assert!(mann_whitney_u(&a, &[f64::INFINITY]).is_none());
}

// ---------------------------------------------------------------- BH

#[test]
fn benjamini_hochberg_known_example_and_monotone() {
    let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005, 0.5]);
    let want = [0.025, 0.05, 0.05, 0.025, 0.5];
    for (g, w) in q.iter().zip(want) {
        assert_close(*g, w, 1e-12, "textbook BH");
    }
    assert_eq!(benjamini_hochberg(&[0.9, 0.8]), vec![0.9, 0.9]);
    assert_eq!(benjamini_hochberg(&[]), Vec::<f64>::new());
    // NaN = no test: excluded from m, returned as NaN.
    let q = benjamini_hochberg(&[0.02, f64::NAN, 0.04]);
    assert!(q[1].is_nan());
    assert_close(q[0], 0.04, 1e-12, "nan excluded");
    assert_close(q[2], 0.04, 1e-12, "nan excluded");

    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..50 {
        let p: Vec<f64> = (0..40).map(|_| rng.random::<f64>().powi(4)).collect();
        let q = benjamini_hochberg(&p);
        for i in 0..p.len() {
            assert!(q[i] >= p[i] && q[i] <= 1.0, "q in [p, 1]");
            for j in 0..p.len() {
                if p[i] <= p[j] {
                    assert!(
                        q[i] <= q[j],
                        "monotone: p {} <= {} but q {} > {}",
                        p[i],
                        p[j],
                        q[i],
                        q[j]
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------- median CI coverage

#[test]
fn median_ci_coverage_is_close_to_nominal() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let sims = 2000;
    for &n in &[6usize, 10, 20, 40] {
        let (_, _, level) = median_ci_indices(n, 0.95).unwrap();
        assert!(level >= 0.95);
        // Normal (median 0) and exponential (skewed, median ln 2).
        let mut hit_norm = 0;
        let mut hit_exp = 0;
        for _ in 0..sims {
            let x = normals(&mut rng, n, 0.0, 1.0);
            let s = summarize(&x).unwrap();
            assert!(s.ci_exact && s.ci_lo <= s.median && s.median <= s.ci_hi);
            if s.ci_lo <= 0.0 && 0.0 <= s.ci_hi {
                hit_norm += 1;
            }
            let e: Vec<f64> = (0..n).map(|_| -(1.0 - rng.random::<f64>()).ln()).collect();
            let s = summarize(&e).unwrap();
            let m = std::f64::consts::LN_2;
            if s.ci_lo <= m && m <= s.ci_hi {
                hit_exp += 1;
            }
        }
        for (name, hits) in [("normal", hit_norm), ("exponential", hit_exp)] {
            let cov = hits as f64 / sims as f64;
            assert!(
                (cov - level).abs() <= 0.02,
                "n={n} {name}: coverage {cov} vs exact level {level}"
            );
        }
    }
    assert!(median_ci_indices(5, 0.95).is_none());
    assert!(median_ci_indices(6, 0.95).is_some());
    let s = summarize(&[3.0, 1.0, 2.0]).unwrap();
    assert!(!s.ci_exact);
    assert_eq!((s.ci_lo, s.ci_hi), (1.0, 3.0));
    assert_close(s.ci_level, 0.75, 1e-12, "n=3 coverage");
}

// ---------------------------------------------------------------- bootstrap

#[test]
fn bootstrap_is_deterministic_and_contains_point() {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let base = normals(&mut rng, 15, 100.0, 3.0);
    let new = normals(&mut rng, 17, 104.0, 3.0);
    let a = bootstrap_ratio_of_medians(&base, &new, 5000, 42).unwrap();
    let b = bootstrap_ratio_of_medians(&base, &new, 5000, 42).unwrap();
    assert_eq!(a, b, "same seed must give the same CI");
    let c = bootstrap_ratio_of_medians(&base, &new, 5000, 43).unwrap();
    assert_ne!((a.lo, a.hi), (c.lo, c.hi), "another seed should move the CI a little");
    assert_close(a.ratio, median(&new).unwrap() / median(&base).unwrap(), 1e-15, "point");
    assert!(a.lo < a.ratio && a.ratio < a.hi, "{a:?}");
    assert!(a.lo > 1.0 && a.hi < 1.1, "a 4% shift with 3% noise: {a:?}");
    assert!(bootstrap_ratio_of_medians(&[], &new, 100, 1).is_none());
    assert!(bootstrap_ratio_of_medians(&base, &new, 0, 1).is_none());
    assert!(bootstrap_ratio_of_medians(&[0.0, 0.0, 1.0], &new, 100, 1).is_none());
}

// ---------------------------------------------------------------- decision rule

fn rule() -> Rule {
    Rule {
        resamples: 2000,
        ..Rule::default()
    }
}

#[test]
fn injected_five_percent_change_is_flagged_in_the_right_direction() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let base = normals(&mut rng, 20, 1000.0, 10.0);
    let down = normals(&mut rng, 20, 950.0, 9.5);
    let up = normals(&mut rng, 20, 1050.0, 10.5);
    let cells = vec![
        Comparison::new(base.clone(), down.clone(), true),  // throughput drops
        Comparison::new(base.clone(), up.clone(), true),    // throughput rises
        Comparison::new(base.clone(), down.clone(), false), // latency drops
        Comparison::new(base.clone(), up.clone(), false),   // latency rises
    ];
    let d = decide_all(&cells, &rule());
    let got: Vec<Verdict> = d.iter().map(|d| d.verdict).collect();
    assert_eq!(
        got,
        [
            Verdict::Regressed,
            Verdict::Improved,
            Verdict::Improved,
            Verdict::Regressed
        ]
    );
    for d in &d {
        let r = d.ratio.unwrap();
        assert!(d.q.unwrap() <= 0.05 && r.lo <= r.ratio && r.ratio <= r.hi);
        assert_eq!((d.n_base, d.n_new, d.floor), (20, 20, 0.02));
    }
    assert!((d[0].ratio.unwrap().ratio - 0.95).abs() < 0.01);
    assert_eq!(d[0].verdict.symbol(), "regressed");
    // "worse by" is positive for both regressions, whatever the metric's direction
    let w: Vec<f64> = d.iter().map(|d| d.worse_by().unwrap().0).collect();
    assert!(w[0] > 0.04 && w[3] > 0.04 && w[1] < -0.04 && w[2] < -0.04, "{w:?}");
    for d in &d {
        let (w, lo, hi) = d.worse_by().unwrap();
        assert!(lo <= w && w <= hi);
    }
    assert!(d[0].may_regress() && d[3].may_regress() && !d[1].may_regress());
}

#[test]
fn aa_simulations_are_calibrated() {
    let mut rng = ChaCha8Rng::seed_from_u64(31337);
    let sims = 500;
    let r = Rule {
        resamples: 1000,
        ..Rule::default()
    };
    let (mut flagged, mut p_sig) = (0usize, 0usize);
    for i in 0..sims {
        let a = normals(&mut rng, 20, 500.0, 5.0);
        let b = normals(&mut rng, 20, 500.0, 5.0);
        let d = &decide_all(&[Comparison::new(a, b, i % 2 == 0)], &r)[0];
        if matches!(d.verdict, Verdict::Regressed | Verdict::Improved) {
            flagged += 1;
        }
        if d.p.unwrap() < r.alpha {
            p_sig += 1;
        }
    }
    let flagged = flagged as f64 / sims as f64;
    let p_rate = p_sig as f64 / sims as f64;
    assert!(flagged <= r.alpha / 5.0, "A/A flagged rate {flagged}");
    assert!((0.02..=0.08).contains(&p_rate), "A/A rate of p < alpha is {p_rate}");
}

#[test]
fn other_verdicts() {
    let mut rng = ChaCha8Rng::seed_from_u64(123);
    // 1% real change with 0.2% noise: significant but below the 2% floor.
    let small = (
        normals(&mut rng, 20, 100.0, 0.2),
        normals(&mut rng, 20, 101.0, 0.2),
        true,
    );
    // no change, tiny noise, many samples: CI well inside +-2%.
    let same = (
        normals(&mut rng, 30, 100.0, 0.3),
        normals(&mut rng, 30, 100.0, 0.3),
        true,
    );
    // no change, large noise, few samples: cannot tell.
    let noisy = (
        normals(&mut rng, 5, 100.0, 15.0),
        normals(&mut rng, 5, 100.0, 15.0),
        false,
    );
    let short = (vec![1.0, 2.0], vec![1.0, 2.0, 3.0, 4.0, 5.0], true);
    let nan = (vec![1.0, 2.0, f64::NAN, 3.0], vec![1.0, 2.0, 3.0, 4.0], true);
    let zero = (vec![0.0; 6], vec![1.0; 6], true);
    // exactly 2% up with 1% spread, nearly separated: significant, and the
    // interval straddles the 2% floor
    let base = vec![99.0, 99.5, 100.0, 100.5, 101.0, 99.8, 100.2, 100.1];
    let unsure = (base.clone(), base.iter().map(|x| x * 1.02).collect(), true);
    let cells: Vec<Comparison> = [small, same, noisy, short, nan, zero, unsure]
        .into_iter()
        .map(|(a, b, h)| Comparison::new(a, b, h))
        .collect();
    let d = decide_all(&cells, &rule());
    let got: Vec<&str> = d.iter().map(|d| d.verdict.symbol()).collect();
    assert_eq!(got, ["small", "≈", "~", "?", "?", "?", "unsure"]);
    let u = d[6].ratio.unwrap();
    assert!(u.lo < 1.02 && u.hi > 1.02 && d[6].q.unwrap() <= 0.05, "{u:?}");
    assert!(
        !d[6].may_regress(),
        "an unsure rise in throughput is no regression risk"
    );
    let mde = d[2].mde.unwrap();
    assert!(mde > 0.15 && mde < 0.6, "mde for 5 vs 5 with 15% noise: {mde}");
    assert_eq!(
        d[1].mde.unwrap(),
        0.02,
        "the power-based mde is below the floor, which bounds it"
    );
    assert!(minimum_detectable_effect(&cells[1].base, &cells[1].new, 0.05).unwrap() < 0.01);
    for d in &d[3..6] {
        assert!(d.p.is_none() && d.q.is_none() && d.ratio.is_none() && d.mde.is_none());
    }
    assert_eq!((d[3].n_base, d[3].n_new), (2, 5));
}

#[test]
fn bh_is_applied_across_all_cells() {
    // One marginal cell alone is significant; among 19 null cells it is not.
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let marginal = (
        normals(&mut rng, 10, 100.0, 1.0),
        normals(&mut rng, 10, 101.2, 1.0),
        true,
    );
    let marginal = Comparison::new(marginal.0, marginal.1, marginal.2);
    let alone = &decide_all(std::slice::from_ref(&marginal), &rule())[0];
    let (p, q) = (alone.p.unwrap(), alone.q.unwrap());
    assert!(p < 0.05 && p > 0.0025 && q == p, "p = {p}");
    let mut cells = vec![marginal];
    for _ in 0..19 {
        cells.push(Comparison::new(
            vec![1.0, 2.0, 3.0, 4.0],
            vec![1.5, 2.5, 3.5, 4.5],
            true,
        ));
    }
    let d = decide_all(&cells, &rule());
    assert!(d[0].q.unwrap() > d[0].p.unwrap());
    assert_eq!(d[0].q.unwrap(), (d[0].p.unwrap() * 20.0).min(1.0).min(d[1].q.unwrap()));
}

#[test]
fn mde_matches_design_rule_of_thumb() {
    // Exactly normal-looking quantile data: MAD-based sigma ~= 1.
    let z = statrs::distribution::Normal::standard();
    use statrs::distribution::ContinuousCDF;
    let grid = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| 100.0 + z.inverse_cdf((i as f64 + 0.5) / n as f64))
            .collect()
    };
    let m10 = minimum_detectable_effect(&grid(10), &grid(10), 0.05).unwrap() * 100.0;
    let m20 = minimum_detectable_effect(&grid(20), &grid(20), 0.05).unwrap() * 100.0;
    assert!((1.2..1.5).contains(&m10), "n=10: {m10} sigma");
    assert!((0.85..1.05).contains(&m20), "n=20: {m20} sigma");
    assert!(minimum_detectable_effect(&[1.0], &[1.0, 2.0], 0.05).is_none());
}

#[test]
fn aa_floor_is_an_upper_bound_for_small_n() {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    let a = [100.0, 101.0, 99.0, 100.5, 99.5];
    let b = [100.2, 100.8, 99.4, 101.0, 99.9];
    let f = aa_floor(&a, &b).unwrap();
    // by hand: sd of all ten around their mean, over their median; chi-square bound, 9 df
    let all: Vec<f64> = a.iter().chain(&b).copied().collect();
    let mean = all.iter().sum::<f64>() / 10.0;
    let sd = (all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 9.0).sqrt();
    let s = sd / median(&all).unwrap();
    let up = s * (9.0 / ChiSquared::new(9.0).unwrap().inverse_cdf(0.05)).sqrt();
    assert_close(f.spread, s, 1e-12, "spread");
    assert_close(f.spread_upper, up, 1e-12, "upper bound");
    assert_close(
        f.floor,
        1.959964 * up * (std::f64::consts::PI / 5.0).sqrt(),
        1e-6,
        "floor",
    );
    assert!(f.spread_upper > 1.6 * f.spread, "10 boots: the bound is wide");
    assert_close(f.observed, (median(&b).unwrap() / 100.0 - 1.0).abs(), 1e-12, "observed");
    // a shift between the arms larger than the model's bound is the floor
    let shifted: Vec<f64> = a.iter().map(|x| x * 1.10).collect();
    let g = aa_floor(&a, &shifted).unwrap();
    assert!(g.floor >= 0.0999 && g.floor == g.observed.max(g.floor), "{g:?}");
    // fewer boots, same spread: a higher floor
    let few = aa_floor(&a[..2], &b[..2]).unwrap();
    assert!(few.floor > f.floor, "{few:?} vs {f:?}");
    assert!(aa_floor(&a[..1], &b).is_none());
    assert!(aa_floor(&[0.0, 0.0], &[1.0, 1.0]).is_none());
    assert_eq!(effect_floor(None), 0.02);
    assert_eq!(effect_floor(Some(0.019)), 0.02);
    assert_eq!(effect_floor(Some(0.05)), 0.05);
    assert_eq!(effect_floor(Some(f64::NAN)), 0.02);
}

#[test]
fn smallest_p_is_set_by_the_boots() {
    for (n, want) in [
        (2, 1.0 / 3.0),
        (3, 0.1),
        (4, 2.0 / 70.0),
        (5, 2.0 / 252.0),
        (6, 2.0 / 924.0),
    ] {
        assert_close(smallest_p(n, n), want, 1e-9, "smallest p");
        let a: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let b: Vec<f64> = (0..n).map(|i| 100.0 + i as f64).collect();
        assert_close(
            mann_whitney_u(&a, &b).unwrap().p,
            want.min(1.0),
            1e-9,
            "separated samples",
        );
    }
    assert_eq!(smallest_p(0, 3), 1.0);
}

#[test]
fn fisher_matches_scipy() {
    // scipy.stats.fisher_exact([[k, n-k], [j, m-j]], alternative='greater')
    assert_close(fisher_greater(5, 5, 0, 5), 1.0 / 252.0, 1e-9, "5/5 vs 0/5");
    assert_close(fisher_greater(3, 5, 0, 5), 0.083_333_333, 1e-6, "3/5 vs 0/5");
    assert_close(fisher_greater(1, 5, 0, 5), 0.5, 1e-9, "1/5 vs 0/5");
    assert_close(fisher_greater(2, 6, 1, 6), 0.5, 1e-9, "2/6 vs 1/6");
    assert_eq!(fisher_greater(0, 5, 0, 5), 1.0);
    assert_eq!(fisher_greater(1, 0, 0, 5), 1.0);
}

/// Issue 29: "fails more" is tested across the call's cells (BH), not on
/// each cell's raw Fisher p: 4/5 against 0/5 (p 0.024) is the headline
/// beside one clean cell (q 0.048), not beside two (q 0.071).
#[test]
fn failing_more_often_is_corrected_across_cells() {
    let same = Comparison::new(vec![10.0, 11.0, 12.0, 10.5], vec![10.2, 11.1, 11.9, 10.4], true);
    let with = |failed| Comparison {
        failures: Some(Failures {
            failed,
            of: 5,
            base_failed: 0,
            base_of: 5,
        }),
        ..same.clone()
    };
    let two = decide_all(&[with(4), with(0)], &rule());
    let f = two[0].failures.unwrap();
    assert_close(f.p, 6.0 / 252.0, 1e-9, "4/5 vs 0/5");
    assert_close(f.q, 12.0 / 252.0, 1e-9, "q over 2 tests");
    assert_eq!(two[0].verdict, Verdict::FailsMore);
    let three = decide_all(&[with(4), with(0), with(0)], &rule());
    let f = three[0].failures.unwrap();
    assert_close(f.q, 18.0 / 252.0, 1e-9, "q over 3 tests");
    assert!(!f.significant && three[0].verdict != Verdict::FailsMore, "{f:?}");
}

#[test]
fn failing_more_often_is_its_own_verdict() {
    let same = Comparison::new(vec![10.0, 11.0, 12.0, 10.5], vec![10.2, 11.1, 11.9, 10.4], true);
    let counts = |failed, base_failed| Failures {
        failed,
        of: 5,
        base_failed,
        base_of: 5,
    };
    let cells = vec![
        Comparison {
            failures: Some(counts(5, 0)),
            ..Comparison::new(vec![10.0; 5], vec![], true)
        },
        Comparison {
            failures: Some(counts(1, 0)),
            ..same.clone()
        },
        Comparison {
            failures: Some(counts(1, 1)),
            ..same.clone()
        },
        Comparison {
            failures: Some(counts(0, 2)),
            ..same
        },
    ];
    let d = decide_all(&cells, &rule());
    // 1/5 against 0/5 (Fisher p 0.5) is no headline: "fails more?" stays in `failures`
    assert_eq!(
        d.iter().map(|d| d.verdict).collect::<Vec<_>>(),
        [
            Verdict::FailsMore,
            Verdict::NotSignificant,
            Verdict::NotSignificant,
            Verdict::NotSignificant
        ]
    );
    let all = d[0].failures.unwrap();
    assert!(all.significant && all.p < 0.005, "{all:?}");
    assert_eq!(
        d[0].performance,
        Verdict::Insufficient,
        "no boot finished: nothing measured"
    );
    let one = d[1].failures.unwrap();
    assert!(!one.significant && (one.p - 0.5).abs() < 1e-9);
    assert_eq!(
        d[1].performance,
        Verdict::NotSignificant,
        "the finished boots are still judged"
    );
    assert!(d[2].failures.is_none() && d[3].failures.is_none());
}

#[test]
fn mde_counts_boots_includes_the_floor_and_the_bh_level() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    // one clear change and three null cells: R = 1 of m = 4
    let mut cells = vec![Comparison::new(
        normals(&mut rng, 6, 100.0, 0.5),
        normals(&mut rng, 6, 90.0, 0.5),
        true,
    )];
    for _ in 0..3 {
        cells.push(Comparison::new(
            normals(&mut rng, 6, 100.0, 3.0),
            normals(&mut rng, 6, 100.0, 3.0),
            true,
        ));
    }
    cells[3].floor = 0.5; // a huge calibrated floor for one cell
    let d = decide_all(&cells, &rule());
    assert_eq!(d[0].verdict, Verdict::Regressed);
    assert_close(d[0].alpha_eff.unwrap(), 0.05 / 4.0, 1e-12, "passed cell: alpha R/m");
    for d in &d[1..] {
        assert!(d.q.unwrap() > 0.05);
        assert_close(d.alpha_eff.unwrap(), 0.05 * 2.0 / 4.0, 1e-12, "alpha (R+1)/m");
        assert_close(d.smallest_p.unwrap(), 2.0 / 924.0, 1e-9, "6 vs 6 boots");
        let power = minimum_detectable_effect(&cells[1].base, &cells[1].new, 0.025).unwrap();
        assert!(d.mde.unwrap() >= d.floor);
        let _ = power;
    }
    let power = minimum_detectable_effect(&cells[1].base, &cells[1].new, 0.025).unwrap();
    assert_close(d[1].mde.unwrap(), power.max(0.02), 1e-12, "mde at the BH level");
    assert_eq!((d[3].floor, d[3].mde.unwrap()), (0.5, 0.5), "the floor bounds the mde");
    assert!(power > minimum_detectable_effect(&cells[1].base, &cells[1].new, 0.05).unwrap());
}

#[test]
fn verdict_names_and_symbols() {
    let all = [
        (Verdict::Regressed, "regressed", "regressed"),
        (Verdict::Improved, "improved", "improved"),
        (Verdict::NotSignificant, "notsignificant", "~"),
        (Verdict::Equivalent, "equivalent", "≈"),
        (Verdict::Small, "small", "small"),
        (Verdict::Unsure, "unsure", "unsure"),
        (Verdict::FailsMore, "failsmore", "fails more"),
        (Verdict::Insufficient, "insufficient", "?"),
    ];
    for (v, name, sym) in all {
        assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{name}\""));
        assert_eq!(serde_json::from_str::<Verdict>(&format!("\"{name}\"")).unwrap(), v);
        assert_eq!(v.symbol(), sym);
        assert_eq!(v.to_string(), sym);
    }
    let r = Rule::default();
    assert_eq!((r.alpha, r.floor, r.min_boots, r.resamples), (0.05, 0.02, 3, 10_000));
}

#[test]
fn summarize_rejects_bad_input() {
    assert!(summarize(&[]).is_none());
    assert!(summarize(&[1.0, f64::NAN]).is_none());
    assert!(median(&[]).is_none());
    let s = summarize(&[2.0]).unwrap();
    assert_eq!((s.n, s.median, s.stddev, s.ci_exact), (1, 2.0, 0.0, false));
}

#[test]
fn bootstrap_ratio_ci_coverage() {
    // True median ratio 1.03; the percentile CI should cover it about 95% of the time.
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let sims = 300;
    let mut hits = 0;
    for i in 0..sims {
        let base = normals(&mut rng, 20, 100.0, 3.0);
        let new = normals(&mut rng, 20, 103.0, 3.0);
        let ci = bootstrap_ratio_of_medians(&base, &new, 500, i).unwrap();
        if ci.lo <= 1.03 && 1.03 <= ci.hi {
            hits += 1;
        }
    }
    let cov = hits as f64 / sims as f64;
    assert!((0.89..=0.99).contains(&cov), "bootstrap ratio CI coverage {cov}");
}

/// The two-sided permutation p-value of the mid-rank sum by listing every
/// way to choose which `a.len()` of the pooled values form the first sample.
fn brute_force_p(a: &[f64], b: &[f64]) -> f64 {
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let n = pooled.len();
    let midrank = |x: f64| {
        let below = pooled.iter().filter(|&&y| y < x).count() as f64;
        let equal = pooled.iter().filter(|&&y| y == x).count() as f64;
        below + (equal + 1.0) / 2.0
    };
    let ranks: Vec<f64> = pooled.iter().map(|&x| midrank(x)).collect();
    let observed: f64 = ranks[..a.len()].iter().sum();
    let mean = a.len() as f64 * (n as f64 + 1.0) / 2.0;
    let (mut hits, mut all) = (0u64, 0u64);
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != a.len() {
            continue;
        }
        let s: f64 = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| ranks[i]).sum();
        all += 1;
        if (s - mean).abs() >= (observed - mean).abs() - 1e-9 {
            hits += 1;
        }
    }
    hits as f64 / all as f64
}

/// Issue 21: ties are counted exactly for small samples, as a brute-force
/// enumeration of every split of the pooled values counts them.
#[test]
fn exact_tied_mann_whitney_matches_brute_force() {
    let cases: [(&[f64], &[f64]); 7] = [
        (&[1.0, 1.0, 1.0], &[2.0, 3.0, 4.0]),
        (&[5.0, 5.0, 6.0, 7.0], &[5.0, 6.0, 6.0, 8.0, 9.0]),
        (&[1.0, 2.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 3.0, 4.0, 4.0, 4.0]),
        (&[10.0; 4], &[10.0, 10.0, 11.0]),
        (
            &[2560.0, 2561.0, 2561.0, 2560.0, 2561.0],
            &[2539.0, 2542.0, 2540.0, 2540.0, 2541.0],
        ),
        (
            &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0],
        ),
        (&[7.0, 7.0], &[7.0, 8.0, 8.0, 9.0, 9.0, 9.0, 10.0, 10.0]),
    ];
    for (a, b) in cases {
        let r = mann_whitney_u(a, b).unwrap();
        let want = brute_force_p(a, b);
        assert!(r.exact, "{a:?} {b:?}");
        assert!(
            (r.p - want).abs() < 1e-12,
            "{a:?} vs {b:?}: {} against brute force {want}",
            r.p
        );
        let back = mann_whitney_u(b, a).unwrap();
        assert!((back.p - r.p).abs() < 1e-12, "symmetric in its arguments");
    }
}

/// Issue 21: every boot of an arm on one value (a deterministic clock) and
/// the arms apart: the p-value is the smallest the exact test can give,
/// never below it as the normal approximation was (0.047/0.013/0.0040/0.0013).
#[test]
fn arms_each_on_one_value_get_the_smallest_exact_p() {
    for (n, want) in [(3, 0.10), (4, 0.029), (5, 0.0079), (6, 0.0022)] {
        let (a, b) = (vec![100.0; n], vec![101.0; n]);
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(r.exact && (r.p - smallest_p(n, n)).abs() < 1e-12, "{n} boots: {r:?}");
        assert!((r.p - want).abs() / want < 0.05, "{n} boots: p {} against {want}", r.p);
    }
    let same = mann_whitney_u(&[3.0; 5], &[3.0; 5]).unwrap();
    assert_eq!(same.p, 1.0, "every value tied: no evidence");
}

/// Issue 21: boots whose benchmark timed out rank worst in the test
/// instead of leaving it; the interval keeps only measured boots.
#[test]
fn timed_out_boots_rank_worst() {
    let base = vec![100.0, 100.2, 99.9, 100.1, 100.3, 99.8];
    let measured = vec![100.0, 100.1, 99.9];
    let without = decide_all(&[Comparison::new(base.clone(), measured.clone(), true)], &rule());
    let with = decide_all(
        &[Comparison {
            worst: (0, 3),
            ..Comparison::new(base.clone(), measured.clone(), true)
        }],
        &rule(),
    );
    assert!(without[0].p.unwrap() > 0.5, "{:?}", without[0]);
    assert!(
        with[0].p.unwrap() < 0.2,
        "three boots that never finished are evidence: {:?}",
        with[0]
    );
    assert_eq!(
        with[0].ratio, without[0].ratio,
        "the interval is of measured boots only"
    );
    // lower is better (a latency): the timed-out boots are the highest values
    let slow = |worst| {
        decide_all(
            &[Comparison {
                worst,
                ..Comparison::new(base.clone(), measured.clone(), false)
            }],
            &rule(),
        )[0]
        .p
        .unwrap()
    };
    assert!(slow((0, 3)) < slow((0, 0)) / 2.0, "{} {}", slow((0, 3)), slow((0, 0)));
}
