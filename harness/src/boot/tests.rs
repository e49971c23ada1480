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
    assert_eq!(p.wait(MeasureClock::TcgIcount, 10.0), Duration::from_secs(600), "backstop before any measurement");
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
    assert_eq!(stuck_under_kvm(Accel::Kvm, log).unwrap(), "QEMU stopped the guest: KVM internal error. Suberror: 1");
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
    assert_eq!(kvm_failure_reason("qemu: warning: KVM x\n").unwrap(), "qemu: warning: KVM x");
    assert_eq!(kvm_failure_reason(""), None);
}
