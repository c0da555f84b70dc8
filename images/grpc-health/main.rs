//! `grpc-health-server`: a gRPC health server (`grpc.health.v1.Health/Check`) for the offline
//! test images, so gRPC probes can be tested against real containers. Its status and speed are
//! set by flags and by files a test writes inside the container (`--help`).
//!
//! Compiled by `images/build.rs` as a static executable with only the standard library: a
//! minimal HTTP/2 server (`frame`, `hpack` with `huffman`, `connection`), gRPC's framing
//! (`grpc`), the health service (`health`), flags (`config`) and the IO (`server`).

mod config;
mod connection;
mod frame;
mod grpc;
mod health;
mod hpack;
mod huffman;
mod server;

use std::os::raw::c_int;

unsafe extern "C" {
    fn signal(signum: c_int, handler: extern "C" fn(c_int)) -> usize;
    fn _exit(status: c_int) -> !;
}

const SIGINT: c_int = 2;
const SIGTERM: c_int = 15;

extern "C" fn shut_down(_: c_int) {
    // As PID 1 in a container, SIGTERM does nothing unless handled. Async-signal-safe only.
    unsafe { _exit(0) }
}

fn main() {
    match config::parse(std::env::args().skip(1)) {
        Ok(config::Command::Help) => print!("{}", config::USAGE),
        Ok(config::Command::Version) => {
            println!("grpc-health-server (kubelet-rs test image) {}", env!("GRPC_HEALTH_VERSION"));
        }
        Ok(config::Command::Run(config)) => {
            unsafe {
                signal(SIGINT, shut_down);
                signal(SIGTERM, shut_down);
            }
            let addr = (config.address, config.port);
            if let Err(e) = server::run(config) {
                eprintln!("grpc-health-server: serving on {}:{}: {e}", addr.0, addr.1);
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("grpc-health-server: {e}");
            std::process::exit(2);
        }
    }
}
