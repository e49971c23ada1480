//! The nightly's report, as Markdown a maintainer can paste into a mail:
//! tonight's commit and its subject, its key cells against history, every
//! change point with its interval and what was done about it, and each
//! bisection whose end it tells: the commits that carry the change with
//! their shares, the steps, and the differential kernel profile of the
//! first culprit's cell where one was taken. Pure text from an [`Outcome`],
//! written to `<dir>/reports/<time>-<commit>.md` by [`write`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{short, Bisection, KeyChange, Outcome, Status};
use crate::report::{self, Report};

/// A change in words: cell, relative change with its interval, p, runs.
pub fn change_line(c: &KeyChange) -> String {
    let ci = c
        .interval
        .map(|(lo, hi)| format!("; 95% interval {:+.2}% to {:+.2}%", lo * 100.0, hi * 100.0))
        .unwrap_or_default();
    format!(
        "{} {} at {} vCPUs: {:+.2}% ({}{ci}; p={:.3}), first night after it {}, between runs {} and {}",
        c.bench,
        c.metric,
        c.vcpus,
        c.change * 100.0,
        if c.worse { "worse" } else { "better" },
        c.p,
        c.date,
        c.good_run,
        c.bad_run
    )
}

/// The headline lines of a bisection's end.
pub fn ended_lines(b: &Bisection) -> Vec<String> {
    let Some(r) = &b.result else {
        return vec![format!(
            "{}: not ended yet (resumed by the next nightly)",
            status_word(b.status)
        )];
    };
    if b.status == Status::Failed || (r.error.is_some() && b.status != Status::Done) {
        return vec![format!(
            "{} after {} attempt(s): {}",
            status_word(b.status),
            b.attempts,
            r.error.as_deref().unwrap_or("?")
        )];
    }
    let mut out = vec![];
    let sole = r.culprits.len() == 1 && r.open.is_empty();
    for c in &r.culprits {
        let skipped: Vec<String> = c.maybe.iter().map(|m| short(m).to_string()).collect();
        out.push(crate::bisect::culprit_line(&c.subject, c.share, &skipped, sole));
    }
    out.extend(r.open.iter().map(|o| format!("not placed: {o}")));
    if let (true, Some(first)) = (r.flat, b.widened.first()) {
        out.push(format!(
            "not placed in {}..{}, the widest range tried (widened {} time(s) from {}..{}, at most {})",
            short(&b.good_commit),
            short(&b.bad_commit),
            b.widened.len(),
            short(&first.good),
            short(&first.bad),
            super::MAX_WIDENINGS
        ));
    }
    if r.culprits.is_empty() && r.open.is_empty() {
        out.push("undecided: no commit carries the change".into());
    }
    out
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pending => "pending",
        Status::Running => "running",
        Status::Done => "done",
        Status::Failed => "failed",
    }
}

/// Text indented by four spaces (a Markdown code block that survives a mail).
fn block(lines: &[String]) -> String {
    lines
        .iter()
        .flat_map(|l| l.lines())
        .map(|l| format!("    {l}\n"))
        .collect()
}

/// The report: `cells` are tonight's key cells of base with their standing.
pub fn text(o: &Outcome, cells: &[String]) -> String {
    let t = &o.tonight;
    let mut s = format!("# Nightly: {} {}\n\n", short(&t.commit), t.subject);
    let how = if o.already {
        "measured by an earlier nightly"
    } else {
        "measured tonight"
    };
    s += &format!(
        "Commit `{}` (\"{}\"), {how}: run {} in {}.\n\n",
        t.commit,
        t.subject,
        o.night.run_id.as_deref().unwrap_or("?"),
        o.night.runs_dir.display()
    );
    if !cells.is_empty() {
        s += "## Key cells\n\n";
        s += &cells.iter().map(|c| format!("- {c}\n")).collect::<String>();
        s += "\n";
    }
    s += "## Change points\n\n";
    if o.changes.is_empty() {
        s += "None in the key cells of base.\n\n";
    }
    for c in &o.changes {
        s += &format!("- {}: {}\n", change_line(&c.change), c.action);
    }
    if !o.changes.is_empty() {
        s += "\n";
    }
    if let Some(holder) = &o.elsewhere {
        s += &format!("The bisections are run by another nightly ({holder}); their ends are told in its report.\n\n");
    }
    for b in &o.bisections {
        s += &bisection(b);
    }
    if o.bisections.is_empty() {
        s += "No bisection ended since the last report.\n";
    }
    fit(&s)
}

/// Markdown within a plain-text mail's 100 columns: a list item goes on
/// indented by two, a code block's line by eight (still in its block), a
/// paragraph from its margin; headings stay whole.
fn fit(s: &str) -> String {
    use crate::report::render::compact::{wrap, DEFAULT_WIDTH};
    s.lines()
        .map(|l| match l {
            h if h.starts_with('#') => format!("{h}\n"),
            b if b.starts_with("    ") => wrap(b, DEFAULT_WIDTH, 8),
            i if i.starts_with("- ") => wrap(i, DEFAULT_WIDTH, 2),
            p => wrap(p, DEFAULT_WIDTH, 0),
        })
        .collect()
}

/// A bisection's section of the report.
fn bisection(b: &Bisection) -> String {
    let mut s = format!(
        "## Bisection #{}: {}..{}\n\n",
        b.id,
        short(&b.good_commit),
        short(&b.bad_commit)
    );
    s += &format!("The change: {}.\n", change_line(&b.change));
    if let Some(d) = &b.dir {
        s += &format!(
            "Directory: {} (`harness bisect --resume {}`).\n",
            d.display(),
            d.display()
        );
    }
    for w in &b.widened {
        s += &format!(
            "Widened: the ends of {}..{} do not differ ({}).\n",
            short(&w.good),
            short(&w.bad),
            w.open.join("; ")
        );
    }
    s += "\n";
    s += &block(&ended_lines(b));
    let Some(r) = b.result.as_ref().filter(|_| b.status == Status::Done) else {
        return s + "\n";
    };
    s += "\nSteps:\n\n";
    for w in &b.widened {
        s += &block(&w.steps);
    }
    s += &block(&r.steps);
    if let Some(p) = &r.profile {
        s += "\nDifferential kernel profile:\n\n";
        s += &block(std::slice::from_ref(p));
    }
    s + "\n"
}

/// Writes the report of `o` (`cells`: tonight's [`key_cells`]) to
/// `<dir>/reports/<time>-<commit>.md`; gives its text and file.
pub fn write(dir: &Path, o: &Outcome, cells: &[String]) -> Result<(String, PathBuf)> {
    // commit subjects, guest units and failure texts are not ours: their
    // control characters are written out, never sent to a terminal or a mail
    let text = crate::report::render::text::printable_lines(&text(o, cells));
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).with_context(|| format!("create {}", reports.display()))?;
    let file = reports.join(format!("{}-{}.md", crate::util::stamp(), short(&o.tonight.commit)));
    std::fs::write(&file, &text).with_context(|| format!("write {}", file.display()))?;
    Ok((text, file))
}

/// Tonight's key cells of base: median, interval and standing against history.
pub fn key_cells(r: &Report, key: &[String]) -> Vec<String> {
    let mut out = vec![];
    for row in r
        .rows
        .iter()
        .filter(|row| report::gate::is_key(key, &row.benchmark, &row.metric))
    {
        for c in row.cells.iter().filter(|c| c.variant == "base") {
            let value = match (&c.summary, &c.failure) {
                (Some(s), _) => format!(
                    "median {:.6} {} ({:.6} to {:.6}, {} boots)",
                    s.median, row.unit, s.ci_lo, s.ci_hi, c.n
                ),
                (None, Some(f)) => format!("no value: {}", f.text),
                (None, None) => "no value".into(),
            };
            let standing = c
                .history
                .as_deref()
                .map(|h| format!("; history: {h}"))
                .unwrap_or_default();
            out.push(format!(
                "{} {} at {} vCPUs: {value}{standing}",
                row.benchmark, row.metric, row.vcpus
            ));
        }
    }
    out
}
