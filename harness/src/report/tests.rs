//! Tests of the report model: cells, comparisons, the BH pass, text and CSV; fixtures other modules' tests share.
use super::*;
use crate::records::{Cause, Event, Failed, Host, RunMeta, Sample, Stage};
use crate::stats::Verdict;

pub(crate) fn meta_with(variants: &[&str], sampling: &str) -> RunMeta {
    let vs: String = variants.iter().map(|v| format!("  - name: {v}\n")).collect();
    let y = format!("variants:\n{vs}vcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\nsampling: {sampling}\nkey_metrics: [d]\n");
    RunMeta {
        uid: None,
        wall_lock: None,
        format_version: crate::records::FORMAT_VERSION,
        id: "r".into(),
        started: "t".into(),
        matrix: crate::config::parse(&y, std::path::Path::new("/x/m.yaml"), None).unwrap(),
        host: Host {
            hostname: "h".into(),
            cpus: 2,
            ..Host::default()
        },
        harness_revision: None,
        clock: None,
        inputs: None,
        jobs: None,
    }
}

pub(crate) fn sample(variant: &str, boot_id: &str, rep: u32, value: f64, warmup: bool) -> Sample {
    Sample {
        variant: variant.into(),
        vcpus: 2,
        benchmark: "d".into(),
        params: serde_json::json!({}),
        metric: "execs_per_s".into(),
        unit: "execs/s".into(),
        higher_is_better: true,
        boot_id: boot_id.into(),
        boot: 0,
        repetition: rep,
        warmup,
        value,
        series: vec![],
        cpu: None,
        clock: None,
        timestamp: "t".into(),
    }
}

pub(crate) fn boot(variant: &str, boot_id: &str, error: Option<&str>) -> Event {
    Event::Boot {
        variant: variant.into(),
        vcpus: 2,
        boot: 0,
        boot_id: boot_id.into(),
        accel: crate::records::Accel::Tcg,
        clock: None,
        wall_per_guest_s: None,
        cmdline: String::new(),
        image: "vmlinux".into(),
        overcommit: 1.0,
        ready_s: Some(1.0),
        env: None,
        error: error.map(str::to_string),
        findings: vec![],
        retried: false,
        failed: None,
    }
}

pub(crate) fn boot_end(variant: &str, boot_id: &str, error: Option<&str>) -> Event {
    Event::BootEnd {
        variant: variant.into(),
        vcpus: 2,
        boot: 0,
        boot_id: Some(boot_id.into()),
        findings: vec![],
        error: error.map(str::to_string),
        busy_wall_per_guest_s: None,
        failed: None,
    }
}

/// `boots` ended boots of `variant`, 1 warm-up and 2 measured repetitions
/// each, boot `b` at `level * (1 + spread(b))`.
pub(crate) fn boots(variant: &str, n: u32, level: f64, out: &mut (Vec<Sample>, Vec<Event>)) {
    for b in 0..n {
        let id = format!("{variant}-2cpu-b{b}");
        let v = level * (1.0 + 0.004 * b as f64);
        out.1.push(boot(variant, &id, None));
        out.0.push(sample(variant, &id, 0, 1.0, true));
        out.0.push(sample(variant, &id, 1, v * 0.999, false));
        out.0.push(sample(variant, &id, 2, v * 1.001, false));
        out.1.push(boot_end(variant, &id, None));
    }
}

fn verdict_of(r: &Report, ci: usize) -> Decision {
    r.rows[0].cells[ci].decision.unwrap()
}

#[test]
fn cells_are_boots_with_verdicts_failures_and_gate() {
    let meta = meta_with(&["base", "slow", "broken"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("slow", 5, 80.0, &mut rec);
    rec.1.push(Event::Build {
        variant: "broken".into(),
        key: None,
        build_s: 0.0,
        cached: false,
        release: None,
        errors: vec!["x.c:1: error: y".into()],
        error: Some("build failed: x.c:1: error: y".into()),
        failed: None,
    });
    for boot in 0..5 {
        // what the pipeline records for the boots of a variant that never built
        rec.1.push(Event::BootEnd {
            variant: "broken".into(),
            vcpus: 2,
            boot,
            boot_id: None,
            findings: vec![],
            error: Some("build failed".into()),
            busy_wall_per_guest_s: None,
            failed: None,
        });
    }
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let base = &r.rows[0].cells[0];
    assert_eq!(
        (base.n, base.reps_per_boot.clone(), base.n_warmup),
        (5, vec![2; 5], 5),
        "5 boots × 2, warm-up kept apart"
    );
    assert_eq!(
        (base.values.len(), base.boots.len()),
        (10, 5),
        "raw values kept for plots, one value per boot for the test"
    );
    assert!(
        (base.boots[1] - 100.4).abs() < 1e-9,
        "a boot's value is its median repetition"
    );
    let slow = verdict_of(&r, 1);
    assert_eq!((slow.verdict, slow.n_base, slow.n_new), (Verdict::Regressed, 5, 5));
    assert!((slow.p.unwrap() - 2.0 / 252.0).abs() < 1e-9, "the test counts boots");
    let text = cell_text(&r.rows[0].cells[1]);
    assert!(
        text.contains("n=5 boots×2")
            && text.contains("worse by 20.0% +0.9/−1.0")
            && text.contains("regressed (p=0.008 q=0.008"),
        "{text}"
    );
    assert!(
        text.contains("range [") && text.contains("<6 boots: no 95% CI"),
        "{text}"
    );
    let broken = &r.rows[0].cells[2];
    assert!(
        cell_text(broken).starts_with("FAILED: build failed: x.c:1: error: y"),
        "{}",
        cell_text(broken)
    );
    assert_eq!(
        broken.decision.unwrap().verdict,
        Verdict::Insufficient,
        "a variant that never built is FAILED, not a failure rate"
    );
    assert_eq!(broken.boots_ended, 0);
    let g = report_gate(&r, &["d".to_string()]);
    assert_eq!((g.failures.len(), g.warnings.len()), (1, 0));
    assert!(
        g.failures[0].starts_with("slow execs_per_s at 2 vCPUs (d): worse by 20.0%"),
        "{g:?}"
    );
    assert!(report_gate(&r, &["other".to_string()]).failures.is_empty());
    let c = csv(&r);
    assert_eq!(c.lines().count(), 4);
    assert!(c.lines().nth(2).unwrap().contains(",regressed,0,5,"), "{c}");
    assert!(table(&r).contains("regressed") && r.rule_text.contains("unit: the boot"));
    assert!(r.complete, "every planned boot job ended");
}

/// Round five: a key metric that matched no row fails the gate in one line
/// naming the metrics its benchmark did report (the misspelt key passed a
/// regressed run in silence); a key naming a benchmark keeps its meaning.
#[test]
fn a_key_metric_that_matched_no_cell_fails_the_gate() {
    let meta = meta_with(&["base", "slow"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("slow", 5, 80.0, &mut rec);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let gate = |k: &str| report_gate(&r, &[k.to_string()]);
    for k in ["d", "d.execs_per_s"] {
        let g = gate(k);
        assert!(
            g.failures.len() == 1 && g.failures[0].starts_with("slow execs_per_s"),
            "{k}: {g:?}"
        );
    }
    assert_eq!(
        gate("other"),
        Gate::default(),
        "a benchmark key that matches nothing is as before"
    );
    assert_eq!(
        gate("d.execs_per_sec").failures,
        ["key metric `d.execs_per_sec` matched no cell: d reported execs_per_s in this run"]
    );
    assert!(gate("d.execs_per_sec").fails(false));
    assert_eq!(
        gate("gone.rate").failures,
        ["key metric `gone.rate` matched no cell: gone reported no metric in this run"]
    );
    let x = render::junit::junit(&r, &["d.execs_per_sec".into()], false);
    assert!(
        x.contains(r#"failures="1""#) && x.contains(r#"<testcase classname="d.execs_per_sec" name="matched no cell">"#),
        "{x}"
    );
}

#[test]
fn resumed_boots_count_once() {
    let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("v", 5, 100.0, &mut rec);
    // v's boot 0 ran as v-2cpu-b0.2 after --resume ...
    for x in rec.0.iter_mut().filter(|x| x.boot_id == "v-2cpu-b0") {
        x.boot_id = "v-2cpu-b0.2".into();
    }
    for ev in rec.1.iter_mut() {
        match ev {
            Event::Boot { boot_id, .. } if boot_id == "v-2cpu-b0" => *boot_id = "v-2cpu-b0.2".into(),
            Event::BootEnd { boot_id: Some(id), .. } if id == "v-2cpu-b0" => *id = "v-2cpu-b0.2".into(),
            _ => {}
        }
    }
    // ... because the first attempt was cut off after one repetition (no boot_end)
    rec.1.insert(0, boot("v", "v-2cpu-b0", None));
    rec.0.splice(
        0..0,
        [
            sample("v", "v-2cpu-b0", 0, 1.0, true),
            sample("v", "v-2cpu-b0", 1, 50.0, false),
        ],
    );
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let v = &r.rows[0].cells[1];
    assert_eq!(
        (v.n, v.values.len()),
        (5, 10),
        "the cut-off boot's repetition is not counted"
    );
    assert!(!v.values.contains(&50.0));
    assert_eq!(
        (v.boots_ended, v.boots_failed),
        (5, 0),
        "the cut-off boot is neither a unit nor a failure"
    );
    assert_eq!(verdict_of(&r, 1).failures, None);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("not counted") && n.contains("v-2cpu-b0")),
        "{:?}",
        r.notes
    );
}

/// A boot whose QEMU crashed before SSH and was started again is shown
/// (note, boots table) but is no failure of the kernel's cell; a boot
/// that failed for good still is.
#[test]
fn a_qemu_crash_that_was_retried_is_not_the_kernels_failure() {
    let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    let crash = "QEMU died from signal 6 (SIGABRT) before SSH came up: qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion failed.";
    let mut crashed = boot("v", "v-2cpu-b0", Some(crash));
    if let Event::Boot { retried, .. } = &mut crashed {
        *retried = true;
    }
    rec.1.push(crashed.clone());
    boots("v", 5, 100.0, &mut rec);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let v = &r.rows[0].cells[1];
    assert_eq!((v.n, v.boots_ended, v.boots_failed, v.failure.clone()), (5, 5, 0, None));
    assert!(!cell_text(v).contains("failed"), "{}", cell_text(v));
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("v-2cpu-b0: QEMU died from signal 6") && n.contains("started again")),
        "{:?}",
        r.notes
    );
    let shown: Vec<_> = r.boots.iter().filter_map(|b| b.error.as_deref()).collect();
    assert!(
        shown.len() == 1 && shown[0].ends_with("(started again)"),
        "the crashed attempt stays in the boots table: {shown:?}"
    );
    // the same crash, not retried (attempts used up), is the cell's failure
    if let Event::Boot { retried, .. } = &mut crashed {
        *retried = false;
    }
    rec.1.retain(|e| !matches!(e, Event::Boot { error: Some(_), .. }));
    rec.1.push(crashed);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let f = r.rows[0].cells[1].failure.as_ref().map(|f| f.text.as_str());
    assert_eq!(f, Some(crash));
}

/// Issue 11 item 8: a build that failed (an interrupted `make` recorded
/// as a failure by an older harness) and was built by `--resume` leaves
/// no failure on the variant's cells.
#[test]
fn a_failure_repaired_by_resume_is_not_shown() {
    let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    let build = |error: Option<&str>| Event::Build {
        variant: "v".into(),
        key: None,
        build_s: 0.0,
        cached: false,
        release: None,
        errors: vec![],
        error: error.map(String::from),
        failed: None,
    };
    rec.1.push(Event::Config {
        variant: "v".into(),
        lost: vec![],
        error: None,
        failed: None,
    });
    rec.1.push(build(Some(
        "build failed: make: *** [Makefile:224: __sub-make] Interrupt",
    )));
    // --resume: configured and built again
    rec.1.push(Event::Config {
        variant: "v".into(),
        lost: vec![],
        error: None,
        failed: None,
    });
    rec.1.push(build(None));
    boots("base", 5, 100.0, &mut rec);
    boots("v", 5, 100.0, &mut rec);
    // one boot of v lost a repetition: its failure text is its own
    rec.0.retain(|x| !(x.boot_id == "v-2cpu-b3" && x.repetition == 2));
    rec.1.push(Event::BenchFailed {
        variant: "v".into(),
        vcpus: 2,
        benchmark: "d".into(),
        boot_id: "v-2cpu-b3".into(),
        repetition: 2,
        error: "killed at its 60 s timeout".into(),
        failed: Some(Failed::new(Stage::Benchmark, Cause::BenchTimeout)),
    });
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let v = &r.rows[0].cells[1];
    let f = v.failure.clone().expect("the cell's failure");
    assert_eq!(f.text, "killed at its 60 s timeout");
    assert_eq!(
        f.failed,
        Some(Failed::new(Stage::Benchmark, Cause::BenchTimeout)),
        "the report keeps the recorded stage and cause"
    );
    let text = cell_text(v);
    assert!(
        !text.contains("build failed") && text.contains("(failed in 1/5 boots: killed at"),
        "{text}"
    );
    // the same run without the failed boot shows no failure at all
    rec.1.retain(|e| !matches!(e, Event::BenchFailed { .. }));
    rec.0.push(sample("v", "v-2cpu-b3", 2, 100.0, false));
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let v = &r.rows[0].cells[1];
    assert_eq!((v.failure.clone(), v.boots_failed), (None, 0), "{}", cell_text(v));
    assert!(!cell_text(v).contains("fail"), "{}", cell_text(v));
}

#[test]
fn unsure_warns_and_fails_the_gate_only_when_strict() {
    let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("v", 5, 97.9, &mut rec); // 2.1% slower, every boot below every base boot
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let d = verdict_of(&r, 1);
    let ci = d.ratio.unwrap();
    assert_eq!(d.verdict, Verdict::Unsure, "{d:?}");
    assert!(ci.lo < 0.98 && ci.hi > 0.98 && d.may_regress(), "{ci:?}");
    assert!(
        decision_text(&d).contains("unsure: needs more boots (p=0.008 q=0.008, threshold 2.0%)"),
        "{}",
        decision_text(&d)
    );
    let g = report_gate(&r, &[]);
    assert!(g.failures.is_empty() && g.warnings.len() == 1, "{g:?}");
    assert!(!g.fails(false) && g.fails(true));
}

#[test]
fn failing_more_often_is_reported_not_thinned() {
    let meta = meta_with(&["base", "flaky", "hangs"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("flaky", 5, 100.0, &mut rec);
    // flaky: the second repetition of 3 boots timed out
    let timed_out = ["flaky-2cpu-b0", "flaky-2cpu-b1", "flaky-2cpu-b2"];
    rec.0
        .retain(|s| !(s.repetition == 2 && timed_out.contains(&s.boot_id.as_str())));
    for boot_id in timed_out.map(String::from) {
        rec.1.push(Event::BenchFailed {
            variant: "flaky".into(),
            vcpus: 2,
            benchmark: "d".into(),
            boot_id,
            repetition: 2,
            error: "killed at its 60 s timeout".into(),
            failed: None,
        });
    }
    // hangs: no boot ever comes up
    for b in 0..5 {
        let id = format!("hangs-2cpu-b{b}");
        rec.1.push(boot("hangs", &id, Some("no SSH within 300 s")));
        rec.1
            .push(boot_end("hangs", &id, Some("boot failed: no SSH within 300 s")));
    }
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let flaky = &r.rows[0].cells[1];
    assert_eq!(
        (flaky.n, flaky.boots_failed, flaky.boots_ended),
        (5, 3, 5),
        "boots that failed keep what they measured"
    );
    let d = flaky.decision.unwrap();
    let f = d.failures.unwrap();
    // 3/5 against 0/5 has Fisher p 0.083: marked "fails more?", not the headline
    assert_eq!(
        (d.verdict, f.counts.failed, f.counts.base_failed, f.significant),
        (d.performance, 3, 0, false)
    );
    assert_ne!(d.verdict, Verdict::FailsMore);
    assert!(
        cell_text(flaky).contains("fails more?: 3/5 boots failed vs base 0/5 (Fisher p=0.083 q=0.083)"),
        "{}",
        cell_text(flaky)
    );
    let hangs = r.rows[0].cells[2].decision.unwrap();
    assert_eq!(
        (hangs.verdict, hangs.performance),
        (Verdict::FailsMore, Verdict::Insufficient)
    );
    assert!(hangs.failures.unwrap().significant);
    let g = report_gate(&r, &[]);
    assert_eq!((g.failures.len(), g.warnings.len()), (1, 1), "{g:?}");
    assert!(g.failures[0].starts_with("hangs") && g.warnings[0].starts_with("flaky"));
    assert!(csv(&r).lines().nth(2).unwrap().contains(",3,5,"), "{}", csv(&r));
    assert!(
        csv(&r).lines().nth(3).unwrap().contains(",fails more,5,5,"),
        "{}",
        csv(&r)
    );
}

#[test]
fn thresholds_apply_per_metric_and_a_calibrated_floor_is_not_added() {
    let mut meta = meta_with(&["base", "slow"], "{boots: 5, repetitions: 2}");
    meta.matrix.statistics.thresholds.insert("d.execs_per_s".into(), 0.25);
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("slow", 5, 80.0, &mut rec);
    let wall: Vec<Sample> = rec
        .0
        .iter()
        .map(|s| Sample {
            metric: "wall_s".into(),
            unit: "s".into(),
            higher_is_better: false,
            ..s.clone()
        })
        .collect();
    rec.0.extend(wall);
    // a calibrated A/A floor of 30% for wall_s: a noise band, which the
    // interval already carries; it does not raise the threshold
    let mut floors = Floors::none("test floors");
    floors.by_cell.insert(("d".into(), "wall_s".into(), 2), 0.30);
    let r = build_from(&meta, &rec.0, &rec.1, &floors);
    let row = |m: &str| r.rows.iter().find(|x| x.metric == m).unwrap();
    assert_eq!((row("execs_per_s").floor, row("wall_s").floor), (0.25, 0.02));
    let execs = row("execs_per_s").cells[1].decision.unwrap();
    let wall = row("wall_s").cells[1].decision.unwrap();
    assert_eq!(
        (execs.verdict, execs.floor),
        (Verdict::Small, 0.25),
        "a 20% drop inside its declared 25% threshold"
    );
    assert_eq!(
        (wall.verdict, wall.floor),
        (Verdict::Improved, 0.02),
        "the other metric keeps 2%, calibration or not"
    );
    assert!(r.rule_text.contains("test floors") && table(&r).contains("floors: test floors"));
}

/// Six boots a side of `base` and `v`, `v` within ±3% of base: a cell
/// no verdict decides, whose interval reaches past 2%.
fn undecided_pair() -> (Vec<Sample>, Vec<Event>) {
    let mut rec = (Vec::new(), Vec::new());
    let v = [97.0, 103.0, 99.0, 101.5, 98.0, 102.0];
    for (i, x) in [100.0, 101.0, 99.0, 100.5, 99.5, 100.2].iter().enumerate() {
        rec.0.push(sample("base", &format!("base-2cpu-b{i}"), 1, *x, false));
        rec.0.push(sample("v", &format!("v-2cpu-b{i}"), 1, v[i], false));
        for v in ["base", "v"] {
            let id = format!("{v}-2cpu-b{i}");
            rec.1.push(boot(v, &id, None));
            rec.1.push(boot_end(v, &id, None));
        }
    }
    rec
}

#[test]
fn the_report_prints_what_a_regressed_call_can_detect() {
    let meta = meta_with(&["base", "v"], "{boots: 6, repetitions: 1}");
    let rec = undecided_pair();
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let d = verdict_of(&r, 1);
    let det = d.detectable.unwrap();
    // the threshold plus the interval's reach: above 2%, and the figure printed
    assert_eq!(d.verdict, Verdict::NotSignificant);
    assert!(det > 0.02 && det < 0.08, "{det}");
    assert!(
        r.detectable
            .starts_with(&format!("regressed calls: a true change of {:.1}%", det * 100.0)),
        "{}",
        r.detectable
    );
    assert!(
        cell_text(&r.rows[0].cells[1]).contains(&format!("a regressed call needs {:.1}%", det * 100.0)),
        "{}",
        cell_text(&r.rows[0].cells[1])
    );
    assert!(table(&r).contains("regressed calls:"));
    let mut staged = meta.clone();
    staged.matrix.statistics.second_stage_boots = 6;
    let r2 = build_from(&staged, &rec.0, &rec.1, &Floors::none("none"));
    assert!(
        r2.detectable.contains("with the second stage's 6 more boots per arm") && r2.detectable.contains("Pocock"),
        "{}",
        r2.detectable
    );
}

/// Issue 46: the second stage picks its cells from the report the gate
/// judges, with the calibrated floors (`finish::second_stage`). A
/// calibrated floor is a noise band the interval already carries, never a
/// raised threshold, so the cells sent are those a report without floors
/// sends: picking with or without them cannot disagree with the gate.
#[test]
fn calibrated_floors_do_not_move_the_cells_the_second_stage_sends() {
    let mut meta = meta_with(&["base", "v"], "{boots: 6, repetitions: 1}");
    meta.matrix.statistics.second_stage_boots = 6;
    let rec = undecided_pair();
    let without = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let mut floors = Floors::none("test floors");
    let row = &without.rows[0];
    floors
        .by_cell
        .insert((row.benchmark.clone(), row.metric.clone(), row.vcpus), 0.30);
    let with = build_from(&meta, &rec.0, &rec.1, &floors);
    let sent = super::second_stage_cells(&without);
    assert!(!sent.is_empty(), "the cell is undecided and reaches past 2%");
    assert_eq!(super::second_stage_cells(&with), sent);
}

#[test]
fn csv_quotes_guest_text() {
    use super::render::text::csv;
    let meta = meta_with(&["base", "broken"], "{boots: 1, repetitions: 1}");
    let events = vec![
        Event::Build {
            variant: "broken".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec![],
            error: Some("exited with 1: \"x\", then\nline 2".into()),
            failed: None,
        },
        boot("base", "b0", None),
        boot_end("base", "b0", None),
    ];
    let mut samples = vec![sample("base", "b0", 1, 1.0, false)];
    samples[0].unit = "ops,\"s\"".into();
    let c = csv(&build_from(&meta, &samples, &events, &Floors::none("none")));
    // a strict RFC 4180 reader: every row has the header's fields, the failure intact
    let rows = parse_csv(&c);
    let header = "benchmark,metric,unit,higher_is_better,vcpus,variant,boots,reps,median,ci_lo,ci_hi,ci_exact,\
                  ratio,ratio_lo,ratio_hi,worse_by,worse_lo,worse_hi,p,q,floor,mde,verdict,boots_failed,boots_ended,failure";
    assert_eq!(
        c.lines().next(),
        Some(header),
        "the header is the record's fields, in order"
    );
    let width = header.split(',').count();
    assert!(rows.iter().all(|r| r.len() == width), "{rows:?}");
    let broken = rows.iter().find(|r| r[5] == "broken").unwrap();
    assert!(
        broken[width - 1].ends_with("exited with 1: \"x\", then\nline 2"),
        "{broken:?}"
    );
    assert_eq!(broken[2], "ops,\"s\"");
    let base = rows.iter().find(|r| r[5] == "base").unwrap();
    assert_eq!(
        (base[3].as_str(), base[6].as_str(), base[8].as_str(), base[20].as_str()),
        ("true", "1", "1", "0.02"),
        "numbers as Rust prints them"
    );
    assert!(
        csv(&Report {
            rows: vec![],
            ..build_from(&meta, &samples, &events, &Floors::none("none"))
        }) == format!("{header}\n"),
        "no cells: the header alone"
    );
}

fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field, mut quoted, mut chars) =
        (vec![], vec![], String::new(), false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

/// `boots("v", …)` with one boot's end carrying a console finding of `kind`.
fn with_finding(rec: &mut (Vec<Sample>, Vec<Event>), variant: &str, boot: u32, kind: crate::records::Trouble) {
    let id = format!("{variant}-2cpu-b{boot}");
    for e in rec.1.iter_mut() {
        if let Event::BootEnd {
            boot_id: Some(b),
            findings,
            ..
        } = e
        {
            if *b == id {
                findings.push(crate::records::Finding {
                    kind,
                    line: "Oops: 0000 [#1] SMP".into(),
                    signature: format!("{kind:?}: do_exit"),
                });
            }
        }
    }
}

/// Issue 21: one kernel fault in the variant's boots and none in base's
/// fails the gate by itself, whatever the measurements and Fisher say; a
/// fault in base too, or a soft lockup (overcommit), does not.
#[test]
fn a_kernel_fault_in_the_variant_only_fails_the_gate() {
    use crate::records::Trouble;
    let meta = meta_with(&["base", "oops", "both", "lockup"], "{boots: 7, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    for v in ["base", "oops", "both", "lockup"] {
        boots(v, 7, 100.0, &mut rec);
    }
    with_finding(&mut rec, "oops", 3, Trouble::Oops);
    with_finding(&mut rec, "both", 1, Trouble::Panic);
    with_finding(&mut rec, "base", 5, Trouble::Panic);
    with_finding(&mut rec, "lockup", 2, Trouble::SoftLockup);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let faults: Vec<usize> = r.rows[0].cells.iter().map(|c| c.kernel_faults).collect();
    assert_eq!(faults, vec![1, 1, 1, 0]);
    let g = report_gate(&r, &[]);
    assert_eq!(g.failures.len(), 0, "base faulted too: {g:?}");
    let mut rec2 = (Vec::new(), Vec::new());
    for v in ["base", "oops", "both", "lockup"] {
        boots(v, 7, 100.0, &mut rec2);
    }
    with_finding(&mut rec2, "oops", 3, Trouble::Oops);
    with_finding(&mut rec2, "lockup", 2, Trouble::SoftLockup);
    let r = build_from(&meta, &rec2.0, &rec2.1, &Floors::none("none"));
    let g = report_gate(&r, &[]);
    assert_eq!(g.failures.len(), 1, "{g:?}");
    assert!(
        g.failures[0].starts_with("oops")
            && g.failures[0].contains("kernel faults (panic, oops, BUG, hang) in 1 of its boots and in none of base's"),
        "{g:?}"
    );
}

/// Issue 21: 1 failed boot of 7 against 0 of 7 (Fisher p 0.5) is "fails
/// more?" and a gate warning, not the headline.
#[test]
fn one_failure_in_seven_is_fails_more_with_a_question_mark() {
    let meta = meta_with(&["base", "flaky"], "{boots: 7, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 7, 100.0, &mut rec);
    boots("flaky", 7, 100.0, &mut rec);
    rec.1.push(Event::BenchFailed {
        variant: "flaky".into(),
        vcpus: 2,
        benchmark: "d".into(),
        boot_id: "flaky-2cpu-b4".into(),
        repetition: 2,
        error: "exit 1".into(),
        failed: None,
    });
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let d = r.rows[0].cells[1].decision.unwrap();
    assert_ne!(d.verdict, Verdict::FailsMore);
    assert!((d.failures.unwrap().p - 0.5).abs() < 1e-9);
    assert!(
        cell_text(&r.rows[0].cells[1]).contains("fails more?: 1/7"),
        "{}",
        cell_text(&r.rows[0].cells[1])
    );
    let g = report_gate(&r, &[]);
    assert_eq!((g.failures.len(), g.warnings.len()), (0, 1), "{g:?}");
}

/// Issue 21: a boot whose benchmark timed out without a value is counted
/// and ranks worst in the test.
#[test]
fn a_timed_out_boot_is_counted_for_the_test() {
    use crate::records::{Cause, Failed, Stage};
    let meta = meta_with(&["base", "slowhang"], "{boots: 6, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 6, 100.0, &mut rec);
    boots("slowhang", 6, 100.0, &mut rec);
    let gone = ["slowhang-2cpu-b0", "slowhang-2cpu-b2", "slowhang-2cpu-b4"];
    rec.0.retain(|s| !gone.contains(&s.boot_id.as_str()));
    for id in gone {
        let failed = Some(Failed::new(Stage::Benchmark, Cause::BenchTimeout));
        rec.1.push(Event::BenchFailed {
            variant: "slowhang".into(),
            vcpus: 2,
            benchmark: "d".into(),
            boot_id: id.into(),
            repetition: 1,
            error: "killed at its timeout".into(),
            failed,
        });
    }
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let c = &r.rows[0].cells[1];
    assert_eq!((c.n, c.timed_out, c.boots_failed), (3, 3, 3));
    let measured_only = crate::stats::decide_all(
        &[crate::stats::Comparison::new(
            r.rows[0].cells[0].boots.clone(),
            c.boots.clone(),
            true,
        )],
        &r.rule,
    );
    let (with, without) = (c.decision.unwrap().p.unwrap(), measured_only[0].p.unwrap());
    assert!(
        with < without / 2.0,
        "the timed-out boots rank worst: p {with} against {without} without them"
    );
}

/// A cell given up after two boots failed before SSH (issue 19): its
/// not-booted jobs count as failed boots, so it reads failed in 3/3 with
/// the reason; the clock line says when boots ran at once.
#[test]
fn a_given_up_cell_reads_failed_in_every_boot() {
    use crate::records::{Cause, Failed, Stage};
    let mut meta = meta_with(&["base", "hang"], "{boots: 3, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 3, 100.0, &mut rec);
    let timeout = Some(Failed::new(Stage::Boot, Cause::BootTimeout));
    for b in 0..2 {
        let id = format!("hang-2cpu-b{b}");
        rec.1.push(boot("hang", &id, Some("no SSH within 120 host seconds")));
        let error = Some("boot failed: no SSH within 120 host seconds".to_string());
        rec.1.push(Event::BootEnd {
            variant: "hang".into(),
            vcpus: 2,
            boot: b,
            boot_id: Some(id),
            findings: vec![],
            error,
            busy_wall_per_guest_s: None,
            failed: timeout,
        });
    }
    let why = "not booted: the 2 boots of hang at 2 vCPUs before it failed before SSH (boot_timeout), the last: no SSH within 120 host seconds";
    let failed = Some(Failed::new(Stage::Boot, Cause::NotBooted));
    rec.1.push(Event::BootEnd {
        variant: "hang".into(),
        vcpus: 2,
        boot: 2,
        boot_id: None,
        findings: vec![],
        error: Some(why.into()),
        busy_wall_per_guest_s: None,
        failed,
    });
    meta.clock = Some(crate::records::MeasureClock::TcgIcount);
    meta.jobs = Some(2);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let hang = &r.rows[0].cells[1];
    assert_eq!((hang.boots_ended, hang.boots_failed), (3, 3), "{hang:?}");
    assert!(cell_text(hang).starts_with("FAILED: "), "{}", cell_text(hang));
    assert!(r.complete);
    assert!(r.clock_text.ends_with("; 2 boots at once"), "{}", r.clock_text);
    meta.clock = Some(crate::records::MeasureClock::TcgWall);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    assert!(
        r.clock_text
            .contains("2 boots at once under a wall clock (--allow-concurrent-wall)"),
        "{}",
        r.clock_text
    );
}

#[test]
fn guest_text_is_escaped_in_the_table_and_neutralised_in_the_csv() {
    use super::render::text::csv;
    let meta = meta_with(&["base", "broken"], "{boots: 1, repetitions: 1}");
    let events = vec![
        Event::Build {
            variant: "broken".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec![],
            error: Some("=HYPERLINK(\"http://x\") \u{1b}[2J\u{9b}".into()),
            failed: None,
        },
        boot("base", "b0", None),
        boot_end("base", "b0", None),
    ];
    let r = build_from(
        &meta,
        &[sample("base", "b0", 1, 1.0, false)],
        &events,
        &Floors::none("none"),
    );
    let t = table(&r);
    assert!(!t.chars().any(|c| c == '\u{1b}' || c == '\u{9b}'), "{t:?}");
    assert!(t.contains("\\x1b[2J"), "{t}");
    let rows = parse_csv(&csv(&r));
    let broken = rows.iter().find(|r| r[5] == "broken").unwrap();
    assert!(
        broken[25].starts_with("'=HYPERLINK"),
        "a spreadsheet must not run it: {:?}",
        broken[25]
    );
    for (text, want) in [
        ("+1", "'+1"),
        ("-x", "'-x"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("ok", "ok"),
        ("", ""),
    ] {
        assert_eq!(super::render::text::neutral(text), want);
    }
}

/// A rate of 0 recorded before the `no_progress` rule (issue 19: the
/// 448-vCPU doexec) is no measurement: the cell never shows it, its
/// repetition counts as failed, a note says why.
#[test]
fn a_rate_of_zero_on_record_is_a_failed_repetition_not_a_value() {
    let meta = meta_with(&["base", "v"], "{boots: 3, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 3, 100.0, &mut rec);
    boots("v", 3, 100.0, &mut rec);
    for s in rec.0.iter_mut().filter(|s| s.boot_id == "v-2cpu-b1" && !s.warmup) {
        s.value = 0.0;
    }
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let v = &r.rows[0].cells[1];
    assert!(v.values.iter().all(|&x| x > 0.0), "{:?}", v.values);
    assert_eq!((v.n, v.boots_ended, v.boots_failed), (2, 3, 1), "{v:?}");
    assert!(r.notes.iter().any(|n| n == "v-2cpu-b1: d repetition 1: execs_per_s of 0 is no progress, not a measurement: the repetition counts as failed"), "{:?}", r.notes);
    assert!(!cell_text(v).contains(" 0 "), "{}", cell_text(v));
}

/// One ended boot `b` of `variant` with one measured value.
fn one_boot(variant: &str, b: u32, value: f64, out: &mut (Vec<Sample>, Vec<Event>)) {
    let id = format!("{variant}-2cpu-b{b}");
    out.1.push(boot(variant, &id, None));
    out.0.push(sample(variant, &id, 1, value, false));
    out.1.push(boot_end(variant, &id, None));
}

#[test]
fn an_undecided_first_stage_is_decided_by_the_second_stages_boots() {
    let mut meta = meta_with(&["base", "v", "same"], "{boots: 6, repetitions: 1}");
    meta.matrix.statistics.second_stage_boots = 6;
    let mut rec = (Vec::new(), Vec::new());
    let base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
    for (b, x) in base.iter().enumerate() {
        one_boot("base", b as u32, *x, &mut rec);
        one_boot("same", b as u32, *x, &mut rec);
    }
    for (b, x) in [96.0, 98.6, 95.5, 99.3, 96.2, 98.0].iter().enumerate() {
        one_boot("v", b as u32, *x, &mut rec);
    }
    let first = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let (v, same) = (&first.rows[0].cells[1], &first.rows[0].cells[2]);
    assert!(
        v.second_stage && !same.second_stage,
        "{} / {}",
        cell_text(v),
        cell_text(same)
    );
    assert!(
        cell_text(v).contains("second stage: its first stage left it undecided past the threshold"),
        "{}",
        cell_text(v)
    );
    assert!(matches!(
        v.decision.unwrap().verdict,
        Verdict::Unsure | Verdict::NotSignificant
    ));
    assert_eq!(second_stage_cells(&first), vec![crate::plan::CellKey::new("v", 2)]);
    assert!(
        first
            .rule_text
            .contains("Pocock's split: each stage's q must be ≤ 0.0294"),
        "{}",
        first.rule_text
    );
    // the second stage: base and v boot 6 more times (b6..b11), v 4% lower
    for (k, (x, y)) in [100.1, 99.8, 100.3, 99.9, 100.0, 100.4]
        .iter()
        .zip([96.1, 95.8, 96.3, 95.9, 96.0, 96.4])
        .enumerate()
    {
        one_boot("base", 6 + k as u32, *x, &mut rec);
        one_boot("v", 6 + k as u32, y, &mut rec);
    }
    let second = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let (v, same) = (
        second.rows[0].cells[1].decision.unwrap(),
        second.rows[0].cells[2].decision.unwrap(),
    );
    assert_eq!((v.n_new, v.verdict), (12, Verdict::Regressed), "{}", decision_text(&v));
    assert_eq!(
        (same.n_base, same.n_new),
        (6, 6),
        "a cell not sent keeps its first stage's decision: {same:?}"
    );
    assert!(
        second.rows[0].cells[1].second_stage,
        "the sent cell is still the one sent"
    );
    assert!(!report_gate(&second, &[]).failures.is_empty());
}

#[test]
fn too_few_boots_for_one_cell_alone_is_said_without_denying_calls_of_cells_that_move_together() {
    let meta = meta_with(&["base", "v"], "{boots: 3, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 3, 100.0, &mut rec);
    boots("v", 3, 90.0, &mut rec);
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    assert!(r.detectable.starts_with("regressed calls: a change in one cell alone cannot be called at this sampling (its boots cannot reach alpha / m); cells that move together can be"), "{}", r.detectable);
    let only_base = meta_with(&["base"], "{boots: 2, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 2, 100.0, &mut rec);
    let r = build_from(&only_base, &rec.0, &rec.1, &Floors::none("none"));
    assert_eq!(
        r.detectable,
        "regressed calls: none can be made at this sampling (no compared cell)"
    );
}

/// Issue 31: a cell whose vCPUs exceed the host's CPUs is marked under a
/// wall clock (in the model, hence report.json, and in the cell's text the
/// table and the HTML show); under icount it is not, and the host line
/// says how the guest was pinned.
#[test]
fn cells_with_more_vcpus_than_host_cpus_are_marked_overcommitted_under_a_wall_clock() {
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 3, 100.0, &mut rec);
    let mut meta = meta_with(&["base"], "{boots: 3, repetitions: 2}");
    for (cpus, clock, marked) in [
        (1, crate::records::MeasureClock::TcgWall, true),
        (1, crate::records::MeasureClock::KvmWall, true),
        (2, crate::records::MeasureClock::KvmWall, false),
        (1, crate::records::MeasureClock::TcgIcount, false),
    ] {
        meta.host.cpus = cpus;
        meta.clock = Some(clock);
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let c = &r.rows[0].cells[0];
        assert_eq!(c.overcommitted, marked, "{cpus} CPUs, {clock}");
        assert_eq!(cell_text(c).contains("(overcommitted)"), marked);
        assert_eq!(serde_json::to_value(c).unwrap().get("overcommitted").is_some(), marked);
        assert!(r.host.ends_with("; guest.pin cores, hugepages off"), "{}", r.host);
    }
}

/// Issue 47: a huge value prints in scientific notation, not 309 digits.
#[test]
fn numbers_from_ten_to_the_fifteen_are_scientific() {
    use super::render::text::num;
    let cases = [
        (0.0, "0"),
        (0.012345, "0.0123"),
        (2.5, "2.50"),
        (123.45, "123.5"),
        (2814.0, "2814"),
        (999_999_999_999_999.0, "999999999999999"),
        (1e15, "1.00e15"),
        (1e308, "1.00e308"),
        (-3.2e20, "-3.20e20"),
    ];
    for (x, want) in cases {
        assert_eq!(num(x), want, "{x}");
    }
}

/// Issue 47: raw ESC and OSC bytes from a guest never reach report.csv;
/// line breaks stay (quoted), a formula is still neutralised.
#[test]
fn csv_cells_carry_no_control_bytes() {
    use super::render::text::neutral;
    assert_eq!(neutral("m\u{1b}]0;owned\u{7}x"), "m\\x1b]0;owned\\x07x");
    assert_eq!(neutral("line 1\nline 2"), "line 1\nline 2");
    assert_eq!(neutral("=1+1\u{1b}"), "'=1+1\\x1b");
}
