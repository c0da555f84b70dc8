//! `fsGroup` ownership of a pod's volumes, as upstream's `SetVolumeOwnership`: every file and
//! directory of the volume gets the group, and the group's read (and, for writable volumes,
//! write) bits; directories also get the setgid bit and the group's search bit, so what the
//! pod creates later belongs to the group too. Symlinks get the group, never a mode. Only what
//! differs is changed, so a volume set up again on each sync costs a walk of `stat`s.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

/// Group bits a writable volume's entries get.
pub const RW_MASK: u32 = 0o660;
/// Group bits a read-only (managed) volume's entries get.
pub const RO_MASK: u32 = 0o440;
/// The search bits directories get.
pub const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// The pod's `securityContext.fsGroup`, if it is a valid group id.
pub fn fs_group(pod: &Pod) -> Option<u32> {
    let gid = pod.spec.as_ref()?.security_context.as_ref()?.fs_group?;
    u32::try_from(gid).ok()
}

/// The mode a file of a volume ends with, with the group's bits.
pub fn file_mode(mode: u32, read_only: bool) -> u32 {
    mode | if read_only { RO_MASK } else { RW_MASK }
}

/// Gives `path` (not following a symlink) the group `gid` and its bits, where it lacks them.
fn own(path: &Path, gid: u32, read_only: bool) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.gid() != gid {
        std::os::unix::fs::lchown(path, None, Some(gid))?;
    }
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mut want = file_mode(meta.permissions().mode() & 0o7777, read_only);
    if meta.is_dir() {
        want |= SETGID | EXEC_MASK;
    }
    if meta.permissions().mode() & 0o7777 != want {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(want))?;
    }
    Ok(())
}

/// Upstream's `SetVolumeOwnership` over `dir` and everything under it (symlinks not
/// followed); the error names the entry it failed on.
pub fn apply(
    dir: &Path,
    gid: u32,
    read_only: bool,
) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    fn fail(p: &Path) -> impl FnOnce(std::io::Error) -> (std::path::PathBuf, std::io::Error) + '_ {
        move |e| (p.to_path_buf(), e)
    }
    own(dir, gid, read_only).map_err(fail(dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(fail(dir))?;
    if !meta.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).map_err(fail(dir))? {
        let path = entry.map_err(fail(dir))?.path();
        apply(&path, gid, read_only)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn entries_get_the_group_its_bits_and_directories_setgid() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(root.join("sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(root.join("sub/key"), "v").unwrap();
        std::fs::set_permissions(root.join("sub/key"), std::fs::Permissions::from_mode(0o400))
            .unwrap();
        std::os::unix::fs::symlink("sub/key", root.join("key")).unwrap();
        // The test's own group: chown to it needs no privilege.
        let gid = std::fs::metadata(tmp.path()).unwrap().gid();

        apply(&root, gid, true).unwrap();
        assert_eq!(mode(&root), 0o2755);
        assert_eq!(mode(&root.join("sub")), 0o2750);
        assert_eq!(mode(&root.join("sub/key")), 0o440);
        assert_eq!(std::fs::symlink_metadata(root.join("key")).unwrap().gid(), gid);

        std::fs::write(root.join("rw"), "").unwrap();
        std::fs::set_permissions(root.join("rw"), std::fs::Permissions::from_mode(0o600)).unwrap();
        apply(&root, gid, false).unwrap();
        assert_eq!(mode(&root.join("rw")), 0o660);
        assert_eq!(mode(&root), 0o2775);
    }

    #[test]
    fn a_missing_volume_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (path, _) = apply(&tmp.path().join("gone"), 0, true).unwrap_err();
        assert!(path.ends_with("gone"));
    }

    #[test]
    fn file_modes_gain_the_groups_bits() {
        assert_eq!(file_mode(0o644, true), 0o644);
        assert_eq!(file_mode(0o400, true), 0o440);
        assert_eq!(file_mode(0o600, false), 0o660);
    }
}
