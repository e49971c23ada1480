//! The profile format pinned between the plugin and the harness: one
//! profile with every section and line kind, rendered by the plugin's own
//! writers, must equal `harness/tests/fixtures/profile/golden.profile`,
//! which the harness's test (`profile::tests::reads_the_golden_profile`)
//! reads and checks value by value. A change to the format on either side
//! fails the other side's test; `HARNESS_BLESS=1 cargo test -p
//! harness-profiler` rewrites the file when the change is meant.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::contention::{Class, LockKind, Role, Row, Rows, Watch};
use crate::symbols::{Bucket, Symbols};
use crate::syscalls::{self, Done};
use crate::tally::{render, seal, Callers, Header, Totals};

/// The golden file's path.
fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/profile/golden.profile")
}

/// Instruction counts: three functions, the user bucket, static callers.
fn instructions(s: &Symbols) -> String {
    let mut t = Totals::new(s.slots());
    t.insns[0] = 100;
    t.calls[0] = 10;
    t.insns[2] = 300;
    t.calls[2] = 5;
    t.locks[2] = 2;
    t.pauses[2] = 1;
    t.insns[s.bucket(Bucket::User) as usize] = 50;
    t.edges.insert((0, 2), 3);
    t.edges.insert((1, 2), 1);
    let h = Header {
        mode: "marker",
        windows: 1,
        unclosed: false,
        ops: 5,
        ops_missing: 0,
        callers: Callers::Static,
        top: 1,
        vcpus: 2,
        blocks: 9,
        counters: 4,
    };
    render(&h, &t, s, &HashMap::new())
}

/// Syscall counts: prlimit64 (302) twice counted, once dropped by a switch.
fn syscall_lines() -> String {
    let mut sys = syscalls::Tally::default();
    sys.add(Done::Call { nr: 302, insns: 900 });
    sys.add(Done::Call { nr: 302, insns: 1100 });
    sys.add(Done::Dropped {
        nr: 302,
        by_switch: true,
    });
    sys.render()
}

/// Contention: a static line, a heap line and a static spin lock.
fn contention_lines() -> String {
    let funcs = |fs: &[(&str, u64)]| -> BTreeMap<String, u64> { fs.iter().map(|(f, n)| (f.to_string(), *n)).collect() };
    let mut rows = Rows {
        vcpus: 2,
        rmws: (40, 12),
        line_count: (9, 3),
        acqs: (30, 20),
        lock_count: (5, 2),
        holds: (7, 1),
        ..Rows::default()
    };
    rows.lines.insert(
        (Class::Static, "counter_x+0x0".into()),
        Row {
            objects: 1,
            writers: 2,
            events: 10,
            funcs: funcs(&[("copy_process", 9), ("do_exit", 1)]),
            ..Row::default()
        },
    );
    rows.lines.insert(
        (Class::Heap, "copy_process".into()),
        Row {
            objects: 3,
            writers: 2,
            events: 2,
            funcs: funcs(&[("copy_process", 2)]),
            ..Row::default()
        },
    );
    rows.locks.insert(
        (Class::Static, "pcpu_lock+0x0".into(), LockKind::Spin),
        Row {
            objects: 1,
            writers: 2,
            events: 20,
            holds: 20,
            hold_insns: 2000,
            funcs: funcs(&[("pcpu_alloc_noprof", 20)]),
        },
    );
    let mut watch = Watch::default();
    watch.roles.insert(0, Role::Acquire(LockKind::Spin, true));
    watch.roles.insert(1, Role::Release(LockKind::Spin));
    watch.holds.push("spin");
    rows.render(&watch, 1)
}

#[test]
fn the_plugin_writes_the_golden_profile() {
    let s = Symbols::parse("ffffffff81000000 100 f0\nffffffff81000100 100 f1\nffffffff81000200 100 f2\n").unwrap();
    let text = seal(instructions(&s) + &syscall_lines() + &contention_lines());
    if std::env::var_os("HARNESS_BLESS").is_some() {
        std::fs::create_dir_all(golden().parent().unwrap()).unwrap();
        std::fs::write(golden(), &text).unwrap();
    }
    let want = std::fs::read_to_string(golden()).unwrap();
    assert!(
        text == want,
        "the plugin's profile format changed: it writes\n{text}\nwhere {} holds\n{want}\nif that is meant, \
         run HARNESS_BLESS=1 cargo test -p harness-profiler, make the harness read it, and commit both",
        golden().display()
    );
}
