//! A run split into shards (`run --shard K/N`): which shards finished,
//! which still run, which failed or never wrote, and the boot jobs a failed
//! or missing shard owes, turned into failed boot jobs so they show as failed
//! cells (never as a variant that is not there). Pure: the caller lists the
//! shard directories and reads the records.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::config::Matrix;
use crate::plan::{self, Shard};
use crate::records::{Cause, Event, Failed, Stage};

/// One shard's standing in the report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShardState {
    /// `K/N`.
    pub shard: String,
    /// `done`, `running (pid …)`, `failed` or `missing`.
    pub state: String,
    /// Its boot jobs.
    pub jobs: usize,
    /// Of those, the ones no record says ended.
    pub not_run: usize,
}

/// What the shards of a run add to its report.
#[derive(Debug, Default)]
pub struct Accounting {
    /// Every shard of the count the run was split into.
    pub shards: Vec<ShardState>,
    /// A failed `boot_end` per job a failed or missing shard owes.
    pub failures: Vec<Event>,
    /// Notes for the report.
    pub notes: Vec<String>,
    /// Every shard's jobs ended (or nothing was sharded).
    pub all_done: bool,
}

/// Accounts for the shards of a run of `m` whose directories are `dirs`
/// (each shard with the holder of its lock, if it is running), given every
/// event of the run, shards' included.
pub fn account(m: &Matrix, dirs: &[(Shard, Option<String>)], events: &[Event]) -> Accounting {
    let mut acc = Accounting {
        all_done: true,
        ..Default::default()
    };
    let Some(n) = shard_count(dirs) else { return acc };
    let counts: BTreeSet<u32> = dirs.iter().map(|d| d.0.n).collect();
    if counts.len() > 1 {
        acc.notes.push(format!(
            "shards of different counts ({counts:?}) wrote into this run; shards are accounted as {n}"
        ));
    }
    let ended: BTreeSet<(&str, u32, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::BootEnd {
                variant, vcpus, boot, ..
            } => Some((variant.as_str(), *vcpus, *boot)),
            _ => None,
        })
        .collect();
    let all = plan::boot_jobs(m);
    for k in 0..n {
        account_shard(&mut acc, m, &all, Shard { k, n }, dirs, &ended);
    }
    let done = acc.shards.iter().filter(|s| s.state == "done").count();
    acc.notes.insert(
        0,
        format!(
            "shards: {done} of {n} done ({})",
            acc.shards
                .iter()
                .map(|s| format!("{} {}", s.shard, s.state))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    acc
}

/// Shard `shard`'s state and the jobs it owes (those with no `boot_end`
/// in `ended`), added to `acc`: a failed or missing shard's owed jobs as
/// failed boots, with a note.
fn account_shard(
    acc: &mut Accounting,
    m: &Matrix,
    all: &[plan::BootJob],
    shard: Shard,
    dirs: &[(Shard, Option<String>)],
    ended: &BTreeSet<(&str, u32, u32)>,
) {
    let jobs = plan::shard_jobs(m, all, shard);
    let owed: Vec<&plan::BootJob> = jobs
        .iter()
        .filter(|j| !ended.contains(&(j.variant.as_str(), j.vcpus, j.boot)))
        .collect();
    let dir = dirs.iter().find(|d| d.0 == shard);
    let state = match (dir, owed.is_empty()) {
        (_, true) => "done".to_string(),
        (Some((_, Some(writer))), false) => format!("running ({writer})"),
        (Some(_), false) => "failed".to_string(),
        (None, false) => "missing".to_string(),
    };
    if !owed.is_empty() {
        acc.all_done = false;
    }
    if state == "failed" || state == "missing" {
        let why = if state == "failed" {
            "failed: it stopped before this boot job"
        } else {
            "is missing: it wrote no records"
        };
        acc.notes.push(format!(
            "shard {shard} {state}: {} of its {} boot jobs not run; they count as failed boots of their cells",
            owed.len(),
            jobs.len()
        ));
        acc.failures.extend(owed.iter().map(|j| owed_job(j, shard, why)));
    }
    acc.shards.push(ShardState {
        shard: shard.to_string(),
        state,
        jobs: jobs.len(),
        not_run: owed.len(),
    });
}

/// The shard count: the one most shard directories were written for.
fn shard_count(dirs: &[(Shard, Option<String>)]) -> Option<u32> {
    let counts: BTreeSet<u32> = dirs.iter().map(|d| d.0.n).collect();
    counts
        .into_iter()
        .max_by_key(|&n| (dirs.iter().filter(|d| d.0.n == n).count(), n))
}

/// The record of a job a shard owes: a boot that ended in failure.
fn owed_job(j: &plan::BootJob, shard: Shard, why: &str) -> Event {
    Event::BootEnd {
        variant: j.variant.clone(),
        vcpus: j.vcpus,
        boot: j.boot,
        boot_id: Some(format!("{} (shard {shard})", j.id())),
        findings: vec![],
        error: Some(format!("shard {shard} {why}")),
        busy_wall_per_guest_s: None,
        failed: Some(Failed::new(Stage::Boot, Cause::ShardLost)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{RunMeta, Sample};
    use crate::report::tests::{meta_with, sample};
    use crate::report::{build_from, cell_text, Floors, Report};
    use crate::stats::Verdict;

    type Records = (Vec<Sample>, Vec<Event>);

    /// What a shard records for one boot job that ran: 1 warm-up and 2 measured repetitions.
    fn ran(j: &plan::BootJob, out: &mut Records) {
        let id = j.id();
        let mut boot = crate::report::tests::boot(&j.variant, &id, None);
        if let Event::Boot { vcpus, boot: b, .. } = &mut boot {
            (*vcpus, *b) = (j.vcpus, j.boot);
        }
        out.1.push(boot);
        for (rep, warm) in [(0, true), (1, false), (2, false)] {
            out.0.push(Sample {
                vcpus: j.vcpus,
                boot: j.boot,
                ..sample(&j.variant, &id, rep, 100.0 + f64::from(j.boot), warm)
            });
        }
        out.1.push(Event::BootEnd {
            variant: j.variant.clone(),
            vcpus: j.vcpus,
            boot: j.boot,
            boot_id: Some(id),
            findings: vec![],
            error: None,
            busy_wall_per_guest_s: None,
            failed: None,
        });
    }

    /// The report of the shards' records as `report::build` makes it.
    fn report(meta: &RunMeta, dirs: &[(Shard, Option<String>)], rec: &Records) -> (Report, Accounting) {
        let acc = account(&meta.matrix, dirs, &rec.1);
        let mut events = rec.1.clone();
        events.extend(acc.failures.iter().cloned());
        let mut r = build_from(meta, &rec.0, &events, &Floors::none("none"));
        r.complete &= acc.all_done;
        (r, acc)
    }

    fn jobs(meta: &RunMeta, k: u32, n: u32) -> Vec<plan::BootJob> {
        plan::shard_jobs(&meta.matrix, &plan::boot_jobs(&meta.matrix), Shard { k, n })
    }

    /// Issue 14: a shard that died shows as failed boots of its cells (both
    /// variants still there, neither "fails more"), and the run is incomplete.
    #[test]
    fn a_failed_shard_shows_as_failed_cells() {
        let meta = meta_with(&["base", "v"], "{boots: 4, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        jobs(&meta, 0, 2).iter().for_each(|j| ran(j, &mut rec));
        // shard 1 ran its first block (one boot of each variant), then died
        jobs(&meta, 1, 2).iter().take(2).for_each(|j| ran(j, &mut rec));
        let dirs = [(Shard { k: 0, n: 2 }, None), (Shard { k: 1, n: 2 }, None)];
        let (r, acc) = report(&meta, &dirs, &rec);
        assert_eq!(
            acc.shards
                .iter()
                .map(|s| (s.state.as_str(), s.jobs, s.not_run))
                .collect::<Vec<_>>(),
            vec![("done", 4, 0), ("failed", 4, 2)]
        );
        assert_eq!(r.rows.len(), 1);
        let cells = &r.rows[0].cells;
        assert_eq!(
            cells.iter().map(|c| c.variant.as_str()).collect::<Vec<_>>(),
            vec!["base", "v"],
            "no variant goes missing"
        );
        for c in cells {
            assert_eq!((c.n, c.boots_ended, c.boots_failed), (3, 4, 1), "{}", cell_text(c));
            assert!(
                cell_text(c).contains("(failed in 1/4 boots: shard 1/2 failed: it stopped before"),
                "{}",
                cell_text(c)
            );
        }
        assert_ne!(
            cells[1].decision.unwrap().verdict,
            Verdict::FailsMore,
            "a shard's failure is not the variant's"
        );
        assert!(!r.complete);
        assert!(
            acc.notes[0].starts_with("shards: 1 of 2 done (0/2 done, 1/2 failed)"),
            "{:?}",
            acc.notes
        );
        assert!(
            acc.notes
                .iter()
                .any(|n| n.contains("shard 1/2 failed: 2 of its 4 boot jobs not run")),
            "{:?}",
            acc.notes
        );
    }

    /// A shard that never wrote: the cells it owned are FAILED cells, in
    /// their rows, with every variant.
    #[test]
    fn a_missing_shard_shows_as_failed_cells() {
        let y = "variants:\n  - name: base\n  - name: v\nvcpus: [2, 4]\nbenchmarks:\n  - {name: d, kind: doexec}\nsampling: {boots: 1, repetitions: 2}\n";
        let meta = RunMeta {
            matrix: crate::config::parse(y, std::path::Path::new("/x/m.yaml"), None).unwrap(),
            ..meta_with(&["base"], "{boots: 1}")
        };
        let mut rec = (Vec::new(), Vec::new());
        jobs(&meta, 0, 2).iter().for_each(|j| ran(j, &mut rec));
        let (r, acc) = report(&meta, &[(Shard { k: 0, n: 2 }, None)], &rec);
        assert_eq!(acc.shards[1].state, "missing");
        let row4 = r
            .rows
            .iter()
            .find(|r| r.vcpus == 4)
            .expect("the missing shard's row is there");
        for c in &row4.cells {
            assert!(
                cell_text(c).starts_with("FAILED: shard 1/2 is missing: it wrote no records"),
                "{}",
                cell_text(c)
            );
        }
        assert_eq!(row4.cells.len(), 2);
        let row2 = r.rows.iter().find(|r| r.vcpus == 2).unwrap();
        assert!(row2.cells.iter().all(|c| c.n == 1 && c.failure.is_none()));
    }

    /// A running shard owes nothing yet; shards that all finished give the
    /// report one run of the whole plan would.
    #[test]
    fn running_and_finished_shards() {
        let meta = meta_with(&["base", "v"], "{boots: 4, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        jobs(&meta, 0, 2).iter().for_each(|j| ran(j, &mut rec));
        let dirs = [
            (Shard { k: 0, n: 2 }, None),
            (Shard { k: 1, n: 2 }, Some("pid 7, harness run --shard 1/2".to_string())),
        ];
        let (r, acc) = report(&meta, &dirs, &rec);
        assert_eq!(acc.shards[1].state, "running (pid 7, harness run --shard 1/2)");
        assert!(acc.failures.is_empty() && !r.complete);
        assert!(r.rows[0].cells.iter().all(|c| c.n == 2 && c.boots_failed == 0));
        jobs(&meta, 1, 2).iter().for_each(|j| ran(j, &mut rec));
        let (r, acc) = report(&meta, &[(dirs[0].0, None), (dirs[1].0, None)], &rec);
        assert!(acc.all_done && r.complete && acc.failures.is_empty());
        let whole = {
            let mut one = (Vec::new(), Vec::new());
            plan::boot_jobs(&meta.matrix).iter().for_each(|j| ran(j, &mut one));
            build_from(&meta, &one.0, &one.1, &Floors::none("none"))
        };
        let shape = |r: &Report| {
            r.rows
                .iter()
                .flat_map(|x| {
                    x.cells
                        .iter()
                        .map(|c| (c.variant.clone(), c.n, c.reps_per_boot.clone(), c.boots.clone()))
                })
                .collect::<Vec<_>>()
        };
        let mut sharded = shape(&r);
        let mut one = shape(&whole);
        for c in sharded.iter_mut().chain(one.iter_mut()) {
            c.3.sort_by(f64::total_cmp);
        }
        assert_eq!(sharded, one);
    }

    /// Shards on hosts of different clocks: the boots measured in another
    /// clock than the run's are not merged into its cells but refused, each
    /// named; the cells hold the run clock's boots alone.
    #[test]
    fn boots_of_another_clock_are_refused_not_merged() {
        use crate::records::MeasureClock;
        let meta = meta_with(&["base", "v"], "{boots: 4, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        jobs(&meta, 0, 2).iter().for_each(|j| ran(j, &mut rec));
        let first_kvm = rec.1.len();
        jobs(&meta, 1, 2).iter().for_each(|j| ran(j, &mut rec));
        for (i, e) in rec.1.iter_mut().enumerate() {
            if let Event::Boot { clock, .. } = e {
                *clock = Some(if i < first_kvm {
                    MeasureClock::TcgWall
                } else {
                    MeasureClock::KvmWall
                });
            }
        }
        let dirs = [(Shard { k: 0, n: 2 }, None), (Shard { k: 1, n: 2 }, None)];
        let (r, _) = report(&meta, &dirs, &rec);
        assert_eq!(r.clock, Some(MeasureClock::TcgWall));
        for c in &r.rows[0].cells {
            assert_eq!(c.n, 2, "{}: boots of two clocks merged: {}", c.variant, cell_text(c));
        }
        let refused: Vec<&String> = r
            .notes
            .iter()
            .filter(|n| n.contains("not counted: 4 boot(s) measured in the kvm-wall clock, not the run's tcg-wall"))
            .collect();
        assert_eq!(refused.len(), 1, "{:?}", r.notes);
    }
}
