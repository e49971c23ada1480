//! JUnit XML for CI: one `<testsuite>` per run (its id, the counts), one
//! `<testcase>` per key cell compared against base (classname
//! `benchmark.metric`, name `<variant> at <N> vCPUs`), a `<failure>` for each
//! cell the gate fails (its message the gate's text: the change, its interval
//! and verdict), `<skipped>` for a cell without a verdict (insufficient), and
//! a gate warning as the testcase's `<system-out>` (a failure with
//! `--strict`). A key benchmark's contention cell is a testcase of its own
//! (classname `benchmark.contention`), failed or warned as the gate calls
//! `more contention`; a key metric that matched no row is a failed
//! testcase (classname the key). The suite's `time` is the run's host seconds from its start
//! to its last sample (absent when unknown); a testcase has none, as a
//! cell's boots are spread over the whole run. Pure: built from the report
//! and the gate's calls.
//!
//! Text is escaped by a small escaper of our own rather than an XML crate:
//! the document is flat, written once and never read back, and five entities
//! plus the control characters XML 1.0 forbids are all it needs.

use std::fmt::Write as _;

use crate::report::gate::{contention_calls, is_key, judge, report_items, unmatched_keys, Call};
use crate::report::Report;
use crate::stats::Verdict;

/// What one testcase holds beside its names.
enum Outcome {
    Passed,
    Failed(String),
    Warned(String),
    Skipped(String),
}

/// The JUnit XML document of a report's key cells (`strict`: gate warnings fail).
pub fn junit(r: &Report, key_metrics: &[String], strict: bool) -> String {
    let cases = cases(r, key_metrics, strict);
    let failures = cases.iter().filter(|c| matches!(c.2, Outcome::Failed(_))).count();
    let skipped = cases.iter().filter(|c| matches!(c.2, Outcome::Skipped(_))).count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    let id = escape(&r.run_id);
    let _ = writeln!(
        x,
        "  <testsuite name=\"harness {id}\" id=\"{id}\" timestamp=\"{}\"{} tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">",
        escape(&r.started),
        // host seconds from the run's start to its last sample
        r.wall_s.map(|s| format!(" time=\"{s:.3}\"")).unwrap_or_default(),
        cases.len()
    );
    let _ = writeln!(
        x,
        "    <properties>\n      <property name=\"run_id\" value=\"{id}\"/>\n    </properties>"
    );
    for (class, name, outcome) in &cases {
        testcase(&mut x, class, name, outcome);
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// Each key cell, each key cell's contention verdict and each key that
/// matched no cell as (class, name, outcome).
fn cases(r: &Report, key_metrics: &[String], strict: bool) -> Vec<(String, String, Outcome)> {
    let cases: Vec<(String, String, Outcome)> = report_items(r)
        .filter(|it| is_key(key_metrics, it.benchmark, it.metric))
        .map(|it| {
            let outcome = match judge(&it) {
                Some((Call::Fails, t)) => Outcome::Failed(t),
                Some((Call::Warns, t)) if strict => Outcome::Failed(t),
                Some((Call::Warns, t)) => Outcome::Warned(t),
                None if it.decision.verdict == Verdict::Insufficient => Outcome::Skipped(format!(
                    "insufficient: {}",
                    crate::report::decision_text(it.decision).replace('\n', "; ")
                )),
                None => Outcome::Passed,
            };
            (
                format!("{}.{}", it.benchmark, it.metric),
                format!("{} at {} vCPUs", it.variant, it.vcpus),
                outcome,
            )
        })
        .collect();
    let mut cases = cases;
    for (c, call) in contention_calls(r, key_metrics) {
        let outcome = match call {
            Some((Call::Fails, t)) => Outcome::Failed(t),
            Some((Call::Warns, t)) if strict => Outcome::Failed(t),
            Some((Call::Warns, t)) => Outcome::Warned(t),
            None => Outcome::Passed,
        };
        cases.push((
            format!("{}.contention", c.benchmark),
            format!("{} at {} vCPUs", c.variant, c.vcpus),
            outcome,
        ));
    }
    let rows = r.rows.iter().map(|row| (row.benchmark.as_str(), row.metric.as_str()));
    for (key, t) in unmatched_keys(key_metrics, rows) {
        cases.push((key.to_string(), "matched no cell".into(), Outcome::Failed(t)));
    }
    cases
}

/// One `<testcase>` element.
fn testcase(x: &mut String, class: &str, name: &str, outcome: &Outcome) {
    let head = format!(
        "    <testcase classname=\"{}\" name=\"{}\"",
        escape(class),
        escape(name)
    );
    let _ = match outcome {
        Outcome::Passed => writeln!(x, "{head}/>"),
        Outcome::Failed(t) => {
            let t = escape(t);
            writeln!(
                x,
                "{head}>\n      <failure message=\"{t}\" type=\"gate\">{t}</failure>\n    </testcase>"
            )
        }
        Outcome::Warned(t) => {
            writeln!(
                x,
                "{head}>\n      <system-out>gate warning (fatal with --strict): {}</system-out>\n    </testcase>",
                escape(t)
            )
        }
        Outcome::Skipped(t) => writeln!(
            x,
            "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>",
            escape(t)
        ),
    };
}

/// Text fit for XML 1.0 content and attribute values: the five markup
/// characters as entities, tab and line breaks as character references, and
/// the characters XML 1.0 forbids (other C0 controls, U+FFFE, U+FFFF) written
/// out as `\u{..}`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = write!(out, "&#{};", c as u32);
            }
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
