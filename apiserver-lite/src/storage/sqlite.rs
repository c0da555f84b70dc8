//! The embedded backend: one SQLite file in WAL mode, every append committed with a full sync.
//! An append writes its rows and nothing else (no index, no counter row): each page it touches
//! is one more page in the WAL to sync before the writes are acknowledged.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use rusqlite::{Connection, params};

use super::{Backend, Record, Revision, StorageError, Write};

#[derive(Debug)]
pub struct SqliteBackend {
    conn: Mutex<Connection>,
}

impl SqliteBackend {
    /// Opens (creating) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StorageError::Io {
                what: format!("creating {}", dir.display()),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: the WAL is synced at every commit, so an acknowledged write survives a crash.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv (
                 revision INTEGER PRIMARY KEY,
                 key TEXT NOT NULL,
                 value BLOB,
                 deleted INTEGER NOT NULL
             );
             CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
             DROP INDEX IF EXISTS kv_key;",
        )?;
        Ok(Self { conn: Mutex::new(conn) })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Backend for SqliteBackend {
    fn load(&self) -> Result<(Vec<Record>, Revision), StorageError> {
        let conn = self.conn();
        // SQLite returns the bare columns of the row holding MAX(revision) for each key.
        let mut stmt =
            conn.prepare("SELECT key, value, MAX(revision), deleted FROM kv GROUP BY key")?;
        let rows = stmt.query_map([], |r| {
            let value: Option<Vec<u8>> = r.get(1)?;
            Ok((r.get::<_, String>(0)?, value, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
        })?;
        let mut records = Vec::new();
        for row in rows {
            let (key, value, revision, deleted) = row?;
            if deleted == 0 {
                records.push(Record {
                    key,
                    value: Bytes::from(value.unwrap_or_default()),
                    revision,
                });
            }
        }
        // The last row's revision, or what compaction recorded when it removed the last row.
        let revision: i64 = conn.query_row(
            "SELECT MAX(COALESCE((SELECT MAX(revision) FROM kv), 0),
                        COALESCE((SELECT value FROM meta WHERE name = 'revision'), 0))",
            [],
            |r| r.get(0),
        )?;
        Ok((records, revision))
    }

    fn append(&self, first: Revision, writes: &[Write]) -> Result<(), StorageError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO kv (revision, key, value, deleted) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (i, w) in writes.iter().enumerate() {
                let rev = first + i64::try_from(i).unwrap_or(i64::MAX);
                match w {
                    Write::Put { key, value } => {
                        insert.execute(params![rev, key, value.as_ref(), 0])?
                    }
                    Write::Delete { key } => {
                        insert.execute(params![rev, key, Option::<&[u8]>::None, 1])?
                    }
                };
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn compact(&self, revision: Revision) -> Result<(), StorageError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        // The revision counter lives in the rows; before they may go, it is kept in `meta`.
        tx.execute(
            "INSERT INTO meta (name, value)
             SELECT 'revision', revision FROM kv WHERE true ORDER BY revision DESC LIMIT 1
             ON CONFLICT(name) DO UPDATE SET value = MAX(value, excluded.value)",
            [],
        )?;
        tx.execute(
            "DELETE FROM kv WHERE revision < ?1 AND (deleted = 1 OR revision NOT IN (SELECT MAX(revision) FROM kv GROUP BY key))",
            params![revision],
        )?;
        tx.execute("INSERT INTO meta (name, value) VALUES ('compacted', ?1) ON CONFLICT(name) DO UPDATE SET value = excluded.value", params![revision])?;
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, v: &str) -> Write {
        Write::Put { key: key.into(), value: Bytes::from(v.to_string()) }
    }

    #[test]
    fn appends_load_back_with_revisions_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db/state.db");
        {
            let b = SqliteBackend::open(&path).unwrap();
            b.append(1, &[put("/a", "1"), put("/b", "1")]).unwrap();
            b.append(3, &[put("/a", "2")]).unwrap();
            b.append(4, &[Write::Delete { key: "/b".into() }]).unwrap();
        }
        let b = SqliteBackend::open(&path).unwrap();
        let (records, rev) = b.load().unwrap();
        assert_eq!(rev, 4);
        assert_eq!(records, [Record { key: "/a".into(), value: Bytes::from("2"), revision: 3 }]);
    }

    #[test]
    fn compaction_keeps_latest_values_and_the_revision_counter() {
        let dir = tempfile::tempdir().unwrap();
        let b = SqliteBackend::open(&dir.path().join("s.db")).unwrap();
        b.append(1, &[put("/a", "1"), put("/b", "1")]).unwrap();
        b.append(3, &[put("/a", "2"), Write::Delete { key: "/b".into() }]).unwrap();
        b.compact(5).unwrap();
        let rows: i64 = b.conn().query_row("SELECT COUNT(*) FROM kv", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1, "only /a's latest value is left");
        let (records, rev) = b.load().unwrap();
        assert_eq!((records.len(), rev), (1, 4));
        b.compact(5).unwrap();
        b.append(5, &[put("/c", "1")]).unwrap();
        assert_eq!(b.load().unwrap().1, 5, "rows after a compaction count again");
        SqliteBackend::open(&dir.path().join("empty.db")).unwrap().compact(1).unwrap();
    }

    #[test]
    fn a_database_written_with_the_key_index_and_a_counter_row_opens_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE kv (revision INTEGER PRIMARY KEY, key TEXT NOT NULL, value BLOB,
                                  deleted INTEGER NOT NULL);
                 CREATE INDEX kv_key ON kv (key, revision);
                 CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
                 INSERT INTO kv VALUES (7, '/a', X'31', 0);
                 INSERT INTO meta VALUES ('revision', 9);",
            )
            .unwrap();
        }
        let b = SqliteBackend::open(&path).unwrap();
        let (records, rev) = b.load().unwrap();
        assert_eq!((records.len(), rev), (1, 9), "the counter row past the last row is kept");
        let indexes: i64 = b
            .conn()
            .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(indexes, 1, "only the meta table's own key index is left");
    }
}
