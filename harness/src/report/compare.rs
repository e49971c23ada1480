//! `harness compare RUN_A RUN_B`: the same cells (benchmark × metric × vCPUs
//! × variant) of two runs — last night against tonight. Boots of different
//! runs are never pooled as one sample: a night-to-night offset moves every
//! boot of a night together and would read as an effect. Each run's base is
//! its own control, so a variant's cell is B's variant-to-base ratio against
//! A's ([`stats::across`]), under the same rule (the larger of the two rows'
//! floors) with Benjamini-Hochberg across all compared cells. A base cell
//! has no control inside the runs and is not compared; its change from
//! night to night is what `harness history` tracks.

use serde::Serialize;

use super::{num, Cell, GateItem, Report, Row};
use crate::records::MeasureClock;
use crate::stats::across::{ratio_of_ratios, Arms, ICOUNT_NIGHT_SD, WALL_NIGHT_SD};
use crate::stats::{self, Decision, Pretested, Rule, Summary};

/// How a compared cell was tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// B's variant-to-base ratio against A's (Welch's t on log boot values).
    RatioOfRatios,
    /// Not compared: base (or a run without this cell's base) has no control.
    NoControl,
}

/// What [`table`] prints under the comparison: how cells were tested.
pub const METHOD_TEXT: &str = "B against A: each run's variant-to-base ratio, each run's base its own control \
     (Welch's t on log boot values, BH across cells); boots of different runs are never pooled. \
     A base cell has no control across runs: its night-to-night change is for `harness history`.";

/// The night effect of each kernel of its own (relative sd) that a
/// comparison in `clock` allows for: it moves one arm of one night and does
/// not cancel in the ratio of ratios (docs/verdicts.md, "Across nights").
pub fn night_sd(clock: Option<MeasureClock>) -> f64 {
    match clock {
        Some(MeasureClock::TcgIcount) => ICOUNT_NIGHT_SD,
        _ => WALL_NIGHT_SD,
    }
}

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
    /// How it was tested.
    pub method: Method,
    /// The per-kernel night offset (relative sd) the test allowed for.
    pub night_sd: f64,
    /// B against A.
    pub decision: Decision,
}

/// Refuses two runs whose numbers are in different clocks (wall under KVM,
/// wall under TCG, instruction counts under TCG): their ratios mean nothing.
pub fn same_clock(a: &Report, b: &Report) -> anyhow::Result<()> {
    let name = |r: &Report| {
        r.clock
            .map(|c| c.name().to_string())
            .unwrap_or_else(|| "an unrecorded clock".into())
    };
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

/// Compares every cell the two reports share (see the module text).
pub fn compare(a: &Report, b: &Report, rule: &Rule) -> Vec<Compared> {
    let allow = night_sd(b.clock);
    let mut keys = Vec::new();
    let mut tests = Vec::new();
    for rb in &b.rows {
        let Some(ra) = a
            .rows
            .iter()
            .find(|r| r.benchmark == rb.benchmark && r.metric == rb.metric && r.vcpus == rb.vcpus)
        else {
            continue;
        };
        for cb in &rb.cells {
            if let Some(ca) = ra.cells.iter().find(|c| c.variant == cb.variant) {
                let test = across(ra, rb, ca, cb, allow);
                keys.push((
                    rb,
                    ca,
                    cb,
                    if test.is_some() {
                        Method::RatioOfRatios
                    } else {
                        Method::NoControl
                    },
                ));
                tests.push(test);
            }
        }
    }
    let decisions = stats::decide_pretested(&tests, rule);
    keys.into_iter()
        .zip(decisions)
        .map(|((row, ca, cb, method), decision)| Compared {
            benchmark: row.benchmark.clone(),
            metric: row.metric.clone(),
            vcpus: row.vcpus,
            variant: cb.variant.clone(),
            a: ca.summary,
            b: cb.summary,
            method,
            night_sd: allow,
            decision,
        })
        .collect()
}

/// The ratio-of-ratios test of a variant's cell allowing `allow` for a
/// per-kernel night offset, None for base or when a run lacks base's boots.
fn across(ra: &Row, rb: &Row, ca: &Cell, cb: &Cell, allow: f64) -> Option<Pretested> {
    let base = |r: &Row| r.cells.iter().find(|c| c.variant == "base").map(|c| c.boots.clone());
    if cb.variant == "base" {
        return None;
    }
    let (base_a, base_b) = (base(ra)?, base(rb)?);
    let t = ratio_of_ratios(
        Arms {
            base: &base_a,
            variant: &ca.boots,
        },
        Arms {
            base: &base_b,
            variant: &cb.boots,
        },
        allow,
    )?;
    Some(Pretested {
        p: t.p,
        ratio: t.ratio,
        floor: ra.floor.max(rb.floor),
        higher_is_better: rb.higher_is_better,
        n_base: ca.boots.len() + base_a.len(),
        n_new: cb.boots.len() + base_b.len(),
    })
}

impl Compared {
    /// This cell for the gate.
    pub fn gate_item(&self) -> GateItem<'_> {
        GateItem {
            benchmark: &self.benchmark,
            metric: &self.metric,
            vcpus: self.vcpus,
            variant: &self.variant,
            decision: &self.decision,
            faults: None,
        }
    }
}

/// The comparison as a terminal table at the terminal's width.
pub fn table(a: &str, b: &str, rows: &[Compared]) -> String {
    table_at(a, b, rows, super::render::compact::terminal_width())
}

/// The comparison of runs `a` and `b` drawn to `width`: one line per
/// compared cell (A's and B's medians, B's change against A with its 95% interval, the verdict, p/q),
/// how cells were tested said once under it.
pub fn table_at(a: &str, b: &str, rows: &[Compared], width: usize) -> String {
    let header = [
        "benchmark",
        "metric",
        "vCPUs",
        "variant",
        "A",
        "B",
        "change",
        "verdict",
        "p/q",
    ];
    let m = |s: &Option<Summary>| s.as_ref().map(|s| num(s.median)).unwrap_or_else(|| "-".into());
    let lines = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.benchmark.clone(),
                r.metric.clone(),
                r.vcpus.to_string(),
                r.variant.clone(),
                m(&r.a),
                m(&r.b),
            ];
            match r.method {
                Method::RatioOfRatios => cells.extend(super::render::compact::decision_cells(Some(&r.decision))),
                Method::NoControl => cells.push("not compared".into()),
            }
            cells
        })
        .collect();
    let mut out = super::render::compact::lines_table(&header, lines, &[2, 4, 5], width);
    // every row of one comparison allows the same (its runs' clock's)
    let allow = rows
        .first()
        .map(|r| {
            format!(
                " Each kernel's own night offset is allowed for at {}% (sd).",
                r.night_sd * 100.0
            )
        })
        .unwrap_or_default();
    let notes = format!("A: run {a}, B: run {b} (medians); change: B's variant-to-base ratio against A's, ± its 95% interval; not compared: no control across runs. {METHOD_TEXT}{allow}");
    out.push_str(&super::render::compact::wrap(&notes, width, 2));
    out
}

/// One line when two runs' hosts were set up differently (governor, boost,
/// SMT, THP, topology, or the host itself), A's setting → B's; `None` when
/// they agree or neither recorded its state.
pub fn host_differs(a: &crate::records::RunMeta, b: &crate::records::RunMeta) -> Option<String> {
    let (ha, hb) = (&a.host, &b.host);
    let mut d: Vec<String> = Vec::new();
    if ha.hostname != hb.hostname {
        d.push(format!("host {} → {}", ha.hostname, hb.hostname));
    }
    match (&ha.state, &hb.state) {
        (Some(sa), Some(sb)) => {
            for ((k, va), (_, vb)) in sa.settings().into_iter().zip(sb.settings()) {
                if va != vb {
                    d.push(format!("{k} {va} → {vb}"));
                }
            }
        }
        (None, None) => {}
        (sa, _) => d.push(format!(
            "not recorded in {} (an older run)",
            if sa.is_none() { "A" } else { "B" }
        )),
    }
    (!d.is_empty()).then(|| format!("host state differs (A → B): {}", d.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MeasureClock;
    use crate::report::tests::{boot, boot_end, boots, meta_with, sample};
    use crate::report::{build_from, Floors};

    fn report(id: &str, clock: Option<MeasureClock>) -> Report {
        let mut meta = meta_with(&["base"], "{boots: 1, repetitions: 1}");
        meta.id = id.into();
        meta.clock = clock;
        let events = vec![boot("base", "b0", None), boot_end("base", "b0", None)];
        build_from(
            &meta,
            &[sample("base", "b0", 0, 1.0, false)],
            &events,
            &Floors::none("none"),
        )
    }

    #[test]
    fn runs_of_different_clocks_are_not_compared() {
        let icount = report("a", Some(MeasureClock::TcgIcount));
        let wall = report("b", Some(MeasureClock::TcgWall));
        let e = same_clock(&icount, &wall).unwrap_err().to_string();
        assert!(e.contains("a was measured in tcg-icount and b in tcg-wall"), "{e}");
        assert!(same_clock(&icount, &report("c", Some(MeasureClock::TcgIcount))).is_ok());
        let old = report("d", None);
        assert!(same_clock(&old, &wall)
            .unwrap_err()
            .to_string()
            .contains("an unrecorded clock"));
        assert_eq!(wall.clock_text.split(':').next(), Some("tcg-wall"));
        assert!(icount.rows[0].unit.ends_with("/Ginsn"), "{}", icount.rows[0].unit);
    }

    /// Two nights: base and `v` at `level`, the variant `effect` away, 6 boots each.
    fn night(id: &str, level: f64, effect: f64) -> Report {
        let mut meta = meta_with(&["base", "v"], "{boots: 6, repetitions: 2}");
        meta.id = id.into();
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 6, level, &mut rec);
        boots("v", 6, level * (1.0 + effect), &mut rec);
        build_from(&meta, &rec.0, &rec.1, &Floors::none("none"))
    }

    /// Issue 21: tonight 3% faster on every boot (a night offset) is no
    /// change of the variant; base has no control and is not compared.
    #[test]
    fn a_night_offset_is_not_a_change_and_base_is_not_compared() {
        let (a, b) = (night("a", 1000.0, -0.01), night("b", 1030.0, -0.01));
        let rows = compare(&a, &b, &b.rule);
        let v = rows.iter().find(|r| r.variant == "v").unwrap();
        assert_eq!(v.method, Method::RatioOfRatios);
        let ratio = v.decision.ratio.unwrap();
        assert!((ratio.ratio - 1.0).abs() < 1e-3, "{ratio:?}");
        assert!(
            !matches!(v.decision.verdict, stats::Verdict::Regressed | stats::Verdict::Improved),
            "{:?}",
            v.decision
        );
        let base = rows.iter().find(|r| r.variant == "base").unwrap();
        assert_eq!(
            (base.method, base.decision.verdict),
            (Method::NoControl, stats::Verdict::Insufficient)
        );
        let text = table_at("a", "b", &rows, 100);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("not compared: no control across runs")
                && flat.contains("never pooled")
                && flat.contains("night offset is allowed for at 0.5% (sd)"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let line = text.lines().find(|l| l.contains(" v ")).unwrap_or_default();
        assert!(
            line.contains('/') && line.contains('%'),
            "one line a cell with its change and p/q: {text}"
        );
    }

    /// A variant 5% slower against its own base tonight is regressed,
    /// whatever the night's offset.
    #[test]
    fn a_change_of_the_variant_against_its_base_is_called() {
        let (a, b) = (night("a", 1000.0, 0.0), night("b", 980.0, -0.05));
        let rows = compare(&a, &b, &b.rule);
        let v = rows.iter().find(|r| r.variant == "v").unwrap();
        assert_eq!(v.decision.verdict, stats::Verdict::Regressed, "{:?}", v.decision);
        assert!((v.decision.ratio.unwrap().ratio - 0.95).abs() < 1e-3);
    }

    /// Each kernel's own night offset is allowed for by the runs' clock:
    /// under icount a 1% change (no boot spread) is still called, on a
    /// wall clock the same runs leave it inside the 0.5% allowance.
    #[test]
    fn the_night_allowance_follows_the_clock() {
        let at = |clock, id, effect| {
            let mut r = night(id, 1000.0, effect);
            r.clock = clock;
            r
        };
        let icount = Some(MeasureClock::TcgIcount);
        let rows = compare(&at(icount, "a", 0.0), &at(icount, "b", -0.03), &Rule::default());
        let v = rows.iter().find(|r| r.variant == "v").unwrap();
        assert_eq!(v.night_sd, ICOUNT_NIGHT_SD);
        let (lo, hi) = (v.decision.ratio.unwrap().lo, v.decision.ratio.unwrap().hi);
        let wall = Some(MeasureClock::TcgWall);
        let rows = compare(&at(wall, "a", 0.0), &at(wall, "b", -0.03), &Rule::default());
        let w = rows.iter().find(|r| r.variant == "v").unwrap();
        assert_eq!(w.night_sd, WALL_NIGHT_SD);
        let (wlo, whi) = (w.decision.ratio.unwrap().lo, w.decision.ratio.unwrap().hi);
        assert!(whi - wlo > hi - lo + 0.015, "icount {lo}..{hi}, wall {wlo}..{whi}");
    }

    #[test]
    fn two_runs_on_differently_set_hosts_say_so_in_one_line() {
        let mut a = meta_with(&["base"], "{boots: 3}");
        let mut b = a.clone();
        assert_eq!(host_differs(&a, &b), None, "neither recorded: nothing to say");
        let state = crate::records::HostState {
            governors: vec!["performance".into()],
            smt: Some("on".into()),
            load: Some(0.1),
            ..Default::default()
        };
        a.host.state = Some(state.clone());
        assert_eq!(
            host_differs(&a, &b).unwrap(),
            "host state differs (A → B): not recorded in B (an older run)"
        );
        b.host.state = Some(crate::records::HostState {
            load: Some(7.0),
            ..state.clone()
        });
        assert_eq!(host_differs(&a, &b), None, "the load is no setting");
        b.host.state = Some(crate::records::HostState {
            governors: vec!["powersave".into()],
            smt: Some("off".into()),
            ..state
        });
        assert_eq!(
            host_differs(&a, &b).unwrap(),
            "host state differs (A → B): governor performance → powersave, SMT on → off"
        );
    }
}
