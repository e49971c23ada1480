//! `harness check` where what runs here cannot be known.

use std::process::Command;

use crate::common::{repo, scratch};

/// Without QEMU the KVM question has no answer: `check` says first that it
/// checks the profile as written and why, instead of passing over it, and
/// the QEMU item still names what is missing.
#[test]
fn check_says_when_it_cannot_tell_what_runs_here() {
    let dir = scratch("check-no-qemu");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["--work-dir"])
        .arg(dir.join("work"))
        .arg("check")
        .arg(repo().join("matrix.yaml"))
        .args(["--profile", "quick"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            "warn  profile here: checked as written: whether KVM is usable here is not known (find qemu-system-x86_64"
        ),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.contains("qemu") && l.starts_with("ERROR")),
        "{stdout}"
    );
}

/// Issue 47: a profile no run selected yet is validated by `check` too,
/// each problem an error naming the profile, so the nightly that first
/// asks for it does not find it broken; the shipped matrix's profiles all
/// validate.
#[test]
fn check_validates_every_profile_not_only_the_one_asked() {
    let dir = scratch("check-profiles");
    // a two-file kernel source: check copies it instead of unpacking 1.8 GB
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 0\n").unwrap();
    let matrix = dir.join("matrix.yaml");
    std::fs::write(
        &matrix,
        format!(
            "kernel: {{source: {}}}\nvariants: [{{name: base}}]\nvcpus: [2]\n\
             benchmarks: [{{name: s, kind: doexec}}]\nprofiles:\n  good: {{vcpus: [4]}}\n  broken: {{benchmarks: [nope]}}\n",
            src.display()
        ),
    )
    .unwrap();
    let check = |m: &std::path::Path, profile: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
        c.arg("--work-dir")
            .arg(dir.join("work"))
            .arg("--json")
            .arg("check")
            .arg(m);
        if let Some(p) = profile {
            c.args(["--profile", p]);
        }
        let out = c.output().unwrap();
        let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        items
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["what"] == "profile" && i["level"] == "error")
            .map(|i| i["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let want = "broken (--profile broken would refuse it): profiles.broken.benchmarks[0]: no benchmark `nope`";
    for profile in [None, Some("good")] {
        let errors = check(&matrix, profile);
        assert!(errors.iter().any(|e| e == want), "{profile:?}: {errors:?}");
    }
    let shipped = harness::config::other_profiles_problems(&repo().join("matrix.yaml"), None).unwrap();
    assert!(shipped.is_empty(), "{shipped:?}");
}

/// Issue 47: series in `series_dir` as they arrive by mail — a
/// quoted-printable body, an ISO-8859-1 8bit body, a `git format-patch
/// --binary` patch — are each found to apply by `check`, where they were
/// "does not apply", "not valid UTF-8" and "not a unified diff".
#[test]
fn check_finds_that_mailed_and_binary_series_apply() {
    let dir = scratch("check-mail-series");
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("kernel")).unwrap();
    std::fs::write(src.join("Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 0\n").unwrap();
    std::fs::write(src.join("kernel/sys.c"), "int a = 1;\nint b = 2;\n").unwrap();
    let patches = dir.join("patches");
    let series = |name: &str, patch: &[u8]| {
        std::fs::create_dir_all(patches.join(name)).unwrap();
        std::fs::write(patches.join(name).join("0001-p.patch"), patch).unwrap();
        std::fs::write(patches.join(name).join("series"), "0001-p.patch\n").unwrap();
    };
    let head = |cs: &str, cte: &str| {
        format!(
            "From 1 Mon Sep 17 00:00:00 2001\nFrom: A <a@b>\nSubject: [PATCH] p\n\
             Content-Type: text/plain; charset={cs}\nContent-Transfer-Encoding: {cte}\n\n---\n"
        )
    };
    let diff = "--- a/kernel/sys.c\n+++ b/kernel/sys.c\n@@ -1,2 +1,2 @@\n int a = 1;\n-int b = 2;\n";
    series(
        "qp",
        format!(
            "{}{}+int b =3D 3; /* Gr=FC=DFe */\n",
            head("iso-8859-1", "quoted-printable"),
            diff.replace(" = ", " =3D ")
        )
        .as_bytes(),
    );
    let mut latin1 = format!("{}{diff}+int b = 3; /* Gr", head("iso-8859-1", "8bit")).into_bytes();
    latin1.extend_from_slice(b"\xfc\xdfe */\n");
    series("latin1", &latin1);
    series(
        "binary",
        b"From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] blob\n\n---\n\
          diff --git a/fw/blob.bin b/fw/blob.bin\nnew file mode 100644\n\
          index 0000000000000000000000000000000000000000..f971a5e28b6c4cb237ca3c7349e33bb600dbc907\n\
          GIT binary patch\nliteral 4\nLcmZQzWcm*P0SW;F\n\nliteral 0\nHcmV?d00001\n\n-- \n2.47.3\n",
    );
    let matrix = dir.join("matrix.yaml");
    std::fs::write(
        &matrix,
        format!(
            "kernel: {{source: {}}}\nseries_dir: {}\nvcpus: [2]\nbenchmarks: [{{name: s, kind: doexec}}]\n\
             variants: [{{name: base}}, {{name: q, apply: [qp]}}, {{name: l, apply: [latin1]}}, {{name: b, apply: [binary]}}]\n",
            src.display(),
            patches.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("--work-dir")
        .arg(dir.join("work"))
        .args(["--json", "check"])
        .arg(&matrix)
        .output()
        .unwrap();
    let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = |what: &str| {
        items
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["what"] == what)
            .map(|i| format!("{} {}", i["level"].as_str().unwrap(), i["message"].as_str().unwrap()))
            .unwrap_or_default()
    };
    for s in ["qp", "latin1", "binary"] {
        let got = said(&format!("series {s}"));
        assert!(got.starts_with("ok applies"), "series {s}: {got}\n{items:#}");
    }
}

/// Issue 58: a series whose patch 1 writes the tree's `.git/config` (a
/// filter that is a command) and `.git/info/attributes`, and whose patch 2
/// is a `GIT binary patch` (applied by `git apply`, which would run that
/// filter), is refused by `check`, naming the patch and the path, and
/// nothing runs.
#[test]
fn check_refuses_a_series_that_writes_git_metadata_and_runs_nothing() {
    let dir = scratch("check-git-filter");
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("fw")).unwrap();
    std::fs::write(src.join("Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 0\n").unwrap();
    let ran = dir.join("ran");
    let s = dir.join("patches/filter");
    std::fs::create_dir_all(&s).unwrap();
    let config = format!(
        "[filter \"x\"]\n\tsmudge = touch {0}\n\tclean = touch {0}\n",
        ran.display()
    );
    let new_file = |path: &str, text: &str| {
        let lines: Vec<String> = text.lines().map(|l| format!("+{l}\n")).collect();
        format!(
            "--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n{}",
            lines.len(),
            lines.concat()
        )
    };
    std::fs::write(
        s.join("0001-config.patch"),
        format!(
            "From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH 1/2] c\n\n---\n{}{}",
            new_file(".git/config", &config),
            new_file(".git/info/attributes", "* filter=x")
        ),
    )
    .unwrap();
    std::fs::write(
        s.join("0002-blob.patch"),
        "From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH 2/2] blob\n\n---\n\
         diff --git a/fw/blob.bin b/fw/blob.bin\nnew file mode 100644\n\
         index 0000000000000000000000000000000000000000..f971a5e28b6c4cb237ca3c7349e33bb600dbc907\n\
         GIT binary patch\nliteral 4\nLcmZQzWcm*P0SW;F\n\nliteral 0\nHcmV?d00001\n\n",
    )
    .unwrap();
    std::fs::write(s.join("series"), "0001-config.patch\n0002-blob.patch\n").unwrap();
    let matrix = dir.join("matrix.yaml");
    std::fs::write(
        &matrix,
        format!(
            "kernel: {{source: {}}}\nseries_dir: {}\nvcpus: [2]\nbenchmarks: [{{name: s, kind: doexec}}]\n\
             variants: [{{name: base}}, {{name: f, apply: [filter]}}]\n",
            src.display(),
            dir.join("patches").display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("--work-dir")
        .arg(dir.join("work"))
        .args(["check"])
        .arg(&matrix)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("0001-config.patch") && text.contains(".git/config") && text.contains("version-control metadata"),
        "{text}"
    );
    assert!(!text.contains("applies (not in the base)"), "{text}");
    assert!(!ran.exists(), "the series' filter ran on the host");
}
