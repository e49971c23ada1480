//! The scaling view in a report: read from a run directory's profiles at
//! two vCPU counts, in the text, `report.json` and the HTML page.

use super::*;
use crate::records::{Event, Sample};
use crate::report::tests::{boot, boot_end, sample};

/// A window of 10 ops: a bulk of 700,000 instructions per op (plus `b`)
/// and a function walking every CPU (`walk` instructions per op; none at 0).
fn window(n: u32, b: u64, walk: u64) -> String {
    let bulk = 7_000_000 + b;
    let mut w = format!(
        "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 10 missing 0\nvcpus {n}\ntotal {t} 1 0 0\nkernel {k} 1 0 0\nf bulk {bulk} 1 0 0\nf [user] 100 0 0 0\n",
        t = bulk + 10 * walk + 100,
        k = bulk + 10 * walk
    );
    if walk > 0 {
        w += &format!("f harness_cpu_walk {} 10 0 0\n", 10 * walk);
    }
    w
}

fn at_vcpus(mut e: Event, n: u32) -> Event {
    match &mut e {
        Event::Boot { vcpus, .. } | Event::BootEnd { vcpus, .. } | Event::Profile { vcpus, .. } => *vcpus = n,
        _ => {}
    }
    e
}

/// A run at `vcpus` of base, `walk` (4,100 instructions per op a CPU) and
/// `same` (base again), 3 boots an arm each with a profile; its report.
fn run(vcpus: &[u32]) -> (tempfile::TempDir, crate::records::RunMeta, Vec<Event>, Report) {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("profiles")).unwrap();
    let list: Vec<String> = vcpus.iter().map(u32::to_string).collect();
    let y = format!(
        "variants:\n  - name: base\n  - name: walk\n  - name: same\nvcpus: [{}]\nbenchmarks:\n  - {{name: d, kind: doexec}}\nsampling: {{boots: 3, repetitions: 1}}\n",
        list.join(", ")
    );
    let mut meta = crate::report::tests::meta_with(&["base"], "{boots: 3, repetitions: 1}");
    meta.matrix = crate::config::parse(&y, std::path::Path::new("/x/m.yaml"), None).unwrap();
    let (mut samples, mut events): (Vec<Sample>, Vec<Event>) = (vec![], vec![]);
    for &n in vcpus {
        for (arm, per_cpu) in [("base", 0), ("walk", 4_100), ("same", 0)] {
            for b in 0..3u64 {
                let id = format!("{arm}-{n}cpu-b{b}");
                events.push(at_vcpus(boot(arm, &id, None), n));
                samples.push(Sample {
                    vcpus: n,
                    ..sample(arm, &id, 1, 1000.0 + b as f64, false)
                });
                let path = format!("profiles/{id}.profile.1");
                std::fs::write(d.path().join(&path), window(n, b * 97, per_cpu * n as u64)).unwrap();
                events.push(Event::Profile {
                    variant: arm.into(),
                    vcpus: n,
                    boot: 0,
                    boot_id: id.clone(),
                    benchmark: "d".into(),
                    repetition: 1,
                    warmup: false,
                    path,
                    ops: Some(10),
                    error: None,
                });
                events.push(at_vcpus(boot_end(arm, &id, None), n));
            }
        }
    }
    let mut r = crate::report::build_from(&meta, &samples, &events, &crate::report::Floors::none("none"));
    r.scaling = scaling_cells(d.path(), &events, None, &meta.matrix, &r, &mut vec![]);
    (d, meta, events, r)
}

#[test]
fn a_run_at_two_counts_has_a_scaling_view_in_its_text_json_and_html() {
    let (d, meta, events, r) = run(&[2, 8]);
    let got: Vec<(&str, Vec<u32>, scaling::ScalingVerdict)> = r
        .scaling
        .iter()
        .map(|c| (c.variant.as_str(), c.scaling.vcpus.clone(), c.scaling.verdict))
        .collect();
    assert_eq!(
        got,
        [
            ("walk", vec![2, 8], scaling::ScalingVerdict::Worse),
            ("same", vec![2, 8], scaling::ScalingVerdict::Same)
        ]
    );
    let walk = &r.scaling[0].scaling;
    assert_eq!(
        walk.options.threshold, 0.02,
        "the run's threshold of kernel_insns_per_op"
    );
    let carried: Vec<String> = walk.carried().map(|r| r.text()).collect();
    assert_eq!(carried, ["harness_cpu_walk (instructions per op)"]);
    let text = crate::report::table_as(&r, 100, false);
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(
        text.contains("  d, walk, 2 → 8 vCPUs: scales worse: harness_cpu_walk (instructions per op) +24600 against"),
        "{text}"
    );
    assert!(
        text.contains("* harness_cpu_walk (instructions per op): base 0 → 0, variant 8200 → 32800 at 2 → 8"),
        "{text}"
    );
    assert!(text.contains("  d, same, 2 → 8 vCPUs: ≈\n"), "{text}");
    assert!(
        text.contains("  rule: with N0 the smallest and N1 the largest vCPU count"),
        "{text}"
    );
    assert!(
        text.contains("scheduler and timing functions: 0 of the whole kernel's"),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["scaling"][0]["scaling"]["verdict"], "worse");
    assert_eq!(json["scaling"][0]["scaling"]["rows"][0]["name"], "whole kernel");
    assert_eq!(json["scaling"][1]["scaling"]["verdict"], "same");
    let html = crate::report::render::html::render(&r).unwrap();
    assert!(html.contains("Scaling: per-op cost against vCPUs") && html.contains("vCPUs (log2 scale)"));
    assert!(
        html.contains("scaling: 1 worse, 0 better, 1 ≈"),
        "the summary line counts them"
    );
    assert!(
        html.contains("<td class=\"regressed\">scales worse: harness_cpu_walk (instructions per op) +24600"),
        "{html}"
    );
    // explain's view: every count of the cell's profiles
    let s = cell_scaling(d.path(), &events, &meta.matrix, "walk", "d", &mut vec![]).unwrap();
    assert_eq!(
        (s.vcpus.clone(), s.verdict),
        (vec![2, 8], scaling::ScalingVerdict::Worse)
    );
}

#[test]
fn a_run_at_one_count_has_none() {
    let (_d, _meta, _events, r) = run(&[2]);
    assert!(r.scaling.is_empty());
    assert!(serde_json::to_value(&r).unwrap().get("scaling").is_none());
    assert!(!crate::report::table_as(&r, 100, false).contains("scaling"));
}
