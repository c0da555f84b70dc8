//! Container logs in the CRI format, as upstream's `kuberuntime/logs`: containerd writes one
//! record per line, `<RFC 3339 nano timestamp> <stdout|stderr> <P|F>[:tags] <content>`, where `P`
//! marks a partial line (the runtime split a long line; the next record continues it) and `F` a
//! full one. [`parse_cri_line`] decodes one record, [`LogWriter`] applies a request's options
//! (timestamps, since, byte limit) and joins partial lines, [`tail_start`] finds where the last
//! N lines begin by reading the file backwards in blocks, and [`read_logs`] streams a file,
//! following it as it grows when asked. Memory is bounded: files are never read whole.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncSeekExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest record kept as one line; longer ones are passed on in pieces (containerd splits
/// lines at 16 KiB, so only a foreign writer produces them).
pub const MAX_RECORD: usize = 256 * 1024;
/// How far back [`tail_start`] reads for one record before giving up on finding its start.
const BLOCK: usize = 8 * 1024;
/// How often a followed file is checked for growth.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How often a follower asks whether the container still runs.
const RUNNING_CHECK: Duration = Duration::from_secs(1);

/// The output stream a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriRecord<'a> {
    /// The timestamp as written (RFC 3339 with nanoseconds).
    pub timestamp: &'a [u8],
    /// The timestamp as nanoseconds since the epoch.
    pub nanos: i128,
    pub stream: LogStream,
    /// A partial line: its content has no newline and the next record continues it.
    pub partial: bool,
    /// The content, with its newline for a full line.
    pub content: &'a [u8],
}

/// Why a line is not a CRI log record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("timestamp is not found")]
    NoTimestamp,
    #[error("unexpected timestamp {0:?}")]
    BadTimestamp(String),
    #[error("stream type is not found")]
    NoStream,
    #[error("unexpected stream type {0:?}")]
    BadStream(String),
    #[error("log tag is not found")]
    NoTag,
}

fn split_space(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = memchr::memchr(b' ', b)?;
    Some((&b[..i], &b[i + 1..]))
}

/// Parses one line (with or without its newline) as upstream's `parseCRILog` does.
pub fn parse_cri_line(line: &[u8]) -> Result<CriRecord<'_>, ParseError> {
    let (ts, rest) = split_space(line).ok_or(ParseError::NoTimestamp)?;
    let text = std::str::from_utf8(ts)
        .map_err(|_| ParseError::BadTimestamp(String::from_utf8_lossy(ts).into_owned()))?;
    let nanos = text
        .parse::<jiff::Timestamp>()
        .map_err(|_| ParseError::BadTimestamp(text.to_string()))?
        .as_nanosecond();
    let (stream, rest) = split_space(rest).ok_or(ParseError::NoStream)?;
    let stream = match stream {
        b"stdout" => LogStream::Stdout,
        b"stderr" => LogStream::Stderr,
        other => return Err(ParseError::BadStream(String::from_utf8_lossy(other).into_owned())),
    };
    let (tags, mut content) = split_space(rest).ok_or(ParseError::NoTag)?;
    // Tags are `P` or `F`, optionally followed by `:`-separated extras (forward compatible).
    let partial = tags.split(|b| *b == b':').next() == Some(b"P");
    if partial && content.last() == Some(&b'\n') {
        content = &content[..content.len() - 1];
    }
    Ok(CriRecord { timestamp: ts, nanos, stream, partial, content })
}

/// What a request asks of the log (upstream's `LogOptions`, less `follow` and `tail`, which
/// decide where reading starts and stops).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Prefix each line with its timestamp.
    pub timestamps: bool,
    /// Only records at or after this instant (nanoseconds since the epoch).
    pub since_nanos: Option<i128>,
    /// Stop after this many bytes of output.
    pub limit_bytes: Option<u64>,
}

/// Whether to keep going after a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The byte limit was reached; nothing more may be written.
    Limit,
}

/// Turns records into the bytes a client sees, joining partial lines.
#[derive(Debug, Clone)]
pub struct LogWriter {
    opts: LogOptions,
    written: u64,
    /// The next record starts a new line (the previous one was not partial).
    at_line_start: bool,
}

impl LogWriter {
    pub fn new(opts: LogOptions) -> Self {
        Self { opts, written: 0, at_line_start: true }
    }

    /// Appends what `line` contributes to `out`. Lines that are not CRI records are skipped
    /// (with a debug log), as upstream does.
    pub fn write(&mut self, line: &[u8], out: &mut Vec<u8>) -> Flow {
        if self.opts.limit_bytes.is_some_and(|l| self.written >= l) {
            return Flow::Limit;
        }
        let record = match parse_cri_line(line) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "skipping a log line that is not in the CRI format");
                return Flow::Continue;
            }
        };
        if self.opts.since_nanos.is_some_and(|since| record.nanos < since) {
            return Flow::Continue;
        }
        let start = out.len();
        if self.opts.timestamps && self.at_line_start {
            out.extend_from_slice(record.timestamp);
            out.push(b' ');
        }
        out.extend_from_slice(record.content);
        self.at_line_start = !record.partial;
        let mut added = (out.len() - start) as u64;
        if let Some(limit) = self.opts.limit_bytes {
            let room = limit - self.written;
            if added >= room {
                out.truncate(start + usize::try_from(room).unwrap_or(usize::MAX));
                added = room;
                self.written += added;
                return Flow::Limit;
            }
        }
        self.written += added;
        Flow::Continue
    }
}

/// Whether the physical line ends a logical one (an `F` record, or anything unparsable).
fn ends_line(line: &[u8]) -> bool {
    parse_cri_line(line).map(|r| !r.partial).unwrap_or(true)
}

/// The offset where the last `n` logical lines of `file` begin (partial records belong to the
/// line their final record ends). Reads backwards in blocks. A record without a newline within
/// [`MAX_RECORD`] bytes ends the search there (fewer lines than asked are returned).
pub async fn tail_start(file: &mut tokio::fs::File, n: u64) -> std::io::Result<u64> {
    let len = file.seek(SeekFrom::End(0)).await?;
    if n == 0 {
        return Ok(len);
    }
    // `buf` holds the file's bytes from `buf_start` to the end of the record being looked at.
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_start = len;
    let mut found = 0u64;
    let mut last_record = true;
    let mut block = vec![0u8; BLOCK];
    loop {
        let body = match buf.last() {
            Some(b'\n') => &buf[..buf.len() - 1],
            _ => &buf[..],
        };
        match memchr::memrchr(b'\n', body) {
            Some(i) => {
                let record_end = buf_start + buf.len() as u64;
                if !last_record && ends_line(&buf[i + 1..]) {
                    found += 1;
                    if found == n {
                        return Ok(record_end);
                    }
                }
                last_record = false;
                buf.truncate(i + 1);
            }
            None if buf_start == 0 => {
                let first_ends_a_line = !last_record && ends_line(&buf);
                return Ok(if first_ends_a_line && found + 1 == n { buf.len() as u64 } else { 0 });
            }
            None if buf.len() > MAX_RECORD => return Ok(buf_start + buf.len() as u64),
            None => {
                let size = usize::try_from(buf_start.min(BLOCK as u64)).unwrap_or(BLOCK);
                buf_start -= size as u64;
                file.seek(SeekFrom::Start(buf_start)).await?;
                file.read_exact(&mut block[..size]).await?;
                buf.splice(0..0, block[..size].iter().copied());
            }
        }
    }
}

/// Why logs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error("reading log file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// What [`read_logs`] needs besides the file.
#[derive(Debug, Clone)]
pub struct ReadRequest {
    /// The file's path, for errors.
    pub path: PathBuf,
    pub opts: LogOptions,
    /// Only the last this many lines.
    pub tail: Option<u64>,
    pub follow: bool,
}

/// Streams the log `file` (opened from `req.path`) into `out` in chunks: from the tail position
/// (or the start), to the end, and when following, on as the file grows until `running` says the
/// container stopped (and the file is drained), the receiver goes away, or `stop`. A follower
/// goes on to the new file at `req.path` when the log is rotated, once the old one is drained,
/// as upstream's reader does on the file's re-creation.
pub async fn read_logs<F, Fut>(
    mut file: tokio::fs::File,
    req: ReadRequest,
    out: mpsc::Sender<Bytes>,
    running: F,
    stop: CancellationToken,
) -> Result<(), LogsError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let io = |source| LogsError::Io { path: req.path.clone(), source };
    let mut inode = file_id(&file.metadata().await.map_err(io)?);
    let start = match req.tail {
        Some(n) => tail_start(&mut file, n).await.map_err(io)?,
        None => 0,
    };
    file.seek(SeekFrom::Start(start)).await.map_err(io)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut writer = LogWriter::new(req.opts);
    let mut line = Vec::with_capacity(1024);
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut last_check = tokio::time::Instant::now();
    let mut container_stopped = false;
    // The path names a newer file (the log was rotated): read on there once this one is drained.
    let mut rotated = false;
    loop {
        if read_record(&mut reader, &mut line).await.map_err(io)? {
            let flow = writer.write(&line, &mut chunk);
            line.clear();
            if flow == Flow::Limit {
                break;
            }
            if chunk.len() >= CHUNK && !send(&out, &mut chunk).await {
                return Ok(());
            }
            continue;
        }
        // At the end of what is written so far; `line` may hold the start of a record.
        if !send(&out, &mut chunk).await {
            return Ok(());
        }
        if req.follow && rotated {
            // Drained the rotated file; the runtime writes to the new one from here.
            rotated = false;
            match tokio::fs::File::open(&req.path).await {
                Ok(next) => {
                    inode = file_id(&next.metadata().await.map_err(io)?);
                    reader = BufReader::with_capacity(64 * 1024, next);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e)),
            }
        }
        if !req.follow || container_stopped {
            if !line.is_empty() {
                writer.write(&line, &mut chunk);
            }
            break;
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = out.closed() => return Ok(()),
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
        if let Ok(m) = tokio::fs::metadata(&req.path).await {
            rotated = file_id(&m) != inode;
        }
        if last_check.elapsed() >= RUNNING_CHECK {
            last_check = tokio::time::Instant::now();
            // After the container stopped, one more pass drains the file, then reading ends.
            container_stopped = !running().await;
        }
    }
    send(&out, &mut chunk).await;
    Ok(())
}

/// Which file a handle or path is: device and inode.
fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

/// Bytes gathered before they are sent on.
const CHUNK: usize = 16 * 1024;

/// Sends `chunk` (if any), leaving it empty. `false` when the receiver is gone.
async fn send(out: &mpsc::Sender<Bytes>, chunk: &mut Vec<u8>) -> bool {
    if chunk.is_empty() {
        return !out.is_closed();
    }
    out.send(Bytes::from(std::mem::replace(chunk, Vec::with_capacity(CHUNK)))).await.is_ok()
}

/// Appends bytes up to and including the next newline to `line`. Returns `true` when a record
/// is complete (newline seen, or [`MAX_RECORD`] reached), `false` at the current end of file.
async fn read_record<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(false);
        }
        let room = MAX_RECORD.saturating_sub(line.len());
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) if i < room => (i + 1, true),
            _ if buf.len() >= room => (room, true),
            _ => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if done {
            return Ok(true);
        }
    }
}

/// `<log dir>/<container>/<restart count>.log`, where the kubelet asks the runtime to write a
/// container's log (see `runtime::container`).
pub fn container_log_path(pod_log_dir: &Path, container: &str, restart_count: u32) -> PathBuf {
    pod_log_dir.join(container).join(format!("{restart_count}.log"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    const T1: &str = "2016-10-06T00:17:09.669794202Z";
    const T2: &str = "2016-10-06T00:17:10.000000001Z";

    fn rec(ts: &str, stream: &str, tag: &str, text: &str) -> String {
        format!("{ts} {stream} {tag} {text}\n")
    }

    fn render(opts: LogOptions, lines: &[String]) -> (String, Flow) {
        let mut w = LogWriter::new(opts);
        let mut out = Vec::new();
        let mut flow = Flow::Continue;
        for l in lines {
            flow = w.write(l.as_bytes(), &mut out);
            if flow == Flow::Limit {
                break;
            }
        }
        (String::from_utf8(out).unwrap(), flow)
    }

    #[test]
    fn parses_full_and_partial_records_as_upstream() {
        let line = rec(T1, "stdout", "F", "hello world");
        let r = parse_cri_line(line.as_bytes()).unwrap();
        assert_eq!(
            (r.stream, r.partial, r.content, r.timestamp),
            (LogStream::Stdout, false, &b"hello world\n"[..], T1.as_bytes())
        );
        assert_eq!(r.nanos, 1_475_713_029_669_794_202);
        let line = rec(T1, "stderr", "P", "part");
        let r = parse_cri_line(line.as_bytes()).unwrap();
        assert_eq!((r.stream, r.partial, r.content), (LogStream::Stderr, true, &b"part"[..]));
        // Tags after a colon are accepted (forward compatible); content may be empty.
        let line = format!("{T1} stdout F:x \n");
        let r = parse_cri_line(line.as_bytes()).unwrap();
        assert_eq!((r.partial, r.content), (false, &b"\n"[..]));
        assert_eq!(parse_cri_line(b"nonsense"), Err(ParseError::NoTimestamp));
        assert!(matches!(
            parse_cri_line(b"yesterday stdout F x"),
            Err(ParseError::BadTimestamp(_))
        ));
        assert_eq!(
            parse_cri_line(format!("{T1} stdin F x").as_bytes()),
            Err(ParseError::BadStream("stdin".into()))
        );
        assert_eq!(parse_cri_line(format!("{T1} stdout").as_bytes()), Err(ParseError::NoStream));
        assert_eq!(parse_cri_line(format!("{T1} stdout F").as_bytes()), Err(ParseError::NoTag));
    }

    #[test]
    fn partial_records_are_joined_and_timestamps_prefix_logical_lines_only() {
        let lines = [
            rec(T1, "stdout", "P", "long "),
            rec(T1, "stdout", "P", "line"),
            rec(T2, "stdout", "F", " ends"),
            "garbage that is skipped\n".to_string(),
            rec(T2, "stderr", "F", "next"),
        ];
        let (out, _) = render(LogOptions::default(), &lines);
        assert_eq!(out, "long line ends\nnext\n");
        let (out, _) = render(LogOptions { timestamps: true, ..Default::default() }, &lines);
        assert_eq!(out, format!("{T1} long line ends\n{T2} next\n"));
    }

    #[test]
    fn since_skips_older_records_and_limit_bytes_truncates() {
        let lines = [rec(T1, "stdout", "F", "old"), rec(T2, "stdout", "F", "new")];
        let since = parse_cri_line(lines[1].as_bytes()).unwrap().nanos;
        let (out, _) =
            render(LogOptions { since_nanos: Some(since), ..Default::default() }, &lines);
        assert_eq!(out, "new\n");
        let (out, flow) = render(LogOptions { limit_bytes: Some(6), ..Default::default() }, &lines);
        assert_eq!((out.as_str(), flow), ("old\nne", Flow::Limit));
        let (out, flow) = render(LogOptions { limit_bytes: Some(4), ..Default::default() }, &lines);
        assert_eq!((out.as_str(), flow), ("old\n", Flow::Limit));
    }

    async fn file_with(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    async fn tail_of(text: &str, n: u64) -> String {
        let (_dir, path) = file_with(text).await;
        let mut f = tokio::fs::File::open(&path).await.unwrap();
        let start = tail_start(&mut f, n).await.unwrap();
        text[usize::try_from(start).unwrap()..].to_string()
    }

    #[tokio::test]
    async fn tail_counts_logical_lines_from_the_end() {
        let a = rec(T1, "stdout", "F", "a");
        let b1 = rec(T1, "stdout", "P", "b1");
        let b2 = rec(T1, "stdout", "F", "b2");
        let c = rec(T1, "stdout", "F", "c");
        let text = format!("{a}{b1}{b2}{c}");
        assert_eq!(tail_of(&text, 1).await, c);
        assert_eq!(tail_of(&text, 2).await, format!("{b1}{b2}{c}"));
        assert_eq!(tail_of(&text, 3).await, text);
        assert_eq!(tail_of(&text, 10).await, text);
        assert_eq!(tail_of(&text, 0).await, "");
        assert_eq!(tail_of("", 3).await, "");
        // A record still being written (no newline yet) belongs to the last line.
        let partial = format!("{T1} stdout P still writ");
        assert_eq!(tail_of(&format!("{a}{c}{partial}"), 1).await, partial);
        assert_eq!(tail_of(&format!("{a}{c}{partial}"), 2).await, format!("{c}{partial}"));
    }

    #[tokio::test]
    async fn tail_reads_across_blocks() {
        let lines: Vec<String> =
            (0..2000).map(|i| rec(T1, "stdout", "F", &format!("line {i}"))).collect();
        let text = lines.concat();
        assert!(text.len() > 4 * BLOCK);
        assert_eq!(tail_of(&text, 3).await, lines[1997..].concat());
        assert_eq!(tail_of(&text, 1500).await, lines[500..].concat());
    }

    async fn collect(mut rx: mpsc::Receiver<Bytes>) -> String {
        let mut out = Vec::new();
        while let Some(b) = rx.recv().await {
            out.extend_from_slice(&b);
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn reads_a_file_with_tail_and_options() {
        let text = [
            rec(T1, "stdout", "F", "one"),
            rec(T1, "stdout", "F", "two"),
            rec(T2, "stderr", "F", "three"),
        ]
        .concat();
        let (_dir, path) = file_with(&text).await;
        let (tx, rx) = mpsc::channel(4);
        let req = ReadRequest { path, opts: LogOptions::default(), tail: Some(2), follow: false };
        let file = tokio::fs::File::open(&req.path).await.unwrap();
        let reading = read_logs(file, req, tx, || async { true }, CancellationToken::new());
        let (r, out) = tokio::join!(reading, collect(rx));
        r.unwrap();
        assert_eq!(out, "two\nthree\n");
    }

    #[tokio::test]
    async fn follow_streams_new_lines_and_ends_after_the_container_stops() {
        let (_dir, path) = file_with(&rec(T1, "stdout", "F", "first")).await;
        let (tx, mut rx) = mpsc::channel(4);
        let running = Arc::new(AtomicBool::new(true));
        let req = ReadRequest {
            path: path.clone(),
            opts: LogOptions::default(),
            tail: None,
            follow: true,
        };
        let r = running.clone();
        let file = tokio::fs::File::open(&path).await.unwrap();
        let reader = tokio::spawn(read_logs(
            file,
            req,
            tx,
            move || {
                let r = r.clone();
                async move { r.load(Ordering::SeqCst) }
            },
            CancellationToken::new(),
        ));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("first\n"));
        // A line written in two pieces arrives whole, once its newline is there.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        use std::io::Write;
        write!(f, "{T2} stdout F sec").unwrap();
        f.flush().unwrap();
        tokio::time::sleep(FOLLOW_POLL * 2).await;
        writeln!(f, "ond").unwrap();
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("second\n"));
        writeln!(f, "{T2} stdout F last").unwrap();
        running.store(false, Ordering::SeqCst);
        assert_eq!(collect(rx).await, "last\n");
        reader.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_follower_reads_the_rotated_file_to_its_end_then_goes_on_in_the_new_one() {
        use std::io::Write;
        let (_dir, path) = file_with(&rec(T1, "stdout", "F", "before")).await;
        let (tx, mut rx) = mpsc::channel(4);
        let req = ReadRequest {
            path: path.clone(),
            opts: LogOptions::default(),
            tail: None,
            follow: true,
        };
        let stop = CancellationToken::new();
        let file = tokio::fs::File::open(&path).await.unwrap();
        let reader = tokio::spawn(read_logs(file, req, tx, || async { true }, stop.clone()));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("before\n"));
        // The rotation: renamed, a last line lands in the old file, then the runtime reopens.
        let mut old = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::fs::rename(&path, path.with_extension("log.20261127-000000")).unwrap();
        writeln!(old, "{T1} stdout F late").unwrap();
        std::fs::write(&path, rec(T2, "stdout", "F", "after")).unwrap();
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("late\n"));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("after\n"));
        stop.cancel();
        reader.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_follower_stops_when_its_client_goes() {
        let (_dir, path) = file_with(&rec(T1, "stdout", "F", "x")).await;
        let (tx, rx) = mpsc::channel(4);
        let file = tokio::fs::File::open(&path).await.unwrap();
        let req = ReadRequest { path, opts: LogOptions::default(), tail: None, follow: true };
        let reader =
            tokio::spawn(read_logs(file, req, tx, || async { true }, CancellationToken::new()));
        drop(rx);
        tokio::time::timeout(Duration::from_secs(5), reader).await.unwrap().unwrap().unwrap();
    }
}
