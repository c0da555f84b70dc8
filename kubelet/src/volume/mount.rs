//! Mounting, behind the [`Mounter`] trait (upstream's `mount.Interface`): the kubelet mounts a
//! tmpfs per memory-backed volume (secrets, projected volumes, `emptyDir.medium: Memory`) and
//! detaches it when the pod's volumes are released. [`HostMounter`] does it with `mount(2)`;
//! tests use the fake, which needs no root.

use std::io;
use std::path::Path;

/// Mounts and unmounts on the node.
pub trait Mounter: Send + Sync + std::fmt::Debug {
    /// Mounts a new tmpfs at `target` (an existing directory), at most `size` bytes when given.
    fn mount_tmpfs(&self, target: &Path, size: Option<u64>) -> io::Result<()>;
    /// Detaches what is mounted at `target`.
    fn unmount(&self, target: &Path) -> io::Result<()>;
    /// Whether something is mounted at `path` (its device differs from its parent's, as
    /// upstream's `IsLikelyNotMountPoint` reads it).
    fn is_mount_point(&self, path: &Path) -> io::Result<bool>;
}

/// The node's own mount table, through `mount(2)` and `umount2(2)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostMounter;

impl Mounter for HostMounter {
    fn mount_tmpfs(&self, target: &Path, size: Option<u64>) -> io::Result<()> {
        let options = size.map(|s| format!("size={s}"));
        nix::mount::mount(
            Some("tmpfs"),
            target,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            options.as_deref(),
        )
        .map_err(io::Error::from)
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        // Detached at once even while a container still holds it; freed with the last user.
        nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH).map_err(io::Error::from)
    }

    fn is_mount_point(&self, path: &Path) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let own = std::fs::symlink_metadata(path)?;
        let parent = path.parent().unwrap_or(path);
        let above = std::fs::metadata(parent)?;
        Ok(own.dev() != above.dev() || own.ino() == above.ino())
    }
}

#[cfg(test)]
pub mod fake {
    //! A mount table in memory: what was mounted where, with which size.

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use super::Mounter;

    #[derive(Debug, Default)]
    pub struct FakeMounter {
        pub mounts: Mutex<BTreeMap<PathBuf, Option<u64>>>,
        /// Mounting fails with this errno when set (no root, say).
        pub fail_mount: Mutex<Option<i32>>,
        /// Unmounting fails with this errno when set (busy, say).
        pub fail_unmount: Mutex<Option<i32>>,
    }

    impl FakeMounter {
        pub fn mounted(&self) -> BTreeMap<PathBuf, Option<u64>> {
            self.mounts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
        }
    }

    impl Mounter for FakeMounter {
        fn mount_tmpfs(&self, target: &Path, size: Option<u64>) -> std::io::Result<()> {
            if let Some(errno) = *self.fail_mount.lock().unwrap_or_else(|e| e.into_inner()) {
                return Err(std::io::Error::from_raw_os_error(errno));
            }
            if !target.is_dir() {
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            }
            let mut mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
            mounts.insert(target.to_path_buf(), size);
            Ok(())
        }

        fn unmount(&self, target: &Path) -> std::io::Result<()> {
            if let Some(errno) = *self.fail_unmount.lock().unwrap_or_else(|e| e.into_inner()) {
                return Err(std::io::Error::from_raw_os_error(errno));
            }
            let mut mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
            match mounts.remove(target) {
                Some(_) => Ok(()),
                None => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            }
        }

        fn is_mount_point(&self, path: &Path) -> std::io::Result<bool> {
            std::fs::symlink_metadata(path)?;
            Ok(self.mounts.lock().unwrap_or_else(|e| e.into_inner()).contains_key(path))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_is_not_a_mount_point_and_the_root_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).expect("mkdir");
        assert!(!HostMounter.is_mount_point(&sub).expect("stat"));
        assert!(HostMounter.is_mount_point(Path::new("/")).expect("stat /"));
        assert!(HostMounter.is_mount_point(&dir.path().join("missing")).is_err());
    }
}
