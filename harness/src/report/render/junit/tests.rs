use super::*;
use crate::report::tests::{boots, meta_with};
use crate::report::{build_from, Floors};

/// base, a regressed, an unchanged and an insufficient variant (one boot).
fn three_cells() -> Report {
    let meta = meta_with(&["base", "slow", "same", "few"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("slow", 5, 80.0, &mut rec);
    boots("same", 5, 100.0, &mut rec);
    boots("few", 1, 100.0, &mut rec);
    build_from(&meta, &rec.0, &rec.1, &Floors::none("none"))
}

#[test]
fn one_regressed_one_unchanged_one_insufficient_cell() {
    let mut r = three_cells();
    r.wall_s = Some(1234.5);
    let x = junit(&r, &[], false);
    let head = format!("<testsuite name=\"harness {0}\" id=\"{0}\"", r.run_id);
    assert!(x.contains(&head), "{x}");
    let want = format!(" time=\"{:.3}\" tests=", 1234.5);
    assert!(x.contains(&want), "the suite's time is the run's wall time: {x}");
    let mut untimed = r.clone();
    untimed.wall_s = None;
    assert!(!junit(&untimed, &[], false).contains(" time="), "no time when unknown");
    assert!(
        x.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
        "{x}"
    );
    assert!(
        x.contains(&format!("<property name=\"run_id\" value=\"{}\"/>", r.run_id)),
        "{x}"
    );
    assert!(
        x.contains("<testcase classname=\"d.execs_per_s\" name=\"same at 2 vCPUs\"/>"),
        "unchanged passes: {x}"
    );
    let slow = x
        .split("name=\"slow at 2 vCPUs\">")
        .nth(1)
        .expect("slow's testcase")
        .split("</testcase>")
        .next()
        .unwrap();
    assert!(
        slow.contains("<failure message=\"slow execs_per_s at 2 vCPUs (d): worse by 20.0%")
            && slow.contains("regressed (p=0.008"),
        "{slow}"
    );
    let few = x
        .split("name=\"few at 2 vCPUs\">")
        .nth(1)
        .expect("few's testcase")
        .split("</testcase>")
        .next()
        .unwrap();
    assert!(
        few.contains("<skipped message=\"insufficient: ? (n=5/1 boots)\"/>"),
        "{few}"
    );
    assert_eq!(x.matches("<testcase ").count(), 3, "base is not a testcase: {x}");
    assert!(
        x.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n")
            && x.ends_with("</testsuite>\n</testsuites>\n")
    );
}

#[test]
fn only_key_metrics_are_testcases() {
    let r = three_cells();
    let x = junit(&r, &["other".to_string()], false);
    assert!(
        x.contains("tests=\"0\" failures=\"0\" errors=\"0\" skipped=\"0\"") && !x.contains("<testcase"),
        "{x}"
    );
    assert_eq!(
        junit(&r, &["d.execs_per_s".to_string()], false)
            .matches("<testcase ")
            .count(),
        3
    );
}

#[test]
fn a_warning_is_system_out_or_a_failure_with_strict() {
    let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, 100.0, &mut rec);
    boots("v", 5, 97.9, &mut rec); // unsure, may regress: the gate warns
    let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
    let x = junit(&r, &[], false);
    assert!(
        x.contains("failures=\"0\"")
            && x.contains("<system-out>gate warning (fatal with --strict): v execs_per_s at 2 vCPUs (d)"),
        "{x}"
    );
    let strict = junit(&r, &[], true);
    assert!(
        strict.contains("failures=\"1\"")
            && strict.contains("<failure message=\"v execs_per_s")
            && !strict.contains("<system-out>"),
        "{strict}"
    );
}

#[test]
fn guest_text_is_escaped() {
    for (text, want) in [
        ("a<b>&\"c'", "a&lt;b&gt;&amp;&quot;c&apos;"),
        ("tab\tnl\ncr\r", "tab&#9;nl&#10;cr&#13;"),
        ("\u{1b}[2J\u{0}\u{7f}", "\\u{1b}[2J\\u{0}\u{7f}"),
        ("\u{fffe}\u{ffff}é", "\\u{fffe}\\u{ffff}é"),
        ("", ""),
    ] {
        assert_eq!(escape(text), want, "{text:?}");
    }
    let mut r = three_cells();
    r.rows[0].metric = "m<&\"'\u{1b}".into();
    r.run_id = "id\"<\u{7}".into();
    let x = junit(&r, &[], false);
    assert!(x.contains("classname=\"d.m&lt;&amp;&quot;&apos;\\u{1b}\""), "{x}");
    assert!(x.contains("id=\"id&quot;&lt;\\u{7}\""), "{x}");
    assert!(
        !x.chars().any(|c| (c as u32) < 0x20 && c != '\n'),
        "no raw control characters: {x:?}"
    );
}
