//! Tests with real kernels, real QEMU guests and real SSH.

mod aa_profile;
mod contention;
mod e2e;
mod hang;
mod kvm_box;
mod nightly;
mod pin;
mod programs;
mod reproduce;
mod scaling;
mod slurm;
mod soak;
mod soak_checks;
mod stages;
mod syscalls;
