//! systemd's manager on D-Bus (`zbus`): [`SystemdBus`], the real [`Systemd`].
//!
//! Each call waits for its job as runc does: the `JobRemoved` signal is subscribed to before
//! the call, and the job the call returned must be removed with result `done` within
//! [`JOB_TIMEOUT`] (runc's 30 s); a failed or timed-out start resets the failed unit.
//!
//! The container manager is synchronous (its cgroupfs writes block too), so the connection
//! lives on a runtime of its own, one worker driving it; each call blocks its caller on a
//! scoped thread, which works from any caller (a tokio worker of either flavour, or none).

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use zbus::zvariant::{OwnedObjectPath, Value as Variant};

use super::{DriverError, Property, Systemd, SystemdError, Value, parse_version};

const SYSTEMD1: &str = "org.freedesktop.systemd1";
const SYSTEMD1_PATH: &str = "/org/freedesktop/systemd1";
const SYSTEMD1_MANAGER: &str = "org.freedesktop.systemd1.Manager";
/// How long a job may take, as runc.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(30);

/// systemd's manager on a bus connection.
#[derive(Debug)]
pub struct SystemdBus {
    /// `None` once dropped (shut down in the background: dropping may happen on a runtime).
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    conn: zbus::Connection,
    timeout: Duration,
    /// The manager's `Version`, asked once.
    version: std::sync::OnceLock<Option<u32>>,
}

impl Drop for SystemdBus {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// A zbus error, boxed for the error types.
fn boxed(e: zbus::Error) -> Box<zbus::Error> {
    Box::new(e)
}

/// Whether systemd refused the call with the D-Bus error `name`.
fn is_error(e: &zbus::Error, name: &str) -> bool {
    matches!(e, zbus::Error::MethodError(n, _, _) if n.as_str() == name)
}

/// `a(sv)` as zbus sends it.
fn variants(properties: &[Property]) -> Vec<(&'static str, Variant<'static>)> {
    properties
        .iter()
        .map(|p| {
            let value = match &p.value {
                Value::Bool(b) => Variant::from(*b),
                Value::U64(n) => Variant::from(*n),
                Value::Str(s) => Variant::from(s.clone()),
                Value::Strs(v) => Variant::from(v.clone()),
            };
            (p.name, value)
        })
        .collect()
}

impl SystemdBus {
    /// systemd on the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else its socket).
    pub fn system() -> Result<Self, DriverError> {
        Self::connect(None)
    }

    /// systemd on the bus at `address` (a private bus in tests).
    pub fn at(address: &str) -> Result<Self, DriverError> {
        Self::connect(Some(address))
    }

    fn connect(address: Option<&str>) -> Result<Self, DriverError> {
        let connect_error = |e: std::io::Error| DriverError::Connect(boxed(zbus::Error::from(e)));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("systemd-dbus")
            .enable_all()
            .build()
            .map_err(connect_error)?;
        let address = address.map(str::to_string);
        let connected = run(runtime.handle(), async move {
            match address {
                Some(a) => zbus::connection::Builder::address(a.as_str())?.build().await,
                None => zbus::Connection::system().await,
            }
        });
        let conn = match connected {
            Ok(conn) => conn,
            Err(e) => {
                // Dropped on a caller's runtime, a runtime would panic.
                runtime.shutdown_background();
                return Err(DriverError::Connect(boxed(e)));
            }
        };
        let handle = runtime.handle().clone();
        Ok(Self {
            runtime: Some(runtime),
            handle,
            conn,
            timeout: JOB_TIMEOUT,
            version: std::sync::OnceLock::new(),
        })
    }

    /// Waits at most `timeout` for each job (tests shorten it).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn block_on<T: Send>(&self, fut: impl Future<Output = T> + Send) -> T {
        run(&self.handle, fut)
    }

    async fn manager(&self) -> zbus::Result<zbus::Proxy<'static>> {
        zbus::Proxy::new(&self.conn, SYSTEMD1, SYSTEMD1_PATH, SYSTEMD1_MANAGER).await
    }

    /// Calls `method`, whose reply is a job, and waits for the job's `JobRemoved`: its result,
    /// or `None` past the timeout. `Ok(None)` from the call itself means it was refused as
    /// `fine` (the unit exists, or is not there to stop).
    async fn job<B>(
        &self,
        method: &'static str,
        body: &B,
        fine: &str,
    ) -> zbus::Result<Option<Option<String>>>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType + Sync,
    {
        let manager = self.manager().await?;
        let mut removed = manager.receive_signal("JobRemoved").await?;
        let job: OwnedObjectPath = match manager.call(method, body).await {
            Ok(job) => job,
            Err(e) if is_error(&e, fine) => return Ok(None),
            Err(e) => return Err(e),
        };
        let wait = async {
            while let Some(signal) = removed.next().await {
                let Ok((_id, path, _unit, result)) =
                    signal.body().deserialize::<(u32, OwnedObjectPath, String, String)>()
                else {
                    continue;
                };
                if path == job {
                    return Some(result);
                }
            }
            None
        };
        Ok(Some(tokio::time::timeout(self.timeout, wait).await.ok().flatten()))
    }

    /// `ResetFailedUnit`, as runc after a failed start; a failure is only logged.
    async fn reset_failed(&self, unit: &str) {
        let reset =
            async { self.manager().await?.call::<_, _, ()>("ResetFailedUnit", &unit).await };
        if let Err(e) = reset.await {
            tracing::warn!(unit, error = %e, "unable to reset failed unit");
        }
    }
}

/// Runs `fut` on `rt` from a thread of its own, so the caller may be on any runtime.
fn run<T: Send>(rt: &tokio::runtime::Handle, fut: impl Future<Output = T> + Send) -> T {
    std::thread::scope(|s| match s.spawn(|| rt.block_on(fut)).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";

impl Systemd for SystemdBus {
    fn start_unit(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError> {
        let aux: Vec<(&str, Vec<(&str, Variant<'_>)>)> = Vec::new();
        let body = (unit, "replace", variants(properties), aux);
        self.block_on(async {
            let outcome = self.job("StartTransientUnit", &body, UNIT_EXISTS).await;
            let unit = unit.to_string();
            match outcome {
                Err(source) => Err(SystemdError::Start { unit, source: boxed(source) }),
                Ok(None) => Ok(()),
                Ok(Some(Some(result))) if result == "done" => Ok(()),
                Ok(Some(Some(result))) => {
                    self.reset_failed(&unit).await;
                    Err(SystemdError::Job { unit, result })
                }
                Ok(Some(None)) => {
                    self.reset_failed(&unit).await;
                    Err(SystemdError::StartTimeout { unit })
                }
            }
        })
    }

    fn set_properties(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError> {
        let body = (unit, true, variants(properties));
        self.block_on(async {
            self.manager().await?.call::<_, _, ()>("SetUnitProperties", &body).await
        })
        .map_err(|source| SystemdError::Set { unit: unit.to_string(), source: boxed(source) })
    }

    fn stop_unit(&self, unit: &str) -> Result<(), SystemdError> {
        let body = (unit, "replace");
        self.block_on(async {
            let unit = unit.to_string();
            match self.job("StopUnit", &body, NO_SUCH_UNIT).await {
                Err(source) => Err(SystemdError::Stop { unit, source: boxed(source) }),
                Ok(None) => Ok(()),
                Ok(Some(Some(result))) => {
                    if result != "done" {
                        tracing::warn!(unit, result, "error removing unit; continuing");
                    }
                    Ok(())
                }
                Ok(Some(None)) => Err(SystemdError::StopTimeout { unit }),
            }
        })
    }

    fn version(&self) -> Option<u32> {
        *self.version.get_or_init(|| {
            let asked: zbus::Result<String> =
                self.block_on(async { self.manager().await?.get_property("Version").await });
            match asked {
                Ok(text) => parse_version(&text),
                Err(e) => {
                    tracing::warn!(error = %e, "unable to get systemd version");
                    None
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
