//! Loopback ports for the components tests start.
//!
//! A port found by binding port 0 comes from the kernel's ephemeral range, and between the
//! harness releasing it and the component binding it any process may be handed it again (by its
//! own bind to port 0 or as an outgoing connection's source port): the component then exits
//! with `Address already in use`. The ports here come from below that range, which the kernel
//! never picks on its own; each is reserved for the rest of the test process by an abstract unix
//! socket named after it, so two test processes running side by side never pick the same one
//! (the reservation ends with the process: nothing is left on disk); and a port some other
//! program listens on is passed over.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener};
use std::sync::{Mutex, PoisonError};

/// How many ports below the ephemeral range are ours to hand out.
const SPAN: u16 = 10_000;

/// The reservations this process holds (never released before it exits).
static HELD: Mutex<Vec<UnixListener>> = Mutex::new(Vec::new());

/// A port no other test process has been given and nobody listens on, on any address.
pub fn free_port() -> io::Result<u16> {
    let (first, span) = range()?;
    let start = std::process::id().wrapping_mul(7919)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    for i in 0..u32::from(span) {
        let offset = u16::try_from((start.wrapping_add(i)) % u32::from(span)).unwrap_or(0);
        let port = first + offset;
        let Some(reservation) = reserve(port)? else { continue };
        // Not listened on by anyone (bound on every address: the kubelet's ports are).
        if std::net::TcpListener::bind(("0.0.0.0", port)).is_err() {
            continue;
        }
        HELD.lock().unwrap_or_else(PoisonError::into_inner).push(reservation);
        return Ok(port);
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!("no free port left in {first}..{}", u32::from(first) + u32::from(span)),
    ))
}

/// `port`'s reservation, or `None` when another test process holds it.
fn reserve(port: u16) -> io::Result<Option<UnixListener>> {
    let name = format!("kubelet-e2e-port-{port}");
    match UnixListener::bind_addr(&UnixAddr::from_abstract_name(name.as_bytes())?) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

/// The first port of ours and how many: the `SPAN` ports just below the ephemeral range
/// (`net.ipv4.ip_local_port_range`), never below 1024.
fn range() -> io::Result<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")?;
    let low: u16 =
        text.split_whitespace().next().and_then(|v| v.parse().ok()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ip_local_port_range: cannot read {text:?}"),
            )
        })?;
    let first = low.saturating_sub(SPAN).max(1024);
    let span = low.saturating_sub(first);
    if span < 1000 {
        return Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!(
                "ip_local_port_range starts at {low}: fewer than 1000 ports below it for tests"
            ),
        ));
    }
    Ok((first, span))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_handed_out_are_distinct_below_the_ephemeral_range_and_bindable() {
        let (first, span) = range().unwrap();
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        for p in ports {
            assert!((first..first + span).contains(&p), "{p} outside {first}+{span}");
            std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
    }

    #[test]
    fn a_port_reserved_elsewhere_is_passed_over() {
        let p = free_port().unwrap();
        // This process holds p's reservation, as another test process would.
        assert!(reserve(p).unwrap().is_none());
    }
}
