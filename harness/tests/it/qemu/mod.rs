//! Tests with real kernels, real QEMU guests and real SSH.

mod aa_profile;
mod e2e;
mod nightly;
mod pin;
mod reproduce;
mod slurm;
mod soak;
mod stages;
