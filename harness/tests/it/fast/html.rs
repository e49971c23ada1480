//! The HTML report opened in a real headless browser (Debian's chromium):
//! the page loads, and every plot is laid out with its points; the quick
//! pair's fixture run (`tests/fixtures/runs/20261130-quick`) reported
//! through the binary shows its regression in the summary line and the
//! forest plot, no text of a plot is cut off, and a screenshot of it is
//! kept in `target/tmp/report-quick/report.png` (the CI's artifact).

use std::path::Path;
use std::process::Command;

use harness::records::CpuWindow;
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
        uid: None,
        wall_lock: None,
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
                    accel: harness::records::Accel::Tcg,
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
    let html = report::render::html::render(&r).unwrap();
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
    // the forest plot, one scaling curve and one cell plot per vCPU count, all laid out with points
    assert!(
        dom.contains(r#"data-rendered-plots="4""#),
        "plots not rendered: {}",
        &dom[..dom.len().min(400)]
    );
    assert!(dom.contains("regressed"));
    assert!(dom.contains(r#"data-forest-rows="2""#) && dom.contains(r#"data-clipped="0""#));
}

const CHROMIUM_FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// The quick pair's run (5 real icount boots a side, 1.2% apart) through
/// `harness report`: the text fits 100 columns in a pipe, and the page
/// says `1 regressed` at the top, draws the cell as the forest plot's one
/// row linking to its plot, cuts no text, and is kept as a screenshot.
#[test]
fn the_quick_runs_report_shows_its_regression_at_a_glance() {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("this test needs Debian's chromium (apt-get install chromium; .ci/run installs it)");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs/20261130-quick");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-quick");
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("20261130-quick");
    std::fs::create_dir_all(&run).unwrap();
    for f in ["run.json", "events.jsonl", "samples.jsonl"] {
        std::fs::copy(fixture.join(f), run.join(f)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", dir.join("work"))
        .env("HARNESS_HISTORY_DB", dir.join("work/history.sqlite"))
        .env_remove("COLUMNS")
        .arg("report")
        .arg(&run)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest <= 100, "{widest} columns in a pipe:\n{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("static-doexec"))
        .unwrap_or_default();
    assert!(
        line.contains("−1.2% ±0.1") && line.contains("regressed"),
        "one line per cell:\n{text}"
    );

    let page = run.join("report.html");
    let browse = |extra: &[String]| {
        let out = Command::new(chromium)
            .args(CHROMIUM_FLAGS)
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dom = browse(&["--dump-dom".into()]);
    let summary = dom
        .split(r#"<p class="summary" id="summary">"#)
        .nth(1)
        .unwrap_or_default();
    assert!(
        summary.starts_with("1 regressed, 0 improved, 0 failed · tcg-icount · 10 boots, none failed · "),
        "the summary line: {}",
        &summary[..summary.len().min(200)]
    );
    assert!(dom.contains(r#"data-forest-rows="1""#), "one compared cell");
    let row = dom.split(r#"<g class="forest-row">"#).nth(1).unwrap_or_default();
    assert!(
        row.contains("no-pcpcntr-grouping · static-doexec execs_per_s · 2 vCPUs")
            && row.contains("−1.2% ±0.1 regressed"),
        "{row}"
    );
    assert!(
        dom.contains(r##"<a href="#cell-static-doexec-execs-per-s-2">"##)
            && dom.contains(r#"id="cell-static-doexec-execs-per-s-2""#)
    );
    assert!(
        dom.contains(r#"data-clipped="0""#),
        "texts cut off: {}",
        dom.split("data-clipped-texts=")
            .nth(1)
            .unwrap_or_default()
            .split('"')
            .nth(1)
            .unwrap_or_default()
    );
    // the forest plot and the cell's plot; one vCPU count: no curve against vCPUs
    assert!(
        dom.contains(r#"data-rendered-plots="2""#),
        "{}",
        &dom[..dom.len().min(300)]
    );
    assert!(!dom.contains(r#"<figure class="scaling">"#));

    let shot = dir.join("report.png");
    browse(&[
        "--hide-scrollbars".into(),
        "--window-size=1000,1250".into(),
        format!("--screenshot={}", shot.display()),
    ]);
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot of the page"
    );
    eprintln!("screenshot: {}", shot.display());
}
