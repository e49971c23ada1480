//! The HTML report opened in a real headless browser (Debian's chromium):
//! the page loads, and every plot is laid out with its points.

use std::path::Path;
use std::process::Command;

use harness::bench::CpuWindow;
use harness::records::{BootEnv, Event, Host, RunMeta, Sample};
use harness::report;

fn sample(variant: &str, vcpus: u32, boot: u32, rep: u32, value: f64) -> Sample {
    Sample {
        variant: variant.into(),
        vcpus,
        benchmark: "static-doexec".into(),
        params: serde_json::json!({}),
        metric: "execs_per_s".into(),
        unit: "execs/s".into(),
        higher_is_better: true,
        boot_id: format!("{variant}-{vcpus}cpu-b{boot}"),
        boot,
        repetition: rep,
        warmup: false,
        value,
        series: vec![value],
        cpu: Some(CpuWindow { idle: 0.1, steal: 0.0 }),
        clock: None,
        timestamp: "2026-11-30T00:00:00Z".into(),
    }
}

#[test]
fn html_report_renders_its_plots_in_a_browser() {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("this test needs Debian's chromium (apt-get install chromium; .ci/run installs it)");
    let yaml = "variants:\n  - name: base\n  - name: v\nvcpus: [2, 4]\nbenchmarks:\n  - {name: static-doexec, kind: doexec}\nsampling: {boots: 5, repetitions: 4}\n";
    let matrix = harness::config::parse(yaml, Path::new("/nonexistent/m.yaml"), None).unwrap();
    let meta = RunMeta {
        format_version: harness::records::FORMAT_VERSION,
        id: "test-run".into(),
        started: "2026-11-30T00:00:00Z".into(),
        matrix,
        host: Host::default(),
        harness_revision: None,
        clock: None,
        inputs: None,
        jobs: None,
    };
    let mut samples = Vec::new();
    let mut events = Vec::new();
    for (variant, scale) in [("base", 1.0), ("v", 0.9)] {
        for vcpus in [2u32, 4] {
            for boot in 0..5 {
                events.push(Event::Boot {
                    clock: None,
                    wall_per_guest_s: None,
                    variant: variant.into(),
                    vcpus,
                    boot,
                    boot_id: format!("{variant}-{vcpus}cpu-b{boot}"),
                    accel: harness::vm::Accel::Tcg,
                    cmdline: "console=ttyS0".into(),
                    image: "vmlinux".into(),
                    overcommit: vcpus as f64 / 2.0,
                    ready_s: Some(6.0),
                    env: Some(BootEnv {
                        kernel_release: "6.12.117".into(),
                        nproc: vcpus,
                        memory_mib: 990,
                        aslr: 0,
                        uptime_s: 0.0,
                    }),
                    error: None,
                    findings: vec![],
                    retried: false,
                    failed: None,
                });
                for rep in 0..4 {
                    let v = scale * 100.0 * vcpus as f64 * (1.0 + 0.01 * ((boot * 4 + rep) % 5) as f64);
                    samples.push(sample(variant, vcpus, boot, rep, v));
                }
                events.push(Event::BootEnd {
                    variant: variant.into(),
                    vcpus,
                    boot,
                    boot_id: Some(format!("{variant}-{vcpus}cpu-b{boot}")),
                    findings: vec![],
                    error: None,
                    busy_wall_per_guest_s: None,
                    failed: None,
                });
            }
        }
    }
    let r = report::build_from(&meta, &samples, &events, &report::Floors::none("none"));
    // a 10% drop with 1% noise over 5 vs 5 boots is a regression
    let d = r.rows[0].cells[1].decision.as_ref().unwrap();
    assert_eq!(d.verdict, harness::stats::Verdict::Regressed, "{d:?}");
    let html = report::html::render(&r).unwrap();
    assert!(html.contains("Decision rule") && html.contains("bootstrap seed"));

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    std::fs::write(&page, &html).unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // one scaling curve + one strip plot per vCPU count, all laid out with points
    assert!(
        dom.contains(r#"data-rendered-plots="3""#),
        "plots not rendered: {}",
        &dom[..dom.len().min(400)]
    );
    assert!(dom.contains("regressed"));
}
