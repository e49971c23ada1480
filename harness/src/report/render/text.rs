//! The report as text: cell and verdict strings, the terminal table and CSV.
//! Changes read "worse by" / "better by" whatever the metric's direction, the
//! `±` after a change is that change's 95% interval, and a cell's own interval
//! is written `[lo, hi]` (or called a range when too few boots allow a CI).

use comfy_table::{presets, ContentArrangement, Table};

use crate::report::{Cell, Report, Row};
use crate::stats::{Decision, Summary, Verdict};
use crate::ui::printable;

/// Compact number: 3 significant digits or more for big values; from
/// 10^15 in scientific notation (a guest's 1e308 would print 309 digits and
/// widen every row of the table).
pub fn num(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 {
        "0".to_string()
    } else if a >= 1e15 {
        format!("{x:.2e}")
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

pub(super) fn p_text(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// The change with its interval, e.g. `worse by 8.1% ±3.1` or
/// `better by 2.0% +1.2/−0.9` (asymmetric interval).
pub fn change_text(d: &Decision) -> Option<String> {
    let (w, lo, hi) = d.worse_by()?;
    // in the headline's own scale: "better by" flips the signs and the ends
    let (word, x, lo, hi) = if w >= 0.0 {
        ("worse", w, lo, hi)
    } else {
        ("better", -w, -hi, -lo)
    };
    let (x, up, down) = (x * 100.0, (hi - x) * 100.0, (x - lo) * 100.0);
    let band = if format!("{up:.1}") == format!("{down:.1}") {
        format!("±{up:.1}")
    } else {
        format!("+{up:.1}/−{down:.1}")
    };
    Some(format!("{word} by {x:.1}% {band}"))
}

/// The boots behind a cell: `5 boots×3`, or `5 boots, 14 reps` when boots
/// measured different numbers of repetitions.
pub fn boots_text(c: &Cell) -> String {
    let reps: usize = c.reps_per_boot.iter().sum();
    match c.reps_per_boot.first() {
        Some(&r) if c.reps_per_boot.iter().all(|&x| x == r) => format!("{} boots×{r}", c.n),
        _ => format!("{} boots, {reps} reps", c.n),
    }
}

fn summary_text(s: &Summary) -> String {
    if s.ci_exact {
        format!("{} [{}, {}]", num(s.median), num(s.ci_lo), num(s.ci_hi))
    } else {
        format!(
            "{} range [{}, {}] (<6 boots: no 95% CI)",
            num(s.median),
            num(s.min),
            num(s.max)
        )
    }
}

/// The text of a cell as the table shows it.
pub fn cell_text(c: &Cell) -> String {
    let mut s = match (&c.summary, &c.failure) {
        (Some(sm), _) => format!("{} n={}", summary_text(sm), boots_text(c)),
        (None, Some(f)) => format!("FAILED: {}", shorten(&f.text, 60)),
        (None, None) => "-".into(),
    };
    if let Some(d) = &c.decision {
        s.push('\n');
        s.push_str(&decision_text(d));
    }
    if c.summary.is_some() && c.boots_failed > 0 {
        let why = c
            .failure
            .as_ref()
            .map(|f| format!(": {}", shorten(&f.text, 40)))
            .unwrap_or_default();
        s.push_str(&format!(
            "\n(failed in {}/{} boots{why})",
            c.boots_failed, c.boots_ended
        ));
    }
    if c.overcommitted {
        s.push_str("\n(overcommitted)");
    }
    if c.second_stage {
        s.push_str("\nsecond stage: its first stage left it undecided past the threshold");
    }
    if let Some(h) = &c.history {
        s.push_str(&format!("\nhistory: {h}"));
    }
    s
}

/// Verdict with its numbers, e.g.
/// `worse by 7.9% ±1.3 regressed (p=0.002 q=0.004, floor 2.0%)`.
pub fn decision_text(d: &Decision) -> String {
    match &d.failures {
        Some(f) if f.significant => {
            let head = format!("fails more: {}", failure_counts_text(f));
            match d.performance {
                Verdict::Insufficient => head,
                _ => format!("{head}\nfinished boots: {}", performance_text(d)),
            }
        }
        // a larger failure share that Fisher's test does not call: marked, not the headline
        Some(f) => format!("{}\nfails more?: {}", performance_text(d), failure_counts_text(f)),
        None => performance_text(d),
    }
}

fn failure_counts_text(f: &crate::stats::FailureRate) -> String {
    let c = f.counts;
    format!(
        "{}/{} boots failed vs base {}/{} (Fisher p={} q={})",
        c.failed,
        c.of,
        c.base_failed,
        c.base_of,
        p_text(f.p),
        p_text(f.q)
    )
}

/// `work per op differs (N → M calls/op): not comparable under this clock`.
pub fn work_text(d: &Decision) -> String {
    let (b, n) = d.work.map_or((0.0, 0.0), |w| (w.base, w.new));
    let calls = |x: f64| {
        if x.abs() >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.2}")
        }
    };
    format!(
        "work per op differs ({} → {} calls/op): not comparable under this clock",
        calls(b),
        calls(n)
    )
}

fn performance_text(d: &Decision) -> String {
    let (Some(p), Some(q)) = (d.p, d.q) else {
        return format!("? (n={}/{} boots)", d.n_base, d.n_new);
    };
    let change = change_text(d).map(|c| format!("{c} ")).unwrap_or_default();
    let pq = format!("p={} q={}", p_text(p), p_text(q));
    match d.performance {
        Verdict::NotSignificant => {
            let reach = match (d.smallest_p, d.alpha_eff, d.mde) {
                (Some(sp), Some(a), _) if sp > a => format!(
                    "; {}/{} boots cannot pass: smallest p {:.3} > {:.3}",
                    d.n_base, d.n_new, sp, a
                ),
                _ if d.detectable.is_some() => {
                    format!(", a regressed call needs {:.1}%", d.detectable.unwrap_or(0.0) * 100.0)
                }
                _ => String::new(),
            };
            format!("{change}~ ({pq}{reach})")
        }
        Verdict::Unsure => format!(
            "{change}unsure: needs more boots ({pq}, threshold {:.1}%)",
            d.floor * 100.0
        ),
        // no "better by"/"worse by": the change measures how the op was filled
        Verdict::WorkDiffers => format!("{} ({pq})", work_text(d)),
        v => format!("{change}{} ({pq}, threshold {:.1}%)", v.symbol(), d.floor * 100.0),
    }
}

pub(super) fn shorten(s: &str, n: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() > n {
        format!("{}…", first.chars().take(n).collect::<String>())
    } else {
        first.to_string()
    }
}

/// `s` with its lines kept and every other control character escaped
/// ([`crate::ui::printable`]): guest text in a table cell prints as text.
pub fn printable_lines(s: &str) -> String {
    s.split('\n').map(printable).collect::<Vec<_>>().join("\n")
}

/// Every cell's full text ([`cell_text`]) in a table of one column per
/// variant, drawn to `width`.
pub fn cells_table(r: &Report, width: usize) -> String {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width.min(u16::MAX as usize) as u16);
    let mut header = vec!["benchmark / metric".to_string(), "vCPUs".to_string()];
    header.extend(r.variants.iter().cloned());
    t.set_header(header);
    for row in &r.rows {
        let dir = if row.higher_is_better { "↑" } else { "↓" };
        let mut line = vec![
            printable_lines(&format!("{} {}\n{} {}", row.benchmark, dir, row.metric, row.unit)),
            row.vcpus.to_string(),
        ];
        for v in &r.variants {
            line.push(
                row.cells
                    .iter()
                    .find(|c| &c.variant == v)
                    .map(|c| printable_lines(&cell_text(c)))
                    .unwrap_or_default(),
            );
        }
        t.add_row(line);
    }
    format!("{t}\n")
}

/// Under the table, each called cell's differential kernel profile: its
/// top rows (`harness explain` prints them all).
pub(super) fn profiles_text(r: &Report) -> String {
    let mut out = String::new();
    for p in &r.profiles {
        out.push_str(&format!(
            "why {} changed: {} at {} vCPUs, kernel profile against base{} (top {}; all: harness explain {} --variant {} --bench {} --vcpus {})\n",
            p.variant,
            p.benchmark,
            p.vcpus,
            p.from_clause(),
            crate::report::profiles::TEXT_ROWS,
            r.run_id,
            p.variant,
            p.benchmark,
            p.vcpus
        ));
        out.push_str(&p.diff.text(crate::report::profiles::TEXT_ROWS));
    }
    out
}

/// A text cell of the CSV. One that a spreadsheet would take for a formula
/// (`=`, `+`, `-`, `@`, a tab or a carriage return first) gets a `'` in
/// front, so guest text opened in a spreadsheet is text, never run.
/// Its control characters but line breaks are escaped as in the terminal
/// ([`printable_lines`]): a guest's ESC and OSC bytes never reach a viewer.
pub fn neutral(s: &str) -> String {
    let s = printable_lines(s);
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s
    }
}

/// A number in a CSV cell as Rust prints it (`1`, `0.25`), not in the
/// shortest round-trip form the `csv` crate would write (`1.0`).
#[derive(Debug, Clone, Copy, Default)]
struct Num(f64);

impl serde::Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// One line of the CSV: a cell of a row. The header is these fields' names.
#[derive(Debug, Default, serde::Serialize)]
struct CsvRecord<'a> {
    benchmark: String,
    metric: String,
    unit: String,
    higher_is_better: bool,
    vcpus: u32,
    variant: String,
    boots: usize,
    reps: usize,
    median: Option<Num>,
    ci_lo: Option<Num>,
    ci_hi: Option<Num>,
    ci_exact: Option<bool>,
    ratio: Option<Num>,
    ratio_lo: Option<Num>,
    ratio_hi: Option<Num>,
    worse_by: Option<Num>,
    worse_lo: Option<Num>,
    worse_hi: Option<Num>,
    p: Option<Num>,
    q: Option<Num>,
    floor: Num,
    mde: Option<Num>,
    verdict: &'a str,
    boots_failed: usize,
    boots_ended: usize,
    failure: String,
}

impl<'a> CsvRecord<'a> {
    fn of(row: &'a Row, c: &'a Cell) -> CsvRecord<'a> {
        let sm = c.summary.as_ref();
        let d = c.decision.as_ref();
        let rr = d.and_then(|d| d.ratio.as_ref());
        let w = d.and_then(|d| d.worse_by());
        let num = |x: Option<f64>| x.map(Num);
        CsvRecord {
            benchmark: neutral(&row.benchmark),
            metric: neutral(&row.metric),
            unit: neutral(&row.unit),
            higher_is_better: row.higher_is_better,
            vcpus: row.vcpus,
            variant: neutral(&c.variant),
            boots: c.n,
            reps: c.reps_per_boot.iter().sum(),
            median: num(sm.map(|s| s.median)),
            ci_lo: num(sm.map(|s| s.ci_lo)),
            ci_hi: num(sm.map(|s| s.ci_hi)),
            ci_exact: sm.map(|s| s.ci_exact),
            ratio: num(rr.map(|r| r.ratio)),
            ratio_lo: num(rr.map(|r| r.lo)),
            ratio_hi: num(rr.map(|r| r.hi)),
            worse_by: num(w.map(|w| w.0)),
            worse_lo: num(w.map(|w| w.1)),
            worse_hi: num(w.map(|w| w.2)),
            p: num(d.and_then(|d| d.p)),
            q: num(d.and_then(|d| d.q)),
            floor: Num(row.floor),
            mde: num(d.and_then(|d| d.mde)),
            verdict: d.map(|d| d.verdict.symbol()).unwrap_or_default(),
            boots_failed: c.boots_failed,
            boots_ended: c.boots_ended,
            failure: neutral(c.failure.as_ref().map_or("", |f| f.text.as_str())),
        }
    }
}

/// CSV (RFC 4180: a field with a comma, a quote or a line break is quoted,
/// its quotes doubled; text from a guest can hold any): a header, then one
/// line per cell.
pub fn csv(r: &Report) -> String {
    let records: Vec<CsvRecord> = r
        .rows
        .iter()
        .flat_map(|row| row.cells.iter().map(move |c| CsvRecord::of(row, c)))
        .collect();
    if records.is_empty() {
        // the csv crate writes the header with the first record: cut it from a blank one
        let blank = csv_text(&[CsvRecord::default()]);
        return blank[..=blank.find('\n').unwrap_or(blank.len() - 1)].to_string();
    }
    csv_text(&records)
}

fn csv_text(records: &[CsvRecord]) -> String {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    for rec in records {
        // writing to memory fails only on a record serde cannot write, and these all can
        w.serialize(rec).expect("a CSV record serializes");
    }
    String::from_utf8(w.into_inner().expect("flush to memory")).expect("the CSV of UTF-8 strings is UTF-8")
}
