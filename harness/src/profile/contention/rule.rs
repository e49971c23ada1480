//! The rule a contention row is called by: beyond its spread across
//! boots, above its floors, the sides apart, and enough boots a side (more
//! for a heap row).

use serde::Serialize;

use super::Class;
use crate::profile::diff::Stat;

/// The rule a contention row is called by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Options {
    /// |Δ median| must exceed this many times the row's noise (the larger
    /// side's max − min across boots).
    pub spread_factor: f64,
    /// ... and this many events per op. 0.75: a new global atomic on a
    /// path the op runs once moves its row by 1; a heap row's count moves
    /// with the scheduler (whether a line had one writer or two), and at
    /// 0.5 seed 002's revert at 8 vCPUs called `heap line via
    /// __x64_sys_prlimit64` 1.47 → 2.00 per exec, its boot ranges just
    /// apart (docs/measurements/2026-12-06-seeds-contention.md).
    pub abs_floor: f64,
    /// ... and this fraction of base's median of the row.
    pub rel_floor: f64,
    /// Boots a side before anything is called.
    pub min_boots: usize,
    /// Boots a side before a heap row is called. A heap row's count has
    /// modes that follow where the scheduler put tasks in a boot (whether
    /// a line had one writer or two: `heap line via do_wait` 2.0 or 0 per
    /// fork-exec); three boots a side all in one mode against three in the
    /// other fooled the rule in 8.7% (fork-exec) and 11% (stress-ng mmap)
    /// of A/A comparisons, five in 0.2% and 0.55%, while no static row was
    /// ever called (2,000 comparisons each; docs/profiles.md, "Contention").
    pub heap_min_boots: usize,
    /// The two sides' boot ranges apart.
    pub separated: bool,
}

/// What the rule makes of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Moved beyond its noise: called.
    Called,
    /// A heap row that moved beyond its noise with fewer than
    /// [`Options::heap_min_boots`] a side: shown, not called.
    HeldBack,
    /// Within its noise (or too few boots for any row).
    Within,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            spread_factor: 3.0,
            abs_floor: 0.75,
            rel_floor: 0.1,
            min_boots: 3,
            heap_min_boots: 5,
            separated: true,
        }
    }
}

impl Options {
    /// A row's threshold on |Δ median| from base's and the variant's boots
    /// `b` and `v` (`fewest`: boots on the smaller side), and what the rule
    /// makes of the row of `class`.
    pub fn calls(&self, class: Class, b: &Stat, v: &Stat, fewest: usize) -> (f64, Call) {
        let noise = b.range().max(v.range());
        let threshold = (self.spread_factor * noise)
            .max(self.abs_floor)
            .max(self.rel_floor * b.median);
        let apart = !self.separated || v.min > b.max || v.max < b.min;
        let moved = (v.median - b.median).abs() > threshold && apart;
        let least = match class {
            Class::Static => self.min_boots,
            Class::Heap => self.heap_min_boots.max(self.min_boots),
        };
        let call = match (moved, fewest >= least) {
            (true, true) => Call::Called,
            (true, false) if fewest >= self.min_boots => Call::HeldBack,
            _ => Call::Within,
        };
        (threshold, call)
    }
}
