use super::*;

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A 4-CPU host (2 cores × 2 threads, one node) with `governor`, `boost`,
/// THP `thp`, a load and other processes.
fn host(root: &Path, governor: &str, boost: &str, thp: &str, load: &str) {
    put(root, "sys/devices/system/cpu/online", "0-3\n");
    for c in 0..4 {
        let t = format!("sys/devices/system/cpu/cpu{c}/topology");
        put(root, &format!("{t}/physical_package_id"), "0\n");
        put(
            root,
            &format!("{t}/thread_siblings_list"),
            &format!("{},{}\n", c % 2, c % 2 + 2),
        );
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
            &format!("{governor}\n"),
        );
    }
    put(root, "sys/devices/system/node/online", "0\n");
    put(root, "sys/devices/system/node/node0/cpulist", "0-3\n");
    put(
        root,
        "sys/devices/system/node/node0/meminfo",
        "Node 0 MemTotal: 8388608 kB\nNode 0 MemFree:  4194304 kB\n",
    );
    put(root, "sys/devices/system/cpu/cpufreq/boost", &format!("{boost}\n"));
    put(root, "sys/devices/system/cpu/smt/control", "on\n");
    put(root, "sys/kernel/mm/transparent_hugepage/enabled", &format!("{thp}\n"));
    put(root, "proc/loadavg", &format!("{load} 0.50 0.40 1/200 999\n"));
    put(
        root,
        "proc/meminfo",
        "HugePages_Free:      100\nHugepagesize:       2048 kB\n",
    );
    put(root, "proc/77/comm", "qemu-system-x86\n");
    put(root, "proc/78/comm", "bash\n");
    put(root, "proc/79/comm", "harness\n");
    put(root, "proc/irq/5/smp_affinity_list", "0-3\n");
    put(root, "proc/irq/9/smp_affinity_list", "3\n");
}

#[test]
fn a_noisy_host_is_read_and_every_cost_has_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    host(dir.path(), "powersave", "1", "always [madvise] never", "3.20");
    let s = HostState::read(dir.path(), &[0, 1], 79);
    assert_eq!(s.topology, "1 package(s), 2 core(s), 4 CPU(s), 1 node(s)");
    assert_eq!(
        (s.governors.clone(), s.boost, s.smt.as_deref()),
        (vec!["powersave".to_string()], Some(true), Some("on"))
    );
    assert_eq!(s.thp.as_deref(), Some("madvise"));
    assert_eq!(
        s.others,
        vec!["qemu-system-x86 77"],
        "bash is no matter, this harness (79) is left out"
    );
    assert_eq!(s.node_free_mib, vec![(0, 4096)]);
    assert_eq!(s.hugepages_free_mib, Some(200));
    assert_eq!(
        (s.measured.as_str(), s.irqs_on_measured.clone()),
        ("0-1", vec![5]),
        "IRQ 9 is on CPU 3 only"
    );
    let f = findings(&s, 4, Some(1024));
    let warned: Vec<&str> = f.iter().filter(|x| x.warn).map(|x| x.what).collect();
    assert_eq!(warned, ["governor", "boost", "load", "processes", "IRQs", "hugepages"]);
    assert!(f.iter().all(|x| x.warn == x.fix.is_some()));
    let fix = |w: &str| f.iter().find(|x| x.what == w).unwrap().fix.clone().unwrap();
    assert_eq!(fix("governor"), "cpupower frequency-set -g performance");
    assert_eq!(fix("hugepages"), "echo 512 > /proc/sys/vm/nr_hugepages  (2 MiB pages)");
    assert!(fix("processes").contains("-p 77"));
}

#[test]
fn a_quiet_host_has_nothing_to_fix_and_settings_tell_hosts_apart() {
    let dir = tempfile::tempdir().unwrap();
    host(dir.path(), "performance", "0", "[always] madvise never", "0.01");
    std::fs::remove_dir_all(dir.path().join("proc/77")).unwrap();
    std::fs::remove_dir_all(dir.path().join("proc/irq")).unwrap();
    let quiet = HostState::read(dir.path(), &[], 79);
    assert_eq!(quiet.measured, "0-3", "no CPUs given: all of them");
    let f = findings(&quiet, 4, None);
    let warned: Vec<&str> = f.iter().filter(|x| x.warn).map(|x| x.what).collect();
    assert_eq!(warned, ["THP"], "{f:?}");
    let mut other = quiet.clone();
    other.governors = vec!["schedutil".into()];
    other.load = Some(5.0);
    let differ: Vec<&str> = quiet
        .settings()
        .iter()
        .zip(other.settings())
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0)
        .collect();
    assert_eq!(differ, ["governor"], "the load is not a setting");
}

#[test]
fn a_host_whose_cpus_carry_the_hypervisor_flag_is_a_virtual_machine() {
    let cases = [
        ("flags\t\t: fpu vme de pse hypervisor lahf_lm svm\n", Some(true)),
        ("flags\t\t: fpu vme de pse lahf_lm svm\n", Some(false)),
        ("processor\t: 0\n", None),
    ];
    for (cpuinfo, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        host(dir.path(), "performance", "0", "always madvise [never]", "0.00");
        put(dir.path(), "proc/cpuinfo", &format!("processor\t: 0\n{cpuinfo}"));
        let s = HostState::read(dir.path(), &[], 1);
        assert_eq!(s.hypervisor, want, "{cpuinfo}");
        let line = findings(&s, 4, None).into_iter().find(|f| f.what == "virtualisation");
        assert_eq!(
            line.as_ref().map(|f| f.message.starts_with("a virtual machine")),
            want,
            "{cpuinfo}"
        );
        assert!(line.is_none_or(|f| !f.warn), "not a fixable cost: {cpuinfo}");
        assert_eq!(nested_kvm_notice(&s).is_some(), want == Some(true), "{cpuinfo}");
    }
}
