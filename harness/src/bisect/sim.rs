//! Seeded simulations of the bisection (tests only): a history of 16 commits
//! after good, boot values with a boot spread `σ` (1%), a change between
//! good and bad of 3σ, a run-to-run offset common to a run's boots, and
//! where the change lies (one culprit, two, or a gradual change). The table
//! in docs/reproduce.md comes from `bisection_error_rates` (see its
//! comment for the command).

use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::graph::Linear;
use super::rule::{Block, Rule};
use super::search::{next, Arms, Found, Next, Seen};

/// Boot-to-boot spread (relative sd).
pub const SIGMA: f64 = 0.01;
/// Commits after good; the last is bad.
pub const COMMITS: usize = 16;

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn index(c: &str) -> usize {
    c[1..].parse().unwrap()
}

/// Where the change lies: the share of it commit `i` (0 good .. 16 bad) carries in all.
pub type Profile = dyn Fn(usize) -> f64;

/// One simulated bisection: what it found and the boots it took.
pub fn bisect_once(frac: &Profile, step: f64, run_sd: f64, rule: &Rule, rng: &mut ChaCha8Rng) -> (Found, u32) {
    let h = Linear((0..=COMMITS).map(|i| format!("c{i}")).collect());
    let mut ev: BTreeMap<Arms, Seen> = BTreeMap::new();
    let mut boots = 0;
    loop {
        match next(&h, "c0", &format!("c{COMMITS}"), &ev, rule, &mut vec![]).unwrap() {
            Next::Done(f) => return (f, boots),
            Next::Measure(arms) => {
                let off = run_sd * normal(rng);
                let mut value = |c: &str| 100.0 * (1.0 - step * frac(index(c))) * (1.0 + off + SIGMA * normal(rng));
                let seen = ev.entry(arms.clone()).or_default();
                for _ in 0..rule.batch {
                    let (g, b) = (value(&arms.good), value(&arms.bad));
                    let c = arms.cand.as_deref().map_or(b, &mut value);
                    seen.blocks.push(Block {
                        good: g,
                        bad: b,
                        cand: c,
                    });
                }
                seen.rounds += rule.batch;
                boots += rule.batch * if arms.cand.is_some() { 3 } else { 2 };
            }
        }
    }
}

/// Rates over `n` bisections.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rates {
    /// A commit that carries no share named.
    pub wrong: f64,
    /// Every culprit named and nothing else.
    pub all: f64,
    /// Some of the culprits named, nothing wrong.
    pub some: f64,
    /// Nothing named.
    pub none: f64,
    /// One "first bad commit" named, nothing else and nothing left open.
    pub single: f64,
    /// Mean boots per bisection.
    pub boots: f64,
}

/// The rates of `n` seeded bisections.
pub fn rates(frac: &Profile, step: f64, run_sd: f64, rule: &Rule, n: usize, seed: u64) -> Rates {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let culprits: Vec<usize> = (1..=COMMITS).filter(|&i| frac(i) != frac(i - 1)).collect();
    let mut r = Rates::default();
    for _ in 0..n {
        let (f, boots) = bisect_once(frac, step, run_sd, rule, &mut rng);
        let named: Vec<usize> = f.culprits.iter().map(|c| index(&c.commit)).collect();
        let wrong = named.iter().any(|i| !culprits.contains(i));
        r.wrong += f64::from(u8::from(wrong));
        r.all += f64::from(u8::from(!wrong && named.len() == culprits.len()));
        r.some += f64::from(u8::from(!wrong && !named.is_empty() && named.len() < culprits.len()));
        r.none += f64::from(u8::from(named.is_empty()));
        r.single += f64::from(u8::from(f.culprits.len() == 1 && f.open.is_empty()));
        r.boots += f64::from(boots);
    }
    let k = n as f64;
    Rates {
        wrong: r.wrong / k,
        all: r.all / k,
        some: r.some / k,
        none: r.none / k,
        single: r.single / k,
        boots: r.boots / k,
    }
}

/// The scenarios of the table: name, where the change lies, run offset (in σ).
pub fn scenarios() -> Vec<(&'static str, Box<Profile>, f64)> {
    let step7 = || Box::new(|i: usize| f64::from(u8::from(i >= 7))) as Box<Profile>;
    vec![
        ("one culprit (c7)", step7(), 0.0),
        ("one culprit (c7)", step7(), 1.0),
        ("one culprit (c7)", step7(), 2.0),
        (
            "two culprits, half each (c5, c12)",
            Box::new(|i: usize| {
                if i >= 12 {
                    1.0
                } else if i >= 5 {
                    0.5
                } else {
                    0.0
                }
            }),
            1.0,
        ),
        (
            "two culprits, 30% and 70% (c5, c12)",
            Box::new(|i: usize| {
                if i >= 12 {
                    1.0
                } else if i >= 5 {
                    0.3
                } else {
                    0.0
                }
            }),
            1.0,
        ),
        (
            "gradual, 1/16 per commit",
            Box::new(|i: usize| i as f64 / COMMITS as f64),
            1.0,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent(x: f64) -> String {
        format!("{:.1}%", x * 100.0)
    }

    #[test]
    fn fault1_a_run_offset_of_one_boot_sd_does_not_name_the_wrong_commit() {
        let rule = Rule::default();
        let step = |i: usize| f64::from(u8::from(i >= 7));
        let r = rates(&step, 3.0 * SIGMA, SIGMA, &rule, 1000, 20);
        println!("fault 1 (3 sd step at c7 of 16, run offset 1 sd): {r:?}");
        assert!(r.wrong <= 0.01, "wrong-commit rate {}", percent(r.wrong));
        assert!(
            r.all >= 0.95 && r.single >= 0.9,
            "c7 named in {}, alone in {}",
            percent(r.all),
            percent(r.single)
        );
    }

    #[test]
    fn fault4_two_half_culprits_are_both_named_and_a_gradual_change_is_no_single_commit() {
        let rule = Rule::default();
        let two = |i: usize| {
            if i >= 12 {
                1.0
            } else if i >= 5 {
                0.5
            } else {
                0.0
            }
        };
        let r2 = rates(&two, 3.0 * SIGMA, SIGMA, &rule, 500, 21);
        let gradual = |i: usize| i as f64 / COMMITS as f64;
        let rg = rates(&gradual, 3.0 * SIGMA, SIGMA, &rule, 500, 22);
        println!("fault 4: two half culprits: {r2:?}; gradual: {rg:?}");
        assert!(
            r2.wrong <= 0.01 && r2.none <= 0.15,
            "two half culprits: wrong {}, nothing named {}",
            percent(r2.wrong),
            percent(r2.none)
        );
        assert!(r2.all >= 0.75, "both named only {}", percent(r2.all));
        assert!(
            rg.single <= 0.01,
            "gradual change: one first bad commit named {}",
            percent(rg.single)
        );
    }

    /// The table of docs/reproduce.md ("The rule's error rates"):
    /// `cargo test --lib bisection_error_rates -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn bisection_error_rates() {
        let rule = Rule::default();
        println!("| where the change lies | run offset | wrong commit | every culprit named | some named, none wrong | nothing named | one \"first bad commit\" | boots per bisection |");
        println!("|---|---|---|---|---|---|---|---|");
        for (k, (name, frac, off)) in scenarios().into_iter().enumerate() {
            let r = rates(&*frac, 3.0 * SIGMA, off * SIGMA, &rule, 2000, 100 + k as u64);
            println!(
                "| {name} | {off} σ | {} | {} | {} | {} | {} | {:.0} |",
                percent(r.wrong),
                percent(r.all),
                percent(r.some),
                percent(r.none),
                percent(r.single),
                r.boots
            );
        }
    }
}
