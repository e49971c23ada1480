use super::*;

#[test]
fn grace_grows_with_tcg_overcommit_only() {
    assert_eq!(answer_grace(Accel::Tcg, 2.0), Duration::from_secs(30));
    assert_eq!(answer_grace(Accel::Tcg, 224.0), Duration::from_secs(420));
    assert_eq!(answer_grace(Accel::Kvm, 224.0), Duration::from_secs(30));
}

#[test]
fn pace_stretches_guest_time_only_under_icount() {
    let mut p = Pace::default();
    assert_eq!(p.wait(MeasureClock::TcgWall, 10.0), Duration::from_secs(10));
    assert_eq!(
        p.wait(MeasureClock::TcgIcount, 10.0),
        Duration::from_secs(600),
        "backstop before any measurement"
    );
    p.observe(120.0, 10.0);
    p.observe(50.0, 10.0);
    assert_eq!(p.measured(), Some(12.0), "the slowest pace is kept");
    assert_eq!(p.wait(MeasureClock::TcgIcount, 10.0), Duration::from_secs(180));
    assert_eq!(p.wait(MeasureClock::KvmWall, 10.0), Duration::from_secs(10));
    p.observe(1.0, 0.0);
    assert_eq!(p.measured(), Some(12.0), "no guest time, no measurement");
}

#[test]
fn guest_time_from_the_console() {
    let text = "SeaBIOS\n[    0.000000] Linux version 6.12\n[   12.500000] random: crng init done\n\
                harness: uptime 14.25 3.10\nharness: guest ready\n";
    assert_eq!(console_guest_time(text), Some(14.25));
    assert_eq!(console_guest_time("[   3.5] x\n"), Some(3.5));
    assert_eq!(console_guest_time("no time here\n[bad] x\n"), None);
}

#[test]
fn a_paused_kvm_guest_is_noticed_from_qemu_log() {
    let log = "$ qemu\nKVM internal error. Suberror: 1\nextra data[0]: 0x0\n";
    assert_eq!(
        stuck_under_kvm(Accel::Kvm, log).unwrap(),
        "QEMU stopped the guest: KVM internal error. Suberror: 1"
    );
    assert_eq!(stuck_under_kvm(Accel::Tcg, log), None);
    assert_eq!(stuck_under_kvm(Accel::Kvm, "$ qemu\n"), None);
}

#[test]
fn kvm_failure_reason_prefers_the_real_error() {
    let log = "$ qemu-system-x86_64 -accel kvm\n\
        qemu-system-x86_64: -accel kvm: warning: Number of SMP cpus requested (26) exceeds the recommended cpus supported by KVM (2)\n\
        KVM internal error. Suberror: 1\n";
    assert_eq!(kvm_failure_reason(log).unwrap(), "KVM internal error. Suberror: 1");
    let log = "qemu: warning: KVM something\nqemu: kvm.c:3849: kvm_buf_set_msrs: Assertion `ret' failed.\n";
    assert!(kvm_failure_reason(log).unwrap().contains("Assertion"));
    assert_eq!(
        kvm_failure_reason("qemu: warning: KVM x\n").unwrap(),
        "qemu: warning: KVM x"
    );
    assert_eq!(kvm_failure_reason(""), None);
}

// The lifecycle on the scripted fake: every rule, each test in
// milliseconds, asserting the exact events.

mod bounds;

use super::fake::{Answer, Call, Fake, Script, Until};
use crate::bench::Measured;
use crate::config::Matrix;
use crate::plan::BootJob;
use crate::records::{BootEnv, Cause, Event, Failed};
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{CmdlineSpec, Exit};

/// A run directory, a matrix of one benchmark `s` (1 warm-up and 2
/// counted repetitions, `timeout_s: 60`) with `guest` as its guest section.
struct World {
    run: Run,
    m: Matrix,
    ui: Ui,
    /// Removed when the test ends (after the run's lock is let go).
    _dir: tempfile::TempDir,
}

fn world(name: &str, guest: &str) -> World {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("harness-boot-{name}-"))
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let yaml = format!(
        "variants:\n  - name: base\nvcpus: [2]\nguest: {guest}\nbenchmarks:\n  - {{name: s, kind: doexec, timeout_s: 60}}\n\
         sampling: {{boots: 3, repetitions: 2, warmup_repetitions: 1}}\n"
    );
    let m = crate::config::parse(&yaml, &dir.join("matrix.yaml"), None).unwrap();
    World {
        run: Run::create(dir, "t").unwrap(),
        m,
        ui: Ui::new(0, true),
        _dir: tmp,
    }
}

/// A run's facts and what it learnt, as the pipeline keeps them.
struct Ctx<'a> {
    run: BootRun<'a>,
    learned: Learned,
}

fn ctx(w: &World) -> Ctx<'_> {
    let run = BootRun {
        run: &w.run,
        m: &w.m,
        ui: &w.ui,
        qemu: "qemu-system-x86_64".into(),
        key: "/nonexistent/key".into(),
        host_key: String::new(),
        host_cpus: 2,
        accel: Accel::Tcg,
        profiler: None,
    };
    Ctx {
        run,
        learned: Learned::default(),
    }
}

fn job(boot: u32) -> BootJob {
    BootJob {
        variant: "base".into(),
        vcpus: 2,
        boot,
        benchmarks: vec!["s".into()],
    }
}

/// Runs `job` on `fake`, its events into a [`Recorder`].
fn boot(ctx: &mut Ctx, fake: &mut Fake, job: &BootJob) -> (Result<()>, Vec<BootEvent>) {
    let mut rec = Recorder::default();
    let res = Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: fake,
        sink: &mut rec,
        job,
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"));
    (res, rec.events)
}

/// A repetition's answer: one sample of `value`, `wall_s` wall seconds for
/// 1 guest second.
fn says(value: f64, wall_s: f64) -> Answer {
    let stdout = format!(
        "uptime0 10.00 0\nsample metric=execs_per_s value={value} unit=execs/s better=higher\nuptime1 11.00 0\n"
    );
    Answer::Says { stdout, wall_s }
}

fn job_event(boot: u32) -> BootEvent {
    BootEvent::Job {
        variant: "base".into(),
        vcpus: 2,
        boot,
    }
}

fn started(ctx: &Ctx, boot_id: &str, attempt: u32) -> BootEvent {
    let cmdline = crate::vm::kernel_cmdline(&CmdlineSpec {
        aslr: true,
        overcommit: ctx.run.overcommit(2),
        accel: Accel::Tcg,
        clock: ctx.run.m.guest.clock,
        extra: vec![],
    });
    let (clock, overcommit) = (ctx.run.clock(), ctx.run.overcommit(2));
    BootEvent::Started(BootStart {
        boot_id: boot_id.into(),
        attempt,
        accel: Accel::Tcg,
        clock,
        image: "bzImage".into(),
        overcommit,
        cmdline,
    })
}

/// SSH after 2 s, the environment of [`super::fake::ENV`] (4 s up).
fn logged_in() -> Vec<BootEvent> {
    let env = BootEnv {
        kernel_release: "6.12.0".into(),
        nproc: 2,
        memory_mib: 1024,
        aslr: 2,
        uptime_s: 4.0,
    };
    vec![
        BootEvent::SshReady { ready_s: 2.0 },
        BootEvent::Environment {
            env: Some(env),
            findings: vec![],
            wall_per_guest_s: Some(0.5),
        },
    ]
}

fn rep(repetition: u32) -> BootEvent {
    BootEvent::Repetition {
        benchmark: "s".into(),
        repetition,
        of: 3,
    }
}

fn done(repetition: u32, value: f64) -> BootEvent {
    let metric = Measured {
        metric: "execs_per_s".into(),
        value,
        unit: "execs/s".into(),
        higher_is_better: true,
        series: vec![],
        warmup_series: vec![],
    };
    let params =
        serde_json::json!({"kind": "doexec", "link": "static", "workers": "nproc", "duration_s": 5, "warmup_s": 1});
    BootEvent::RepetitionDone {
        benchmark: "s".into(),
        params,
        repetition,
        warmup: repetition == 0,
        metrics: vec![metric],
        cpu: None,
    }
}

/// The three repetitions of values 1, 2, 3 (1 wall second per guest second).
fn measured() -> Vec<BootEvent> {
    vec![rep(0), done(0, 1.0), rep(1), done(1, 2.0), rep(2), done(2, 3.0)]
}

fn three() -> Vec<Answer> {
    vec![says(1.0, 1.0), says(2.0, 1.0), says(3.0, 1.0)]
}

/// A boot that measured and powered off.
fn ended(busy: f64) -> Vec<BootEvent> {
    vec![
        BootEvent::PoweredOff { findings: vec![] },
        BootEvent::Ended {
            findings: vec![],
            error: None,
            busy_wall_per_guest_s: Some(busy),
            failed: None,
        },
    ]
}

/// A job that never reached SSH, for `cause`.
fn failed(error: String, cause: Cause) -> BootEvent {
    let failed = Some(Failed::new(crate::records::Stage::Boot, cause));
    BootEvent::Ended {
        findings: vec![],
        error: Some(error),
        busy_wall_per_guest_s: None,
        failed,
    }
}

/// A job cut off during measurement, for `cause`.
fn cut_off(error: String, cause: Cause) -> BootEvent {
    let failed = Some(Failed::new(crate::records::Stage::Benchmark, cause));
    BootEvent::Ended {
        findings: vec![],
        error: Some(error),
        busy_wall_per_guest_s: Some(1.0),
        failed,
    }
}

fn cut(stage: BootStage, cause: Cause, error: &str, again: bool) -> BootEvent {
    BootEvent::Cut {
        stage,
        cause,
        error: error.into(),
        findings: vec![],
        again,
    }
}

const SIGABRT: &str =
    "QEMU died from signal 6 (SIGABRT) before SSH came up: qemu: iotlb_to_section: Assertion `section' failed.";

fn aborts() -> Script {
    Script {
        log: "$ qemu-system-x86_64\nqemu: iotlb_to_section: Assertion `section' failed.\n".into(),
        ..Script::dies(Exit::Signal(libc::SIGABRT))
    }
}

#[test]
fn a_qemu_signal_before_ssh_boots_the_job_again() {
    let w = world("retry-before-ssh", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![aborts(), Script::ssh(three())]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let mut want = vec![
        job_event(0),
        started(&ctx, "base-2cpu-b0", 1),
        cut(BootStage::WaitSsh, Cause::QemuSignal, SIGABRT, true),
    ];
    want.push(started(&ctx, "base-2cpu-b0.2", 2));
    want.extend(logged_in().into_iter().chain(measured()).chain(ended(1.0)));
    assert_eq!(events, want);
    assert_eq!(
        fake.calls.iter().filter(|c| **c == Call::Kill).count(),
        1,
        "the crashed QEMU is reaped: {:?}",
        fake.calls
    );
    assert!(
        w.run.log("boots/base-2cpu-b0.2").is_dir(),
        "the retry has its own log directory"
    );
}

#[test]
fn a_qemu_signal_during_measurement_cuts_the_boot_and_boots_again() {
    let w = world("retry-measuring", "{}");
    let mut ctx = ctx(&w);
    let first = Script::ssh(vec![says(1.0, 1.0), Answer::Dies(Exit::Signal(libc::SIGABRT))]);
    let mut fake = Fake::new(vec![first, Script::ssh(three())]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let mut want = vec![job_event(0), started(&ctx, "base-2cpu-b0", 1)];
    want.extend(logged_in());
    want.extend([rep(0), done(0, 1.0), rep(1)]);
    // no RepetitionFailed, no Ended: the cut boot's samples are never counted
    want.push(cut(
        BootStage::Measure,
        Cause::QemuSignal,
        "measure during s: QEMU died from signal 6 (SIGABRT) in repetition 1: no QEMU output",
        true,
    ));
    want.push(started(&ctx, "base-2cpu-b0.2", 2));
    want.extend(logged_in().into_iter().chain(measured()).chain(ended(1.0)));
    assert_eq!(events, want);
}

#[test]
fn qemu_dying_in_every_attempt_fails_the_job_once() {
    let w = world("retry-all", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![aborts(), aborts(), aborts()]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let last = format!("{SIGABRT} (QEMU died in all 3 attempts)");
    let want = vec![
        job_event(0),
        started(&ctx, "base-2cpu-b0", 1),
        cut(BootStage::WaitSsh, Cause::QemuSignal, SIGABRT, true),
        started(&ctx, "base-2cpu-b0.2", 2),
        cut(BootStage::WaitSsh, Cause::QemuSignal, SIGABRT, true),
        started(&ctx, "base-2cpu-b0.3", 3),
        cut(BootStage::WaitSsh, Cause::QemuSignal, &last, false),
    ];
    let want: Vec<BootEvent> = want
        .into_iter()
        .chain([failed(format!("boot failed: {last}"), Cause::QemuSignal)])
        .collect();
    assert_eq!(events, want);
}

#[test]
fn a_kernel_panic_or_a_qemu_exit_before_ssh_is_the_kernels_failure() {
    let w = world("panic", "{}");
    let mut ctx = ctx(&w);
    let console = "[    1.5] Kernel panic - not syncing: VFS: Unable to mount root fs\n".to_string();
    let panics = Script {
        until: Until::Hangs,
        console: console.clone(),
        ..Script::ssh(vec![])
    };
    let mut fake = Fake::new(vec![panics, Script::dies(Exit::Code(1))]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let why = "kernel panic during boot (panic)";
    let findings = crate::vm::scan_console(&console);
    let want = vec![
        job_event(0),
        started(&ctx, "base-2cpu-b0", 1),
        BootEvent::Cut {
            stage: BootStage::WaitSsh,
            cause: Cause::Panic,
            error: why.into(),
            findings: findings.clone(),
            again: false,
        },
        BootEvent::Ended {
            findings,
            error: Some(format!("boot failed: {why}")),
            busy_wall_per_guest_s: None,
            failed: Some(Failed::new(crate::records::Stage::Boot, Cause::Panic)),
        },
    ];
    assert_eq!(events, want);
    let (res, events) = boot(&mut ctx, &mut fake, &job(1));
    res.unwrap();
    let why = "QEMU exited with status 1 before SSH came up: no console output";
    let want = vec![
        job_event(1),
        started(&ctx, "base-2cpu-b1", 1),
        cut(BootStage::WaitSsh, Cause::QemuExit, why, false),
        failed(format!("boot failed: {why}"), Cause::QemuExit),
    ];
    assert_eq!(events, want);
}

#[test]
fn a_guest_that_stops_answering_or_powers_off_is_cut_and_not_booted_again() {
    let w = world("hung", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![
        Script::ssh(vec![says(1.0, 1.0), Answer::Hangs]),
        Script::ssh(vec![says(1.0, 1.0), Answer::Dies(Exit::Code(0))]),
    ]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let why = "guest stopped answering: no result 30 s after the benchmark's timeout";
    let mut want = vec![job_event(0), started(&ctx, "base-2cpu-b0", 1)];
    want.extend(logged_in());
    want.extend([
        rep(0),
        done(0, 1.0),
        rep(1),
        BootEvent::RepetitionFailed {
            benchmark: "s".into(),
            repetition: 1,
            error: why.into(),
            cause: Cause::GuestHung,
        },
    ]);
    let error = format!("measure during s: {why}");
    want.extend([
        cut(BootStage::Measure, Cause::GuestHung, &error, false),
        BootEvent::PoweredOff { findings: vec![] },
    ]);
    want.push(cut_off(error, Cause::GuestHung));
    assert_eq!(events, want);
    // the bench waits its timeout plus 30 s of grace; a guest that does not answer is killed, dmesg not asked
    let runs: Vec<&Call> = fake
        .calls
        .iter()
        .filter(|c| matches!(c, Call::Run(cmd, _) if cmd.starts_with("/bench/")))
        .collect();
    assert!(
        runs.iter()
            .all(|c| matches!(c, Call::Run(_, w) if *w == Duration::from_secs(90))),
        "{runs:?}"
    );
    assert_eq!(fake.calls.last(), Some(&Call::Kill));
    assert!(!fake
        .calls
        .iter()
        .any(|c| matches!(c, Call::Run(cmd, _) if cmd == "dmesg")));

    let (res, events) = boot(&mut ctx, &mut fake, &job(1));
    res.unwrap();
    let why = "read the guest command's output: connection reset";
    let error = format!("measure during s: {why}");
    let tail = [
        BootEvent::RepetitionFailed {
            benchmark: "s".into(),
            repetition: 1,
            error: why.into(),
            cause: Cause::Ssh,
        },
        cut(BootStage::Measure, Cause::Ssh, &error, false),
        BootEvent::PoweredOff { findings: vec![] },
        cut_off(error.clone(), Cause::Ssh),
    ];
    assert_eq!(events[events.len() - 4..], tail);
}

#[test]
fn a_boot_timeout_is_guest_time_turned_into_a_host_wait_by_the_pace() {
    let w = world("timeout", "{clock: icount, boot_timeout_s: 100}");
    let mut ctx = ctx(&w);
    let console = "[    0.0] Linux version 6.12\nharness: uptime 150.25 1.0\n".to_string();
    let past = Script {
        until: Until::Hangs,
        console,
        ..Script::ssh(vec![])
    };
    // the busy pace: 12 wall seconds per guest second
    let slow = Answer::Says {
        stdout: "uptime0 10.00 0\nsample metric=x value=1 unit=s better=lower\nuptime1 20.00 0\n".into(),
        wall_s: 120.0,
    };
    let scripts = vec![
        Script {
            until: Until::Hangs,
            ..Script::ssh(vec![])
        },
        past,
        Script::ssh(vec![slow]),
        Script {
            until: Until::Hangs,
            ..Script::ssh(vec![])
        },
    ];
    let mut fake = Fake::new(scripts);
    let deadline = "reach the guest over SSH before the boot deadline: connect to the guest's sshd: connection refused";
    // before any measured pace: the backstop of 60 wall seconds per guest second, bounded by the first
    // boot's bound at 2 vCPUs (issue 30: 190 s, not the 30 min cap)
    let (_, events) = boot(&mut ctx, &mut fake, &job(0));
    assert_eq!(
        events[2],
        cut(
            BootStage::WaitSsh,
            Cause::BootTimeout,
            &host_deadline(190, deadline),
            false
        )
    );
    assert_eq!(fake.calls[1], Call::WaitSsh(crate::boot::first_ssh_bound(2)));
    // the console's guest time passes boot_timeout_s first
    let (_, events) = boot(&mut ctx, &mut fake, &job(1));
    let why = "no SSH after 150 guest seconds (guest.boot_timeout_s is 100 guest seconds under icount)";
    assert_eq!(events[2], cut(BootStage::WaitSsh, Cause::BootTimeout, why, false));
    // a boot that measures: its waits stretch by the backstop (capped), then by the pace it measured,
    // bounded by 5x the repetition it measured (120 s)
    ctx.learned.strikes = Strikes::default();
    let (_, events) = boot(&mut ctx, &mut fake, &job(2));
    let bench_waits: Vec<Duration> = fake
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Run(cmd, w) if cmd.starts_with("/bench/") => Some(*w),
            _ => None,
        })
        .collect();
    assert_eq!(
        bench_waits[0], ICOUNT_WAIT_CAP,
        "60 guest seconds at the backstop and the grace, capped"
    );
    assert_eq!(
        bench_waits[1],
        Duration::from_secs(600),
        "5x the slowest repetition, under the pace's 60 x 12 x 1.5 + 30 s"
    );
    assert!(
        matches!(events.last(), Some(BootEvent::Ended { error: None, busy_wall_per_guest_s: Some(p), .. }) if *p == 12.0),
        "{events:?}"
    );
    assert_eq!(ctx.learned.pace.measured(), Some(12.0));
    // the pace would give 1800 s; the run's slowest boot to SSH (2 s) bounds it at its floor
    let (_, events) = boot(&mut ctx, &mut fake, &job(0));
    assert_eq!(
        events[2],
        cut(
            BootStage::WaitSsh,
            Cause::BootTimeout,
            &host_deadline(120, deadline),
            false
        )
    );
    assert_eq!(
        fake.calls.iter().rev().find(|c| matches!(c, Call::WaitSsh(_))),
        Some(&Call::WaitSsh(SEEN_FLOOR))
    );
}

#[test]
fn warmup_repetitions_are_marked_and_the_busy_pace_is_the_slowest() {
    let w = world("warmup", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![Script::ssh(vec![says(1.0, 3.0), says(2.0, 2.0), says(3.0, 1.5)])]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let want: Vec<BootEvent> = [job_event(0), started(&ctx, "base-2cpu-b0", 1)]
        .into_iter()
        .chain(logged_in())
        .chain(measured())
        .chain(ended(3.0))
        .collect();
    assert_eq!(
        events, want,
        "only repetition 0 is a warm-up one; the busy pace is the slowest repetition's"
    );
    assert_eq!(ctx.learned.pace.measured(), Some(3.0));
    assert_eq!(fake.calls.iter().filter(|c| matches!(c, Call::PowerOff(_))).count(), 1);
}

/// What `--resume` redoes: a job interrupted mid-measurement has no
/// `boot_end`, so the resumed run boots it again, in its next log
/// directory, from its first attempt and repetition; a job with a
/// `boot_end` is skipped (pipeline's `done`).
#[test]
fn an_interrupted_job_boots_afresh_when_resumed() {
    let w = world("resume", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![Script::ssh(three())]);
    let mut sink = RunSink::new(&w.run, &w.ui);
    Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: &mut fake,
        sink: &mut sink,
        job: &job(1),
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"))
    .unwrap();
    let mut fake = Fake::new(vec![Script::ssh(vec![says(1.0, 1.0), Answer::Interrupted])]);
    let mut sink = RunSink::new(&w.run, &w.ui);
    let e = Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: &mut fake,
        sink: &mut sink,
        job: &job(0),
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"))
    .unwrap_err();
    assert!(e.downcast_ref::<crate::proc::Interrupted>().is_some(), "{e:#}");
    let ends = |run: &Run| -> Vec<(u32, Option<String>)> {
        run.events()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                Event::BootEnd { boot, boot_id, .. } => Some((boot, boot_id)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        ends(&w.run),
        [(1, Some("base-2cpu-b1".to_string()))],
        "the interrupted boot has no boot_end"
    );
    // resumed: the jobs without a boot_end boot again
    let done: Vec<u32> = ends(&w.run).iter().map(|e| e.0).collect();
    let mut fake = Fake::new(vec![Script::ssh(three())]);
    for j in [job(0), job(1)].iter().filter(|j| !done.contains(&j.boot)) {
        let (res, events) = boot(&mut ctx, &mut fake, j);
        res.unwrap();
        let want: Vec<BootEvent> = [job_event(0), started(&ctx, "base-2cpu-b0.2", 1)]
            .into_iter()
            .chain(logged_in())
            .chain(measured())
            .chain(ended(1.0))
            .collect();
        assert_eq!(events, want);
    }
    assert_eq!(
        fake.calls.iter().filter(|c| matches!(c, Call::Start(_))).count(),
        1,
        "the ended job is not booted again"
    );
}

/// The run's sink writes the records of today's schema: a retried boot
/// before SSH, a boot cut during measurement, a boot that ended.
#[test]
fn the_run_sink_writes_the_runs_records() {
    let w = world("records", "{}");
    let mut ctx = ctx(&w);
    let measuring = Script::ssh(vec![says(1.0, 1.0), Answer::Dies(Exit::Signal(libc::SIGABRT))]);
    let dmesg = "[    9.0] WARNING: CPU: 1 PID: 9 at mm/vmalloc.c:100 free_vmap_area_noflush+0x9/0x20\n".to_string();
    let mut fake = Fake::new(vec![
        aborts(),
        measuring,
        Script {
            dmesg,
            ..Script::ssh(three())
        },
    ]);
    let mut sink = RunSink::new(&w.run, &w.ui);
    Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: &mut fake,
        sink: &mut sink,
        job: &job(0),
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"))
    .unwrap();
    let lines = |f: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(w.run.dir.join(f))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let events = lines("events.jsonl");
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["boot_id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        kinds,
        [
            ("boot", "base-2cpu-b0"),
            ("boot", "base-2cpu-b0.2"),
            ("notice", ""),
            ("boot", "base-2cpu-b0.3"),
            ("boot_end", "base-2cpu-b0.3")
        ]
    );
    let cmdline = match started(&ctx, "x", 1) {
        BootEvent::Started(s) => s.cmdline,
        _ => unreachable!(),
    };
    let first = serde_json::json!({
        "event": "boot", "variant": "base", "vcpus": 2, "boot": 0, "boot_id": "base-2cpu-b0", "accel": "tcg", "clock": "tcg-wall",
        "wall_per_guest_s": null, "cmdline": "", "image": "bzImage", "overcommit": 1.0, "ready_s": null, "env": null,
        "error": SIGABRT, "findings": [], "retried": true, "failed": {"stage": "boot", "cause": "qemu_signal"}
    });
    assert_eq!(events[0], first);
    let second = serde_json::json!({
        "event": "boot", "variant": "base", "vcpus": 2, "boot": 0, "boot_id": "base-2cpu-b0.2", "accel": "tcg", "clock": "tcg-wall",
        "wall_per_guest_s": 0.5, "cmdline": cmdline, "image": "bzImage", "overcommit": 1.0, "ready_s": 2.0,
        "env": {"kernel_release": "6.12.0", "nproc": 2, "memory_mib": 1024, "aslr": 2, "uptime_s": 4.0},
        "error": null, "findings": []
    });
    assert_eq!(events[1], second);
    let notice =
        "base-2cpu-b0.2: measure during s: QEMU died from signal 6 (SIGABRT) in repetition 1: no QEMU output; \
                  QEMU's failure, not the kernel's: this boot's samples are not counted and the job boots again";
    assert_eq!(events[2], serde_json::json!({"event": "notice", "message": notice}));
    let finding = serde_json::json!({"kind": "warn", "line": "WARNING: CPU: 1 PID: 9 at mm/vmalloc.c:100 free_vmap_area_noflush+0x9/0x20", "signature": "warn: free_vmap_area_noflush"});
    let end = serde_json::json!({
        "event": "boot_end", "variant": "base", "vcpus": 2, "boot": 0, "boot_id": "base-2cpu-b0.3", "findings": [finding], "error": null,
        "busy_wall_per_guest_s": 1.0
    });
    assert_eq!(events[4], end);
    let samples = lines("samples.jsonl");
    let ids: Vec<(&str, u64, bool)> = samples
        .iter()
        .map(|s| {
            (
                s["boot_id"].as_str().unwrap(),
                s["repetition"].as_u64().unwrap(),
                s["warmup"] == true,
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("base-2cpu-b0.2", 0, true),
            ("base-2cpu-b0.3", 0, true),
            ("base-2cpu-b0.3", 1, false),
            ("base-2cpu-b0.3", 2, false)
        ]
    );
    assert_eq!(samples[3]["value"], 3.0);
    assert_eq!(samples[3]["clock"], "tcg-wall");
    assert!(
        w.run.log("boots/base-2cpu-b0.3/bench-s-r2.log").is_file()
            && w.run.log("boots/base-2cpu-b0.3/dmesg.log").is_file()
    );
}

/// The KVM probe: a guest that reaches SSH proves KVM; one QEMU stops with
/// a KVM internal error, or one silent on its console until the deadline,
/// is KVM's fault (remembered for the host); a kernel panic, or a guest
/// that printed and then did not answer, is not.
#[test]
fn the_kvm_probe_tells_a_kvm_fault_from_another_failure() {
    let w = world("probe", "{}");
    let mut ctx = ctx(&w);
    ctx.run.accel = Accel::Kvm;
    let dir = w.run.log("kvm-probe");
    let (k, i) = (Path::new("/k/bzImage"), Path::new("/k/initrd"));
    let stuck = Script {
        until: Until::Hangs,
        log: "$ qemu\nKVM internal error. Suberror: 1\nextra data[0]: 0x0\n".into(),
        ..Script::ssh(vec![])
    };
    let panics = Script {
        until: Until::Hangs,
        console: "[    0.5] Kernel panic - not syncing: Fatal exception\n".into(),
        ..Script::ssh(vec![])
    };
    let silent = Script {
        until: Until::Hangs,
        ..Script::ssh(vec![])
    };
    let slow = Script {
        until: Until::Hangs,
        console: "[    1.653697] amd_pstate: the _CPC object is not present\n".into(),
        ..Script::ssh(vec![])
    };
    let mut fake = Fake::new(vec![Script::ssh(vec![]), stuck, panics, silent, slow]);
    assert_eq!(probe_on(&ctx.run, &mut fake, k, i, &dir).unwrap(), None);
    assert_eq!(fake.calls.last(), Some(&Call::PowerOff(Duration::from_secs(5))));
    assert_eq!(fake.calls[1], Call::WaitSsh(PROBE_DEADLINE));
    let got = |f: Option<ProbeFailure>| f.map(|f| (f.why, f.kvm_fault, f.cause));
    assert_eq!(
        got(probe_on(&ctx.run, &mut fake, k, i, &dir).unwrap()),
        Some(("KVM internal error. Suberror: 1".to_string(), true, Cause::Qemu))
    );
    assert_eq!(
        got(probe_on(&ctx.run, &mut fake, k, i, &dir).unwrap()),
        Some(("kernel panic during boot (panic)".to_string(), false, Cause::Panic))
    );
    // a guest that wrote nothing by the deadline never ran its kernel: KVM's fault
    assert_eq!(
        got(probe_on(&ctx.run, &mut fake, k, i, &dir).unwrap()),
        Some((
            "the KVM guest wrote nothing to its console in 60 s".to_string(),
            true,
            Cause::BootTimeout
        ))
    );
    // one that printed and then did not answer is not blamed on KVM
    let f = probe_on(&ctx.run, &mut fake, k, i, &dir).unwrap().unwrap();
    assert_eq!((f.kvm_fault, f.cause), (false, Cause::BootTimeout), "{}", f.why);
}

/// The real machine's edge without QEMU: a program that, like a QEMU hit
/// by its TCG race, prints an assertion and dies from SIGABRT. `Qemu` sees
/// the signal, the lifecycle boots the job again, and after the last
/// attempt the job fails once, as the e2e test with a real QEMU shows; a
/// program that exits with a status fails the job at once.
#[test]
fn the_real_machine_sees_a_qemu_that_aborts_or_exits_before_ssh() {
    let w = world("qemu-aborts", "{}");
    let fake_qemu = w._dir.path().join("qemu-system-x86_64");
    std::fs::write(
        &fake_qemu,
        "#!/bin/sh\necho \"qemu: iotlb_to_section: Assertion \\`section' failed.\"\nkill -ABRT $$\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake_qemu, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut ctx = ctx(&w);
    ctx.run.qemu = fake_qemu;
    let mut machine = Qemu::new("/nonexistent/key".into(), String::new());
    let mut rec = Recorder::default();
    Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: &mut machine,
        sink: &mut rec,
        job: &job(0),
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"))
    .unwrap();
    let cuts: Vec<(&str, Cause, bool)> = rec
        .events
        .iter()
        .filter_map(|e| match e {
            BootEvent::Cut {
                error, cause, again, ..
            } => Some((error.as_str(), *cause, *again)),
            _ => None,
        })
        .collect();
    let last = format!("{SIGABRT} (QEMU died in all 3 attempts)");
    assert_eq!(
        cuts,
        [
            (SIGABRT, Cause::QemuSignal, true),
            (SIGABRT, Cause::QemuSignal, true),
            (last.as_str(), Cause::QemuSignal, false)
        ]
    );
    assert_eq!(
        rec.events.last(),
        Some(&failed(format!("boot failed: {last}"), Cause::QemuSignal))
    );
    assert!(w.run.log("boots/base-2cpu-b0.3/qemu.log").is_file());

    // one that exits with a status: the kernel's boot failed, no retry
    std::fs::write(
        &ctx.run.qemu,
        "#!/bin/sh\necho \"qemu: could not load kernel '/k/bzImage'\"\nexit 1\n",
    )
    .unwrap();
    let mut rec = Recorder::default();
    Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: &mut machine,
        sink: &mut rec,
        job: &job(1),
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"))
    .unwrap();
    let why = "QEMU exited with status 1 before SSH came up: qemu: could not load kernel '/k/bzImage'";
    assert_eq!(
        rec.events[2..],
        [
            cut(BootStage::WaitSsh, Cause::QemuExit, why, false),
            failed(format!("boot failed: {why}"), Cause::QemuExit)
        ]
    );
}

#[test]
fn icount_boots_load_the_profiler_when_the_run_has_one() {
    let k = tempfile::tempdir().unwrap();
    let kernel = k.path().join("bzImage");
    let so = k.path().join("libharness_profiler.so");
    std::fs::write(&so, b"\x7fELF").unwrap();
    let syms = k.path().join(crate::profile::symbols::FILE);
    let dir = Path::new("/runs/x/logs/boots/base-2cpu-b0");
    // (guest section, profiler set, symbols written, expected: None = no plugin, Some(true) = plugin, Some(false) = refused)
    let cases = [
        ("{clock: icount, accel: tcg}", true, true, Some(true)),
        ("{clock: icount, accel: tcg}", false, true, None),
        ("{clock: icount, accel: tcg, kernel_profile: false}", true, true, None),
        ("{clock: wall, accel: tcg}", true, true, None),
        ("{clock: icount, accel: tcg}", true, false, Some(false)),
    ];
    for (guest, set, written, want) in cases {
        let _ = std::fs::remove_file(&syms);
        if written {
            std::fs::write(&syms, "ffffffff81000000 10 f\n").unwrap();
        }
        let w = world("profile", guest);
        let mut c = ctx(&w);
        c.run.profiler = set.then(|| so.clone());
        match (super::profile_plugin(&c.run, &kernel, dir, true), want) {
            (Ok(None), None) => {}
            (Ok(Some(p)), Some(true)) => {
                assert_eq!((p.so, p.symbols), (so.clone(), syms.clone()));
                assert_eq!(p.out, w.run.records().join("profiles/base-2cpu-b0.profile"));
                assert!(w.run.records().join("profiles").is_dir());
            }
            (Err(e), Some(false)) => assert!(format!("{e:#}").contains("read the symbols file"), "{e:#}"),
            (got, want) => panic!("{guest} {set} {written}: {:?}, want {want:?}", got.map(|p| p.is_some())),
        }
    }
}

#[test]
fn a_profiled_boot_has_nokaslr_and_a_broken_profiler_only_a_notice() {
    let k = tempfile::tempdir().unwrap();
    let so = k.path().join("libharness_profiler.so");
    std::fs::write(&so, b"\x7fELF").unwrap();
    let kernel = k.path().join("bzImage");
    for (syms, nokaslr) in [(true, true), (false, false)] {
        if syms {
            std::fs::write(k.path().join(crate::profile::symbols::FILE), "ffffffff81000000 10 f\n").unwrap();
        } else {
            let _ = std::fs::remove_file(k.path().join(crate::profile::symbols::FILE));
        }
        let w = world("nokaslr", "{clock: icount, accel: tcg}");
        let mut c = ctx(&w);
        c.run.profiler = Some(so.clone());
        let mut fake = Fake::new(vec![Script::ssh(vec![says(100.0, 1.0)])]);
        let mut rec = Recorder::default();
        Boot {
            ctx: &c.run,
            learned: &mut c.learned,
            machine: &mut fake,
            sink: &mut rec,
            job: &job(0),
        }
        .run(&kernel, Path::new("/k/initrd"))
        .unwrap();
        let cmdline = rec.events.iter().find_map(|e| match e {
            BootEvent::Started(s) => Some(s.cmdline.clone()),
            _ => None,
        });
        assert_eq!(cmdline.unwrap().ends_with(" nokaslr"), nokaslr);
        let notices: Vec<String> = w
            .run
            .events()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                Event::Notice { message } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(
            notices
                .iter()
                .any(|n| n.starts_with("base-2cpu-b0: this boot has no kernel profile: read the symbols file")),
            !syms,
            "{notices:?}"
        );
    }
}

#[test]
fn a_profiled_boot_records_each_window_and_its_instructions_per_op() {
    let k = tempfile::tempdir().unwrap();
    let so = k.path().join("libharness_profiler.so");
    std::fs::write(&so, b"\x7fELF").unwrap();
    std::fs::write(k.path().join(crate::profile::symbols::FILE), "ffffffff81000000 10 f\n").unwrap();
    let w = world("windows", "{clock: icount, accel: tcg}");
    let mut c = ctx(&w);
    c.run.profiler = Some(so);
    // the plugin writes a window at each closing marker: here the warm-up's
    // and the first measured repetition's; the second wrote none
    let profiles = w.run.records().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let window = |ops: u64| {
        format!("harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops {ops} missing 0\nvcpus 2\ntotal 1000 1 0 0\nkernel 800 1 0 0\nf f 800 1 0 0\nf [user] 200 0 0 0\n")
    };
    std::fs::write(profiles.join("base-2cpu-b0.profile.1"), window(10)).unwrap();
    std::fs::write(profiles.join("base-2cpu-b0.profile.2"), window(4)).unwrap();
    let mut fake = Fake::new(vec![Script::ssh(vec![says(100.0, 1.0)])]);
    let mut sink = super::RunSink::new(&w.run, &w.ui);
    Boot {
        ctx: &c.run,
        learned: &mut c.learned,
        machine: &mut fake,
        sink: &mut sink,
        job: &job(0),
    }
    .run(&k.path().join("bzImage"), Path::new("/k/initrd"))
    .unwrap();
    let got: Vec<(u32, bool, String, Option<u64>)> = w
        .run
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Event::Profile {
                repetition,
                warmup,
                path,
                ops,
                error: None,
                boot_id,
                ..
            } if boot_id == "base-2cpu-b0" => Some((repetition, warmup, path, ops)),
            _ => None,
        })
        .collect();
    let rel = |n: u32| format!("profiles/base-2cpu-b0.profile.{n}");
    assert_eq!(got, [(0, true, rel(1), Some(10)), (1, false, rel(2), Some(4))]);
    let per_op: Vec<(u32, String, f64)> = w
        .run
        .samples()
        .unwrap()
        .into_iter()
        .filter(|s| s.unit == "insns/op")
        .map(|s| (s.repetition, s.metric, s.value))
        .collect();
    let want = [
        (0, "insns_per_op", 100.0),
        (0, "kernel_insns_per_op", 80.0),
        (0, "user_insns_per_op", 20.0),
        (1, "insns_per_op", 250.0),
        (1, "kernel_insns_per_op", 200.0),
        (1, "user_insns_per_op", 50.0),
    ];
    assert_eq!(
        per_op,
        want.map(|(r, m, v)| (r, m.to_string(), v)).to_vec(),
        "the second measured repetition has no window"
    );
}

/// The reason a boot under icount gives when the host stopped waiting.
fn host_deadline(s: u64, why: &str) -> String {
    format!(
        "no SSH within {s} host seconds (under icount a host wait is its guest time through the pace, at most 5x the slowest \
         of its kind the run measured (at least 120 s), at most 1800 s): {why}"
    )
}

/// Issue 22 item 8: a repetition whose output goes over the limit is
/// recorded as such, and the boot goes on with the next one.
#[test]
fn a_repetition_over_the_output_limit_fails_alone() {
    let w = world("flood", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![Script::ssh(vec![says(1.0, 1.0), Answer::Floods, says(1.0, 1.0)])]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let over = BootEvent::RepetitionFailed {
        benchmark: "s".into(),
        repetition: 1,
        error: "output over limit: the guest command printed more than 64 MiB".into(),
        cause: Cause::OutputOverLimit,
    };
    assert!(events.contains(&over), "{events:#?}");
    assert!(
        !events.iter().any(|e| matches!(e, BootEvent::Cut { .. })),
        "{events:#?}"
    );
}

/// Issue 22 item 8: a boot whose console floods is stopped, as over the limit.
#[test]
fn a_boot_whose_console_floods_is_stopped() {
    let w = world("console-flood", "{}");
    let mut ctx = ctx(&w);
    let flood = "[    1.0] flood\n".repeat((crate::vm::MAX_CONSOLE as usize) / 16 + 1);
    let mut fake = Fake::new(vec![Script {
        console: flood,
        ..Script::ssh(vec![says(1.0, 1.0)])
    }]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let why = "console over limit: the guest wrote more than 64 MiB to its console";
    assert_eq!(
        events.last(),
        Some(&failed(format!("boot failed: {why}"), Cause::OutputOverLimit)),
        "{:?}",
        events.last()
    );
    assert!(
        !fake.calls.iter().any(|c| matches!(c, Call::Run(..))),
        "no benchmark runs"
    );
}

/// Issue 30: a guest that floods its console while a benchmark runs is
/// stopped then (the real machine checks the console file four times a
/// second during the command), as over the limit, and no later repetition
/// runs.
#[test]
fn a_console_that_floods_during_a_repetition_stops_the_boot() {
    let w = world("console-flood-rep", "{}");
    let mut ctx = ctx(&w);
    let mut fake = Fake::new(vec![Script::ssh(vec![
        says(1.0, 1.0),
        Answer::FloodsConsole,
        says(1.0, 1.0),
    ])]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let why = "measure during s: console over limit: the guest wrote more than 64 MiB to its console";
    let Some(BootEvent::Ended { error, failed, .. }) = events.last() else {
        panic!("{events:#?}")
    };
    assert_eq!(error.as_deref(), Some(why));
    let stage = crate::records::Stage::Benchmark;
    assert_eq!(
        *failed,
        Some(crate::records::Failed {
            stage,
            cause: Cause::OutputOverLimit
        })
    );
    let bench = |c: &&Call| matches!(c, Call::Run(cmd, _) if !cmd.starts_with("uname") && cmd != "dmesg");
    let runs = fake.calls.iter().filter(bench).count();
    assert_eq!(runs, 2, "the repetition after the flood never runs: {:?}", fake.calls);
}

/// The run's sink files each event by its envelope: a job's end told with
/// no `Job` event before it is that job's record (the sink once kept the
/// job from its `Job` event and failed with "came before its job").
#[test]
fn the_run_sink_files_an_event_by_its_envelope() {
    let w = world("envelope", "{}");
    let mut sink = RunSink::new(&w.run, &w.ui);
    let j = job(3);
    let event = BootEvent::NotBooted { error: "why".into() };
    sink.emit(Told::now(&j, event)).unwrap();
    let want = Event::BootEnd {
        variant: "base".into(),
        vcpus: 2,
        boot: 3,
        boot_id: None,
        findings: vec![],
        error: Some("why".into()),
        busy_wall_per_guest_s: None,
        failed: Some(Failed::new(crate::records::Stage::Boot, Cause::NotBooted)),
    };
    assert_eq!(w.run.events().unwrap(), [want]);
}
