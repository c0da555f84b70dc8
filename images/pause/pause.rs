//! The pod sandbox's first process. It holds the pod's namespaces open, reaps the orphans that
//! are re-parented to it, and exits 0 on SIGINT or SIGTERM. `pause -v` prints its version.
//!
//! Compiled by `images/build.rs` as a static executable with only the standard library, so it
//! runs in an image that has nothing else.

use std::os::raw::c_int;

unsafe extern "C" {
    fn signal(signum: c_int, handler: extern "C" fn(c_int)) -> usize;
    fn pause() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
}

const SIGINT: c_int = 2;
const SIGTERM: c_int = 15;
const SIGCHLD: c_int = 17;
const WNOHANG: c_int = 1;

extern "C" fn shut_down(_: c_int) {
    // Only async-signal-safe calls here.
    unsafe { _exit(0) }
}

extern "C" fn reap(_: c_int) {
    while unsafe { waitpid(-1, std::ptr::null_mut(), WNOHANG) } > 0 {}
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("-v") {
        println!("pause (kubelet-rs test image) {}", env!("PAUSE_VERSION"));
        return;
    }
    if std::process::id() != 1 {
        eprintln!("pause: warning: not running as PID 1 (pid {})", std::process::id());
    }
    unsafe {
        signal(SIGINT, shut_down);
        signal(SIGTERM, shut_down);
        signal(SIGCHLD, reap);
    }
    loop {
        unsafe { pause() };
    }
}
