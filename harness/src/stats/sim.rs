//! Simulated experiments with a boot random effect: the rule's A/A false-call
//! rate and its power against a 5% change, per profile sampling. The table in
//! docs/verdicts.md ("The rule, simulated") comes from `simulation_table` (ignored by
//! default; see its comment for the command), and the table at each shipped
//! profile's real number of comparisons ("At the profiles' real number of
//! comparisons") from `profile_simulation_table`.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    benjamini_hochberg, bootstrap_ratio_of_medians, classify, decide_all, mann_whitney_u, median, Comparison, Rule,
    Verdict,
};

/// Within-boot spread of one repetition (relative sd).
pub(super) const WITHIN_SD: f64 = 0.01;
/// Boot-to-boot spread as a multiple of the within-boot spread.
const BOOT_RATIOS: [f64; 3] = [0.5, 1.0, 3.0];
/// (profile, boots per arm, measured repetitions per boot), as in matrix.yaml.
const PROFILES: [(&str, usize, usize); 3] = [("nightly", 7, 2), ("premerge", 6, 2), ("quick", 4, 1)];
/// The change whose detection rate is reported (throughput down by 5%).
const EFFECT: f64 = -0.05;

pub(super) fn normal(rng: &mut ChaCha8Rng, sd: f64) -> f64 {
    // Box-Muller; u1 in (0, 1]
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// One arm: `boots` boots, each with its own offset, summarised by the median of
/// its `reps` repetitions, as the report does.
pub(super) fn arm(rng: &mut ChaCha8Rng, boots: usize, reps: usize, boot_sd: f64, effect: f64) -> Vec<f64> {
    (0..boots)
        .map(|_| {
            let b = normal(rng, boot_sd);
            let vals: Vec<f64> = (0..reps)
                .map(|_| 1000.0 * (1.0 + effect) * (1.0 + b + normal(rng, WITHIN_SD)))
                .collect();
            median(&vals).unwrap()
        })
        .collect()
}

/// The verdict of one comparison alone in its report (m = 1, so q = p). The
/// bootstrap is only drawn when the test is significant: a non-significant cell
/// can only be `~` or `≈`, never a call; `lazy_verdicts_match_decide_all` checks
/// this shortcut against [`decide_all`].
fn verdict(base: &[f64], new: &[f64], rule: &Rule) -> (f64, Option<Verdict>) {
    let p = mann_whitney_u(base, new).unwrap().p;
    if p > rule.alpha {
        return (p, None);
    }
    let ci = bootstrap_ratio_of_medians(base, new, rule.resamples, rule.seed).unwrap();
    (p, Some(classify(p, &ci, rule.floor, rule.alpha, true)))
}

/// Rates of one scenario.
#[derive(Debug)]
struct Rates {
    aa_p: f64,
    aa_called: f64,
    aa_small_or_unsure: f64,
    power_regressed: f64,
    power_significant: f64,
}

fn scenario(boots: usize, reps: usize, boot_sd: f64, sims: (usize, usize), rule: &Rule, seed: u64) -> Rates {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut p_sig, mut called, mut soft) = (0, 0, 0);
    for _ in 0..sims.0 {
        let (a, b) = (
            arm(&mut rng, boots, reps, boot_sd, 0.0),
            arm(&mut rng, boots, reps, boot_sd, 0.0),
        );
        let (p, v) = verdict(&a, &b, rule);
        p_sig += usize::from(p <= rule.alpha);
        called += usize::from(matches!(v, Some(Verdict::Regressed | Verdict::Improved)));
        soft += usize::from(matches!(v, Some(Verdict::Small | Verdict::Unsure)));
    }
    let (mut regressed, mut significant) = (0, 0);
    for _ in 0..sims.1 {
        let (a, b) = (
            arm(&mut rng, boots, reps, boot_sd, 0.0),
            arm(&mut rng, boots, reps, boot_sd, EFFECT),
        );
        let (p, v) = verdict(&a, &b, rule);
        significant += usize::from(p <= rule.alpha);
        regressed += usize::from(v == Some(Verdict::Regressed));
    }
    let f = |k: usize, n: usize| k as f64 / n.max(1) as f64;
    Rates {
        aa_p: f(p_sig, sims.0),
        aa_called: f(called, sims.0),
        aa_small_or_unsure: f(soft, sims.0),
        power_regressed: f(regressed, sims.1),
        power_significant: f(significant, sims.1),
    }
}

fn all_scenarios(sims: (usize, usize), resamples: usize) -> Vec<(&'static str, usize, usize, f64, Rates)> {
    let rule = Rule {
        resamples,
        ..Rule::default()
    };
    let mut out = Vec::new();
    for (i, (name, boots, reps)) in PROFILES.iter().enumerate() {
        for (j, ratio) in BOOT_RATIOS.iter().enumerate() {
            let seed = 1000 + (i * 10 + j) as u64;
            out.push((
                *name,
                *boots,
                *reps,
                *ratio,
                scenario(*boots, *reps, ratio * WITHIN_SD, sims, &rule, seed),
            ));
        }
    }
    out
}

#[test]
fn aa_false_calls_stay_below_alpha_with_a_boot_effect() {
    let alpha = Rule::default().alpha;
    for (name, boots, reps, ratio, r) in all_scenarios((2000, 200), 200) {
        let what = format!("{name} {boots}x{reps}, boot spread {ratio}x within");
        assert!(
            r.aa_called <= alpha,
            "{what}: A/A called regressed/improved in {:.3}",
            r.aa_called
        );
        // exact Mann-Whitney over boots is conservative: within 2 standard errors of alpha
        assert!(
            r.aa_p <= alpha + 2.0 * (alpha * (1.0 - alpha) / 2000.0).sqrt(),
            "{what}: A/A p <= alpha in {:.3}",
            r.aa_p
        );
        if ratio <= 1.0 {
            assert!(
                r.power_regressed >= 0.5,
                "{what}: a 5% drop called regressed in only {:.2}",
                r.power_regressed
            );
        }
    }
}

#[test]
fn pooling_repetitions_would_not_hold_alpha() {
    // The reason for the boot as unit: with a boot effect, testing every
    // repetition as if independent rejects far more often than alpha.
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let (sims, mut hits) = (400, 0);
    for _ in 0..sims {
        // the case: nightly 4 boots x 5 repetitions, 1.5% between boots, 0.3% within
        let reps = |rng: &mut ChaCha8Rng| -> Vec<f64> {
            let mut v = Vec::new();
            for _ in 0..4 {
                let b = normal(rng, 0.015);
                for _ in 0..5 {
                    v.push(1000.0 * (1.0 + b + normal(rng, 0.003)));
                }
            }
            v
        };
        let (a, b) = (reps(&mut rng), reps(&mut rng));
        hits += usize::from(mann_whitney_u(&a, &b).unwrap().p <= 0.05);
    }
    assert!(
        hits as f64 / sims as f64 > 0.2,
        "pooled repetitions: p <= 0.05 in {hits}/{sims}"
    );
}

#[test]
fn lazy_verdicts_match_decide_all() {
    let rule = Rule {
        resamples: 300,
        ..Rule::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for i in 0..60 {
        let effect = if i % 2 == 0 { 0.0 } else { EFFECT * (i % 5) as f64 / 4.0 };
        let (a, b) = (arm(&mut rng, 5, 2, 0.01, 0.0), arm(&mut rng, 5, 2, 0.01, effect));
        let full = decide_all(&[Comparison::new(a.clone(), b.clone(), true)], &rule)[0];
        match verdict(&a, &b, &rule) {
            (_, Some(v)) => assert_eq!(v, full.verdict),
            (p, None) => {
                assert!(p > rule.alpha);
                assert!(
                    matches!(full.verdict, Verdict::NotSignificant | Verdict::Equivalent),
                    "{full:?}"
                );
            }
        }
    }
}

/// The table in docs/verdicts.md. Reproduce with
/// `cargo test --lib simulation_table -- --ignored --nocapture` (about two
/// minutes in a debug build), which checks the docs' rows against it.
#[test]
#[ignore]
fn simulation_table() {
    let header = "| profile | boots × reps | boot spread | A/A p ≤ 0.05 | A/A called | A/A small/unsure | 5% drop: regressed | 5% drop: q ≤ 0.05 |";
    let rows: Vec<String> = all_scenarios((2000, 2000), 1000)
        .into_iter()
        .map(|(name, boots, reps, ratio, r)| {
            format!(
                "| {name} | {boots} × {reps} | {ratio}× | {:.1}% | {:.2}% | {:.1}% | {:.0}% | {:.0}% |",
                r.aa_p * 100.0,
                r.aa_called * 100.0,
                r.aa_small_or_unsure * 100.0,
                r.power_regressed * 100.0,
                r.power_significant * 100.0
            )
        })
        .collect();
    crate::testutil::assert_doc_table("verdicts.md", header, &rows);
}

#[test]
fn simulated_sampling_is_the_shipped_sampling() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../matrix.yaml");
    for (name, boots, reps) in PROFILES {
        let m = crate::config::load(&file, (name != "nightly").then_some(name)).unwrap();
        assert_eq!(
            (m.sampling.boots as usize, m.sampling.repetitions as usize),
            (boots, reps),
            "{name}"
        );
    }
}

/// The changes whose detection the per-profile table reports (throughput down).
const PROFILE_EFFECTS: [f64; 3] = [-0.02, -0.03, -0.05];
/// Boot-to-boot spread of the per-profile table (relative sd), with
/// [`WITHIN_SD`] between repetitions of a boot.
const PROFILE_BOOT_SD: f64 = 0.01;

/// A shipped profile as the simulation sees it: its sampling, its floor and
/// its number of comparisons `m` (every one in one BH pass).
struct ProfileShape {
    name: &'static str,
    boots: usize,
    reps: usize,
    floor: f64,
    m: usize,
}

/// The shipped profiles that compare something (`scale` has one variant),
/// read from matrix.yaml: sampling and floor from `config::load`, `m` as
/// `harness check` counts it (`bench::comparison_count`).
fn shipped_profiles() -> Vec<ProfileShape> {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../matrix.yaml");
    let names = ["quick", "premerge", "smoke", "nightly", "exact", "reproduce"];
    names
        .iter()
        .map(|&name| {
            let m = crate::config::load(&file, (name != "nightly").then_some(name)).unwrap();
            let (boots, reps) = (m.sampling.boots as usize, m.sampling.repetitions as usize);
            ProfileShape {
                name,
                boots,
                reps,
                floor: m.statistics.threshold,
                m: crate::bench::comparison_count(&m),
            }
        })
        .collect()
}

/// One report of `m` throughput comparisons, the first changed by `effect`,
/// decided as `decide_all` does (one BH pass over all m); the bootstrap is
/// only drawn for cells with q ≤ alpha, the only ones that can be called.
/// Returns (the changed cell's verdict when q ≤ alpha, any other cell called).
fn report_run(rng: &mut ChaCha8Rng, p: &ProfileShape, effect: f64, rule: &Rule) -> (Option<Verdict>, bool) {
    let cells: Vec<(Vec<f64>, Vec<f64>)> = (0..p.m)
        .map(|i| {
            let e = if i == 0 { effect } else { 0.0 };
            (
                arm(rng, p.boots, p.reps, PROFILE_BOOT_SD, 0.0),
                arm(rng, p.boots, p.reps, PROFILE_BOOT_SD, e),
            )
        })
        .collect();
    let ps: Vec<f64> = cells.iter().map(|(a, b)| mann_whitney_u(a, b).unwrap().p).collect();
    let qs = benjamini_hochberg(&ps);
    let decided = |i: usize| -> Option<Verdict> {
        (qs[i] <= rule.alpha).then(|| {
            let ci = bootstrap_ratio_of_medians(&cells[i].0, &cells[i].1, rule.resamples, rule.seed).unwrap();
            classify(qs[i], &ci, p.floor, rule.alpha, true)
        })
    };
    let other_called = (1..p.m).any(|i| matches!(decided(i), Some(Verdict::Regressed | Verdict::Improved)));
    (decided(0), other_called)
}

/// Per profile: the share of `runs` reports in which one changed cell is
/// called regressed, per [`PROFILE_EFFECTS`], and the share of A/A reports
/// (nothing changed) with any regressed or improved call.
fn profile_rates(p: &ProfileShape, runs: usize, resamples: usize, seed: u64) -> ([f64; 3], f64) {
    let rule = Rule {
        resamples,
        floor: p.floor,
        ..Rule::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let share = |k: usize| k as f64 / runs as f64;
    let mut power = [0.0; 3];
    for (slot, &effect) in power.iter_mut().zip(&PROFILE_EFFECTS) {
        let hits = (0..runs)
            .filter(|_| report_run(&mut rng, p, effect, &rule).0 == Some(Verdict::Regressed))
            .count();
        *slot = share(hits);
    }
    let aa = (0..runs)
        .filter(|_| {
            let (first, others) = report_run(&mut rng, p, 0.0, &rule);
            others || matches!(first, Some(Verdict::Regressed | Verdict::Improved))
        })
        .count();
    (power, share(aa))
}

#[test]
fn shipped_profiles_count_their_comparisons() {
    let m: Vec<(&str, usize)> = shipped_profiles().iter().map(|p| (p.name, p.m)).collect();
    let want = [
        ("quick", 2),
        ("premerge", 11),
        ("smoke", 11),
        ("nightly", 33),
        ("exact", 4),
        ("reproduce", 96),
    ];
    assert_eq!(m, want);
}

#[test]
fn quick_profile_calls_one_changed_cell_only_by_luck() {
    // 4 boots: smallest p 0.029, times m = 2 is above alpha, so BH passes the
    // changed cell only when the unchanged one also reaches p 0.029 by chance
    // (2 of the 70 orderings): at most about 3% of runs, whatever the change
    let quick = shipped_profiles().into_iter().find(|p| p.name == "quick").unwrap();
    let (power, _) = profile_rates(&quick, 200, 200, 3);
    assert!(power.iter().all(|&x| x <= 0.08), "{power:?}");
}

/// The per-profile table in docs/verdicts.md ("At the profiles' real number
/// of comparisons"). Reproduce with
/// `cargo test --release --lib profile_simulation_table -- --ignored --nocapture`.
#[test]
#[ignore]
fn profile_simulation_table() {
    let runs = 5000;
    let header = "| profile | m | boots × reps | floor | 2% drop: regressed | 3% drop: regressed | 5% drop: regressed | A/A: any false call |";
    let mut rows = vec![];
    for (i, p) in shipped_profiles().iter().enumerate() {
        let head = format!(
            "| {} | {} | {} × {} | {}% |",
            p.name,
            p.m,
            p.boots,
            p.reps,
            p.floor * 100.0
        );
        if p.boots < Rule::default().min_boots {
            rows.push(format!("{head} – | – | – | – (fewer than 3 boots: every cell is ?) |"));
            continue;
        }
        let (power, aa) = profile_rates(p, runs, 1000, 2000 + i as u64);
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        rows.push(format!(
            "{head} {} | {} | {} | {} |",
            pct(power[0]),
            pct(power[1]),
            pct(power[2]),
            pct(aa)
        ));
    }
    crate::testutil::assert_doc_table("verdicts.md", header, &rows);
}
