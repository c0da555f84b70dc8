//! `cp`: copies files and directories to and from containers through `exec` and `tar`, as
//! kubectl does: into a pod, a local tar stream goes to `tar -xmf - -C DIR` (into the
//! destination when it is a directory there); out of a pod, `tar cf - SRC`'s stream is unpacked
//! locally. As kubectl's, the remote `tar`'s stderr (its `removing leading '/'` notice) and the
//! default-container notice of a copy out of a pod go to stdout.

mod archive;
pub mod filespec;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use super::{exec, podcmd, remotecommand};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use filespec::FileSpec;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// <file-spec-src> <file-spec-dest>: [[namespace/]pod:]file/path or a local path.
    #[arg(value_name = "FILE-SPEC")]
    pub args: Vec<String>,
    /// Container name (default: the pod's default container).
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// The copied file/directory's ownership and permissions will not be preserved in the container.
    #[arg(long)]
    pub no_preserve: bool,
}

/// Which way a copy goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Direction {
    ToPod { src: FileSpec, dest: FileSpec },
    FromPod { src: FileSpec, dest: FileSpec },
}

/// The copy the arguments ask for, refused in kubectl's words when it is none.
pub fn direction(args: &[String]) -> Result<Direction> {
    let [src, dest] = args else {
        return Err(CliError::Usage("source and destination are required".into()));
    };
    let src = filespec::extract(src)?;
    let dest = filespec::extract(dest)?;
    if src.is_remote() && dest.is_remote() {
        return Err(CliError::Usage(
            "one of src or dest must be a local file specification".into(),
        ));
    }
    if src.file.is_empty() || dest.file.is_empty() {
        return Err(CliError::Usage("filepath can not be empty".into()));
    }
    if src.is_remote() {
        return Ok(Direction::FromPod { src, dest });
    }
    if dest.is_remote() {
        return Ok(Direction::ToPod { src, dest });
    }
    Err(CliError::Usage("one of src or dest must be a remote file specification".into()))
}

/// The command that unpacks a copy's stream in the pod into `dir`.
pub fn untar_command(dir: &str, no_preserve: bool) -> Vec<String> {
    let mut cmd: Vec<&str> = if no_preserve {
        vec!["tar", "--no-same-permissions", "--no-same-owner", "-xmf", "-"]
    } else {
        vec!["tar", "-xmf", "-"]
    };
    if !dir.is_empty() {
        cmd.extend(["-C", dir]);
    }
    cmd.into_iter().map(str::to_string).collect()
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    match direction(&a.args)? {
        Direction::ToPod { src, dest } => to_pod(f, &a, &src, &dest).await,
        Direction::FromPod { src, dest } => from_pod(f, &a, &src, &dest).await,
    }
}

/// Runs `command` in the pod of `spec` (kubectl's `ExecOptions.Run` by pod name).
#[allow(clippy::too_many_arguments)]
async fn pod_exec(
    f: &Factory,
    a: &Args,
    spec: &FileSpec,
    command: &[String],
    stdin: Option<remotecommand::Source>,
    stdout: remotecommand::Sink<'_>,
    stderr: remotecommand::Sink<'_>,
    notice: &mut dyn Write,
) -> Result<()> {
    let namespace = match &spec.pod_namespace {
        Some(n) => n.clone(),
        None => f.namespace().await?,
    };
    let pod = podcmd::get(f, &namespace, &spec.pod_name).await?;
    if let Some(phase) = podcmd::completed_phase(&pod) {
        return Err(CliError::Usage(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let container = match &a.container {
        Some(c) => c.clone(),
        None => {
            podcmd::container_or_default(&pod, None, false, notice).map_err(CliError::Usage)?.name
        }
    };
    exec::exec(f, &pod, &container, command, false, stdin, Some(stdout), Some(stderr)).await
}

async fn to_pod(f: &Factory, a: &Args, src: &FileSpec, dest: &FileSpec) -> Result<()> {
    let src_path = PathBuf::from(&src.file);
    if std::fs::metadata(&src_path).is_err() {
        return Err(CliError::Usage(format!("{} doesn't exist in local filesystem", src.file)));
    }
    // Into the destination when it is a directory in the pod.
    let mut dest_file = dest.file.clone();
    let test = ["test".to_string(), "-d".into(), dest.file.clone()];
    let (mut discard_out, mut discard_err) = (|_: &[u8]| Ok(()), |_: &[u8]| Ok(()));
    let is_dir =
        pod_exec(f, a, dest, &test, None, &mut discard_out, &mut discard_err, &mut io::sink())
            .await;
    if is_dir.is_ok() {
        let base =
            src_path.file_name().map(|b| b.to_string_lossy().into_owned()).unwrap_or_default();
        dest_file = filespec::join(&dest_file, &base);
    }
    let (tx, rx) = mpsc::channel(16);
    let tar_dest = dest_file.clone();
    let maker = std::thread::spawn(move || {
        archive::make(&local_clean(&src_path), &tar_dest, ChannelWriter(tx))
    });
    let command = untar_command(&filespec::dir(&dest_file), a.no_preserve);
    let mut out = remotecommand::stdout_sink;
    let mut err = remotecommand::stderr_sink;
    let copied =
        pod_exec(f, a, dest, &command, Some(rx), &mut out, &mut err, &mut io::stderr()).await;
    match maker.join() {
        Ok(Err(e)) => return Err(CliError::Usage(e.to_string())),
        Err(_) => return Err(CliError::Usage("making the tar stream failed".into())),
        Ok(Ok(())) => {}
    }
    copied
}

async fn from_pod(f: &Factory, a: &Args, src: &FileSpec, dest: &FileSpec) -> Result<()> {
    let namespace = match &src.pod_namespace {
        Some(n) => n.clone(),
        None => f.namespace().await?,
    };
    let hint =
        format!("kubectl-lite exec -n {namespace:?} {:?} -- tar cf - {:?}", src.pod_name, src.file);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(16);
    let (remote, local) = (src.file.clone(), PathBuf::from(&dest.file));
    let unpacker = std::thread::spawn(move || {
        let mut reader = ChannelReader { rx, buf: Vec::new(), pos: 0, total: 0 };
        let r = archive::unpack(&mut reader, &remote, &local, &hint, &mut io::stderr());
        (r, reader.total)
    });
    let command = ["tar".to_string(), "cf".into(), "-".into(), src.file.clone()];
    let copied = {
        let mut into_tar = move |b: &[u8]| {
            tx.send(b.to_vec()).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
        };
        // The remote tar's complaints and the default-container notice go to stdout, as
        // kubectl's.
        let mut err = remotecommand::stdout_sink;
        pod_exec(f, a, src, &command, None, &mut into_tar, &mut err, &mut io::stdout()).await
    };
    let Ok((unpacked, received)) = unpacker.join() else {
        return Err(CliError::Usage("unpacking the tar stream failed".into()));
    };
    // kubectl is done when the archive ends: a remote tar failing after it wrote one (a
    // missing path) still copies with success, its complaint printed; without an archive the
    // command's failure is the answer.
    match (unpacked, copied) {
        (Ok(()), _) if received > 0 => Ok(()),
        (Ok(()), copied) => copied,
        (Err(_), Err(e)) if received == 0 => Err(e),
        (Err(e), _) => Err(CliError::Usage(e.to_string())),
    }
}

/// A local path cleaned as Go's `filepath.Clean` (the base of `makeTar`).
fn local_clean(p: &Path) -> PathBuf {
    PathBuf::from(filespec::clean(&p.to_string_lossy()))
}

/// Writes into a channel feeding a remote stdin (from a thread of its own).
struct ChannelWriter(mpsc::Sender<Vec<u8>>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(buf.to_vec())
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads what a remote stdout sent, chunk by chunk; the sender's end is the end.
struct ChannelReader {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
    /// Bytes handed out so far.
    total: u64,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.buf.len() {
            match self.rx.recv() {
                Ok(chunk) => {
                    self.buf = chunk;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        self.total += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_remote_side_decides_the_direction() {
        assert!(matches!(
            direction(&strings(&["/tmp/a", "talker:/tmp/b"])),
            Ok(Direction::ToPod { .. })
        ));
        assert!(matches!(
            direction(&strings(&["ns/talker:/tmp/a", "b"])),
            Ok(Direction::FromPod { .. })
        ));
    }

    #[test]
    fn impossible_copies_are_refused_in_kubectls_words() {
        let e = |a: &[&str]| direction(&strings(a)).unwrap_err().to_string();
        assert_eq!(e(&["a"]), "error: source and destination are required");
        assert_eq!(
            e(&["p:/a", "q:/b"]),
            "error: one of src or dest must be a local file specification"
        );
        assert_eq!(
            e(&["/a", "/b"]),
            "error: one of src or dest must be a remote file specification"
        );
        assert_eq!(e(&["p:", "/b"]), "error: filepath can not be empty");
    }

    #[test]
    fn the_pod_unpacks_into_the_destinations_directory() {
        assert_eq!(untar_command("/tmp", false), ["tar", "-xmf", "-", "-C", "/tmp"]);
        assert_eq!(
            untar_command(".", true),
            ["tar", "--no-same-permissions", "--no-same-owner", "-xmf", "-", "-C", "."]
        );
    }

    #[test]
    fn a_channel_reader_reads_the_chunks_in_order_then_ends() {
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        tx.send(b"ab".to_vec()).unwrap();
        tx.send(b"cde".to_vec()).unwrap();
        drop(tx);
        let mut s = String::new();
        ChannelReader { rx, buf: Vec::new(), pos: 0, total: 0 }.read_to_string(&mut s).unwrap();
        assert_eq!(s, "abcde");
    }
}
