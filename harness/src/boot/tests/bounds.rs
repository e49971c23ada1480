//! The rules of issue 19 on the scripted fake: every host wait under
//! icount bounded by what the run measured, a cell given up after two
//! boots in a row failed before SSH, a repetition without progress failed.

use super::*;

/// A hung guest costs minutes: under icount every host wait is at most
/// 5x the slowest of its kind the run measured (at the job's vCPU count,
/// at least 120 s) and never over the cap, however long the pace and the
/// guest-time deadlines would make it.
#[test]
fn under_icount_every_wait_is_bounded_by_what_the_run_measured() {
    let w = world("bounded", "{clock: icount, boot_timeout_s: 300}");
    let mut ctx = ctx(&w);
    let hangs = || Script {
        until: Until::Hangs,
        ..Script::ssh(vec![])
    };
    // 40 wall seconds per guest second: 300 guest s of boot timeout would be 5 h at the backstop, 5 h again at this pace
    let slow = || says(1.0, 40.0);
    let measures = Script {
        until: Until::Ssh(30.0),
        ..Script::ssh(vec![slow(), slow(), Answer::Hangs])
    };
    let mut fake = Fake::new(vec![measures, hangs()]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    let waits = host_waits(&fake);
    // SSH before anything was measured: the first boot's bound (180 s + 5 s a vCPU); the environment before
    // anything was measured: the cap; the first repetition too; the second: 5x the first (200 s) under the
    // pace's 60 x 40 x 1.5 + 30 s; the third (it hangs) as well
    let cap = ICOUNT_WAIT_CAP;
    assert_eq!(
        waits,
        [
            Duration::from_secs(190),
            cap,
            cap,
            Duration::from_secs(200),
            Duration::from_secs(200)
        ],
        "{:?}",
        fake.calls
    );
    let why = "guest stopped answering: no result within 200 host seconds (under icount a host wait is its guest time through the pace, \
               at most 5x the slowest of its kind the run measured (at least 120 s), at most 1800 s)";
    assert!(
        events.contains(&BootEvent::RepetitionFailed {
            benchmark: "s".into(),
            repetition: 2,
            error: why.into(),
            cause: Cause::GuestHung
        }),
        "{events:?}"
    );
    // the next boot at 2 vCPUs waits 5x the 30 s the first took to reach SSH
    let (_, events) = boot(&mut ctx, &mut fake, &job(1));
    assert_eq!(
        fake.calls.iter().rev().find(|c| matches!(c, Call::WaitSsh(_))),
        Some(&Call::WaitSsh(Duration::from_secs(150)))
    );
    let deadline = "reach the guest over SSH before the boot deadline: connect to the guest's sshd: connection refused";
    let why = host_deadline(150, deadline);
    assert_eq!(events[2], cut(BootStage::WaitSsh, Cause::BootTimeout, &why, false));
    // another vCPU count has measured nothing yet: the first boot's bound there
    assert_eq!(ctx.learned.seen.ssh_bound(4), Some(Duration::from_secs(200)));
    assert!(!ctx.learned.seen.measured_ssh(4) && ctx.learned.seen.measured_ssh(2));
}

/// The host waits the fake was asked for, in order.
fn host_waits(fake: &Fake) -> Vec<Duration> {
    fake.calls
        .iter()
        .filter_map(|c| match c {
            Call::Run(_, w) | Call::WaitSsh(w) => Some(*w),
            _ => None,
        })
        .collect()
}

/// A wall clock's waits are not bounded by what the run measured.
#[test]
fn a_wall_clock_wait_is_not_bounded() {
    let long = Duration::from_secs(7200);
    assert_eq!(bounded(MeasureClock::TcgWall, long, Some(Duration::from_secs(1))), long);
}

/// Issue 30: a kernel that hangs silently in the run's first boot (nothing
/// measured yet, the console silent) is given up after the first boot's
/// bound, minutes, not [`ICOUNT_WAIT_CAP`]'s 30; at 448 vCPUs the bound is
/// the cap.
#[test]
fn a_silent_hang_in_the_first_boot_costs_minutes() {
    let w = world("first-hang", "{clock: icount, boot_timeout_s: 60}");
    let mut ctx = ctx(&w);
    let hangs = Script {
        until: Until::Hangs,
        ..Script::ssh(vec![])
    };
    let mut fake = Fake::new(vec![hangs]);
    let (res, events) = boot(&mut ctx, &mut fake, &job(0));
    res.unwrap();
    assert_eq!(
        fake.calls.iter().find(|c| matches!(c, Call::WaitSsh(_))),
        Some(&Call::WaitSsh(Duration::from_secs(190))),
        "{:?}",
        fake.calls
    );
    let deadline = "reach the guest over SSH before the boot deadline: connect to the guest's sshd: connection refused";
    let why = host_deadline(190, deadline);
    assert_eq!(events[2], cut(BootStage::WaitSsh, Cause::BootTimeout, &why, false));
    assert_eq!(crate::boot::first_ssh_bound(448), ICOUNT_WAIT_CAP);
}

/// After a cell's boot fails before SSH, one more is tried; when it fails
/// too, the cell's other boots are told as failed without booting. A boot
/// that reaches SSH in between forgives; a QEMU crash retried is not a
/// strike; other cells boot as before; a not-booted job's record has no
/// boot id.
#[test]
fn a_cell_that_fails_before_ssh_twice_in_a_row_is_not_booted_again() {
    let w = world("give-up", "{}");
    let mut ctx = ctx(&w);
    let panics = || Script {
        until: Until::Hangs,
        console: "[    1.5] Kernel panic - not syncing: x\n".into(),
        ..Script::ssh(vec![])
    };
    let other = BootJob {
        variant: "other".into(),
        ..job(0)
    };
    // b0 panics, b1 reaches SSH (forgiven), b2 panics, `other` boots, b3 crashes QEMU once then panics: given up
    let mut fake = Fake::new(vec![
        panics(),
        Script::ssh(three()),
        panics(),
        Script::ssh(three()),
        aborts(),
        panics(),
    ]);
    for j in [job(0), job(1), job(2), other.clone(), job(3)] {
        let (res, events) = boot(&mut ctx, &mut fake, &j);
        res.unwrap();
        assert!(matches!(events.last(), Some(BootEvent::Ended { .. })), "{events:?}");
    }
    let starts = |f: &Fake| f.calls.iter().filter(|c| matches!(c, Call::Start(_))).count();
    assert_eq!(starts(&fake), 6);
    let why = "not booted: the 2 boots of base at 2 vCPUs before it failed before SSH (panic), the last: kernel panic during boot (panic)";
    for b in [4, 5] {
        let (res, events) = boot(&mut ctx, &mut fake, &job(b));
        res.unwrap();
        assert_eq!(events, [job_event(b), BootEvent::NotBooted { error: why.into() }]);
    }
    assert_eq!(starts(&fake), 6, "no boot of a given-up cell");
    let mut fake = Fake::new(vec![Script::ssh(three())]);
    let (_, events) = boot(&mut ctx, &mut fake, &BootJob { boot: 1, ..other });
    assert!(
        matches!(events.last(), Some(BootEvent::Ended { failed: None, .. })),
        "another cell boots: {events:?}"
    );
    not_booted_into_the_records(&w, &mut ctx, why);
}

/// A given-up cell's next job, through the run's sink, ends failed in the
/// records with no boot id.
fn not_booted_into_the_records(w: &World, ctx: &mut Ctx<'_>, why: &str) {
    let mut sink = RunSink::new(&w.run, &w.ui);
    let mut none = Fake::new(vec![]);
    Boot {
        ctx: &ctx.run,
        learned: &mut ctx.learned,
        machine: &mut none,
        sink: &mut sink,
        job: &job(6),
    }
    .run(Path::new("/k/bzImage"), Path::new("/k/initrd"))
    .unwrap();
    let want = Event::BootEnd {
        variant: "base".into(),
        vcpus: 2,
        boot: 6,
        boot_id: None,
        findings: vec![],
        error: Some(why.into()),
        busy_wall_per_guest_s: None,
        failed: Some(Failed::new(crate::records::Stage::Boot, Cause::NotBooted)),
    };
    assert_eq!(
        w.run.events().unwrap(),
        [want],
        "a not-booted job ends failed, with no boot id"
    );
}

/// A resumed run counts the strikes on from its records' `boot_end`s.
#[test]
fn strikes_are_read_back_from_the_records() {
    let end = |boot: u32, failed: Option<Failed>, error: Option<&str>| Event::BootEnd {
        variant: "base".into(),
        vcpus: 2,
        boot,
        boot_id: Some(format!("base-2cpu-b{boot}")),
        findings: vec![],
        error: error.map(str::to_string),
        busy_wall_per_guest_s: None,
        failed,
    };
    let timeout = Some(Failed::new(crate::records::Stage::Boot, Cause::BootTimeout));
    let hung = Some(Failed::new(crate::records::Stage::Benchmark, Cause::GuestHung));
    let one = [end(0, timeout, Some("boot failed: no SSH"))];
    assert_eq!(Strikes::from_events(&one).given_up("base", 2), None, "one more try");
    let two = [
        end(0, timeout, Some("boot failed: no SSH")),
        end(1, timeout, Some("boot failed: no SSH again")),
    ];
    let why = "not booted: the base kernel hangs at 2 vCPUs, so no variant there has a baseline: \
               the 2 boots of base at 2 vCPUs before it failed before SSH (boot_timeout), the last: no SSH again";
    assert_eq!(Strikes::from_events(&two).given_up("base", 2).as_deref(), Some(why));
    assert_eq!(Strikes::from_events(&two).given_up("base", 4), None);
    let forgiven = [
        end(0, timeout, Some("x")),
        end(1, hung, Some("measure: hung")),
        end(2, timeout, Some("x")),
    ];
    assert_eq!(
        Strikes::from_events(&forgiven).given_up("base", 2),
        None,
        "a boot that reached SSH forgives"
    );
}

/// A repetition that made no progress (issue 19's 448-vCPU doexec: 0
/// execs/s in every second, `measured_execs=0`) is a failed repetition
/// with its cause, never a sample of 0; the boot measures on.
#[test]
fn a_repetition_without_progress_fails_and_records_no_zero() {
    let w = world("no-progress", "{}");
    let mut ctx = ctx(&w);
    let stuck = "uptime0 10.00 0\nsample metric=execs_per_s value=0 unit=execs/s better=higher t=0\n\
                 sample metric=execs_per_s value=0.0 unit=execs/s better=higher t=1\ninfo measured_execs=0\nuptime1 137.00 0\n";
    let stuck = Answer::Says {
        stdout: stuck.into(),
        wall_s: 127.0,
    };
    let mut fake = Fake::new(vec![Script::ssh(vec![says(1.0, 1.0), stuck, says(3.0, 1.0)])]);
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
    let failed: Vec<(Option<Failed>, String)> = w
        .run
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Event::BenchFailed { failed, error, .. } => Some((failed, error)),
            _ => None,
        })
        .collect();
    let why = "no progress: execs_per_s was 0 in every interval (measured_execs=0)".to_string();
    assert_eq!(
        failed,
        [(
            Some(Failed::new(crate::records::Stage::Benchmark, Cause::NoProgress)),
            why
        )]
    );
    let values: Vec<f64> = w.run.samples().unwrap().iter().map(|s| s.value).collect();
    assert_eq!(values, [1.0, 3.0], "no sample of 0; the boot measured on");
}

/// Issue 30: when base's boots at a vCPU count hang, the run says the base
/// kernel hangs (no variant there has a baseline); another variant's
/// given-up boots say only what failed.
#[test]
fn a_base_kernel_that_hangs_is_named() {
    let mut s = crate::boot::Strikes::default();
    for v in ["base", "a"] {
        s.failed(v, 2, Cause::BootTimeout, "no SSH within 190 host seconds");
        s.failed(v, 2, Cause::BootTimeout, "no SSH within 190 host seconds");
    }
    let base = s.given_up("base", 2).unwrap();
    assert!(
        base.starts_with(
            "not booted: the base kernel hangs at 2 vCPUs, so no variant there has a baseline: the 2 boots"
        ),
        "{base}"
    );
    let a = s.given_up("a", 2).unwrap();
    assert!(
        a.starts_with("not booted: the 2 boots of a at 2 vCPUs") && !a.contains("hangs"),
        "{a}"
    );
}
