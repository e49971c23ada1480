use super::*;
use crate::profile::parse;

/// A window of 10 ops whose contention lines are `x`.
fn window(x: &str) -> String {
    format!(
        "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 10 missing 0\nvcpus 2\ntotal 1000 1 0 0\n\
         kernel 900 1 0 0\nf f 900 1 0 0\nx watch 20 14 rwsem_read,rwsem_write,mutex\n{x}"
    )
}

/// A boot with `counter` RMWs on `counter_x` and `pcpu` acquisitions of
/// `pcpu_lock` in 10 ops, and a heap line whose count is `heap`.
fn boot(counter: u64, pcpu: u64, heap: u64) -> PerOp {
    let mut x = format!(
        "x summary 2 {r} {r} 3 2 {pcpu} {pcpu} 1 1 0 0\nx line heap copy_process 1 2 {heap}\nxf copy_process {heap}\n\
         x lock static pcpu_lock+0x0 spin 1 1 {pcpu} 0 0\nxf pcpu_alloc_noprof {pcpu}\n",
        r = counter + heap
    );
    if counter > 0 {
        x += &format!("x line static counter_x+0x0 1 1 {counter}\nxf copy_process {counter}\n");
    }
    parse(&window(&x)).unwrap().per_op(None).unwrap().contention.unwrap()
}

#[test]
fn reads_the_plugins_lines_and_sums_windows() {
    let text = window(
        "x summary 2 40 12 9 3 30 20 5 2 7 1\nx line static counter_x+0x0 1 1 10\nxf copy_process 10\n\
         x lock heap unlink_file_vma_batch_process rwsem_write 1 2 20 18 3600\nxf unlink_file_vma_batch_process 20\n",
    );
    let p = parse(&text).unwrap();
    let c = p.contention.as_ref().unwrap();
    assert_eq!(
        (c.vcpus, c.rmws, c.lines, c.acqs, c.locks, c.holds),
        (2, (40, 12), (9, 3), (30, 20), (5, 2), (7, 1))
    );
    assert_eq!(c.watch, (20, 14, "rwsem_read,rwsem_write,mutex".to_string()));
    let lock = Key {
        object: Object::Lock("rwsem_write".into()),
        class: Class::Heap,
        name: "unlink_file_vma_batch_process".into(),
    };
    assert_eq!(lock.text(), "heap rwsem_write lock via unlink_file_vma_batch_process");
    let r = &c.rows[&lock];
    assert_eq!(
        (r.objects, r.writers, r.events, r.holds, r.hold_insns),
        (1, 2, 20, 18, 3600)
    );
    let per = p.per_op(None).unwrap().contention.unwrap();
    assert_eq!((per.shared_rmws, per.shared_acqs), (1.2, 2.0));
    assert_eq!(per.rows[&lock].hold, Some(200.0), "instructions per measured hold");
    let s = crate::profile::sum(&[p.clone(), p.clone()])
        .unwrap()
        .contention
        .unwrap();
    assert_eq!(
        (
            s.rmws,
            s.rows[&lock].events,
            s.rows[&lock].funcs["unlink_file_vma_batch_process"]
        ),
        ((80, 24), 40, 40)
    );
    assert!(
        parse("harness-profile 1\nxf f 1\n").is_err(),
        "a function line needs a row"
    );
    assert!(
        parse(&window("x line shared f 1 1 1\n")).is_err(),
        "a class is static or heap"
    );
    assert!(parse(&window("x summary 2 x\n")).is_err());
    assert_eq!(
        parse(&window(""))
            .unwrap()
            .per_op(None)
            .unwrap()
            .contention
            .unwrap()
            .rows
            .len(),
        0
    );
    let plain = text
        .lines()
        .filter(|l| !l.starts_with('x'))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(parse(&plain).unwrap().contention, None, "no x lines, no contention");
}

#[test]
fn a_new_global_atomic_is_more_contention_and_names_its_line() {
    let base: Vec<PerOp> = (0..5).map(|i| boot(0, 10, 30 + i % 2)).collect();
    let var: Vec<PerOp> = (0..5).map(|i| boot(10, 10, 30 + i % 2)).collect();
    let d = diff(&base, &var, &Options::default());
    assert_eq!(d.verdict, Verdict::More);
    let called: Vec<&str> = d.called().map(|r| r.text.as_str()).collect();
    assert_eq!(called, ["line counter_x+0x0"]);
    assert_eq!(
        d.summary(2),
        "more contention: +1.00 shared-line RMW per op on line counter_x+0x0 (copy_process)"
    );
    assert_eq!(d.varying, 1, "the heap row's counts differ between boots");
    let back = diff(&var, &base, &Options::default());
    assert_eq!(
        (back.verdict, back.summary(1).starts_with("less contention: -1.00")),
        (Verdict::Less, true)
    );
}

#[test]
fn the_rule_table() {
    // (base and variant pcpu_lock acquisitions in 10 ops per boot, verdict)
    type Case = (&'static [u64], &'static [u64], Verdict);
    let cases: &[Case] = &[
        (&[10, 10, 10], &[40, 40, 40], Verdict::More), // seed 000 reverted: 1 -> 4 per op
        (&[40, 40, 40], &[10, 10, 10], Verdict::Less),
        (&[10, 10, 10], &[10, 10, 10], Verdict::Same),       // A/A
        (&[10, 10], &[40, 40], Verdict::Same),               // too few boots
        (&[10, 10, 10], &[14, 14, 14], Verdict::Same),       // +0.4 per op: under the floor
        (&[10, 10, 10], &[17, 17, 17], Verdict::Same),       // +0.7 per op: under the floor
        (&[10, 10, 10], &[18, 18, 18], Verdict::More),       // +0.8 per op: over it
        (&[10, 20, 10], &[30, 30, 30], Verdict::Same),       // +2 per op, noise 1: under 3 x noise
        (&[10, 20, 10], &[50, 50, 50], Verdict::More),       // +4 per op over 3 x noise
        (&[100, 100, 100], &[108, 108, 108], Verdict::Same), // +0.8 of 10 per op: under 10% of base
        (&[10, 10, 30], &[35, 35, 25], Verdict::Same),       // ranges overlap
    ];
    for (b, v, want) in cases {
        let base: Vec<PerOp> = b.iter().map(|&n| boot(0, n, 30)).collect();
        let var: Vec<PerOp> = v.iter().map(|&n| boot(0, n, 30)).collect();
        let d = diff(&base, &var, &Options::default());
        assert_eq!(d.verdict, *want, "{b:?} -> {v:?}: {:?}", d.rows.first());
    }
}

#[test]
fn a_heap_row_is_called_from_five_boots_a_side_and_held_back_below() {
    // the heap line via copy_process: 1.0 -> 4.0 per op, no spread; the
    // static lock steady
    let side = |n: usize, heap: u64| -> Vec<PerOp> { (0..n).map(|_| boot(0, 10, heap)).collect() };
    for (boots, verdict, held) in [
        (3, Verdict::Same, true),
        (4, Verdict::Same, true),
        (5, Verdict::More, false),
    ] {
        let d = diff(&side(boots, 10), &side(boots, 40), &Options::default());
        assert_eq!(d.verdict, verdict, "{boots} boots a side");
        let r = &d.rows[0];
        assert_eq!(
            (r.text.as_str(), r.called, r.held_back, r.mark()),
            ("heap line via copy_process", !held, held, if held { '?' } else { '*' }),
            "{boots} boots a side"
        );
        assert_eq!(d.held_back().is_some(), held, "{boots} boots a side");
    }
    let d = diff(&side(3, 10), &side(3, 40), &Options::default());
    assert!(
        d.held_back()
            .unwrap()
            .contains("1 heap row(s) (marked ?) moved beyond their spread but are not called")
            && d.held_back()
                .unwrap()
                .contains("called from 5 boots a side (this cell has 3)"),
        "{:?}",
        d.held_back()
    );
    // a static row is called from three; with two nothing is held back either
    let d = diff(&[boot(0, 10, 10), boot(0, 10, 10)], &side(2, 40), &Options::default());
    assert_eq!((d.verdict, d.held_back()), (Verdict::Same, None));
}

#[test]
fn a_lock_row_carries_its_hold_and_functions() {
    let with_hold = |acqs: u64, hold: u64| {
        let x = format!(
            "x summary 2 0 0 0 0 {acqs} {acqs} 1 1 {acqs} 0\nx lock static tasklist_lock+0x0 read 1 1 {acqs} {acqs} {}\n\
             xf do_prlimit {acqs}\n",
            acqs * hold
        );
        parse(&window(&x)).unwrap().per_op(None).unwrap().contention.unwrap()
    };
    let base: Vec<PerOp> = (0..3).map(|_| with_hold(30, 120)).collect();
    let var: Vec<PerOp> = (0..3).map(|_| with_hold(0, 0)).collect();
    let d = diff(&base, &var, &Options::default());
    let r = &d.rows[0];
    assert_eq!(
        (r.text.as_str(), r.delta, r.called),
        ("read lock tasklist_lock+0x0", -3.0, true)
    );
    assert_eq!(
        r.hold,
        Some(Pair {
            base: 120.0,
            variant: 0.0
        })
    );
    assert_eq!(r.funcs[0].0, "do_prlimit");
    assert_eq!(
        d.summary(3),
        "less contention: -3.00 shared-lock acquisition per op on read lock tasklist_lock+0x0 (do_prlimit)"
    );
}

#[test]
fn a_window_that_saw_fewer_vcpus_says_so() {
    let base: Vec<PerOp> = (0..3).map(|_| boot(0, 10, 30)).collect();
    let d = diff(&base, &base, &Options::default());
    assert_eq!(d.vcpus, (2, 2));
    assert_eq!(d.short_of(2), None);
    let n = d.short_of(8).unwrap();
    assert!(n.contains("only 2 of 8 vCPUs did an atomic or took a lock"), "{n}");
}

#[test]
fn aa_false_calls_count_the_comparisons_a_heap_mode_jump_fools() {
    // twelve boots of one kernel: the static rows never move; the heap line
    // has two modes (10 or 40 RMWs in 10 ops) as the scheduler places tasks
    let steady: Vec<PerOp> = (0..12).map(|_| boot(10, 40, 10)).collect();
    let a = aa_false_calls(&steady, 3, 200, 7, &Options::default()).unwrap();
    assert_eq!((a.trials, a.calling, a.by_row.len()), (200, 0, 0));
    let modes: Vec<PerOp> = (0..12).map(|i| boot(10, 40, if i < 6 { 10 } else { 40 })).collect();
    let a = aa_false_calls(&modes, 5, 400, 7, &Options::default()).unwrap();
    // five boots a side from one mode against five of the other: the
    // line's median moves by 3 per op with no spread on either side
    assert!(a.calling > 0 && a.calling < 400, "{a:?}");
    assert_eq!((a.heap_calling, a.static_calling), (a.calling, 0));
    assert_eq!(a.by_row.keys().collect::<Vec<_>>(), ["heap line via copy_process"]);
    assert_eq!(
        a,
        aa_false_calls(&modes, 5, 400, 7, &Options::default()).unwrap(),
        "seeded"
    );
    // at three a side the heap row is held back, never called
    assert_eq!(
        aa_false_calls(&modes, 3, 400, 7, &Options::default()).unwrap().calling,
        0
    );
    assert!(
        aa_false_calls(&modes, 7, 10, 7, &Options::default()).is_none(),
        "14 boots wanted"
    );
}

/// `text` as the plugin writes format 2: its version, then its trailer.
fn sealed(text: &str) -> String {
    let t = text.replacen("harness-profile 1", "harness-profile 2", 1);
    format!("{t}end {}\n", t.lines().count())
}

#[test]
fn a_profile_cut_short_or_missing_contention_lines_is_refused() {
    let x = "x summary 2 12 12 3 2 5 5 1 1 0 0\nx line heap copy_process 1 2 2\nxf copy_process 2\n\
             x line static counter_x+0x0 1 2 10\nxf copy_process 9\nxf [rest] 1\n\
             x lock static pcpu_lock+0x0 spin 1 2 5 0 0\nxf pcpu_alloc_noprof 5\n";
    let whole = sealed(&window(x));
    let p = parse(&whole).unwrap();
    assert_eq!(p.contention.unwrap().rows.len(), 3);
    // cut at every line boundary: refused, never read as fewer rows
    let lines: Vec<&str> = whole.lines().collect();
    for cut in 1..lines.len() {
        let e = parse(&(lines[..cut].join("\n") + "\n")).unwrap_err().to_string();
        assert!(e.contains("cut short"), "cut after {cut} lines: {e}");
    }
    // a row, or one of a row's functions, dropped with the trailer made to match
    for dropped in [
        "x line static counter_x+0x0 1 2 10\n",
        "x lock static pcpu_lock+0x0 spin 1 2 5 0 0\n",
        "xf [rest] 1\n",
    ] {
        let e = parse(&sealed(&window(&x.replacen(dropped, "", 1))))
            .unwrap_err()
            .to_string();
        assert!(e.contains("were lost or changed"), "without {dropped}: {e}");
    }
    let miscounted = whole.replace(&format!("end {}", lines.len() - 1), "end 99");
    assert!(parse(&miscounted).unwrap_err().to_string().contains("which says 99"));
    // format 1 (older runs) has no trailer and is read as it was
    assert_eq!(parse(&window(x)).unwrap().contention.unwrap().rows.len(), 3);
}
