//! The binary as a process: what it does when its reader goes away.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

#[test]
fn output_to_a_closed_pipe_ends_the_process_by_sigpipe_without_a_panic() {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-lite"))
        .args(["version", "--client"])
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .expect("run kubectl-lite");
    assert_eq!(out.status.signal(), Some(libc_sigpipe()), "{out:?}");
    assert!(out.stderr.is_empty(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
}

fn libc_sigpipe() -> i32 {
    nix::sys::signal::Signal::SIGPIPE as i32
}
