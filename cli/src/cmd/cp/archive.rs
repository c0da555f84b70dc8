//! The tar streams `cp` sends and receives, as kubectl makes and reads them: a local file or
//! directory written under its destination's name (directories' files one by one, an empty
//! directory as itself, symlinks as links), and a pod's `tar cf -` unpacked under a local
//! destination with the source's prefix removed, members escaping it or symlinks skipped with a
//! warning.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::filespec;

/// What goes wrong making or unpacking a copy's tar stream.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{path}: {source}")]
    Local {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{0}")]
    Stream(#[source] io::Error),
    /// A member outside the source's prefix: the stream was not what `tar cf -` makes.
    #[error("tar contents corrupted")]
    Corrupted,
}

fn local(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Local { path: path.to_path_buf(), source }
}

/// Writes `src` (a local path) as a tar stream whose members are named after `dest` (a remote
/// path), as kubectl's `makeTar`: `dest`'s base name, and below it a directory's files.
pub fn make(src: &Path, dest: &str, out: impl Write) -> Result<(), ArchiveError> {
    let mut tar = tar::Builder::new(out);
    tar.mode(tar::HeaderMode::Complete);
    // Links are sent as links, as kubectl's `Lstat` sees them.
    tar.follow_symlinks(false);
    let name = filespec::base(&filespec::clean(dest));
    add(&mut tar, src, &name)?;
    tar.into_inner().map_err(ArchiveError::Stream)?.flush().map_err(ArchiveError::Stream)
}

fn add<W: Write>(tar: &mut tar::Builder<W>, path: &Path, name: &str) -> Result<(), ArchiveError> {
    let meta = fs::symlink_metadata(path).map_err(local(path))?;
    if meta.is_dir() {
        let mut children: Vec<_> = fs::read_dir(path)
            .map_err(local(path))?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        children.sort();
        if children.is_empty() {
            return tar.append_path_with_name(path, name).map_err(local(path));
        }
        for c in children {
            let child_name = format!("{name}/{}", c.to_string_lossy());
            add(tar, &path.join(&c), &child_name)?;
        }
        return Ok(());
    }
    tar.append_path_with_name(path, name).map_err(local(path))
}

/// Unpacks a pod's `tar cf - SRC` stream under `dest` (kubectl's `untarAll`); warnings go to
/// `warn`. `exec_hint` is what the symlink warning suggests instead.
pub fn unpack(
    input: impl Read,
    src: &str,
    dest: &Path,
    exec_hint: &str,
    warn: &mut dyn Write,
) -> Result<(), ArchiveError> {
    let prefix = filespec::member_prefix(src);
    let dest_text = dest.to_string_lossy().into_owned();
    let dest_text = filespec::strip_trailing_slash(&dest_text).to_string();
    let mut archive = tar::Archive::new(input);
    let mut symlink_warned = false;
    for entry in archive.entries().map_err(ArchiveError::Stream)? {
        let mut entry = entry.map_err(ArchiveError::Stream)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(rest) = name.strip_prefix(prefix.as_str()) else {
            return Err(ArchiveError::Corrupted);
        };
        let rest = filespec::strip_trailing_slash(&rest.replace('\\', "/")).to_string();
        let target = local_join(&dest_text, &rest);
        if !filespec::is_inside(&dest_text, &target) {
            let _ =
                writeln!(warn, "warning: file {target:?} is outside target destination, skipping");
            continue;
        }
        let target_path = PathBuf::from(&target);
        if let Some(parent) = target_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(local(parent))?;
        }
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            fs::create_dir_all(&target_path).map_err(local(&target_path))?;
            continue;
        }
        if kind.is_symlink() {
            let link = entry
                .link_name_bytes()
                .map(|l| String::from_utf8_lossy(&l).into_owned())
                .unwrap_or_default();
            if !symlink_warned {
                let _ = writeln!(
                    warn,
                    "warning: skipping symlink: {target:?} -> {link:?} (consider using \"{exec_hint} | tar xf -\")"
                );
                symlink_warned = true;
            } else {
                let _ = writeln!(warn, "warning: skipping symlink: {target:?} -> {link:?}");
            }
            continue;
        }
        let mut file = fs::File::create(&target_path).map_err(local(&target_path))?;
        io::copy(&mut entry, &mut file).map_err(local(&target_path))?;
    }
    Ok(())
}

/// Go's `filepath.Join` of a local destination and a member's remaining name.
fn local_join(dest: &str, rest: &str) -> String {
    filespec::join(dest, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in entries {
            // Names are set raw: a pod's tar may hold what the builder would refuse (`..`).
            let mut h = tar::Header::new_gnu();
            h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn a_file_is_written_at_the_destination_itself() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.txt");
        let stream = tar_of(&[("tmp/in.txt", b"hello\n")]);
        let mut warn = Vec::new();
        unpack(&stream[..], "/tmp/in.txt", &dest, "x", &mut warn).unwrap();
        assert_eq!(fs::read_to_string(&dest).unwrap(), "hello\n");
        assert!(warn.is_empty());
    }

    #[test]
    fn a_directorys_members_land_below_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("copy");
        let stream = tar_of(&[("tmp/d/a", b"A"), ("tmp/d/sub/b", b"B")]);
        unpack(&stream[..], "/tmp/d", &dest, "x", &mut Vec::new()).unwrap();
        assert_eq!(fs::read_to_string(dest.join("a")).unwrap(), "A");
        assert_eq!(fs::read_to_string(dest.join("sub/b")).unwrap(), "B");
    }

    #[test]
    fn a_member_outside_the_source_prefix_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let stream = tar_of(&[("etc/passwd", b"x")]);
        let e = unpack(&stream[..], "/tmp/d", dir.path(), "x", &mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "tar contents corrupted");
    }

    #[test]
    fn a_member_climbing_out_of_the_destination_is_skipped_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("d");
        let stream = tar_of(&[("tmp/d/../../escape", b"x")]);
        let mut warn = Vec::new();
        unpack(&stream[..], "/tmp/d", &dest, "x", &mut warn).unwrap();
        let warn = String::from_utf8_lossy(&warn);
        assert!(
            warn.starts_with("warning: file ")
                && warn.contains("is outside target destination, skipping"),
            "{warn}"
        );
        assert!(!dir.path().join("escape").exists());
    }

    #[test]
    fn a_local_directory_is_tarred_under_the_destination_name() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("empty")).unwrap();
        fs::write(src.join("f"), "F").unwrap();
        let mut out = Vec::new();
        make(&src, "/tmp/target", &mut out).unwrap();
        let mut names: Vec<String> = tar::Archive::new(&out[..])
            .entries()
            .unwrap()
            .map(|e| String::from_utf8_lossy(&e.unwrap().path_bytes()).into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["target/empty", "target/f"]);
    }
}
