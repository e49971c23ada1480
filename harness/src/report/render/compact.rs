//! The report's default text: one line per compared cell (benchmark,
//! metric, vCPUs, base, the variant, the change with its interval, the
//! verdict, p and q) in a table that fits the terminal (100 columns in a
//! pipe or a mail), and what every line would repeat said once under it:
//! the legend, the threshold, and each cell's notes (failures, the second
//! stage, the history) grouped by their words. `--verbose` prints the full
//! cell text instead ([`super::text::cells_table`]).

pub use super::layout::{lines_table, terminal_width, wrap, DEFAULT_WIDTH};
use super::text::{boots_text, num, p_text, shorten};
use crate::report::{Cell, Report, Row};
use crate::stats::Decision;
use crate::ui::printable;

/// The change of the variant's value against base with its 95% interval,
/// signed as the value moves: `−1.2% ±0.1`, `+2.0% +1.2/−0.9`.
pub fn signed_change(d: &Decision) -> Option<String> {
    let r = d.ratio?;
    let (x, up, down) = (
        (r.ratio - 1.0) * 100.0,
        (r.hi - r.ratio) * 100.0,
        (r.ratio - r.lo) * 100.0,
    );
    let sign = |v: f64| if v < 0.0 { '−' } else { '+' };
    let band = if format!("{up:.1}") == format!("{down:.1}") {
        format!("±{up:.1}")
    } else {
        format!("+{up:.1}/−{down:.1}")
    };
    Some(format!("{}{:.1}% {band}", sign(x), x.abs()))
}

/// `p/q` of a decision without leading zeros (`.008/.024`, `<.001/.002`,
/// `1/1`), empty when it has none.
pub fn pq_text(d: &Decision) -> String {
    let short = |x: f64| match p_text(x).as_str() {
        "1.000" => "1".to_string(),
        t => t.replacen("0.", ".", 1),
    };
    match (d.p, d.q) {
        (Some(p), Some(q)) => format!("{}/{}", short(p), short(q)),
        _ => String::new(),
    }
}

/// A cell's value as a compact line shows it: its median, `FAILED`, or `-`.
fn value(c: Option<&Cell>) -> String {
    match c {
        Some(c) => match (&c.summary, &c.failure) {
            (Some(s), _) => num(s.median),
            (None, Some(_)) => "FAILED".into(),
            (None, None) => "-".into(),
        },
        None => "-".into(),
    }
}

/// One line of the compact table: a row and one of its variants' cells
/// (None: a row of base alone).
struct Line<'a> {
    row: &'a Row,
    base: Option<&'a Cell>,
    cell: Option<&'a Cell>,
}

impl Line<'_> {
    fn who(&self) -> String {
        format!("{} {} at {} vCPUs", self.row.benchmark, self.row.metric, self.row.vcpus)
    }
}

/// Every line of a report: each variant's cell of each row, or the base
/// cell alone where a row has no other.
fn lines(r: &Report) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for row in &r.rows {
        let base = row.cells.iter().find(|c| c.variant == "base");
        let others: Vec<&Cell> = row.cells.iter().filter(|c| c.variant != "base").collect();
        if others.is_empty() {
            out.push(Line { row, base, cell: None });
        }
        out.extend(others.into_iter().map(|c| Line {
            row,
            base,
            cell: Some(c),
        }));
    }
    out
}

/// The variants other than base that have a line.
fn variants<'a>(lines: &[Line<'a>]) -> Vec<&'a str> {
    let mut v: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.cell.map(|c| c.variant.as_str()))
        .collect();
    v.dedup();
    v.sort_unstable();
    v.dedup();
    v
}

/// The compact table of a report's cells, drawn to `width`.
fn grid(lines: &[Line], width: usize) -> String {
    let names = variants(lines);
    let one = (names.len() == 1).then(|| names[0]);
    let mut header = vec!["benchmark", "metric", "vCPUs", "base"];
    header.extend(match one {
        Some(v) if named_header(lines, v, width) => vec![v],
        Some(_) => vec!["variant"],
        None => vec!["variant", "value"],
    });
    header.extend(["change", "verdict", "p/q"]);
    let rows = lines
        .iter()
        .map(|l| {
            let d = l.cell.and_then(|c| c.decision.as_ref());
            let mut cells = vec![
                l.row.benchmark.clone(),
                metric_text(l.row),
                l.row.vcpus.to_string(),
                value(l.base),
            ];
            if one.is_none() {
                cells.push(l.cell.map(|c| c.variant.clone()).unwrap_or_else(|| "-".into()));
            }
            cells.push(l.cell.map_or(String::new(), |c| value(Some(c))));
            cells.extend(decision_cells(d));
            cells
        })
        .collect();
    let values = if one.is_some() { 4 } else { 5 };
    lines_table(&header, rows, &[2, 3, values], width)
}

/// Whether the one variant's name can head its column: the table still
/// fits `width` with no word broken (else the column is headed `variant`
/// and the legend names it).
fn named_header(lines: &[Line], name: &str, width: usize) -> bool {
    let longest = |f: &dyn Fn(&Line) -> String| lines.iter().map(|l| f(l).chars().count()).max().unwrap_or(0);
    let d = |l: &Line| decision_cells(l.cell.and_then(|c| c.decision.as_ref()));
    let values = longest(&|l| value(l.cell)).max(name.chars().count());
    let widths = [
        longest(&|l| l.row.benchmark.clone()).max(9),
        longest(&|l| metric_text(l.row)).max(6),
        5,
        longest(&|l| value(l.base)).max(4),
        values,
        longest(&|l| d(l)[0].clone()).max(6),
        longest(&|l| d(l)[1].clone()).max(7),
        longest(&|l| d(l)[2].clone()).max(3),
    ];
    widths.iter().sum::<usize>() + 2 * (widths.len() - 1) <= width
}

/// `execs_per_s ↑`: a metric with its direction.
pub fn metric_text(row: &Row) -> String {
    format!("{} {}", row.metric, if row.higher_is_better { "↑" } else { "↓" })
}

/// The change, the verdict and p/q of a line (empty without a decision).
pub fn decision_cells(d: Option<&Decision>) -> [String; 3] {
    // a change whose arms did different work per op is no change to read (issue 34)
    let change = |d: &Decision| match d.work {
        Some(_) if d.performance == crate::stats::Verdict::WorkDiffers => Some("—".to_string()),
        _ => signed_change(d),
    };
    [
        d.and_then(change).unwrap_or_default(),
        d.map(|d| d.verdict.to_string()).unwrap_or_default(),
        d.map(pq_text).unwrap_or_default(),
    ]
}

/// A cell's notes that a compact line leaves out: a failure, a failure
/// rate, the second stage, the history.
fn notes_of(c: &Cell) -> Vec<String> {
    let mut out = Vec::new();
    match (&c.summary, &c.failure) {
        (None, Some(f)) => out.push(format!("FAILED: {}", shorten(&f.text, 80))),
        (Some(_), f) if c.boots_failed > 0 => out.push(format!(
            "failed in {}/{} boots{}",
            c.boots_failed,
            c.boots_ended,
            f.as_ref()
                .map(|f| format!(": {}", shorten(&f.text, 60)))
                .unwrap_or_default()
        )),
        _ => {}
    }
    if let Some(f) = c.decision.as_ref().and_then(|d| d.failures.as_ref()) {
        let k = f.counts;
        let word = if f.significant { "fails more" } else { "fails more?" };
        out.push(format!(
            "{word}: {}/{} boots failed vs base {}/{} (Fisher p={})",
            k.failed,
            k.of,
            k.base_failed,
            k.base_of,
            p_text(f.p)
        ));
    }
    if c.second_stage {
        out.push("second stage: its first stage left it undecided past the threshold".into());
    }
    if let Some(h) = &c.history {
        out.push(format!("history: {h}"));
    }
    out
}

/// The notes of every line, each text once after the cells it is about
/// (`all cells:` when it is about every line's cell).
fn grouped_notes(lines: &[Line]) -> Vec<String> {
    let mut by_text: Vec<(String, Vec<String>)> = Vec::new();
    let mut seen_base = std::collections::BTreeSet::new();
    let mut cells = 0;
    for l in lines {
        let mut add = |c: &Cell| {
            cells += 1;
            for n in notes_of(c) {
                let who = format!("{}, {}", l.who(), c.variant);
                match by_text.iter_mut().find(|(t, _)| *t == n) {
                    Some((_, w)) => w.push(who),
                    None => by_text.push((n, vec![who])),
                }
            }
        };
        if let Some(b) = l.base.filter(|_| seen_base.insert(l.who())) {
            add(b);
        }
        if let Some(c) = l.cell {
            add(c);
        }
    }
    by_text
        .into_iter()
        .map(|(t, who)| match who.len() {
            n if n == cells && n > 1 => format!("all cells: {t}"),
            _ => format!("{}: {t}", who.join("; ")),
        })
        .collect()
}

/// What every line shares, said once: what the numbers are, the boots,
/// the intervals, the threshold.
fn legend(r: &Report, lines: &[Line]) -> String {
    let cells: Vec<&Cell> = r.rows.iter().flat_map(|row| row.cells.iter()).collect();
    let boots: Vec<String> = cells
        .iter()
        .filter(|c| c.summary.is_some())
        .map(|c| boots_text(c))
        .collect();
    let n = match boots.first() {
        Some(b) if boots.iter().all(|x| x == b) => format!(" ({b} each)"),
        Some(_) => " (boots: --verbose)".into(),
        None => String::new(),
    };
    let mut s = format!("base and variant: the median of each cell's boot values{n}; change: the variant's value against base's, ± its 95% interval");
    if cells.iter().any(|c| c.summary.is_some_and(|s| !s.ci_exact)) {
        s.push_str("; cells of <6 boots have a range, no 95% CI of their own (--verbose)");
    }
    let mut floors: Vec<(String, Vec<String>)> = Vec::new();
    for l in lines.iter().filter(|l| l.cell.is_some()) {
        let f = format!("{:.1}%", l.row.floor * 100.0);
        let what = format!("{} {}", l.row.benchmark, l.row.metric);
        match floors.iter_mut().find(|(x, _)| *x == f) {
            Some((_, w)) if !w.contains(&what) => w.push(what),
            Some(_) => {}
            None => floors.push((f, vec![what])),
        }
    }
    match &floors[..] {
        [] => {}
        [(f, _)] => s.push_str(&format!("; threshold {f}")),
        many => {
            let each: Vec<String> = many.iter().map(|(f, w)| format!("{f} ({})", w.join(", "))).collect();
            s.push_str(&format!("; thresholds {}", each.join(", ")));
        }
    }
    s.push_str(&units(lines));
    s
}

/// `; units: <metric> <unit> (↑ higher is better), …`, each metric once.
fn units(lines: &[Line]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for l in lines {
        let u = printable(&format!("{} in {}", l.row.metric, l.row.unit));
        if !seen.contains(&u) {
            seen.push(u);
        }
    }
    match seen.is_empty() {
        true => String::new(),
        false => format!("; {} (↑ higher is better, ↓ lower)", seen.join(", ")),
    }
}

/// The compact table with its legend and notes, drawn to `width`.
pub fn lines_of(r: &Report, width: usize) -> String {
    let lines = lines(r);
    let mut out = grid(&lines, width);
    let names = variants(&lines);
    let mut legend = legend(r, &lines);
    if let [one] = names[..] {
        if !named_header(&lines, one, width) {
            legend = format!("variant: {one}; {legend}");
        }
    }
    out.push_str(&wrap(&legend, width, 2));
    for (row, c) in r.rows.iter().flat_map(|row| row.cells.iter().map(move |c| (row, c))) {
        if let Some(d) = c.decision.as_ref().filter(|d| d.work.is_some()) {
            let what = format!("{} {} at {} vCPUs, {}", row.benchmark, row.metric, row.vcpus, c.variant);
            out.push_str(&wrap(
                &format!("{}: {}", printable(&what), crate::report::decision_text(d)),
                width,
                2,
            ));
        }
    }
    for n in grouped_notes(&lines) {
        out.push_str(&wrap(&printable(&n), width, 2));
    }
    out
}

/// Under the table, each called cell's differential kernel profile in
/// 100 columns: its top functions, instructions and calls per op (the
/// callers whose calls changed under each), `harness explain` for all.
pub fn profiles(r: &Report, width: usize) -> String {
    let mut out = String::new();
    for p in &r.profiles {
        let head = format!(
            "why {} changed: {} at {} vCPUs, kernel profile against base{} (top {})",
            p.variant,
            p.benchmark,
            p.vcpus,
            p.from_clause(),
            crate::report::profiles::TEXT_ROWS
        );
        let all = format!(
            "all: harness explain {} --variant {} --bench {} --vcpus {}",
            r.run_id, p.variant, p.benchmark, p.vcpus
        );
        out.push_str(&wrap(&printable(&head), width, 2));
        out.push_str(&wrap(&format!("  {}", printable(&all)), width, 4));
        out.push_str(&diff_text(&p.diff, crate::report::profiles::TEXT_ROWS));
    }
    out
}

/// The first `limit` rows of a differential profile within 100 columns:
/// each function's instructions and calls per op (`*`: called over its
/// noise), under it the callers whose calls changed.
pub fn diff_text(d: &crate::profile::diff::Diff, limit: usize) -> String {
    let (tb, tv) = d.total;
    let mut out = format!(
        "  instructions per op {} -> {}; boots {} base, {} variant; * called (over its noise)\n",
        num(tb.median),
        num(tv.median),
        d.base_boots,
        d.variant_boots
    );
    out.push_str(&format!(
        "  {:<38} {:>19} {:>9} {:>15}\n",
        "function", "insns/op", "delta", "calls/op"
    ));
    for row in d.rows.iter().take(limit) {
        let mark = if row.called { '*' } else { ' ' };
        let ins = format!("{}>{}", num(row.base.median), num(row.variant.median));
        let calls = format!("{}>{}", num(row.calls.base), num(row.calls.variant));
        let name = shorten(&printable(&row.name), 37);
        out.push_str(&format!(
            "{mark} {name:<38} {ins:>19} {:>+9.0} {calls:>15}\n",
            row.delta
        ));
        for c in row.callers.iter().filter(|c| c.calls.base != c.calls.variant).take(3) {
            let calls = format!("{}>{}", num(c.calls.base), num(c.calls.variant));
            out.push_str(&format!(
                "      from {:<53} {calls:>15}\n",
                shorten(&printable(&c.name), 53)
            ));
        }
    }
    out
}

/// Rows of a cell's contention profile shown under its line.
pub const CONTENTION_ROWS: usize = 4;

/// Under the profiles, the contention verdict of every cell whose boots
/// carry contention counts: cells with more or less contention each with
/// the rows that carry it, the others (`≈`) named in one line.
pub fn contention(r: &Report, width: usize) -> String {
    if r.contention.is_empty() {
        return String::new();
    }
    let mut out = wrap(
        "contention (the profiler's counts per op under the instruction-counting clock: atomic RMWs on cache lines that two or more vCPUs write or that are the kernel's static data, and acquisitions of such locks; `harness explain` gives every row):",
        width,
        2,
    );
    let mut same = Vec::new();
    for c in &r.contention {
        if c.diff.verdict == crate::profile::contention::Verdict::Same {
            same.push(format!("{} ({} vCPUs, {})", c.benchmark, c.vcpus, c.variant));
            continue;
        }
        let head = format!("  {}: {}", c.title(), c.diff.verdict.text());
        out.push_str(&wrap(&printable(&head), width, 4));
        for n in [c.diff.short_of(c.vcpus), c.diff.held_back()].into_iter().flatten() {
            out.push_str(&wrap(&n, width, 6));
        }
        out.push_str(&contention_rows(&c.diff, CONTENTION_ROWS, width));
        out.push_str(&model_text(&c.model, width));
    }
    if !same.is_empty() {
        out.push_str(&wrap(
            &printable(&format!("  ≈ (no row moved): {}", same.join(", "))),
            width,
            4,
        ));
    }
    out
}

/// The first `limit` rows of a contention profile (`*`: called over its
/// noise), drawn to `width`: events per op base > variant, the change, the
/// vCPUs that wrote or took it, instructions held per acquisition, the
/// function that did the most.
pub fn contention_rows(d: &crate::profile::contention::Diff, limit: usize, width: usize) -> String {
    let varying = match d.varying {
        0 => "every row's counts equal in every boot of a kernel".to_string(),
        n => format!("{n} rows' counts differ between boots of one kernel"),
    };
    let head = format!(
        "    shared-line RMWs/op {} -> {}, shared-lock acquisitions/op {} -> {}; boots {} base, {} variant; {varying}",
        num(d.shared_rmws.0.median),
        num(d.shared_rmws.1.median),
        num(d.shared_acqs.0.median),
        num(d.shared_acqs.1.median),
        d.boots.0,
        d.boots.1,
    );
    let mut out = wrap(&head, width, 6);
    out.push_str(&format!(
        "  {:<44} {:>15} {:>8} {:>7} {:>11}\n",
        "shared line or lock", "per op", "delta", "writers", "held insns"
    ));
    for r in d.rows.iter().take(limit) {
        let mark = r.mark();
        let per = format!("{}>{}", num(r.base.median), num(r.variant.median));
        let held = r
            .hold
            .map(|h| format!("{}>{}", num(h.base), num(h.variant)))
            .unwrap_or_default();
        let line = format!(
            "{mark} {:<44} {per:>15} {:>+8.2} {:>7} {held:>11}",
            shorten(&printable(&r.text), 44),
            r.delta,
            r.writers
        );
        out.push_str(line.trim_end());
        out.push('\n');
        if let Some((f, p)) = r.funcs.first() {
            let per = format!("{}>{}", num(p.base), num(p.variant));
            out.push_str(&format!("      by {:<40} {per:>15}\n", shorten(&printable(f), 40)));
        }
    }
    out
}

/// A cell's model in lines: its label (constants) and, at each CPU count,
/// the throughput ratio band variant/base and what bounds it.
pub fn model_text(m: &crate::report::profiles::CellModel, width: usize) -> String {
    let mut out = wrap(
        &format!(
            "    {} (throughput of N CPUs each looping on the op: exact mean-value analysis under 1/(largest serial demand))",
            m.label
        ),
        width,
        6,
    );
    if m.at.is_empty() {
        let line = format!(
            "      no CPU count modelled from these {}-vCPU counts: the run measured counts nearer each",
            m.counts_at
        );
        out.push_str(&wrap(&line, width, 8));
    }
    for c in &m.at {
        let line = format!(
            "      at {} CPUs ({}): variant/base {:.3}–{:.3}; base {}–{} ops/s, variant {}–{} ops/s",
            c.cpus,
            m.source(c.cpus),
            c.ratio.0,
            c.ratio.1,
            num(c.base.low),
            num(c.base.high),
            num(c.variant.low),
            num(c.variant.high)
        );
        out.push_str(&wrap(&line, width, 8));
    }
    out
}

/// The terminal table (guest text escaped), compact and drawn to the
/// terminal's width ([`terminal_width`]).
pub fn table(r: &Report) -> String {
    table_as(r, terminal_width(), false)
}

/// The report as text drawn to `width`: one line per cell
/// (this module), or with `verbose` every cell's full text.
pub fn table_as(r: &Report, width: usize, verbose: bool) -> String {
    let mut out = format!(
        "run {} (started {}){}\n",
        crate::ui::printable(&r.run_id),
        crate::ui::printable(&r.started),
        if r.complete { "" } else { " — INCOMPLETE" }
    );
    out.push_str(&wrap(&format!("clock: {}", r.clock_text), width, 2));
    if verbose {
        out.push_str(&super::text::cells_table(r, width));
        out.push_str(&super::text::profiles_text(r));
    } else {
        out.push_str(&lines_of(r, width));
        out.push_str(&profiles(r, width));
    }
    out.push_str(&contention(r, width));
    out.push_str(&super::scaling::section(r, width));
    for line in r
        .coverage
        .iter()
        .flat_map(|c| crate::coverage::text(c).lines().map(String::from).collect::<Vec<_>>())
    {
        out.push_str(&wrap(&line, width, 4));
    }
    let wrap = |s: &str| wrap(s, width, 2);
    out.push_str(&wrap(&r.detectable));
    out.push_str(&wrap(&format!("floors: {}", r.floor_source)));
    for n in &r.notes {
        out.push_str(&wrap(&format!("note: {}", crate::ui::printable(n))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_within_the_width() {
        let text = "clock: tcg-icount: a guest second is 10^9 guest instructions over all vCPUs, so a rate per second is per 10^9 instructions";
        let w = wrap(text, 40, 2);
        assert!(w.lines().all(|l| l.chars().count() <= 40), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("  ")), "{w}");
        assert_eq!(
            w.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert_eq!(wrap("short", 40, 2), "short\n");
        assert_eq!(wrap("  lead kept", 40, 4), "  lead kept\n");
    }

    /// Issue 30: a unit or metric a guest printed reaches the terminal as
    /// text, its escape sequences written out, in both table forms.
    #[test]
    fn guest_text_in_row_labels_is_escaped() {
        use crate::report::tests::{boots, meta_with};
        let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 1}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots("v", 5, 90.0, &mut rec);
        let mut r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        r.rows[0].unit = "ops\x1b[2J".into();
        r.rows[0].metric = "m\x1b]0;t\x07".into();
        r.rows[0].benchmark = "b\u{9b}31m".into();
        for (form, text) in [
            ("compact", crate::report::table_as(&r, 100, false)),
            ("verbose", crate::report::table_as(&r, 100, true)),
        ] {
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{form}: {text:?}");
            assert!(text.contains("\\x1b"), "{form} shows the escape as text: {text}");
        }
    }

    /// The quick pair's shape at 100 columns: a long variant name and a
    /// long metric; no line over 100, no name broken across lines.
    #[test]
    fn no_word_is_broken_to_fit_the_width() {
        use crate::report::tests::{boots, meta_with};
        let meta = meta_with(&["base", "no-pcpcntr-grouping"], "{boots: 5, repetitions: 1}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 2814.0, &mut rec);
        boots("no-pcpcntr-grouping", 5, 2781.0, &mut rec);
        let mut r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        r.rows[0].benchmark = "static-doexec".into();
        r.rows[0].metric = "kernel_insns_per_op".into();
        let text = crate::report::table_as(&r, 100, false);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("kernel_insns_per_op ↑"), "{text}");
        assert!(
            text.contains("variant: no-pcpcntr-grouping;"),
            "the legend names it: {text}"
        );
        let wide = crate::report::table_as(&r, 140, false);
        let header = wide.lines().find(|l| l.starts_with("benchmark")).unwrap();
        assert!(header.contains("no-pcpcntr-grouping"), "{wide}");
        assert!(!wide.contains("variant: no-pcpcntr-grouping;"), "{wide}");
    }

    /// Three variants with long names, history on every cell: one line a
    /// variant, each within 100 columns, and the shared words said once.
    #[test]
    fn the_compact_table_fits_100_columns_and_says_shared_words_once() {
        use crate::report::tests::{boots, meta_with};
        let names = ["base", "no-pcpcntr-grouping", "lazy-rss-stat", "vmalloc-nonatomic"];
        let meta = meta_with(&names, "{boots: 5, repetitions: 1}");
        let mut rec = (Vec::new(), Vec::new());
        for (v, level) in names.iter().zip([100.0, 90.0, 100.0, 101.0]) {
            boots(v, 5, level, &mut rec);
        }
        let mut r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        for c in &mut r.rows[0].cells {
            c.history = Some("new cell".into());
        }
        let text = crate::report::table_as(&r, 100, false);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let regressed: Vec<&str> = text.lines().filter(|l| l.contains("no-pcpcntr-grouping")).collect();
        assert_eq!(regressed.len(), 1, "one line a cell: {text}");
        assert!(
            regressed[0].contains("−10.0%") && regressed[0].contains(" regressed "),
            "{text}"
        );
        assert_eq!(text.matches("history: new cell").count(), 1, "{text}");
        assert!(text.contains("\nall cells: history: new cell\n"), "{text}");
        assert_eq!(text.matches("no 95% CI").count(), 1, "{text}");
        let verbose = crate::report::table_as(&r, 100, true);
        assert_eq!(verbose.matches("history:").count(), 4, "every cell says it: {verbose}");
        assert!(verbose.lines().all(|l| l.chars().count() <= 100), "{verbose}");
    }
}
