//! vCPU threads pinned where the placement says, read back from
//! `/proc/<qemu pid>/task/*/status`: a real QEMU under TCG's multi-threaded
//! wall clock at 2 vCPUs here (the guest a multiboot stub that halts, so
//! no kernel is built: QEMU makes one thread per vCPU whatever it boots),
//! and on demand under KVM on a host with the cores for it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness::config::{Clock, Pin};
use harness::host::topology::{self, format_list, GuestShape, Placement, Topology};
use harness::vm::pin::{allowed_list, record_path, tasks, Pinned};
use harness::vm::{Accel, Vm, VmSpec};

/// A multiboot (v1, a.out kludge) image loaded at 1 MiB whose code is
/// `cli; hlt; jmp hlt`.
pub fn halting_kernel(dir: &Path) -> PathBuf {
    let (magic, flags, at) = (0x1BAD_B002u32, 0x0001_0000u32, 0x0010_0000u32);
    let mut b = Vec::new();
    for w in [magic, flags, 0u32.wrapping_sub(magic + flags), at, at, 0, 0, at + 32] {
        b.extend(w.to_le_bytes());
    }
    b.extend([0xfa, 0xf4, 0xeb, 0xfd]);
    let p = dir.join("halt.mb");
    std::fs::write(&p, b).unwrap();
    std::fs::write(dir.join("module"), b"module").unwrap();
    p
}

pub fn spec(dir: &Path, accel: Accel, vcpus: u32, placement: Placement) -> VmSpec {
    VmSpec {
        qemu: harness::host::qemu_binary().unwrap(),
        accel,
        clock: Clock::Wall,
        vcpus,
        sockets: 1,
        threads: 1,
        numa_nodes: 0,
        memory_mib: 256,
        kernel: halting_kernel(dir),
        initrd: dir.join("module"),
        cmdline: String::new(),
        console: dir.join("console.log"),
        ssh_port: 0,
        plugin: None,
        placement: Some(placement),
        hugepages: false,
        qmp: None,
    }
}

/// Starts the guest, waits for `pin.json`, and checks every vCPU thread's
/// and every other thread's `Cpus_allowed_list` against the plan while
/// QEMU runs. Gives what was recorded.
pub fn start_and_check(s: VmSpec) -> Pinned {
    let dir = s.console.parent().unwrap().to_path_buf();
    let vm = Vm::start(s, &dir.join("qemu.log")).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !record_path(&dir.join("console.log")).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    // as before every repetition of a boot: threads QEMU started since are
    // put with its other threads (in the KVM box one was born on vCPU 1's CPU)
    let mut vm = vm;
    vm.repin();
    let text = std::fs::read_to_string(record_path(&dir.join("console.log"))).unwrap();
    let pinned: Pinned = serde_json::from_str(&text).unwrap();
    let log = std::fs::read_to_string(dir.join("qemu.log")).unwrap_or_default();
    assert_eq!(pinned.error, None, "{text}\nQEMU: {log}");
    let p = &pinned.placement;
    assert_eq!(pinned.vcpu_threads.len(), p.vcpu_cpus.len(), "{text}");
    let pid = vm.pid();
    for &(i, tid) in &pinned.vcpu_threads {
        let want = p.vcpu_cpus[i as usize].to_string();
        assert_eq!(allowed_list(pid, tid), Some(want), "vCPU {i} (thread {tid}): {text}");
    }
    let all = tasks(pid);
    assert!(
        all.len() > pinned.vcpu_threads.len(),
        "QEMU has threads besides its vCPUs: {all:?}"
    );
    let vcpu_tids: Vec<i32> = pinned.vcpu_threads.iter().map(|&(_, t)| t).collect();
    for tid in all.iter().filter(|t| !vcpu_tids.contains(t)) {
        assert_eq!(
            allowed_list(pid, *tid),
            Some(format_list(&p.others)),
            "thread {tid}: {text}"
        );
    }
    drop(vm);
    pinned
}

#[test]
fn tcg_wall_vcpu_threads_are_pinned_as_planned() {
    let dir = tempfile::tempdir().unwrap();
    let t = Topology::here().unwrap();
    let vcpus = 2.min(t.cpus.len() as u32);
    let shape = GuestShape {
        vcpus,
        sockets: 1,
        numa_nodes: 0,
    };
    let mut p = topology::place(&t, shape, Pin::Cores);
    // on this 2-CPU host every CPU holds a vCPU; put them crossed and the
    // other threads on one CPU, so the read-back tells a plan from defaults
    p.vcpu_cpus.reverse();
    if t.cpus.len() > 1 {
        p.others = vec![t.cpus[0].id];
    }
    let want = p.clone();
    let got = start_and_check(spec(dir.path(), Accel::Tcg, vcpus, p));
    assert_eq!(got.placement, want);
    assert_eq!(
        got.vcpu_threads.iter().map(|&(i, _)| i).collect::<Vec<_>>(),
        (0..vcpus).collect::<Vec<_>>()
    );
}

/// Why an on-demand KVM test cannot run here: no usable `/dev/kvm`, or
/// fewer than `cpus` host CPUs this process may use.
fn kvm_missing(cpus: usize) -> Option<String> {
    if let Some(why) = harness::vm::kvm_precheck() {
        return Some(why);
    }
    let here = Topology::here().map_or(0, |t| t.cpus.len());
    (here < cpus).then(|| format!("{here} host CPUs here, the test needs {cpus}"))
}

/// How many KVM vCPU descriptors process `pid` holds (`anon_inode:kvm-vcpu:N`;
/// QEMU also holds a `kvm-vcpu-stats:N` per vCPU, not counted).
pub fn kvm_vcpu_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("anon_inode:kvm-vcpu:")))
        .count()
}

fn skip(test: &str, why: &str) {
    eprintln!("skipped {test}: {why} (run it on a KVM host: docs/kvm-host.md)");
}

/// On demand (`-- --ignored`), on a KVM host with at least 27 CPUs: a
/// 26-vCPU guest (seed 000's size) under KVM, each vCPU thread on a core
/// of its own and the other threads off them, and KVM really used (QEMU
/// holds a `kvm-vcpu` descriptor per vCPU).
#[test]
#[ignore = "needs /dev/kvm and 27 CPUs: docs/kvm-host.md"]
fn kvm_vcpu_threads_are_pinned_at_26_vcpus() {
    let name = "kvm_vcpu_threads_are_pinned_at_26_vcpus";
    if let Some(why) = kvm_missing(27) {
        return skip(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let t = Topology::here().unwrap();
    let shape = GuestShape {
        vcpus: 26,
        sockets: 1,
        numa_nodes: 0,
    };
    let p = topology::place(&t, shape, Pin::Cores);
    assert!(p.pinned() && !p.overcommitted, "{p:?}");
    let cores: std::collections::BTreeSet<u32> = p
        .vcpu_cpus
        .iter()
        .map(|c| t.cpus.iter().find(|x| x.id == *c).unwrap().core)
        .collect();
    assert_eq!(cores.len(), 26, "one core per vCPU: {p:?}");
    let s = spec(dir.path(), Accel::Kvm, 26, p);
    let vm = Vm::start(s.clone(), &dir.path().join("probe.log")).unwrap();
    assert_eq!(kvm_vcpu_fds(vm.pid()), 26, "QEMU runs its vCPUs in KVM");
    drop(vm);
    start_and_check(s);
}

/// On demand (`-- --ignored`), on a KVM host with at least 4 CPUs (it
/// builds the test kernels, minutes): under KVM's wall clock at 2 pinned
/// vCPUs, the `exec-delay` fixture (a fixed 100000-iteration loop per exec,
/// some 30 us) is called regressed on execs/s, base against itself is not,
/// the run is `kvm-wall` with `pin: cores` in run.json, and every boot's
/// `pin.json` names its two vCPU threads with no error.
#[test]
#[ignore = "needs /dev/kvm and 4 CPUs: docs/kvm-host.md"]
fn kvm_wall_clock_calls_a_fixed_exec_cost_regressed() {
    let name = "kvm_wall_clock_calls_a_fixed_exec_cost_regressed";
    if let Some(why) = kvm_missing(4) {
        return skip(name, &why);
    }
    let _g = crate::common::serial();
    let dir = crate::common::scratch("kvm-exec");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/series");
    let matrix = dir.join("matrix.yaml");
    let yaml = format!(
        "{}variants:\n  - name: base\n  - name: base-again\n  - name: exec-delay\n    apply: [exec-delay]\n\
         guest: {{memory_mib: 1024, accel: kvm, pin: cores}}\nvcpus: [2]\nbenchmarks:\n\
         \x20 - {{name: static-doexec, kind: doexec, duration_s: 2, warmup_s: 1, timeout_s: 60}}\n\
         sampling: {{boots: 5, repetitions: 3}}\nstatistics: {{floor: 0.02}}\n",
        super::e2e::kernel_yaml(&fixtures)
    );
    std::fs::write(&matrix, yaml).unwrap();
    let runs = dir.join("runs");
    let mut c = super::e2e::harness(&runs);
    c.arg("run").arg(&matrix);
    let table = crate::common::run_ok(c);
    let run = super::e2e::only_run_dir(&runs);
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["clock"], "kvm-wall", "{table}");
    assert_eq!(meta["matrix"]["guest"]["pin"], "cores");
    let mut boots = 0;
    for e in std::fs::read_dir(run.join("logs/boots")).unwrap().flatten() {
        if !e.path().join("pin.json").exists() {
            continue;
        }
        let text = std::fs::read_to_string(e.path().join("pin.json")).unwrap();
        let p: Pinned = serde_json::from_str(&text).unwrap();
        assert!(p.error.is_none() && p.vcpu_threads.len() == 2, "{text}");
        boots += 1;
    }
    assert!(boots >= 15, "{boots} boot directories");
    let report: serde_json::Value = super::e2e::report_of(&run);
    let verdict = |variant: &str| {
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == "execs_per_s")
            .unwrap()["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["variant"] == variant)
            .unwrap()["decision"]["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(verdict("exec-delay"), "regressed", "{table}");
    assert!(
        !["regressed", "improved"].contains(&verdict("base-again").as_str()),
        "{table}"
    );
}
