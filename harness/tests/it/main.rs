//! The integration tests, one binary (so one link, and one place that says
//! which tests run first):
//!
//! * `fast::` — fixtures, synthetic runs, the docs and the layering rule: no
//!   kernel, no QEMU; seconds. CI runs them first (`cargo test --test it fast::`),
//!   so a broken build or rule fails in minutes.
//! * `qemu::` — real kernels, real QEMU guests, real SSH: tens of minutes on 2
//!   cores. They share one kernel cache (`common::e2e_work`) and take
//!   `common::serial()` — a file lock beside it — for their whole run, so
//!   threads of this binary and other test processes on the same checkout
//!   wait for each other instead of colliding on the work directory.

mod common;
mod fast;
mod qemu;
