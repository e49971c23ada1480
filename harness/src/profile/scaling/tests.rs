//! The scaling rule on table boots and on synthetic boots with the noise
//! real ones have.

use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::profile::contention::{Class, Object};
use crate::profile::contention::{PerOp as ContentionPerOp, RowPerOp};
use crate::profile::FnPerOp;

/// The constant bulk of a table boot's kernel: its threshold at 0.5% is 5,000.
const BULK: f64 = 1_000_000.0;

/// A boot of `fs` (function, instructions per op) beside the bulk, and of
/// contention rows (key, events per op, hold).
fn boot(fs: &[(&str, f64)], rows: &[(&Key, f64, Option<f64>)]) -> PerOp {
    let mut functions: BTreeMap<String, FnPerOp> = BTreeMap::new();
    for (name, insns) in fs.iter().copied().chain([("bulk", BULK)]) {
        functions.insert(
            name.to_string(),
            FnPerOp {
                insns,
                ..FnPerOp::default()
            },
        );
    }
    let rows = rows
        .iter()
        .map(|(k, events, hold)| {
            let r = RowPerOp {
                events: *events,
                objects: 1,
                writers: 2,
                hold: *hold,
                funcs: BTreeMap::new(),
            };
            ((*k).clone(), r)
        })
        .collect();
    let kernel_insns = functions.values().map(|f| f.insns).sum();
    PerOp {
        ops: 1000.0,
        total_insns: kernel_insns,
        kernel_insns,
        functions,
        contention: Some(ContentionPerOp {
            vcpus: 2,
            shared_rmws: 0.0,
            shared_acqs: 0.0,
            rows,
        }),
    }
}

fn options() -> ScalingOptions {
    ScalingOptions {
        threshold: 0.005,
        ..ScalingOptions::default()
    }
}

fn key(class: Class, object: Object, name: &str) -> Key {
    Key {
        object,
        class,
        name: name.into(),
    }
}

/// Boots of one function `f` of the given values.
fn of(f: &str, xs: &[f64]) -> Vec<PerOp> {
    xs.iter().map(|&x| boot(&[(f, x)], &[])).collect()
}

/// The view of `f`'s boots at 2 and 8 vCPUs: base's and the variant's.
fn view(f: &str, b2: &[f64], b8: &[f64], v2: &[f64], v8: &[f64]) -> Scaling {
    let (b2, b8, v2, v8) = (of(f, b2), of(f, b8), of(f, v2), of(f, v8));
    scaling(&[Count::of(8, &b8, &v8), Count::of(2, &b2, &v2)], &options())
}

fn row_of<'a>(s: &'a Scaling, name: &str, m: Measure) -> &'a Row {
    s.rows
        .iter()
        .find(|r| r.name == name && r.measure == m)
        .unwrap_or_else(|| panic!("no row {name}: {:?}", s.rows.iter().map(Row::text).collect::<Vec<_>>()))
}

#[test]
fn the_rule_table() {
    const FLAT: &[f64] = &[100.0, 101.0, 99.0];
    // (function, base at 2, at 8, variant at 2, at 8, its mark, the cell's verdict)
    type Case = (&'static str, [&'static [f64]; 4], Mark, ScalingVerdict);
    let cases: &[Case] = &[
        // grows 30,000 more than base: beyond 5,000
        (
            "walk",
            [FLAT, FLAT, FLAT, &[30_100.0, 30_101.0, 30_099.0]],
            Mark::Worse,
            ScalingVerdict::Worse,
        ),
        // a flat cost added at every count
        (
            "flat",
            [FLAT, FLAT, &[600.0, 601.0, 599.0], &[600.0, 601.0, 599.0]],
            Mark::Within,
            ScalingVerdict::Same,
        ),
        // base against base again
        (
            "same",
            [
                FLAT,
                &[5100.0, 5099.0, 5101.0],
                &[99.0, 100.0, 101.0],
                &[5101.0, 5100.0, 5099.0],
            ],
            Mark::Within,
            ScalingVerdict::Same,
        ),
        // base grows, the variant does not
        (
            "fixed",
            [FLAT, &[30_100.0, 30_101.0, 30_099.0], FLAT, FLAT],
            Mark::Better,
            ScalingVerdict::Better,
        ),
        // 9,500 more at the medians, but at its extremes only 4,500: not called
        (
            "spread",
            [&[0.0; 3], &[0.0, 0.0, 4500.0], &[0.0; 3], &[9000.0, 9500.0, 10_000.0]],
            Mark::Within,
            ScalingVerdict::Same,
        ),
        // the scheduler's row alone never carries the cell
        (
            "sched_balance_rq",
            [FLAT, FLAT, FLAT, &[30_100.0, 30_101.0, 30_099.0]],
            Mark::Worse,
            ScalingVerdict::Same,
        ),
    ];
    for (f, [b2, b8, v2, v8], mark, verdict) in cases {
        let s = view(f, b2, b8, v2, v8);
        let r = row_of(&s, f, Measure::Function);
        assert_eq!((r.mark, s.verdict), (*mark, *verdict), "{f}: {r:?}");
    }
    let s = view("walk", FLAT, FLAT, FLAT, &[30_100.0, 30_101.0, 30_099.0]);
    assert_eq!(s.vcpus, [2, 8], "smallest first");
    let r = row_of(&s, "walk", Measure::Function);
    assert_eq!(
        (r.growth.base, r.growth.variant, r.interaction, r.worse_by),
        (0.0, 30_000.0, 30_000.0, 29_996.0)
    );
    assert_eq!(r.at[1].base.median, 100.0);
    assert!((r.threshold - 0.005 * (BULK + 100.0)).abs() < 1e-6, "{}", r.threshold);
    assert_eq!(
        s.carried().map(Row::text).collect::<Vec<_>>(),
        ["walk (instructions per op)"]
    );
    assert_eq!(s.kernel().mark, Mark::Worse, "the whole kernel has its own mark");
    let sched = view("sched_balance_rq", FLAT, FLAT, FLAT, &[30_100.0, 30_101.0, 30_099.0]);
    assert!(row_of(&sched, "sched_balance_rq", Measure::Function).scheduler);
    assert_eq!(
        sched.scheduler.share,
        Some(1.0),
        "all of the interaction is the scheduler's"
    );
}

#[test]
fn too_few_boots_or_one_count_give_no_verdict_and_say_why() {
    let s = view("walk", &[1.0; 3], &[1.0; 3], &[1.0; 3], &[30_000.0, 30_000.0]);
    assert_eq!(s.verdict, ScalingVerdict::None);
    assert_eq!(
        s.why.as_deref(),
        Some("too few boots: the variant has 2 at 8 vCPUs (3 an arm at the smallest and the largest count)")
    );
    assert!(s.rows.iter().all(|r| r.mark == Mark::Unjudged));
    let b = of("walk", &[1.0; 3]);
    let one = scaling(&[Count::of(2, &b, &b)], &options());
    assert_eq!(
        (one.verdict, one.why.as_deref()),
        (
            ScalingVerdict::None,
            Some("one vCPU count: a scaling view needs two or more")
        )
    );
}

#[test]
fn contention_rows_scale_by_the_contention_rules_floors() {
    let lock = key(Class::Static, Object::Lock("spin".into()), "pcpu_lock+0x0");
    let heap = key(Class::Heap, Object::Line, "do_wait");
    let boots = |acqs: f64, hold: f64, heap_rmws: f64| -> Vec<PerOp> {
        (0..3)
            .map(|i| boot(&[], &[(&lock, acqs, Some(hold + i as f64)), (&heap, heap_rmws, None)]))
            .collect()
    };
    let view = |b2: &[PerOp], b8: &[PerOp], v2: &[PerOp], v8: &[PerOp]| {
        scaling(&[Count::of(2, b2, v2), Count::of(8, b8, v8)], &options())
    };
    // taken 50 times an op, held 100 -> 600 instructions against base's
    // 100 -> 300: beyond 10% of base's 301 and 5,000 / 50 instructions
    let held = |acqs: f64| {
        let (b2, b8) = (boots(acqs, 100.0, 0.0), boots(acqs, 300.0, 0.0));
        view(&b2, &b8, &boots(acqs, 100.0, 0.0), &boots(acqs, 600.0, 0.0))
    };
    let s = held(50.0);
    let hold = row_of(&s, "spin lock pcpu_lock+0x0", Measure::Hold);
    assert_eq!(
        (hold.mark, hold.threshold, s.verdict),
        (Mark::Worse, 100.0, ScalingVerdict::Worse)
    );
    assert_eq!(hold.at[1].writers, None, "writers are the events row's");
    // taken twice an op: 600 more instructions held per op, under 5,000
    let s = held(2.0);
    let hold = row_of(&s, "spin lock pcpu_lock+0x0", Measure::Hold);
    assert_eq!(
        (hold.mark, hold.threshold, s.verdict),
        (Mark::Within, 2500.0, ScalingVerdict::Same)
    );
    let (b2, b8) = (boots(2.0, 100.0, 0.0), boots(2.0, 300.0, 0.0));
    // acquisitions 2 -> 8 per op: beyond 0.75
    let s = view(&b2, &b8, &boots(2.0, 100.0, 0.0), &boots(8.0, 300.0, 0.0));
    let acqs = row_of(&s, "spin lock pcpu_lock+0x0", Measure::Acquisitions);
    assert_eq!((acqs.mark, acqs.at[1].writers), (Mark::Worse, Some((2, 2))));
    assert_eq!(s.verdict, ScalingVerdict::Worse);
    // +0.5 acquisitions per op: under the floor
    let s = view(&b2, &b8, &boots(2.0, 100.0, 0.0), &boots(2.5, 300.0, 0.0));
    assert_eq!(s.verdict, ScalingVerdict::Same);
    // a heap line 0 -> 4 RMWs per op from 3 boots an arm: held back, not called
    let s = view(&b2, &b8, &boots(2.0, 100.0, 0.0), &boots(2.0, 300.0, 4.0));
    let h = row_of(&s, "heap line via do_wait", Measure::Rmws);
    assert_eq!(
        (h.mark, h.held_back, h.symbol(), s.verdict),
        (Mark::Within, true, '?', ScalingVerdict::Same)
    );
    let first = s.rows.iter().find(|r| r.key.is_some()).unwrap();
    assert_eq!(
        first.name, "heap line via do_wait",
        "held back rows before the quiet ones"
    );
}

/// Synthetic boots of a fork-exec-like op at `n` vCPUs with the noise real
/// ones have: a kernel of ~700,000 instructions, functions at 0.2%
/// spread, one with page-layout modes of ±1,500, the percpu sum growing
/// with the CPU count, the scheduler's and idle's growing and very noisy,
/// a static lock whose hold grows with the CPUs, a heap line with two
/// modes. `walk`: a function walking every CPU's data (4,100 instructions
/// a CPU) is added; `flat`: one of 50 instructions at every count.
fn synthetic(rng: &mut ChaCha8Rng, n: u32, arm: &str) -> PerOp {
    let mut normal = |sd: f64| {
        let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random::<f64>());
        sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let n = n as f64;
    let mut fs: Vec<(String, f64)> = (0..40)
        .map(|i| {
            let size = 2_000.0 + 900.0 * i as f64;
            (format!("f{i}"), size + normal(0.002 * size))
        })
        .collect();
    let layout = [-1500.0, 0.0, 1500.0][(normal(1.0).abs() * 2.0) as usize % 3];
    fs.push(("filemap_map_pages".into(), 60_000.0 + 500.0 * n + layout));
    fs.push(("__percpu_counter_sum".into(), 300.0 + 50.0 * n + normal(5.0)));
    fs.push(("pcpu_alloc_noprof".into(), 5_000.0 + 100.0 * n + normal(30.0)));
    fs.push(("sched_balance_rq".into(), (2_000.0 * n * (1.0 + normal(0.3))).max(0.0)));
    fs.push(("do_idle".into(), (10_000.0 * n * (1.0 + normal(0.4))).max(0.0)));
    match arm {
        "walk" => fs.push(("harness_cpu_walk".into(), 4_100.0 * n + normal(1.0))),
        "flat" => fs.push(("harness_flat".into(), 50.0)),
        _ => {}
    }
    let lock = key(Class::Static, Object::Lock("spin".into()), "percpu_counters_lock+0x0");
    let heap = key(Class::Heap, Object::Line, "do_wait");
    let hold = 100.0 + 25.0 * n + normal(3.0);
    let modes = if normal(1.0) > 0.0 { 2.0 } else { 0.0 };
    let fs: Vec<(&str, f64)> = fs.iter().map(|(f, x)| (f.as_str(), *x)).collect();
    let mut b = boot(&fs, &[(&lock, 8.0, Some(hold)), (&heap, modes, None)]);
    b.kernel_insns -= BULK - 300_000.0;
    b.functions.get_mut("bulk").unwrap().insns = 300_000.0;
    b
}

/// `boots` synthetic boots of `arm` at each of 2 and 8 vCPUs.
fn synthetic_arm(seed: u64, arm: &str, boots: usize) -> [(u32, Vec<PerOp>); 2] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    [2, 8].map(|n| (n, (0..boots).map(|_| synthetic(&mut rng, n, arm)).collect()))
}

#[test]
fn synthetic_boots_call_a_growing_row_and_not_a_flat_one_nor_base_again() {
    let base = synthetic_arm(1, "base", 3);
    let verdict = |arm: &str, seed: u64| {
        let v = synthetic_arm(seed, arm, 3);
        let counts: Vec<Count> = base
            .iter()
            .zip(&v)
            .map(|((n, b), (_, v))| Count::of(*n, b, v))
            .collect();
        scaling(&counts, &options())
    };
    let walk = verdict("walk", 2);
    assert_eq!(walk.verdict, ScalingVerdict::Worse);
    assert_eq!(
        walk.carried().map(Row::text).collect::<Vec<_>>(),
        ["harness_cpu_walk (instructions per op)"]
    );
    let r = row_of(&walk, "harness_cpu_walk", Measure::Function);
    assert!((r.interaction - 6.0 * 4_100.0).abs() < 10.0, "{}", r.interaction);
    for (arm, seed) in [("flat", 3), ("base", 4), ("base", 5)] {
        let s = verdict(arm, seed);
        assert_eq!(
            s.verdict,
            ScalingVerdict::Same,
            "{arm} (seed {seed}): {:?}",
            s.carried().collect::<Vec<_>>()
        );
    }
    let shown: Vec<&str> = walk
        .rows
        .iter()
        .filter(|r| r.measure == Measure::Function)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        shown.len(),
        8,
        "the top 8 by |interaction|, the called one among them: {shown:?}"
    );
    assert_eq!(shown[0], "harness_cpu_walk", "the called first");
    let share = walk.scheduler.share.unwrap();
    assert!(
        share.abs() < 10.0,
        "the scheduler's share is said: {:?}",
        walk.scheduler
    );
}

#[test]
fn an_aa_across_the_same_counts_calls_nothing() {
    let arm = synthetic_arm(7, "base", 12);
    let pools: Vec<(u32, &[PerOp])> = arm.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let o = options();
    for per_side in [3, 5] {
        let aa = aa_false_calls(&pools, per_side, 500, 11, &o).unwrap();
        assert_eq!((aa.trials, aa.calling), (500, 0), "{per_side} a side: {:?}", aa.by_row);
        // at 3 a side the whole kernel's and the scheduler's rows do move
        // between boots of one kernel: why neither carries a cell
        let quiet = per_side == 5;
        assert_eq!(
            (aa.kernel_marked == 0, aa.scheduler_marked == 0),
            (quiet, quiet),
            "{aa:?}"
        );
    }
    assert!(
        aa_false_calls(&pools, 7, 10, 11, &o).is_none(),
        "12 boots make no two sides of 7"
    );
}
