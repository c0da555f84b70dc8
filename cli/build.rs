//! kubectl-lite is linked as a position-dependent executable, as kubectl (a Go binary) is: a
//! position-independent one carries 34,000 relocations (0.8 MB) that the dynamic loader reads
//! and applies to 0.6 MB of pointers at every start, all of it resident for a command that
//! lives milliseconds (BENCHMARKS.md). Only this crate's binary is linked so; the daemons keep
//! the default (ASLR of their image).

fn main() {
    println!("cargo:rustc-link-arg-bin=kubectl-lite=-no-pie");
}
