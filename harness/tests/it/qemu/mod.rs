//! Tests with real kernels, real QEMU guests and real SSH.

mod e2e;
mod reproduce;
mod slurm;
