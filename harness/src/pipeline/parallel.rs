//! Boot jobs several at a time (`run --jobs N`): how many ([`jobs_at_once`]:
//! under icount as many as the host's cores and memory allow, under a wall
//! clock one unless concurrency is asked for explicitly), and the
//! scheduler ([`boot_at_once`]). Worker threads take the jobs in the seeded
//! plan's order, so the blocks stay interleaved and variants still
//! alternate; each job is a whole boot in its own log directory, its
//! records written as they arrive. QEMU is spawned on the main thread,
//! which does nothing else while the workers run: a child's parent-death
//! signal follows the thread that spawned it, and the main thread lives as
//! long as the run. What the workers measure (pace, bounds, strikes) is
//! merged after each job. Until a boot at a vCPU count has ended, the
//! next job of that count waits for it (the first boot runs alone), so
//! the waits of every later boot are bounded by a measurement
//! (`boot::Seen`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use anyhow::{anyhow, Result};

use super::{boot_one, is_done, Ended, Kernels};
use crate::boot::{BootRun, Learned, Spawner};
use crate::plan::BootJob;
use crate::proc;
use crate::records::MeasureClock;
use crate::vm::{Vm, VmSpec};

/// How many boot jobs run at once: `asked` (`--jobs`), else under icount
/// as many as the host's CPUs and its available memory hold guests that
/// each need `need_mib` of the host (at least 1; [`crate::host::guest_need_mib`]
/// at the run's largest vCPU count: two 448-vCPU guests of 8 GiB do not
/// start together on a 24 GiB host), under a wall clock 1. More than one under a
/// wall clock is refused unless `allow_wall` (`--allow-concurrent-wall`):
/// guests sharing the host's CPUs change each other's wall-clock numbers.
pub fn jobs_at_once(
    clock: MeasureClock,
    asked: Option<u32>,
    allow_wall: bool,
    cpus: u32,
    available_mib: u64,
    need_mib: u64,
) -> Result<u32> {
    let wall = clock != MeasureClock::TcgIcount;
    match asked {
        Some(0) => Err(anyhow!("--jobs 0 runs nothing: give 1 or more")),
        Some(n) if n > 1 && wall && !allow_wall => Err(anyhow!(
            "--jobs {n} under the {clock} clock: guests running at once share the host's CPUs and change each other's \
             wall-clock numbers; add --allow-concurrent-wall to run them so anyway (the report then says so), or measure under icount"
        )),
        Some(n) => Ok(n),
        None if wall => Ok(1),
        None => Ok(cpus.max(1).min((available_mib / need_mib.max(1)).max(1) as u32)),
    }
}

/// What the workers share: the jobs left, in plan order, and what the
/// run measured so far.
struct Shared<'j> {
    queue: Mutex<VecDeque<&'j BootJob>>,
    learned: Mutex<Learned>,
    /// The vCPU counts of the jobs running now.
    running: Mutex<Vec<u32>>,
    stop: AtomicBool,
}

impl Shared<'_> {
    /// The next job in plan order, once it may start: when the run has
    /// measured a boot at its vCPU count, or none of that count runs.
    /// `None`: no job is left.
    fn next(&self) -> Option<&BootJob> {
        loop {
            {
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                let &job = q.front()?;
                let measured = self
                    .learned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .seen
                    .measured_ssh(job.vcpus);
                let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
                if measured || !running.contains(&job.vcpus) || self.stop.load(Ordering::SeqCst) {
                    running.push(job.vcpus);
                    return q.pop_front();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// A job of `vcpus` ended.
    fn done(&self, vcpus: u32) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = running.iter().position(|&n| n == vcpus) {
            running.remove(i);
        }
    }
}

/// A request to the main thread: start QEMU so, reply with the guest.
type SpawnRequest = (VmSpec, PathBuf, mpsc::Sender<Result<Vm>>);

/// Boots the jobs not done yet, `n` at a time, as [`super::boot_jobs`]
/// does one at a time. The first error (an interruption, a record that
/// cannot be written) stops every worker after its current job.
pub(super) fn boot_at_once(
    ctx: &BootRun,
    learned: &mut Learned,
    n: u32,
    jobs: &[BootJob],
    kernels: &Kernels,
    done: &Ended,
) -> Result<()> {
    let left: VecDeque<&BootJob> = jobs.iter().filter(|j| !is_done(done, j)).collect();
    for _ in 0..jobs.len() - left.len() {
        ctx.ui.inc();
    }
    let shared = Shared {
        queue: Mutex::new(left),
        learned: Mutex::new(learned.clone()),
        running: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    };
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let workers: Vec<_> = (0..n)
            .map(|_| {
                let tx = tx.clone();
                let spawn: Spawner = Arc::new(move |spec: VmSpec, log: &Path| {
                    let (reply, answer) = mpsc::channel();
                    tx.send((spec, log.to_path_buf(), reply))
                        .map_err(|_| anyhow!("start QEMU: the main thread no longer spawns"))?;
                    answer
                        .recv()
                        .map_err(|_| anyhow!("start QEMU: the main thread did not answer"))?
                });
                let shared = &shared;
                s.spawn(move || worker(ctx, shared, kernels, spawn))
            })
            .collect();
        drop(tx);
        // the main thread spawns every QEMU until the last worker is done
        for (spec, log, reply) in rx {
            let _ = reply.send(Vm::start(spec, &log));
        }
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err(anyhow!("a boot worker panicked"))))
            .collect()
    });
    *learned = shared.learned.into_inner().unwrap_or_else(|e| e.into_inner());
    results.into_iter().collect()
}

/// One worker: takes the next job in plan order until none is left or
/// another worker failed; each job on a copy of what the run measured,
/// merged back when it ends.
fn worker(ctx: &BootRun, shared: &Shared, kernels: &Kernels, spawn: Spawner) -> Result<()> {
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let Some(job) = shared.next() else { return Ok(()) };
        let before = shared.learned.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut learned = before.clone();
        let res =
            proc::check_interrupted().and_then(|_| boot_one(ctx, &mut learned, job, kernels, Some(spawn.clone())));
        shared
            .learned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(&before, &learned, job);
        shared.done(job.vcpus);
        ctx.ui.inc();
        if let Err(e) = res {
            shared.stop.store(true, Ordering::SeqCst);
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host;

    #[test]
    fn jobs_follow_the_clock_the_cores_and_the_memory() {
        let icount = MeasureClock::TcgIcount;
        let wall = MeasureClock::TcgWall;
        // (clock, asked, allow wall, cpus, available MiB, a guest's need in MiB) -> jobs or the error's start
        type Case = (
            MeasureClock,
            Option<u32>,
            bool,
            u32,
            u64,
            u64,
            std::result::Result<u32, &'static str>,
        );
        let cases: [Case; 11] = [
            (icount, None, false, 2, 22_000, 1536, Ok(2)),
            (icount, None, false, 64, 22_000, 1536, Ok(14)),
            (icount, None, false, 16, 1000, 1536, Ok(1)),
            // at 448 vCPUs, 8 GiB guests: one at a time on a 24 GiB host
            (icount, None, false, 2, 22_000, host::guest_need_mib(8192, 448), Ok(1)),
            (icount, None, false, 2, 22_000, host::guest_need_mib(4096, 448), Ok(2)),
            (icount, Some(3), false, 2, 22_000, 1024, Ok(3)),
            (wall, None, false, 64, 220_000, 1024, Ok(1)),
            (wall, Some(1), false, 64, 220_000, 1024, Ok(1)),
            (
                wall,
                Some(2),
                false,
                64,
                220_000,
                1024,
                Err("--jobs 2 under the tcg-wall clock"),
            ),
            (wall, Some(2), true, 64, 220_000, 1024, Ok(2)),
            (icount, Some(0), false, 2, 22_000, 1024, Err("--jobs 0 runs nothing")),
        ];
        for (clock, asked, allow, cpus, avail, guest, want) in cases {
            let got = jobs_at_once(clock, asked, allow, cpus, avail, guest).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{clock:?} {asked:?} {cpus} {avail}"),
                (Err(g), Err(w)) => assert!(g.starts_with(w), "{g}"),
                (g, w) => panic!("{clock:?} {asked:?}: got {g:?}, want {w:?}"),
            }
        }
    }
}
