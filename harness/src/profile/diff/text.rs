//! The differential profile as a plain-text table.

use std::fmt::Write as _;

use super::{Diff, DiffRow, Pair};

fn short(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

impl Diff {
    /// A plain-text table of the first `limit` rows (rows called by the
    /// instruction rule marked `*`, rows whose counts alone moved `#`; the
    /// marked rows come first), each followed by its changed callers.
    pub fn text(&self, limit: usize) -> String {
        let mut out = self.heading();
        for r in self.rows.iter().take(limit) {
            row_text(&mut out, r);
        }
        out
    }

    /// The whole op's line, the rule's line and the column names.
    fn heading(&self) -> String {
        let (tb, tv) = self.total;
        let (kb, kv) = self.kernel;
        let o = &self.options;
        let mut out = format!(
            "instructions per op: total {} -> {} ({:+.3}%), kernel {} -> {}; boots {} base, {} variant; noise from {}\n",
            short(tb.median),
            short(tv.median),
            if tb.median > 0.0 { (tv.median / tb.median - 1.0) * 100.0 } else { 0.0 },
            short(kb.median),
            short(kv.median),
            self.base_boots,
            self.variant_boots,
            if self.aa { "A/A and boot ranges" } else { "boot ranges (max-min)" }
        );
        let _ = writeln!(
            out,
            "* called: |delta| > max({} x noise, {} x base op, {} insn/op){}, >= {} boots a side",
            o.spread_factor,
            o.rel_floor,
            o.abs_floor,
            if o.separated { ", boot ranges apart" } else { "" },
            o.min_boots
        );
        let _ = writeln!(
            out,
            "# counts moved: |delta calls, locks or pauses per op| >= {} and > {} x its noise{} (whatever the instruction share; `moved` names them)",
            o.count_floor,
            o.spread_factor,
            if o.separated { ", boot ranges apart" } else { "" },
        );
        let _ = writeln!(
            out,
            "  {:<40} {:>12} {:>12} {:>11} {:>8} {:>15} {:>19} {:>15} {:>15} {:>9} moved",
            "function",
            "base ins/op",
            "var ins/op",
            "delta",
            "d%op",
            "share",
            "calls/op",
            "locks/op",
            "pauses/op",
            "threshold"
        );
        out
    }
}

/// One function's line of [`Diff::text`] and its changed callers' lines.
fn row_text(out: &mut String, r: &DiffRow) {
    let pair = |p: &Pair| format!("{}>{}", short(p.base), short(p.variant));
    let _ = writeln!(
        out,
        "{} {:<40} {:>12} {:>12} {:>11} {:>7.3}% {:>15} {:>19} {:>15} {:>15} {:>9} {}",
        match (r.called, r.moved.is_empty()) {
            (true, _) => '*',
            (false, false) => '#',
            (false, true) => ' ',
        },
        r.name,
        short(r.base.median),
        short(r.variant.median),
        format!("{:+}", short(r.delta)).replace("+-", "-"),
        r.delta_of_op * 100.0,
        format!("{:.2}%>{:.2}%", r.share.base * 100.0, r.share.variant * 100.0),
        pair(&r.calls),
        pair(&r.locks),
        pair(&r.pauses),
        short(r.threshold),
        r.moved.join(",")
    );
    for c in r.callers.iter().filter(|c| c.calls.base != c.calls.variant) {
        let _ = writeln!(out, "      from {:<34} calls/op {}", c.name, pair(&c.calls));
    }
}
