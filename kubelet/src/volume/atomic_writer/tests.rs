#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::os::unix::fs::PermissionsExt;

use super::*;

fn file(data: &str, mode: u32) -> FileProjection {
    FileProjection { data: data.as_bytes().to_vec(), mode }
}

fn payload(entries: &[(&str, &str)]) -> Payload {
    entries.iter().map(|(p, d)| (p.to_string(), file(d, 0o644))).collect()
}

fn data_target(dir: &Path) -> String {
    std::fs::read_link(dir.join(DATA_DIR)).unwrap().to_string_lossy().into_owned()
}

/// The entries of `dir` whose names start with `..`, besides `..data`.
fn timestamp_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("..") && n != DATA_DIR)
        .collect();
    names.sort();
    names
}

#[test]
fn files_are_links_through_data_to_a_timestamped_directory() {
    let dir = tempfile::tempdir().unwrap();
    let p = payload(&[("key", "value"), ("conf/app.yaml", "a: 1")]);
    assert_eq!(write(dir.path(), &p, None).unwrap(), Written::Updated);
    let ts = data_target(dir.path());
    assert!(ts.starts_with("..") && ts.len() > "..2024_01_01_00_00_00.".len(), "{ts}");
    assert_eq!(timestamp_dirs(dir.path()), std::slice::from_ref(&ts));
    let ts_meta = std::fs::metadata(dir.path().join(&ts)).unwrap();
    assert_eq!(ts_meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(std::fs::read_link(dir.path().join("key")).unwrap(), Path::new("..data/key"));
    assert_eq!(std::fs::read_link(dir.path().join("conf")).unwrap(), Path::new("..data/conf"));
    assert_eq!(std::fs::read_to_string(dir.path().join("key")).unwrap(), "value");
    assert_eq!(std::fs::read_to_string(dir.path().join("conf/app.yaml")).unwrap(), "a: 1");
    let mode = std::fs::metadata(dir.path().join("key")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o644);
}

#[test]
fn the_same_payload_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = payload(&[("key", "value")]);
    write(dir.path(), &p, None).unwrap();
    let ts = data_target(dir.path());
    assert_eq!(write(dir.path(), &p, None).unwrap(), Written::Unchanged);
    assert_eq!(data_target(dir.path()), ts);
}

#[test]
fn an_update_swaps_data_removes_the_old_directory_and_gone_names() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &payload(&[("a", "1"), ("b", "2"), ("sub/c", "3")]), None).unwrap();
    let first = data_target(dir.path());
    write(dir.path(), &payload(&[("a", "one")]), None).unwrap();
    let second = data_target(dir.path());
    assert_ne!(first, second);
    assert_eq!(timestamp_dirs(dir.path()), [second]);
    assert_eq!(std::fs::read_to_string(dir.path().join("a")).unwrap(), "one");
    for gone in ["b", "sub"] {
        assert!(std::fs::symlink_metadata(dir.path().join(gone)).is_err(), "{gone} left");
    }
}

#[test]
fn a_mode_change_alone_is_written() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &payload(&[("k", "v")]), None).unwrap();
    let p: Payload = [("k".to_string(), file("v", 0o400))].into();
    assert_eq!(write(dir.path(), &p, None).unwrap(), Written::Updated);
    let mode = std::fs::metadata(dir.path().join("k")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o400);
}

#[test]
fn bad_paths_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("", PathError::Empty),
        ("/etc/passwd", PathError::Absolute("/etc/passwd".into())),
        ("a/../../b", PathError::DotDot("a/../../b".into())),
        ("..data", PathError::Reserved("..data".into())),
        ("..x/y", PathError::Reserved("..x/y".into())),
    ];
    for (path, want) in cases {
        let err = write(dir.path(), &payload(&[(path, "x")]), None).unwrap_err();
        assert!(matches!(&err, WriteError::Path(e) if *e == want), "{path}: {err}");
    }
    let long = "x".repeat(256);
    assert!(matches!(clean_path(&long), Err(PathError::NameTooLong(_))));
    assert!(matches!(clean_path("a\0b"), Err(PathError::Nul(_))));
    assert!(matches!(
        validate(&payload(&[("a", "1"), ("./a", "2")])),
        Err(PathError::Duplicate(p)) if p == "a"
    ));
    assert!(matches!(
        validate(&payload(&[("a", "1"), ("a/b", "2")])),
        Err(PathError::FileIsDirectory { file, .. }) if file == "a"
    ));
    assert_eq!(clean_path("a//./b").unwrap(), "a/b");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
}

#[test]
fn a_crash_left_directory_and_link_are_cleaned_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &payload(&[("k", "v")]), None).unwrap();
    std::fs::create_dir(dir.path().join("..2020_01_01_00_00_00.1")).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.path().join(NEW_DATA_DIR)).unwrap();
    write(dir.path(), &payload(&[("k", "w")]), None).unwrap();
    assert_eq!(timestamp_dirs(dir.path()), [data_target(dir.path())]);
    assert_eq!(std::fs::read_to_string(dir.path().join("k")).unwrap(), "w");
}

#[test]
fn a_reader_never_sees_half_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_path_buf();
    let size = 256 * 1024;
    let content = |i: u8| FileProjection { data: vec![b'a' + i % 26; size], mode: 0o644 };
    let write_version = |i: u8| {
        let p: Payload = [("big".to_string(), content(i)), ("small".to_string(), content(i))]
            .into_iter()
            .map(|(k, mut v)| {
                if k == "small" {
                    v.data.truncate(1);
                }
                (k, v)
            })
            .collect();
        write(&target, &p, None).unwrap();
    };
    write_version(0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, target) = (stop.clone(), target.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // One resolution of ..data: both files from the same version.
                let Ok(version) = std::fs::canonicalize(target.join(DATA_DIR)) else { continue };
                let (Ok(big), Ok(small)) =
                    (std::fs::read(version.join("big")), std::fs::read(version.join("small")))
                else {
                    continue; // that version was removed after the next swap: read again
                };
                assert_eq!(big.len(), size, "a whole file");
                assert!(big.iter().all(|b| *b == big[0]), "one version in the file");
                assert_eq!(small, [big[0]], "both files from one version");
                // Resolved while the old version is removed: read again.
                let Ok(through_link) = std::fs::read(target.join("big")) else { continue };
                assert_eq!(through_link.len(), size);
                assert!(through_link.iter().all(|b| *b == through_link[0]));
                reads += 1;
            }
            reads
        })
    };
    for i in 1..=100u8 {
        write_version(i);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0, "the reader read");
}

#[test]
fn with_a_group_files_are_the_groups_before_they_show_and_stay_unchanged_after() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let gid = std::fs::metadata(dir.path()).unwrap().gid();
    let mut p = payload(&[("secret", "s")]);
    p.get_mut("secret").unwrap().mode = 0o400;
    assert_eq!(write(dir.path(), &p, Some(gid)).unwrap(), Written::Updated);
    let file = std::fs::metadata(dir.path().join("secret")).unwrap();
    assert_eq!((file.permissions().mode() & 0o7777, file.gid()), (0o440, gid));
    let data = std::fs::metadata(dir.path().join("..data")).unwrap();
    assert_eq!(data.permissions().mode() & 0o7777, 0o2755, "the timestamped dir is setgid");
    assert_eq!(write(dir.path(), &p, Some(gid)).unwrap(), Written::Unchanged);
}
