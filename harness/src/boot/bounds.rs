//! What a run has seen so far that shapes its next boots: the bounds of
//! every host wait under icount ([`Seen`]: the slowest boot to SSH and the
//! slowest repetition measured, in host seconds, with an absolute cap), and
//! the variant × vCPU counts whose boots are given up ([`Strikes`]: after
//! [`BOOTS_BEFORE_GIVING_UP`] boots in a row failed before SSH, the rest
//! are recorded as failed without booting). The lifecycle applies them.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::plan::CellKey;
use crate::records::MeasureClock;
use crate::records::{Cause, Event};

/// The longest one host wait may be under icount, whatever guest time it
/// stands for: before the run measured anything, a guest-time deadline
/// stretched by the backstop pace (60×) would otherwise be hours.
pub const ICOUNT_WAIT_CAP: Duration = Duration::from_secs(1800);

/// Before the run has measured a boot to SSH at a vCPU count, the wait for
/// SSH there is at most this much plus [`FIRST_SSH_PER_VCPU`] a vCPU (and
/// never over [`ICOUNT_WAIT_CAP`]): a kernel that hangs silently in the
/// run's first boot costs minutes, not the cap. Boots to SSH under icount
/// take 6–31 s at 2–26 vCPUs on the development hosts (measured in
/// docs/measurements/icount-boot-time.md), so this is 6× and more of the
/// slowest seen there; the plan boots base first at each vCPU count, so
/// the bound of every other variant's boot is normally measured.
pub const FIRST_SSH_CAP: Duration = Duration::from_secs(180);

/// What each vCPU adds to [`FIRST_SSH_CAP`]: icount runs every vCPU on one
/// host thread, so a boot's bring-up grows with their number.
pub const FIRST_SSH_PER_VCPU: Duration = Duration::from_secs(5);

/// Once the run has measured a boot to SSH (at the job's vCPU count) or a
/// repetition (of the benchmark, at the job's vCPU count), a host wait
/// under icount is at most this multiple of the slowest one…
pub const SEEN_MULTIPLE: f64 = 5.0;

/// …and never less than this, so a host busier than before is not a hang.
pub const SEEN_FLOOR: Duration = Duration::from_secs(120);

/// Boots of one variant at one vCPU count that fail before SSH one after
/// the other (the job's last attempt, a QEMU crash retried not counted)
/// before that cell's remaining boots are recorded as failed without
/// booting: the first failure, then one more try.
pub const BOOTS_BEFORE_GIVING_UP: u32 = 2;

/// The slowest successful boot to SSH per vCPU count, and the slowest
/// successful repetition per benchmark and vCPU count, in host seconds.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    ssh: BTreeMap<u32, f64>,
    reps: BTreeMap<(String, u32), f64>,
}

fn keep_slowest(slot: &mut f64, wall_s: f64) {
    if wall_s.is_finite() && wall_s > *slot {
        *slot = wall_s;
    }
}

fn bound(slowest: f64) -> Duration {
    Duration::from_secs_f64(slowest * SEEN_MULTIPLE).max(SEEN_FLOOR)
}

impl Seen {
    /// A guest of `vcpus` reached SSH `wall_s` host seconds after its start.
    pub fn ssh(&mut self, vcpus: u32, wall_s: f64) {
        keep_slowest(self.ssh.entry(vcpus).or_insert(0.0), wall_s);
    }

    /// A repetition of `benchmark` at `vcpus` answered after `wall_s`.
    pub fn repetition(&mut self, benchmark: &str, vcpus: u32, wall_s: f64) {
        keep_slowest(self.reps.entry((benchmark.to_string(), vcpus)).or_insert(0.0), wall_s);
    }

    /// Keeps the slowest of this and `other` (what a boot running at the
    /// same time measured).
    pub fn merge(&mut self, other: &Seen) {
        for (&n, &s) in &other.ssh {
            self.ssh(n, s);
        }
        for ((b, n), &s) in &other.reps {
            self.repetition(b, *n, s);
        }
    }

    /// The bound of a wait for SSH at `vcpus`: from the slowest boot
    /// measured there, else the first boot's ([`first_ssh_bound`]).
    pub fn ssh_bound(&self, vcpus: u32) -> Option<Duration> {
        Some(
            self.ssh
                .get(&vcpus)
                .map_or_else(|| first_ssh_bound(vcpus), |&s| bound(s)),
        )
    }

    /// Whether a boot at `vcpus` reached SSH in this run.
    pub fn measured_ssh(&self, vcpus: u32) -> bool {
        self.ssh.contains_key(&vcpus)
    }

    /// The bound of a wait for a repetition of `benchmark` at `vcpus`,
    /// once one was measured.
    pub fn repetition_bound(&self, benchmark: &str, vcpus: u32) -> Option<Duration> {
        self.reps.get(&(benchmark.to_string(), vcpus)).map(|&s| bound(s))
    }
}

/// The wait for SSH at `vcpus` before any boot there was measured:
/// [`FIRST_SSH_CAP`] and [`FIRST_SSH_PER_VCPU`] a vCPU, at most
/// [`ICOUNT_WAIT_CAP`].
pub fn first_ssh_bound(vcpus: u32) -> Duration {
    (FIRST_SSH_CAP + FIRST_SSH_PER_VCPU * vcpus).min(ICOUNT_WAIT_CAP)
}

/// `wait` under `clock`, bounded: under icount at most `seen` (what the run
/// measured, when it did) and [`ICOUNT_WAIT_CAP`]; under a wall clock
/// `wait` itself.
pub fn bounded(clock: MeasureClock, wait: Duration, seen: Option<Duration>) -> Duration {
    match clock {
        MeasureClock::TcgIcount => seen.map_or(wait, |s| wait.min(s)).min(ICOUNT_WAIT_CAP),
        _ => wait,
    }
}

/// Per variant and vCPU count, how many boots in a row failed before SSH,
/// and the last one's reason and cause.
#[derive(Debug, Clone, Default)]
pub struct Strikes {
    failed: BTreeMap<CellKey, (u32, String, Cause)>,
}

impl Strikes {
    /// A boot of `variant` at `vcpus` failed before SSH for `cause`.
    pub fn failed(&mut self, variant: &str, vcpus: u32, cause: Cause, why: &str) {
        let e = self
            .failed
            .entry(CellKey::new(variant, vcpus))
            .or_insert((0, String::new(), cause));
        *e = (e.0 + 1, why.to_string(), cause);
    }

    /// A boot of `variant` at `vcpus` reached SSH: its failures are forgiven.
    pub fn reached(&mut self, variant: &str, vcpus: u32) {
        self.failed.remove(&CellKey::new(variant, vcpus));
    }

    /// Why the next boot of `variant` at `vcpus` is not booted, if it is not.
    pub fn given_up(&self, variant: &str, vcpus: u32) -> Option<String> {
        let (n, why, cause) = self.failed.get(&CellKey::new(variant, vcpus))?;
        (*n >= BOOTS_BEFORE_GIVING_UP).then(|| {
            let hangs = match (variant, cause) {
                ("base", Cause::BootTimeout) => {
                    format!("the base kernel hangs at {vcpus} vCPUs, so no variant there has a baseline: ")
                }
                _ => String::new(),
            };
            let cause = serde_json::to_value(cause).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            format!(
                "not booted: {hangs}the {n} boots of {variant} at {vcpus} vCPUs before it failed before SSH ({cause}), the last: {why}"
            )
        })
    }

    /// Adds what one job of `variant` at `vcpus` did, run on a copy of the
    /// strikes (`before` it, `after` it) while others ran at the same time:
    /// it failed before SSH (a strike more), reached SSH (forgiven), or was
    /// not booted (nothing).
    pub fn merge_job(&mut self, before: &Strikes, after: &Strikes, variant: &str, vcpus: u32) {
        let key = CellKey::new(variant, vcpus);
        match (before.failed.get(&key), after.failed.get(&key)) {
            (_, None) => self.reached(variant, vcpus),
            (b, Some((n, why, cause))) if b.map_or(0, |b| b.0) < *n => self.failed(variant, vcpus, *cause, why),
            _ => {}
        }
    }

    /// The strikes a run's records hold (a resumed run goes on counting):
    /// its `boot_end` events in the order they were written.
    pub fn from_events(events: &[Event]) -> Strikes {
        let mut s = Strikes::default();
        for e in events {
            let Event::BootEnd {
                variant,
                vcpus,
                boot_id: Some(_),
                error,
                failed,
                ..
            } = e
            else {
                continue;
            };
            match failed {
                Some(f) if f.stage == crate::records::Stage::Boot => s.failed(
                    variant,
                    *vcpus,
                    f.cause,
                    error.as_deref().unwrap_or("").trim_start_matches("boot failed: "),
                ),
                _ => s.reached(variant, *vcpus),
            }
        }
        s
    }
}
