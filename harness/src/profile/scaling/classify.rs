//! Which rows of a scaling view are the scheduler's and the clock's: the
//! functions whose cost per op at many vCPUs is set by when things happen
//! (load balancing, wake-ups and switches, idle, IPIs, timer ticks, and
//! under TCG's round-robin the spinning of a waiter whose lock holder is
//! not running), not by the path a patch changes. Such a row is shown,
//! and its share of the interaction said, but it never carries a cell's
//! scaling verdict.

/// Function name patterns (`*` any run of characters) of the scheduler
/// and timing class. A name's compiler suffix (`.isra.0`, `.constprop.0`,
/// `.part.0`, `.cold`) is dropped before it is matched.
pub const SCHEDULER_FUNCTIONS: &[&str] = &[
    // load balancing
    "*_balance*",
    "update_sd_lb_stats*",
    "update_sg_lb_stats*",
    "find_busiest_*",
    "*nohz*",
    "kick_ilb*",
    "update_blocked_averages*",
    // wake-up, placement, enqueue and dequeue
    "select_task_rq*",
    "select_idle_*",
    "try_to_wake_up",
    "ttwu_*",
    "activate_task",
    "deactivate_task",
    "enqueue_task*",
    "dequeue_task*",
    "*enqueue_entit*",
    "*dequeue_entit*",
    "place_entity",
    "check_preempt*",
    "wakeup_preempt*",
    "resched_curr*",
    "raw_spin_rq_*",
    "double_rq_*",
    "*_rq_lock*",
    // switching
    "__schedule",
    "schedule*",
    "pick_next_*",
    "pick_task*",
    "pick_eevdf",
    "put_prev_*",
    "set_next_*",
    "finish_task_switch*",
    "__switch_to*",
    "context_switch",
    // accounting
    "*update_load_avg*",
    "update_curr*",
    "update_rq_clock*",
    "update_cfs_group",
    "reweight_*",
    "psi_*",
    "cpuacct_*",
    "account_process_tick",
    "account_idle_ticks",
    "irqtime_account_*",
    // idle
    "do_idle",
    "cpuidle_*",
    "*_idle*",
    "*safe_halt*",
    // IPIs and interrupt entry and exit
    "smp_call_function*",
    "*ipi*",
    "*IPI*",
    "*sysvec_*",
    "flush_smp_call_function*",
    "native_send_call_func*",
    "default_send_IPI*",
    "x2apic_send_IPI*",
    "irq_enter*",
    "irq_exit*",
    "__irq_exit_rcu",
    "*softirq*",
    // timers and the tick
    "*hrtimer*",
    "tick_*",
    "update_process_times",
    "scheduler_tick",
    "sched_tick*",
    "*timer_interrupt*",
    // spinning on a lock whose holder TCG is not running
    "*lock_slowpath*",
    "*spin_on_owner*",
    "osq_lock",
];

/// Data symbol patterns of the class, for a static contention row (a
/// heap row is named by its function and matched as one).
pub const SCHEDULER_DATA: &[&str] = &[
    "runqueues",
    "*sched*",
    "*nohz*",
    "def_root_domain",
    "*hrtimer*",
    "tick_*",
    "jiffies*",
    "tk_core",
    "cfd_data",
    "csd_data",
    "call_single_queue",
];

/// Whether `name` matches `pattern` (`*`: any run of characters).
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return name == pattern;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// A function's name without its compiler suffix (`.isra.0`, `.cold`).
fn bare(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Whether function `name` is of the scheduler and timing class.
pub fn scheduler_function(name: &str) -> bool {
    let name = bare(name);
    SCHEDULER_FUNCTIONS.iter().any(|p| glob(p, name))
}

/// Whether a contention row is of the class: a heap row by the function
/// that wrote or took it, a static one by its data symbol (`runqueues+0x40`)
/// or, failing that, as a function.
pub fn scheduler_row(key: &super::contention::Key) -> bool {
    match key.class {
        super::contention::Class::Heap => scheduler_function(&key.name),
        super::contention::Class::Static => {
            let symbol = key.name.split('+').next().unwrap_or(&key.name);
            SCHEDULER_DATA.iter().any(|p| glob(p, symbol)) || scheduler_function(symbol)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::contention::{Class, Key, Object};

    #[test]
    fn the_class_is_the_schedulers_and_the_clocks() {
        for f in [
            "sched_balance_rq",
            "update_sd_lb_stats.constprop.0",
            "select_task_rq_fair",
            "enqueue_task_fair",
            "dequeue_entities",
            "__schedule",
            "schedule_tail",
            "try_to_wake_up",
            "ttwu_do_activate.isra.0",
            "do_idle",
            "default_idle",
            "pv_native_safe_halt",
            "asm_sysvec_apic_timer_interrupt",
            "__sysvec_call_function_single",
            "native_send_call_func_ipi",
            "x2apic_send_IPI_mask",
            "hrtimer_interrupt",
            "__hrtimer_run_queues",
            "tick_sched_timer",
            "sched_tick",
            "update_load_avg",
            "native_queued_spin_lock_slowpath",
            "psi_task_change",
        ] {
            assert!(scheduler_function(f), "{f}");
        }
        for f in [
            "copy_process",
            "harness_cpu_walk",
            "dequeue_signal",
            "pcpu_alloc_noprof",
            "__percpu_counter_sum",
            "clear_page_erms",
            "pipe_write",
            "account_kernel_stack",
            "do_raw_spin_lock",
        ] {
            assert!(!scheduler_function(f), "{f}");
        }
        let key = |class, name: &str| Key {
            object: Object::Line,
            class,
            name: name.into(),
        };
        assert!(scheduler_row(&key(Class::Static, "runqueues+0x40")));
        assert!(scheduler_row(&key(Class::Heap, "raw_spin_rq_lock_nested")));
        assert!(!scheduler_function("irq_lock_sparse"), "a runqueue lock, not any lock");
        assert!(scheduler_row(&key(Class::Heap, "__schedule")));
        assert!(!scheduler_row(&key(Class::Static, "pcpu_lock+0x0")));
        assert!(!scheduler_row(&key(Class::Heap, "copy_process")));
        assert!(glob("a*b*c", "axxbyyc") && !glob("a*b*c", "axxc") && glob("*", "") && !glob("ab*ba", "aba"));
    }
}
