//! How often the differential profile's rule calls a change between boots
//! of one kernel (on demand, ~8 minutes): 24 icount boots of the base
//! kernel at 2 vCPUs (arms base and base-again, 12 each), every boot
//! profiled; then 2,000 seeded A/A comparisons of 3, 4 and 5 boots a side
//! drawn from them, at three floors of the op. docs/profiles.md quotes the
//! table it prints.
//!
//! `HARNESS_AA_RUN=<run dir>` reads a run made before instead of booting.
//!
//! The floor was chosen on those boots, so their 0/2000 is in sample. The
//! second test is its out-of-sample check: 24 other boots of the base
//! kernel running another benchmark (fork+exec of `/bin/true`, the seed
//! 004 loop: `copy_process`, page-table copies and teardown, not the
//! doexec path alone), the rule applied as shipped.

use std::path::{Path, PathBuf};

use harness::profile::diff::{aa_false_calls, Options};
use harness::profile::PerOp;
use harness::report::profiles::boots;

use super::e2e::{harness, icount_doexec_matrix, icount_matrix, only_run_dir};
use crate::common::{build_profiler, run_ok, scratch};

/// The run directory `$env` names, else a run of the matrix `make` writes
/// into the fresh scratch directory `name`.
fn aa_run(env: &str, name: &str, make: impl FnOnce(&Path) -> PathBuf) -> PathBuf {
    match std::env::var_os(env) {
        Some(dir) => dir.into(),
        None => {
            build_profiler();
            let dir = scratch(name);
            let matrix = make(&dir);
            let runs = dir.join("runs");
            let mut c = harness(&runs);
            c.arg("run").arg(&matrix);
            run_ok(c);
            only_run_dir(&runs)
        }
    }
}

/// The 24 profiled boots of one kernel at 2 vCPUs (arms base and
/// base-again, 12 each) of `bench` in the run directory `run`.
fn boots_of(run: &Path, bench: &str) -> Vec<PerOp> {
    let events = harness::store::Run::open(run).unwrap().events().unwrap();
    let mut notes = Vec::new();
    let mut all = boots(run, &events, "base", 2, bench, &mut notes);
    all.extend(boots(run, &events, "base-again", 2, bench, &mut notes));
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(all.len(), 24, "24 profiled boots of one kernel");
    all
}

/// [`boots_of`] the run [`aa_run`] gives.
fn aa_boots(env: &str, name: &str, bench: &str, make: impl FnOnce(&Path) -> PathBuf) -> Vec<PerOp> {
    boots_of(&aa_run(env, name, make), bench)
}

/// The two arms of one kernel, 12 boots each.
const ARMS: &str = "  - name: base\n  - name: base-again\n";
const TWELVE: &str = "boots: 12, repetitions: 1, warmup_repetitions: 0";

#[test]
#[ignore = "on demand: 24 icount boots, ~8 minutes"]
fn aa_profiles_rarely_call_a_function() {
    let _g = crate::common::serial();
    let all = aa_boots("HARNESS_AA_RUN", "aa-profile", "static-doexec", |dir| {
        icount_doexec_matrix(dir, ARMS, "", TWELVE, "")
    });
    let mut at_default = None;
    for per_side in [3, 4, 5] {
        for rel_floor in [1e-4, 2e-4, 5e-4] {
            let o = Options {
                rel_floor,
                ..Options::default()
            };
            let a = aa_false_calls(&all, per_side, 2000, 0xAA, &o).unwrap();
            let mut top: Vec<(&String, &usize)> = a.by_function.iter().collect();
            top.sort_by(|x, y| y.1.cmp(x.1));
            top.truncate(4);
            eprintln!(
                "{per_side} boots a side, floor {:.2}% of the op: {}/{} A/A comparisons call a function {top:?}",
                rel_floor * 100.0,
                a.calling,
                a.trials
            );
            if per_side == 3 && rel_floor == Options::default().rel_floor {
                eprintln!(
                    "  counts rule: {}/{} A/A comparisons move a count {:?}",
                    a.counts_calling, a.trials, a.counts_by_function
                );
                assert!(
                    a.counts_calling <= 20,
                    "the counts rule moved a count in {}/2000 A/A comparisons",
                    a.counts_calling
                );
                at_default = Some(a.calling);
            }
        }
    }
    let n = at_default.expect("the default floor is among those tried");
    assert!(n <= 20, "at the default rule and its minimum of 3 boots a side, {n}/2000 A/A comparisons call a function (more than 1%)");
}

/// The out-of-sample check: 24 icount boots of base at 2 vCPUs (base and
/// base-again, 12 each), fork-exec for 1 guest second, every boot profiled.
/// `HARNESS_AA_OOS_RUN=<run dir>` reads a run made before.
#[test]
#[ignore = "on demand: 24 icount boots of fork-exec, ~10 minutes"]
fn aa_profiles_out_of_sample_call_nothing_at_the_shipped_rule() {
    let _g = crate::common::serial();
    let all = aa_boots("HARNESS_AA_OOS_RUN", "aa-profile-oos", "fork-exec", |dir| {
        let fork_exec = "{name: fork-exec, kind: fork_exec, duration_s: 1, warmup_s: 1, timeout_s: 60}";
        icount_matrix(dir, ARMS, "", fork_exec, TWELVE, "")
    });
    let functions: std::collections::BTreeSet<&String> = all.iter().flat_map(|p| p.functions.keys()).collect();
    eprintln!(
        "out of sample: {} functions seen in 24 fork-exec boots",
        functions.len()
    );
    let o = Options::default();
    let mut marking = Vec::new();
    for per_side in [3, 4, 5] {
        let a = aa_false_calls(&all, per_side, 2000, 0x0A5, &o).unwrap();
        eprintln!(
            "{per_side} boots a side, shipped rule: {}/{} A/A comparisons mark a function (instructions {} {:?}; counts {} {:?})",
            a.marking, a.trials, a.calling, a.by_function, a.counts_calling, a.counts_by_function
        );
        marking.push(a.marking);
    }
    // measured 2026-12-03 (docs/profiles.md): 3 boots a side mark a function in
    // about 5% of A/A comparisons out of sample, 4 in about 1.5%, 5 in 0.1%;
    // the docs state these rates, and 5 boots a side is what they advise
    assert!(marking[0] >= marking[2], "more boots a side mark less: {marking:?}");
    assert!(
        marking[2] <= 20,
        "out of sample, at 5 boots a side the shipped rule marked a function in {}/2000 A/A comparisons (more than 1%)",
        marking[2]
    );
}

/// The contention rule's false verdicts (issue 45): 24 icount boots of base
/// at 2 vCPUs (base and base-again, 12 each) running the contention test's
/// benchmarks, fork-exec and stress-ng mmap with 2 workers; then 2,000
/// seeded A/A comparisons of 3 to 6 boots a side each, at the shipped
/// rule (heap rows called from 5 boots a side) and with heap rows called
/// from 3, as static rows are. docs/profiles.md quotes the table it prints.
/// `HARNESS_AA_CONT_RUN=<run dir>` reads a run made before.
#[test]
#[ignore = "on demand: 24 icount boots of two benchmarks, ~10 minutes"]
fn aa_contention_rarely_calls_a_row() {
    use harness::profile::contention;
    let _g = crate::common::serial();
    let run = aa_run("HARNESS_AA_CONT_RUN", "aa-contention", |dir| {
        icount_matrix(dir, ARMS, "", super::contention::BENCHES, TWELVE, "")
    });
    let rules = [
        ("shipped", contention::Options::default()),
        (
            "heap rows from 3 boots",
            contention::Options {
                heap_min_boots: 3,
                ..Default::default()
            },
        ),
        (
            "heap rows from 3 boots, spread 5x",
            contention::Options {
                heap_min_boots: 3,
                spread_factor: 5.0,
                ..Default::default()
            },
        ),
    ];
    let mut shipped = Vec::new();
    for bench in ["fork-exec", "stress-mmap"] {
        let all: Vec<contention::PerOp> = boots_of(&run, bench)
            .into_iter()
            .map(|p| p.contention.expect("every boot profiled with contention counts"))
            .collect();
        for (rule, o) in &rules {
            for per_side in [3, 4, 5, 6] {
                let a = contention::aa_false_calls(&all, per_side, 2000, 0xC0, o).unwrap();
                let mut top: Vec<(&String, &usize)> = a.by_row.iter().collect();
                top.sort_by(|x, y| y.1.cmp(x.1));
                top.truncate(4);
                eprintln!(
                    "{bench}, {rule}, {per_side} boots a side: {}/{} A/A comparisons not ≈ (static rows {}, heap rows {}) {top:?}",
                    a.calling, a.trials, a.static_calling, a.heap_calling
                );
                if *rule != "shipped" && per_side == 3 {
                    for (row, _) in &top {
                        let per_boot: Vec<String> = all
                            .iter()
                            .map(|p| {
                                let r = p.rows.iter().find(|(k, _)| k.text() == **row);
                                format!("{:.2}", r.map_or(0.0, |(_, r)| r.events))
                            })
                            .collect();
                        eprintln!("  {row} per op, boot by boot: {}", per_boot.join(" "));
                    }
                }
                if *rule == "shipped" {
                    shipped.push((bench, per_side, a.calling));
                }
            }
        }
    }
    // measured 2026-12-06 (docs/profiles.md): no static row called at any
    // boots a side; heap rows, called from 5, in 0.2% (fork-exec) and 0.55%
    // (stress-ng mmap) of comparisons at 5
    for (bench, per_side, n) in shipped {
        assert!(
            n <= 20,
            "{bench}: at the shipped rule and {per_side} boots a side, {n}/2000 A/A comparisons were not ≈ (more than 1%)"
        );
    }
}
