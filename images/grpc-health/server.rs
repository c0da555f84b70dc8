//! The IO: a listener and one thread per connection (at most [`MAX_CONNECTIONS`]), each driving
//! its [`Connection`] with reads that time out when the next delayed reply is due. Replies are
//! computed when due, so a status file written during a delay is seen.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::config::Config;
use super::connection::{Connection, Request};
use super::grpc::{Code, Reply};
use super::health::{self, Call};

/// Connections served at once; more are closed as soon as they are accepted.
pub const MAX_CONNECTIONS: usize = 64;
/// Time for a new connection to send the preface and its SETTINGS.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no stream and no frame for this long is sent GOAWAY.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// A client that does not read its replies for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn log(line: std::fmt::Arguments<'_>) {
    eprintln!("grpc-health-server: {line}");
}

/// Binds, prints `listening on <addr>` on stdout, and serves until the process ends.
pub fn run(config: Config) -> io::Result<()> {
    let listener = TcpListener::bind((config.address, config.port))?;
    println!("grpc-health-server: listening on {}", listener.local_addr()?);
    io::stdout().flush()?;
    serve(&listener, &Arc::new(config));
    Ok(())
}

/// Releases a connection slot when its thread ends (or was never started).
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve(listener: &TcpListener, config: &Arc<Config>) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                log(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            log(format_args!("{peer}: refused, {MAX_CONNECTIONS} connections are open"));
            continue;
        }
        let slot = Slot(Arc::clone(&active));
        let config = Arc::clone(config);
        let spawned = std::thread::Builder::new().stack_size(256 * 1024).spawn(move || {
            let _slot = slot;
            serve_connection(stream, peer, &config);
        });
        if let Err(e) = spawned {
            log(format_args!("{peer}: no thread for the connection: {e}"));
        }
    }
}

fn log_answer(peer: SocketAddr, call: Option<&Call>, reply: &Reply) {
    let what = match call {
        Some(Call::Check(service)) => format!("Check {service:?}"),
        Some(Call::Watch) => "Watch".to_string(),
        Some(Call::Other(path)) => path.clone(),
        None => "request".to_string(),
    };
    match &reply.message {
        Some(m) => log(format_args!("{peer}: {what} -> {}", health::response_status(m).name())),
        None => log(format_args!("{peer}: {what} -> {:?}: {}", reply.code, reply.detail)),
    }
}

/// Closes our side, then reads and drops what the client still sends, for at most a second:
/// closing with unread input would reset the connection and could cost the client our GOAWAY.
fn linger(stream: &mut TcpStream, buf: &mut [u8]) {
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + Duration::from_secs(1);
    let mut drained = 0;
    while drained < 1 << 20 {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

fn serve_connection(mut stream: TcpStream, peer: SocketAddr, config: &Config) {
    // Replies are a few small frames: send them at once.
    let _ = stream.set_nodelay(true);
    if let Err(e) = stream.set_write_timeout(Some(WRITE_TIMEOUT)) {
        return log(format_args!("{peer}: {e}"));
    }
    let started = Instant::now();
    let mut last_frame = started;
    let mut conn = Connection::new();
    let mut pending: Vec<(Instant, Request)> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let ended = loop {
        let out = conn.take_output();
        if let Err(e) = stream.write_all(&out) {
            break Some(format!("write: {e}"));
        }
        if conn.is_finished() {
            break conn.failure().map(str::to_string);
        }
        let now = Instant::now();
        let mut wake = if conn.is_established() {
            last_frame + IDLE_TIMEOUT
        } else {
            started + HANDSHAKE_TIMEOUT
        };
        if let Some(due) = pending.iter().map(|(due, _)| *due).min() {
            wake = wake.min(due);
        }
        let wait = wake.saturating_duration_since(now).max(Duration::from_millis(1));
        if let Err(e) = stream.set_read_timeout(Some(wait)) {
            break Some(e.to_string());
        }
        match stream.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                last_frame = Instant::now();
                for request in conn.receive(&buf[..n]) {
                    match health::delay(config) {
                        Ok(delay) => pending.push((last_frame + delay, request)),
                        Err(why) => {
                            let reply = Reply::error(Code::Internal, why);
                            log_answer(peer, None, &reply);
                            conn.reply(request.stream, reply.into_response());
                        }
                    }
                }
                // Requests the client reset while they waited.
                pending.retain(|(_, r)| conn.awaits_reply(r.stream));
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Some(format!("read: {e}")),
        }
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = pending.into_iter().partition(|(at, _)| *at <= now);
        pending = later;
        for (_, request) in due {
            let (call, reply) = health::answer(&request, config);
            log_answer(peer, call.as_ref(), &reply);
            conn.reply(request.stream, reply.into_response());
        }
        if !conn.is_established() && now >= started + HANDSHAKE_TIMEOUT {
            break Some("no HTTP/2 handshake within 10 s".into());
        }
        if conn.is_idle() && now >= last_frame + IDLE_TIMEOUT {
            conn.go_away();
        }
    };
    let _ = stream.write_all(&conn.take_output());
    linger(&mut stream, &mut buf);
    if let Some(why) = ended {
        log(format_args!("{peer}: connection closed: {why}"));
    }
}
