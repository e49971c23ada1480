//! The scaling view's contention rows: every shared line's RMWs per op,
//! every shared lock's acquisitions per op and, where the plugin measured
//! its holds, its instructions held per acquisition; with the most vCPUs
//! that wrote or took one of the row's objects, at each count.

use std::collections::BTreeSet;

use super::{row, Count, Mark, Measure, Row, ScalingOptions, Spec};
use crate::profile::contention::{Class, Key, Object};
use crate::profile::PerOp;

/// Every contention row of any boot at any count: the marked first, then
/// those held back, then by |interaction| in thresholds.
pub(super) fn contention_rows(counts: &[Count], insns: f64, enough: bool, o: &ScalingOptions) -> Vec<Row> {
    let keys: BTreeSet<&Key> = counts
        .iter()
        .flat_map(|c| c.base.iter().chain(&c.variant))
        .filter_map(|p| p.contention.as_ref())
        .flat_map(|c| c.rows.keys())
        .collect();
    let mut out = Vec::new();
    for k in keys {
        out.push(events_row(k, counts, enough, o));
        if let Some(r) = hold_row(k, counts, insns, enough, o) {
            out.push(r);
        }
    }
    let rank = |r: &Row| {
        let marked = matches!(r.mark, Mark::Worse | Mark::Better);
        (!marked, !r.held_back)
    };
    let size = |r: &Row| r.interaction.abs() / r.threshold.max(f64::MIN_POSITIVE);
    out.sort_by(|x, y| {
        rank(x)
            .cmp(&rank(y))
            .then(size(y).total_cmp(&size(x)))
            .then(x.name.cmp(&y.name))
    });
    out
}

fn spec<'a>(k: &Key, measure: Measure, pick: &'a dyn Fn(&PerOp) -> Option<f64>) -> Spec<'a> {
    Spec {
        measure,
        name: k.text(),
        key: Some(k.clone()),
        scheduler: super::scheduler_row(k),
        heap: k.class == Class::Heap,
        pick,
    }
}

/// A row's RMWs or acquisitions per op (0 in a boot with contention counts
/// that did not see it); its threshold the contention rule's floors on
/// base's value at the largest count.
fn events_row(k: &Key, counts: &[Count], enough: bool, o: &ScalingOptions) -> Row {
    let pick = |p: &PerOp| p.contention.as_ref().map(|c| c.rows.get(k).map_or(0.0, |r| r.events));
    let c = &o.contention;
    let threshold = |base: f64| c.abs_floor.max(c.rel_floor * base);
    let measure = match k.object {
        Object::Line => Measure::Rmws,
        Object::Lock(_) => Measure::Acquisitions,
    };
    let mut r = row(spec(k, measure, &pick), counts, &threshold, enough, o);
    let most = |boots: &[&PerOp]| {
        boots
            .iter()
            .filter_map(|p| p.contention.as_ref()?.rows.get(k))
            .map(|x| x.writers)
            .max()
            .unwrap_or(0)
    };
    for (a, c) in r.at.iter_mut().zip(counts) {
        a.writers = Some((most(&c.base), most(&c.variant)));
    }
    r
}

/// A lock's instructions held per acquisition, from the boots that
/// measured a hold of it; None for a line or a lock no boot measured. Its
/// threshold: the hold floor, 10% of base's hold at the largest count, and
/// the instruction threshold `insns` over base's acquisitions per op there
/// (the variant's where base takes none).
fn hold_row(k: &Key, counts: &[Count], insns: f64, enough: bool, o: &ScalingOptions) -> Option<Row> {
    let pick = |p: &PerOp| p.contention.as_ref()?.rows.get(k)?.hold;
    let measured = counts
        .iter()
        .flat_map(|c| c.base.iter().chain(&c.variant))
        .any(|p| pick(p).is_some());
    if !matches!(k.object, Object::Lock(_)) || !measured {
        return None;
    }
    // base's acquisitions per op at the largest count (the variant's for a
    // lock base does not take there)
    let acqs = |boots: &[&PerOp]| {
        let xs: Vec<f64> = boots
            .iter()
            .filter_map(|p| Some(p.contention.as_ref()?.rows.get(k)?.events))
            .collect();
        crate::profile::diff::Stat::of(&xs).median
    };
    let last = &counts[counts.len() - 1];
    let taken = [acqs(&last.base), acqs(&last.variant)].into_iter().find(|&a| a > 0.0);
    let per_op = taken.map_or(0.0, |a| insns / a);
    let threshold = |base: f64| o.hold_floor.max(o.contention.rel_floor * base).max(per_op);
    Some(row(spec(k, Measure::Hold, &pick), counts, &threshold, enough, o))
}
