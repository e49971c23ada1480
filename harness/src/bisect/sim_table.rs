//! The scenarios of docs/reproduce.md's table of the bisection's error
//! rates (tests only), and the tests that pin them.

use super::graph::Dag;
use super::rule::{Rule, ICOUNT_OFFSET, WALL_OFFSET};
use super::sim::{rates, Case, Clock, History, Profile, Rates, COMMITS, ICOUNT, WALL};

/// One row of the table.
pub struct Scenario {
    /// Where the change lies, in words.
    pub name: &'static str,
    /// The history and where the change lies in it.
    pub history: History,
    /// The clock's noise.
    pub clock: Clock,
    /// A commit that cannot be built.
    pub unbuildable: Option<&'static str>,
}

fn step7() -> Box<Profile> {
    Box::new(|i: usize| f64::from(u8::from(i >= 7)))
}

fn two(first: f64) -> Box<Profile> {
    Box::new(move |i: usize| {
        if i >= 12 {
            1.0
        } else if i >= 5 {
            first
        } else {
            0.0
        }
    })
}

fn row(name: &'static str, frac: Box<Profile>, clock: Clock) -> Scenario {
    Scenario {
        name,
        history: History::linear(frac),
        clock,
        unbuildable: None,
    }
}

/// The main line c0 (good) m1..m7, the merge M, a1, a2 (bad); a topic
/// branch t1..t7 forked at `fork` (c0, or f0 before it) that M merges;
/// 17 commits after good. `shares`: the commits that carry the change.
pub fn merged(fork: &str, shares: &[(&str, f64)]) -> History {
    let mut d = Dag::default();
    d.add("f0", &[]);
    d.add("c0", &["f0"]);
    let chain = |d: &mut Dag, from: &str, name: &str, n: usize| {
        (1..=n).fold(from.to_string(), |prev, i| {
            let c = format!("{name}{i}");
            d.add(&c, &[&prev]);
            c
        })
    };
    let main = chain(&mut d, "c0", "m", 7);
    let topic = chain(&mut d, fork, "t", 7);
    d.add("M", &[&main, &topic]);
    chain(&mut d, "M", "a", 2);
    History::graph(d, "c0", "a2", shares)
}

fn branches(name: &'static str, fork: &str, shares: &[(&str, f64)], clock: Clock) -> Scenario {
    Scenario {
        name,
        history: merged(fork, shares),
        clock,
        unbuildable: None,
    }
}

/// The rows of the table.
pub fn scenarios() -> Vec<Scenario> {
    let one = "one culprit (c7)";
    let halves = "two culprits on two branches, half each (t4 on a merged branch, m3 on the main line)";
    vec![
        row(one, step7(), WALL),
        row(one, step7(), WALL.run(1.0)),
        row(one, step7(), WALL.run(2.0)),
        row("two culprits, half each (c5, c12)", two(0.5), WALL.run(1.0)),
        row("two culprits, 30% and 70% (c5, c12)", two(0.3), WALL.run(1.0)),
        row(
            "gradual, 1/16 per commit",
            Box::new(|i: usize| i as f64 / COMMITS as f64),
            WALL.run(1.0),
        ),
        row(one, step7(), WALL.run(1.0).arm(0.005)),
        row(one, step7(), WALL.run(1.0).arm(0.01)),
        row(one, step7(), WALL.run(1.0).arm(0.02)),
        row(one, step7(), ICOUNT.arm(0.0004)),
        row(one, step7(), ICOUNT.arm(0.002)),
        row(one, step7(), ICOUNT.arm(0.005)),
        Scenario {
            unbuildable: Some("c7"),
            ..row("one culprit (c7), which cannot be built", step7(), WALL.run(1.0))
        },
        branches(halves, "c0", &[("t4", 0.5), ("m3", 0.5)], WALL.run(1.0)),
        branches(
            "two culprits on two branches, 30% (t4, merged branch) and 70% (m3, main line)",
            "c0",
            &[("t4", 0.3), ("m3", 0.7)],
            WALL.run(1.0),
        ),
        branches(halves, "c0", &[("t4", 0.5), ("m3", 0.5)], ICOUNT.arm(0.0004)),
        branches(
            "one culprit (t4) on a branch forked before good (at f0); good itself 2% slower than f0",
            "f0",
            &[("c0", 0.02 / 0.03), ("t4", 1.0)],
            WALL.run(1.0),
        ),
    ]
}

fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn pct(x: f64) -> String {
    let s = format!("{:.2}", x * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The clock columns of a row.
fn clock_cells(k: &Clock) -> String {
    let name = if k == &WALL.run(k.run_sd / k.sigma).arm(k.arm_sd) {
        "wall"
    } else {
        "icount"
    };
    format!(
        "{name} (σ {}, change {}) | {} σ | {}",
        pct(k.sigma),
        pct(k.step),
        k.run_sd / k.sigma,
        pct(k.arm_sd)
    )
}

/// The table's header.
pub const HEADER: &str = "| where the change lies | clock | run offset | per-arm run offset | offset allowed for | wrong commit | every culprit named | some named, none wrong | nothing named | one \"first bad commit\" | a range with a skipped commit | boots per bisection |\n|---|---|---|---|---|---|---|---|---|---|---|---|";

/// One row as printed.
pub fn line(s: &Scenario, rule: &Rule, r: &Rates) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |",
        s.name,
        clock_cells(&s.clock),
        pct(rule.run_offset),
        percent(r.wrong),
        percent(r.all),
        percent(r.some),
        percent(r.none),
        percent(r.single),
        percent(r.range),
        r.boots
    )
}

/// The rule as `bisect` sets it for the scenario's clock: the per-arm run
/// offset allowed for.
pub fn rule_for(s: &Scenario) -> Rule {
    let run_offset = if s.clock.sigma == WALL.sigma {
        WALL_OFFSET
    } else {
        ICOUNT_OFFSET
    };
    Rule {
        run_offset,
        ..Rule::default()
    }
}

/// The rates of scenario `k` over `n` bisections (seeded by `k`).
pub fn of(s: &Scenario, k: usize, rule: &Rule, n: usize) -> Rates {
    let case = Case {
        history: &s.history,
        clock: s.clock,
        unbuildable: s.unbuildable,
    };
    rates(&case, rule, n, 100 + k as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of docs/reproduce.md ("The rule's error rates"), checked
    /// against the docs: `cargo test --lib bisection_error_rates -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn bisection_error_rates() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reproduce.md")).unwrap();
        println!("{HEADER}");
        let mut missing = vec![];
        for (k, s) in scenarios().iter().enumerate() {
            let rule = rule_for(s);
            let l = line(s, &rule, &of(s, k, &rule, 2000));
            println!("{l}");
            if !doc.lines().any(|d| d == l) {
                missing.push(l);
            }
        }
        assert!(doc.contains(HEADER), "docs/reproduce.md lacks the table's header");
        assert!(missing.is_empty(), "rows not in docs/reproduce.md: {missing:#?}");
    }

    #[test]
    fn fault1_a_run_offset_of_one_boot_sd_does_not_name_the_wrong_commit() {
        // a run offset common to the arms: the rule allowing for no per-arm offset
        let rule = Rule {
            run_offset: 0.0,
            ..Rule::default()
        };
        let history = History::linear(step7());
        let case = Case {
            history: &history,
            clock: WALL.run(1.0),
            unbuildable: None,
        };
        let r = rates(&case, &rule, 1000, 20);
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
        let rule = Rule {
            run_offset: 0.0,
            ..Rule::default()
        };
        let case = |history| Case {
            history,
            clock: WALL.run(1.0),
            unbuildable: None,
        };
        let half = History::linear(two(0.5));
        let r2 = rates(&case(&half), &rule, 500, 21);
        let gradual = History::linear(Box::new(|i: usize| i as f64 / COMMITS as f64));
        let rg = rates(&case(&gradual), &rule, 500, 22);
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

    /// Per-arm run offsets, seeded: the wrong-commit rate of the rule (200
    /// bisections per row; the table has 2,000).
    #[test]
    fn per_arm_run_offsets_pinned() {
        let rows = scenarios();
        let mut got = vec![];
        for (k, tau) in [
            (8, WALL_OFFSET),
            (8, 0.02),
            (11, 0.0),
            (11, ICOUNT_OFFSET),
            (9, ICOUNT_OFFSET),
        ] {
            let rule = Rule {
                run_offset: tau,
                ..Rule::default()
            };
            let r = of(&rows[k], k, &rule, 200);
            println!("{}", line(&rows[k], &rule, &r));
            got.push(percent(r.wrong));
        }
        assert_eq!(
            got,
            ["0.5%", "0.0%", "34.5%", "16.5%", "0.0%"],
            "wall 2%, icount 0.5%, icount 0.04%"
        );
    }

    /// The graph rows (issue 29: the merge was named for two culprits on two
    /// branches, and a branch forked before good got its first commit), 200
    /// seeded bisections each: no wrong commit, the merge never named.
    #[test]
    fn branch_rows_never_name_the_merge() {
        let rows = scenarios();
        for (k, s) in rows.iter().enumerate().filter(|(_, s)| s.name.contains("branch")) {
            let rule = rule_for(s);
            let r = of(s, k, &rule, 200);
            println!("{}", line(s, &rule, &r));
            assert!(r.wrong <= 0.01, "{}: wrong commit in {}", s.name, percent(r.wrong));
            assert!(
                r.all + r.some >= 0.5,
                "{}: named in {}",
                s.name,
                percent(r.all + r.some)
            );
        }
    }
}
