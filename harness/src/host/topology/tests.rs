use super::*;

/// A sysfs tree under `root` numbered as Linux numbers x86 CPUs: every
/// package's first threads, then every package's second threads
/// (cpu = thread × packages × cores + package × cores + core); `nodes`
/// split the packages' cores evenly, in order; 0 nodes: no node directory.
fn fake_sysfs(root: &Path, packages: u32, cores: u32, threads: u32, nodes: u32) {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let n = packages * cores * threads;
    std::fs::create_dir_all(&cpu_dir).unwrap();
    std::fs::write(cpu_dir.join("online"), format!("0-{}\n", n - 1)).unwrap();
    let per_node = (packages * cores) / nodes.max(1);
    let mut node_cpus: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for id in 0..n {
        let pc = id % (packages * cores);
        let siblings: Vec<u32> = (0..threads).map(|s| s * packages * cores + pc).collect();
        let d = cpu_dir.join(format!("cpu{id}/topology"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("physical_package_id"), format!("{}\n", pc / cores)).unwrap();
        std::fs::write(d.join("core_id"), format!("{}\n", pc % cores)).unwrap();
        std::fs::write(d.join("thread_siblings_list"), format_list(&siblings) + "\n").unwrap();
        node_cpus.entry(pc / per_node.max(1)).or_default().push(id);
    }
    if nodes > 0 {
        let nd = root.join("sys/devices/system/node");
        for (node, cpus) in &node_cpus {
            std::fs::create_dir_all(nd.join(format!("node{node}"))).unwrap();
            std::fs::write(nd.join(format!("node{node}/cpulist")), format_list(cpus) + "\n").unwrap();
        }
        std::fs::write(nd.join("online"), format!("0-{}\n", nodes - 1)).unwrap();
    }
}

fn host(packages: u32, cores: u32, threads: u32, nodes: u32) -> Topology {
    let dir = tempfile::tempdir().unwrap();
    fake_sysfs(dir.path(), packages, cores, threads, nodes);
    Topology::read(dir.path()).unwrap()
}

fn shape(vcpus: u32, sockets: u32, numa_nodes: u32) -> GuestShape {
    GuestShape {
        vcpus,
        sockets,
        numa_nodes,
    }
}

fn range(a: u32, b: u32) -> Vec<u32> {
    (a..b).collect()
}

#[test]
fn cpu_lists_read_and_write_as_sysfs_does() {
    assert_eq!(parse_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
    assert_eq!(parse_list(""), Some(vec![]));
    assert_eq!(parse_list("0-x"), None);
    assert_eq!(format_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
}

#[test]
fn one_socket_two_cores() {
    let t = host(1, 2, 1, 1);
    assert_eq!((t.packages(), t.cores(), t.cpus.len(), t.nodes()), (1, 2, 2, vec![0]));
    let one = place(&t, shape(1, 1, 0), Pin::Cores);
    assert_eq!((one.vcpu_cpus, one.others, one.note), (vec![0], vec![1], None));
    let two = place(&t, shape(2, 1, 0), Pin::Cores);
    assert_eq!(two.vcpu_cpus, vec![0, 1]);
    assert_eq!(
        two.others,
        vec![0, 1],
        "nothing left: QEMU's threads share the vCPUs' CPUs"
    );
    assert!(two.note.unwrap().contains("no host CPU left"));
    assert!(!two.overcommitted);
    let none = place(&t, shape(2, 1, 0), Pin::None);
    assert!(!none.pinned() && none.others.is_empty() && none.guest_nodes.is_empty());
}

#[test]
fn two_sockets_of_64_cores_with_smt_and_two_nodes() {
    let t = host(2, 64, 2, 2);
    assert_eq!(
        (t.packages(), t.cores(), t.cpus.len(), t.nodes()),
        (2, 128, 256, vec![0, 1])
    );
    assert_eq!(
        t.cpus[128],
        HostCpu {
            id: 128,
            package: 0,
            core: 0,
            node: 0
        },
        "cpu0's sibling"
    );
    // 26 vCPUs, one guest node: the first 26 cores of host node 0, one each
    let p = place(&t, shape(26, 1, 0), Pin::Cores);
    assert_eq!(p.vcpu_cpus, range(0, 26));
    assert!(p.guest_nodes.is_empty(), "no guest nodes, no backends to bind");
    assert!(!p.others.contains(&128) && p.others.contains(&26) && p.others.contains(&154));
    // 26 vCPUs as 2 guest nodes: one host node each
    let p = place(&t, shape(26, 1, 2), Pin::Cores);
    assert_eq!(p.vcpu_cpus, [range(0, 13), range(64, 77)].concat());
    assert_eq!(p.guest_nodes, vec![0, 1]);
    // 256 vCPUs in 2 guest nodes: each guest node all of its host node,
    // its cores then their siblings
    let p = place(&t, shape(256, 2, 2), Pin::Cores);
    assert_eq!(
        p.vcpu_cpus,
        [range(0, 64), range(128, 192), range(64, 128), range(192, 256)].concat()
    );
    assert_eq!(p.guest_nodes, vec![0, 1]);
    assert_eq!(p.others.len(), 256, "every CPU measured");
    // threads: SMT pairs on a core's pair
    let p = place(&t, shape(4, 1, 0), Pin::Threads);
    assert_eq!(p.vcpu_cpus, vec![0, 128, 1, 129]);
    assert_eq!(p.others.first(), Some(&2), "QEMU's threads on cores no vCPU uses");
}

#[test]
fn eight_nodes_of_56_cores() {
    let t = host(8, 56, 1, 8);
    assert_eq!((t.cores(), t.nodes().len()), (448, 8));
    // 448 vCPUs in 8 guest nodes: guest node N on host node N
    let p = place(&t, shape(448, 8, 8), Pin::Cores);
    assert_eq!(p.vcpu_cpus, range(0, 448));
    assert_eq!(p.guest_nodes, range(0, 8));
    // 448 vCPUs as 2 guest nodes: the host's nodes split 4 and 4
    let p = place(&t, shape(448, 2, 2), Pin::Cores);
    assert_eq!(p.guest_nodes, vec![0, 4]);
    assert_eq!(p.vcpu_cpus[224], 224, "guest node 1 starts on host node 4");
    // 256 vCPUs, one guest node: host nodes 0-3 and 32 cores of node 4
    let p = place(&t, shape(256, 1, 0), Pin::Cores);
    assert_eq!(p.vcpu_cpus, range(0, 256));
    assert_eq!(p.others, range(256, 448));
}

#[test]
fn more_vcpus_than_host_cpus_are_not_pinned() {
    let t = host(1, 2, 1, 1);
    let p = place(&t, shape(26, 1, 0), Pin::Cores);
    assert!(p.overcommitted && !p.pinned());
    assert!(p.guest_nodes.is_empty() && p.others.is_empty());
    assert_eq!(
        p.note.as_deref(),
        Some("26 vCPUs on 2 host CPUs: overcommitted, not pinned (the host scheduler shares the CPUs)")
    );
    // 448 on a 256-thread host: the seed-001 size on the seed-004 host
    let p = place(&host(2, 64, 2, 2), shape(448, 2, 2), Pin::Threads);
    assert!(p.overcommitted && !p.pinned());
}

#[test]
fn a_host_without_numa_in_sysfs_binds_no_memory() {
    let t = host(1, 4, 1, 0);
    assert!(!t.numa);
    let p = place(&t, shape(2, 1, 2), Pin::Cores);
    assert_eq!(p.vcpu_cpus, vec![0, 1]);
    assert!(p.guest_nodes.is_empty());
    assert_eq!(t.describe(), "1 package(s), 4 core(s), 4 CPU(s), 1 node(s)");
}
