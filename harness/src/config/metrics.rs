//! The metrics each benchmark kind can produce and the kernel functions
//! that are its unit of work: facts of the kinds, declared here so that
//! validation (key metrics, thresholds) and the guest side (`bench`, which
//! re-exports them) read one list.

use super::{BenchKind, Benchmark};

/// The kernel functions that are one benchmark's unit of work: their calls
/// per op, from the kernel profile, must agree between the arms of a cell
/// for its rate and per-op counts to be comparable under the
/// instruction-counting clock (`profile::work`). fork-prlimit: its child's
/// three syscalls (its op holds as many as fit in the parent's sleep);
/// doexec: the exec; fork-exec: the fork and the exec (`copy_process` and
/// `bprm_execve`, once each per op in a fork+exec profile); test_vmalloc:
/// none (its work is a module's loop, outside the kernel's symbols).
/// A `program` declares its own (`work:`).
pub fn unit_of_work(b: &Benchmark) -> Vec<&str> {
    match &b.kind {
        BenchKind::ForkPrlimit { .. } => vec!["__x64_sys_prlimit64", "__x64_sys_getpriority", "__x64_sys_setpriority"],
        BenchKind::Doexec { .. } => vec!["bprm_execve"],
        BenchKind::ForkExec { .. } => vec!["copy_process", "bprm_execve"],
        BenchKind::TestVmalloc { .. } => vec![],
        BenchKind::Program { work, .. } => work.iter().map(String::as_str).collect(),
    }
}

/// The prefix of a syscall handler's name in a unit of work
/// (`__x64_sys_prlimit64`).
pub const SYSCALL_HANDLER: &str = "__x64_sys_";

/// The system calls of a unit of work: the names of its syscall handlers
/// without [`SYSCALL_HANDLER`] (`prlimit64`).
pub fn syscall_names<'a>(unit: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
    unit.iter().filter_map(|f| f.strip_prefix(SYSCALL_HANDLER))
}

/// Whether `b`'s unit of work is system calls (then its boots count
/// instructions per call: the plugin's `syscalls=on`).
pub fn works_in_syscalls(b: &Benchmark) -> bool {
    syscall_names(&unit_of_work(b)).next().is_some()
}

/// Metric names of a profiled window's instructions per benchmark
/// operation: all instructions, kernel functions', user space's.
pub const INSNS_PER_OP: [&str; 3] = ["insns_per_op", "kernel_insns_per_op", "user_insns_per_op"];

/// test_vmalloc's tests in 6.12's `lib/test_vmalloc.c` (`test_case_array`):
/// bit i of `run_test_mask` runs test i, and its `Summary:` line names it.
pub const VMALLOC_TESTS: [&str; 11] = [
    "fix_size_alloc_test",
    "full_fit_alloc_test",
    "long_busy_list_alloc_test",
    "random_size_alloc_test",
    "fix_align_alloc_test",
    "random_size_align_alloc_test",
    "align_shift_alloc_test",
    "pcpu_alloc_test",
    "kvfree_rcu_1_arg_vmalloc_test",
    "kvfree_rcu_2_arg_vmalloc_test",
    "vm_map_ram_test",
];

/// The metric of a syscall's instructions per call (`prlimit64` →
/// `prlimit64_insns_per_call`).
pub fn per_call_metric(syscall: &str) -> String {
    format!("{syscall}_insns_per_call")
}

/// Every metric `b` can produce, sorted; `None` where the names are known
/// only from its output: a `program` without `metrics:` (it prints `sample`
/// lines itself) and a test_vmalloc whose `run_test_mask` selects a test
/// past [`VMALLOC_TESTS`] (a kernel with more tests). Its own: doexec's,
/// fork_exec's and fork_prlimit's `sample` lines (`images/`), test_vmalloc's
/// tests, a `program`'s `metrics:`; with
/// `profiled` (kernel profiles under the instruction-counting clock) the
/// profile's [`INSNS_PER_OP`] and, for each syscall of its unit of work,
/// [`per_call_metric`] (`boot::profiled::metrics`).
pub fn metric_names(b: &Benchmark, profiled: bool) -> Option<Vec<String>> {
    let mut names: Vec<String> = match &b.kind {
        BenchKind::Doexec { .. } => vec!["execs_per_s".into()],
        BenchKind::ForkExec { .. } => vec!["forkexecs_per_s".into()],
        BenchKind::ForkPrlimit { .. } => vec!["wall_s".into(), "iterations_per_s".into()],
        &BenchKind::TestVmalloc { run_test_mask, .. } => {
            if run_test_mask >> VMALLOC_TESTS.len() != 0 {
                return None;
            }
            let run = |i: &usize| run_test_mask & (1 << i) != 0;
            (0..VMALLOC_TESTS.len())
                .filter(run)
                .map(|i| VMALLOC_TESTS[i].into())
                .collect()
        }
        BenchKind::Program { metrics, .. } if metrics.is_empty() => return None,
        BenchKind::Program { metrics, .. } => metrics.iter().map(|m| m.name.clone()).collect(),
    };
    if profiled {
        names.extend(INSNS_PER_OP.map(String::from));
        names.extend(syscall_names(&unit_of_work(b)).map(per_call_metric));
    }
    names.sort();
    names.dedup();
    Some(names)
}
