//! `harness compare RUN_A RUN_B`: the same cells (benchmark × metric × vCPUs
//! × variant) of two runs — last night against tonight — under the same
//! decision rule (boot values, the larger of the two rows' floors, failure
//! rates of B against A), with Benjamini-Hochberg across all compared cells.

use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

use super::{comparison, decision_text, num, GateItem, Report};
use crate::stats::{self, Decision, Rule, Summary};

/// One cell present in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    /// Benchmark.
    pub benchmark: String,
    /// Metric.
    pub metric: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Variant.
    pub variant: String,
    /// Run A's cell.
    pub a: Option<Summary>,
    /// Run B's cell.
    pub b: Option<Summary>,
    /// B against A.
    pub decision: Decision,
}

/// Refuses two runs whose numbers are in different clocks (wall under KVM,
/// wall under TCG, instruction counts under TCG): their ratios mean nothing.
pub fn same_clock(a: &Report, b: &Report) -> anyhow::Result<()> {
    let name = |r: &Report| r.clock.map(|c| c.name().to_string()).unwrap_or_else(|| "an unrecorded clock".into());
    if a.clock != b.clock {
        anyhow::bail!(
            "compare {} with {}: {} was measured in {} and {} in {}; numbers of different clocks are never compared \
             (run both with the same guest.clock and accelerator)",
            a.run_id,
            b.run_id,
            a.run_id,
            name(a),
            b.run_id,
            name(b)
        );
    }
    Ok(())
}

/// Compares every cell the two reports share.
pub fn compare(a: &Report, b: &Report, rule: &Rule) -> Vec<Compared> {
    let mut keys = Vec::new();
    let mut pairs = Vec::new();
    for rb in &b.rows {
        let Some(ra) = a.rows.iter().find(|r| r.benchmark == rb.benchmark && r.metric == rb.metric && r.vcpus == rb.vcpus) else {
            continue;
        };
        for cb in &rb.cells {
            if let Some(ca) = ra.cells.iter().find(|c| c.variant == cb.variant) {
                keys.push((rb, ca, cb));
                pairs.push(comparison(ca, cb, rb.higher_is_better, ra.floor.max(rb.floor)));
            }
        }
    }
    let decisions = stats::decide_all(&pairs, rule);
    keys.into_iter()
        .zip(decisions)
        .map(|((row, ca, cb), decision)| Compared {
            benchmark: row.benchmark.clone(),
            metric: row.metric.clone(),
            vcpus: row.vcpus,
            variant: cb.variant.clone(),
            a: ca.summary,
            b: cb.summary,
            decision,
        })
        .collect()
}

impl Compared {
    /// This cell for the gate.
    pub fn gate_item(&self) -> GateItem<'_> {
        GateItem { benchmark: &self.benchmark, metric: &self.metric, vcpus: self.vcpus, variant: &self.variant, decision: &self.decision }
    }
}

/// The comparison as a terminal table.
pub fn table(a: &str, b: &str, rows: &[Compared]) -> String {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["benchmark / metric", "vCPUs", "variant", a, b, "change B vs A (± its 95% interval)"]);
    for r in rows {
        let m = |s: &Option<Summary>| s.as_ref().map(|s| num(s.median)).unwrap_or_else(|| "-".into());
        t.add_row(vec![
            format!("{}\n{}", r.benchmark, r.metric),
            r.vcpus.to_string(),
            r.variant.clone(),
            m(&r.a),
            m(&r.b),
            decision_text(&r.decision),
        ]);
    }
    format!("{}\n", t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{boot, boot_end, meta_with, sample};
    use crate::report::{build_from, Floors};
    use crate::vm::MeasureClock;

    fn report(id: &str, clock: Option<MeasureClock>) -> Report {
        let mut meta = meta_with(&["base"], "{boots: 1, repetitions: 1}");
        meta.id = id.into();
        meta.clock = clock;
        let events = vec![boot("base", "b0", None), boot_end("base", "b0", None)];
        build_from(&meta, &[sample("base", "b0", 0, 1.0, false)], &events, &Floors::none("none"))
    }

    #[test]
    fn runs_of_different_clocks_are_not_compared() {
        let icount = report("a", Some(MeasureClock::TcgIcount));
        let wall = report("b", Some(MeasureClock::TcgWall));
        let e = same_clock(&icount, &wall).unwrap_err().to_string();
        assert!(e.contains("a was measured in tcg-icount and b in tcg-wall"), "{e}");
        assert!(same_clock(&icount, &report("c", Some(MeasureClock::TcgIcount))).is_ok());
        let old = report("d", None);
        assert!(same_clock(&old, &wall).unwrap_err().to_string().contains("an unrecorded clock"));
        assert_eq!(wall.clock_text.split(':').next(), Some("tcg-wall"));
        assert!(icount.rows[0].unit.ends_with("/Ginsn"), "{}", icount.rows[0].unit);
    }
}
