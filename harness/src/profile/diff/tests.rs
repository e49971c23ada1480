//! The differential profile's rule on fixture boots.

use std::collections::BTreeMap;

use super::*;

/// (name, insns/op, calls/op, callers) of one function in a test boot.
type FnRow<'a> = (&'a str, f64, f64, &'a [(&'a str, f64)]);
/// base boots, variant boots, A/A arms, options, expected threshold, expected called.
type Case = (Vec<f64>, Vec<f64>, Option<(Vec<f64>, Vec<f64>)>, Options, f64, bool);

/// A boot: total insns/op and its function rows.
fn boot(total: f64, fs: &[FnRow]) -> PerOp {
    let functions: BTreeMap<String, FnPerOp> = fs
        .iter()
        .map(|(n, i, c, callers)| {
            let callers = callers.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            (
                n.to_string(),
                FnPerOp {
                    insns: *i,
                    calls: *c,
                    locks: 0.0,
                    pauses: 0.0,
                    callers,
                },
            )
        })
        .collect();
    let kernel = fs.iter().filter(|f| !f.0.starts_with('[')).map(|f| f.1).sum();
    PerOp {
        ops: 1000.0,
        total_insns: total,
        kernel_insns: kernel,
        functions,
        contention: None,
    }
}

#[test]
fn ranks_and_calls_only_above_each_functions_threshold() {
    // f_big: large and noisy (range 300), changes by +200: not called
    // f_small: quiet (range 2), changes by +60: called
    // f_new: only in the variant, +80: called
    // f_same: identical: not called
    let base = vec![
        boot(
            100_000.0,
            &[
                ("f_big", 50_000.0, 10.0, &[]),
                ("f_small", 100.0, 2.0, &[("g", 2.0)]),
                ("f_same", 10.0, 1.0, &[]),
            ],
        ),
        boot(
            100_100.0,
            &[
                ("f_big", 50_300.0, 10.0, &[]),
                ("f_small", 102.0, 2.0, &[("g", 2.0)]),
                ("f_same", 10.0, 1.0, &[]),
            ],
        ),
        boot(
            100_050.0,
            &[
                ("f_big", 50_150.0, 10.0, &[]),
                ("f_small", 101.0, 2.0, &[("g", 2.0)]),
                ("f_same", 10.0, 1.0, &[]),
            ],
        ),
    ];
    let variant = vec![
        boot(
            100_300.0,
            &[
                ("f_big", 50_350.0, 10.0, &[]),
                ("f_small", 161.0, 3.0, &[("g", 2.0), ("h", 1.0)]),
                ("f_new", 80.0, 1.0, &[]),
                ("f_same", 10.0, 1.0, &[]),
            ],
        ),
        boot(
            100_280.0,
            &[
                ("f_big", 50_200.0, 10.0, &[]),
                ("f_small", 160.0, 3.0, &[("g", 2.0), ("h", 1.0)]),
                ("f_new", 80.0, 1.0, &[]),
                ("f_same", 10.0, 1.0, &[]),
            ],
        ),
        boot(
            100_310.0,
            &[
                ("f_big", 50_500.0, 10.0, &[]),
                ("f_small", 162.0, 3.0, &[("g", 2.0), ("h", 1.0)]),
                ("f_new", 80.0, 1.0, &[]),
                ("f_same", 10.0, 1.0, &[]),
            ],
        ),
    ];
    let d = diff(&base, &variant, None, &Options::default());
    let got: Vec<(&str, f64, bool)> = d.rows.iter().map(|r| (r.name.as_str(), r.delta, r.called)).collect();
    assert_eq!(
        got,
        vec![
            ("f_new", 80.0, true),
            ("f_small", 60.0, true),
            ("f_big", 200.0, false),
            ("f_same", 0.0, false)
        ],
        "the called rows first, then the rest, each by |delta|"
    );
    let small = &d.rows[1];
    assert_eq!(small.noise, 2.0);
    assert!((small.threshold - 50.025).abs() < 1e-9, "{}", small.threshold); // the 5e-4 floor of the op (100050 insns) beats 3 x 2
    assert_eq!(
        small.calls,
        Pair {
            base: 2.0,
            variant: 3.0
        }
    );
    assert_eq!(
        small.callers[0],
        CallerRow {
            name: "h".into(),
            calls: Pair {
                base: 0.0,
                variant: 1.0
            }
        }
    );
    assert!((small.delta_of_op - 60.0 / 100_050.0).abs() < 1e-12);
    assert!((small.share.base - 101.0 / 100_050.0).abs() < 1e-12);
    let big = &d.rows[2];
    assert_eq!(big.noise, 300.0);
    assert_eq!(d.total.0.median, 100_050.0);
    let text = d.text(10);
    assert!(text.contains("* f_small"), "{text}");
    assert!(text.contains("from h"), "{text}");
    assert!(!text.contains("* f_big"), "{text}");
}

#[test]
fn thresholds_table() {
    // (base boots, variant boots, aa (arm1, arm2) values, options) -> (threshold, called)
    let one = |x: f64| boot(10_000.0, &[("f", x, 1.0, &[])]);
    let two = Options {
        min_boots: 2,
        ..Options::default()
    };
    let cases: Vec<Case> = vec![
        // identical boots: only the floors: max(5e-4*10000=5, 1) = 5
        (vec![100.0, 100.0], vec![106.0, 106.0], None, two.clone(), 5.0, true),
        (vec![100.0, 100.0], vec![104.0, 104.0], None, two.clone(), 5.0, false),
        (
            vec![100.0, 100.0],
            vec![102.0, 102.0],
            None,
            Options {
                rel_floor: 1e-4,
                ..two.clone()
            },
            1.0,
            true,
        ),
        // ... but not with fewer boots than the default asks
        (
            vec![100.0, 100.0],
            vec![106.0, 106.0],
            None,
            Options::default(),
            5.0,
            false,
        ),
        (
            vec![100.0, 100.0, 100.0],
            vec![106.0, 106.0, 106.0],
            None,
            Options::default(),
            5.0,
            true,
        ),
        // a single boot per side is never called
        (
            vec![100.0],
            vec![200.0],
            None,
            Options {
                min_boots: 1,
                ..two.clone()
            },
            5.0,
            true,
        ),
        (vec![100.0], vec![200.0], None, two.clone(), 5.0, false),
        // variant spread counts as noise too (3 x 8)
        (vec![100.0, 100.0], vec![102.0, 110.0], None, two.clone(), 24.0, false),
        // an A/A pair that moved by 5 raises the threshold (3 x 5)
        (
            vec![100.0, 100.0],
            vec![116.0, 116.0],
            Some((vec![100.0, 100.0], vec![105.0, 105.0])),
            two.clone(),
            15.0,
            true,
        ),
        (
            vec![100.0, 100.0],
            vec![114.0, 114.0],
            Some((vec![100.0, 100.0], vec![105.0, 105.0])),
            two.clone(),
            15.0,
            false,
        ),
        // a factor of 1
        (
            vec![100.0, 108.0],
            vec![113.0, 113.0],
            None,
            Options {
                spread_factor: 1.0,
                ..two.clone()
            },
            8.0,
            true,
        ),
        // above the threshold, but the ranges overlap
        (
            vec![100.0, 110.0],
            vec![108.0, 125.0],
            None,
            Options {
                spread_factor: 0.5,
                ..two.clone()
            },
            8.5,
            false,
        ),
        (
            vec![100.0, 110.0],
            vec![108.0, 125.0],
            None,
            Options {
                spread_factor: 0.5,
                separated: false,
                ..two.clone()
            },
            8.5,
            true,
        ),
    ];
    for (b, v, aa, o, threshold, called) in cases {
        let b: Vec<PerOp> = b.into_iter().map(one).collect();
        let v: Vec<PerOp> = v.into_iter().map(one).collect();
        let aa: Option<(Vec<PerOp>, Vec<PerOp>)> =
            aa.map(|(x, y)| (x.into_iter().map(one).collect(), y.into_iter().map(one).collect()));
        let d = diff(&b, &v, aa.as_ref().map(|(x, y)| (x.as_slice(), y.as_slice())), &o);
        let r = &d.rows[0];
        assert_eq!((r.threshold, r.called), (threshold, called), "{b:?} {v:?}");
    }
}

/// Boots of one kernel whose `bits` function sits in one of two modes
/// (100 or 160 insns/op, as a bitmap search does by where the last
/// allocations left it), boot `i` in the high mode when bit `i` of
/// `modes` is set, and a `steady` function that never moves.
fn two_mode_boots(n: usize, modes: u64) -> Vec<PerOp> {
    (0..n)
        .map(|i| {
            boot(
                400_000.0,
                &[
                    ("bits", if modes >> i & 1 == 1 { 160.0 } else { 100.0 }, 5.0, &[]),
                    ("steady", 2000.0, 1.0, &[]),
                ],
            )
        })
        .collect()
}

/// A mode jump looks like a change to 3 boots a side: the rule calls it
/// in the A/A comparisons that put each side in one mode, unless the
/// floor of the op is above the jump; the steady function is never
/// called, and the draws repeat with the seed.
#[test]
fn aa_false_calls_count_the_comparisons_a_mode_jump_fools() {
    let boots = two_mode_boots(12, 0b1010_0110_1001);
    let low = Options {
        rel_floor: 1e-4,
        ..Options::default()
    };
    let a = aa_false_calls(&boots, 3, 500, 7, &low).unwrap();
    // P(one side all low, the other all high) ≈ 2 · (6/12·5/11·4/10) · (6/9·5/8·4/7) ≈ 0.04
    assert!((5..=50).contains(&a.calling), "{a:?}");
    assert_eq!(a.by_function.keys().collect::<Vec<_>>(), vec!["bits"], "{a:?}");
    assert_eq!(a, aa_false_calls(&boots, 3, 500, 7, &low).unwrap());
    // 60 insns is 0.015% of the op: a floor of 0.02% calls nothing
    let floor = aa_false_calls(
        &boots,
        3,
        500,
        7,
        &Options {
            rel_floor: 2e-4,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(floor.calling, 0, "{floor:?}");
    assert_eq!(
        aa_false_calls(&boots, 2, 100, 7, &low).unwrap().calling,
        0,
        "under min_boots nothing is called"
    );
    assert!(
        aa_false_calls(&boots, 7, 10, 7, &low).is_none(),
        "12 boots cannot make two sides of 7"
    );
}

#[test]
fn from_profile_files_end_to_end() {
    let text = |insns: u64| {
        format!(
            "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 0 missing 1\nvcpus 2\ncallers static top 8\n\
             total {} 0 0 0\nkernel {insns} 100 0 0\nf do_x {insns} 100 0 0\nc [indirect] 100\nf [user] 1000 0 0 0\n",
            insns + 1000
        )
    };
    let per = |insns| super::super::parse(&text(insns)).unwrap().per_op(Some(100)).unwrap();
    let d = diff(
        &[per(5000), per(5002), per(5001)],
        &[per(6000), per(6004), per(6002)],
        None,
        &Options::default(),
    );
    assert_eq!(d.rows[0].name, "do_x");
    assert!((d.rows[0].delta - 10.01).abs() < 1e-9, "{}", d.rows[0].delta);
    assert!(d.rows[0].called);
    assert_eq!(
        d.rows[0].calls,
        Pair {
            base: 1.0,
            variant: 1.0
        }
    );
    assert_eq!(d.rows[1].name, "[user]");
    assert!(!d.rows[1].called);
}

/// A boot of seed-like mechanism rows: (name, insns/op, calls/op, locks/op).
fn mech_boot(total: f64, fs: &[(&str, f64, f64, f64)]) -> PerOp {
    let functions = fs
        .iter()
        .map(|(n, i, c, l)| {
            (
                n.to_string(),
                FnPerOp {
                    insns: *i,
                    calls: *c,
                    locks: *l,
                    pauses: 0.0,
                    callers: BTreeMap::new(),
                },
            )
        })
        .collect();
    PerOp {
        ops: 1000.0,
        total_insns: total,
        kernel_insns: total,
        functions,
        contention: None,
    }
}

/// Seed 001's and 002's mechanisms, from the measured rows of
/// docs/measurements/2026-12-01-mechanism-counts.md (boots spread a little
/// around them): `purge_vmap_node` 0.0527 → 104 atomics per op with −12
/// instructions, `down_write` 118 → 130 calls per exec with +60
/// instructions, both under the instruction rule's 0.05% floor; a big
/// noisy function that moves its instructions within its spread and its
/// counts not at all; a row whose calls move by 1 per op only.
fn seed_sides() -> (Vec<PerOp>, Vec<PerOp>) {
    let side = |jit: [f64; 3], variant: bool| -> Vec<PerOp> {
        jit.iter()
            .map(|&j| {
                let (purge_l, dw_c, dw_i, one_c) = if variant {
                    (104.0 + j, 130.0 + j / 10.0, 650.0 + j, 4.0)
                } else {
                    (0.0527, 118.0 + j / 10.0, 591.0 + j, 3.0)
                };
                mech_boot(
                    390_000.0 + j * 10.0,
                    &[
                        (
                            "purge_vmap_node",
                            5087.0 - if variant { 12.0 } else { 0.0 } + j,
                            0.0527,
                            purge_l,
                        ),
                        ("down_write", dw_i, dw_c, 0.0),
                        ("noisy", 50_000.0 + j * 100.0, 10.0, 2.0),
                        ("one_more_call", 300.0 + j, one_c, 0.0),
                    ],
                )
            })
            .collect()
    };
    (side([0.0, 1.0, 2.0], false), side([0.5, 1.5, 2.5], true))
}

#[test]
fn mechanism_rows_under_the_instruction_floor_are_marked_by_the_counts_rule() {
    let (base, variant) = seed_sides();
    let d = diff(&base, &variant, None, &Options::default());
    let got: Vec<(&str, bool, Vec<&str>)> = d
        .rows
        .iter()
        .map(|r| (r.name.as_str(), r.called, r.moved.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("down_write", false, vec!["calls"]),
            ("purge_vmap_node", false, vec!["locks"]),
            ("noisy", false, vec![]),
            ("one_more_call", false, vec![]),
        ],
        "the two mechanism rows marked and ranked first, though `noisy` moved more instructions"
    );
    // shown within the top 2, marked `#` with the count that moved
    let text = d.text(2);
    assert!(
        text.contains("# down_write") && text.contains("# purge_vmap_node"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("# purge_vmap_node") && l.ends_with(" locks")),
        "{text}"
    );
    assert!(!text.contains("noisy"), "{text}");
    // with 2 boots a side nothing is marked
    assert!(diff(&base[..2], &variant[..2], None, &Options::default())
        .rows
        .iter()
        .all(|r| !r.marked()));
}

#[test]
fn counts_rule_table() {
    // (base counts, variant counts, options) -> moved
    let one = |c: f64| mech_boot(10_000.0, &[("f", 100.0, c, 0.0)]);
    let d = Options::default();
    let cases: Vec<(Vec<f64>, Vec<f64>, Options, bool)> = vec![
        (vec![1.0, 1.0, 1.0], vec![3.0, 3.0, 3.0], d.clone(), true), // +2 per op, no spread
        (vec![1.0, 1.0, 1.0], vec![2.9, 2.9, 2.9], d.clone(), false), // under the floor of 2
        (vec![0.0, 1.0, 0.5], vec![3.0, 3.0, 3.0], d.clone(), false), // +2.5, not above 3 x base's range of 1
        (vec![10.0, 11.0, 12.0], vec![16.0, 17.0, 18.0], d.clone(), false), // +6 = 3 x 2: not above
        (vec![10.0, 11.0, 12.0], vec![17.5, 18.0, 18.5], d.clone(), true), // +7 > 3 x 2
        (
            vec![10.0, 10.0, 14.0],
            vec![13.0, 13.0, 13.0],
            Options {
                spread_factor: 0.1,
                ..d.clone()
            },
            false,
        ), // ranges overlap
        (
            vec![10.0, 10.0, 14.0],
            vec![13.0, 13.0, 13.0],
            Options {
                spread_factor: 0.1,
                separated: false,
                ..d.clone()
            },
            true,
        ),
        (vec![1.0, 1.0], vec![5.0, 5.0], d.clone(), false), // 2 boots a side
    ];
    for (i, (b, v, o, moved)) in cases.into_iter().enumerate() {
        let b: Vec<PerOp> = b.into_iter().map(one).collect();
        let v: Vec<PerOp> = v.into_iter().map(one).collect();
        let r = &diff(&b, &v, None, &o).rows[0];
        assert_eq!(!r.moved.is_empty(), moved, "case {i}: {:?}", r.moved);
    }
}

#[test]
fn an_aa_pair_of_the_seed_boots_marks_none_by_either_rule() {
    let (base, _) = seed_sides();
    let (_, variant) = seed_sides();
    let again: Vec<PerOp> = base.iter().rev().cloned().collect();
    let d = diff(&base, &again, None, &Options::default());
    assert!(d.rows.iter().all(|r| !r.marked()), "{}", d.text(10));
    // the variant's boots against themselves resampled: nothing marked
    let mut six = variant.clone();
    six.extend(variant.iter().cloned());
    let a = aa_false_calls(&six, 3, 200, 11, &Options::default()).unwrap();
    assert_eq!((a.calling, a.counts_calling, a.marking), (0, 0, 0), "{a:?}");
}
