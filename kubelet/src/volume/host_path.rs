//! `hostPath`: a path on the node, checked against its `type` as upstream does (and created
//! for the `...OrCreate` types).

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use super::SetupError;

/// Checks (or creates) `path` as `kind` says; `""` checks nothing.
pub fn check(path: &Path, kind: &str) -> Result<(), SetupError> {
    let meta = std::fs::metadata(path);
    let wrong = |detail: Option<String>| SetupError::HostPathType {
        path: path.to_path_buf(),
        kind: kind.to_string(),
        detail,
    };
    match (kind, &meta) {
        ("", _) => Ok(()),
        ("DirectoryOrCreate", Err(_)) => std::fs::create_dir_all(path)
            .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)))
            .map_err(SetupError::io("creating directory", path)),
        ("DirectoryOrCreate" | "Directory", Ok(m)) if m.is_dir() => Ok(()),
        ("FileOrCreate", Err(_)) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(drop)
            .map_err(SetupError::io("creating file", path)),
        ("FileOrCreate" | "File", Ok(m)) if m.is_file() => Ok(()),
        ("Socket", Ok(m)) if m.file_type().is_socket() => Ok(()),
        ("CharDevice", Ok(m)) if m.file_type().is_char_device() => Ok(()),
        ("BlockDevice", Ok(m)) if m.file_type().is_block_device() => Ok(()),
        (_, Err(e)) => Err(wrong(Some(e.to_string()))),
        (_, Ok(_)) => Err(wrong(None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_path_types_are_checked() {
        let root = tempfile::tempdir().unwrap();
        let err = check(&root.path().join("missing"), "Directory").unwrap_err();
        assert!(err.to_string().contains("is not a Directory"), "{err}");
        assert!(check(root.path(), "File").is_err());
        assert!(check(&root.path().join("f"), "FileOrCreate").is_ok());
        assert!(root.path().join("f").is_file());
        assert!(check(&root.path().join("d/e"), "DirectoryOrCreate").is_ok());
        assert!(root.path().join("d/e").is_dir());
    }
}
