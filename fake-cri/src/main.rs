//! `fake-cri --listen unix:///path/to.sock`: serves an in-memory CRI v1 runtime for tests and
//! demos. It runs no containers: sandboxes and containers only change state.

use anyhow::Context;
use clap::Parser;
use fake_cri::{FakeCriServer, FakeRuntime, PodCidr};
use proto::UnixEndpoint;
use tokio::signal::unix::{SignalKind, signal};

/// An in-memory CRI v1 runtime (RuntimeService and ImageService) on a unix socket.
/// It keeps sandbox and container state like containerd but runs no containers.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The socket to serve on.
    #[arg(long, default_value = "unix:///run/fake-cri/fake-cri.sock")]
    listen: UnixEndpoint,
    /// An image present from the start, as if pulled (repeatable).
    #[arg(long = "image", value_name = "REFERENCE")]
    images: Vec<String>,
    /// The subnet sandboxes get their addresses from (host-local's range: the network, `.1` and
    /// the broadcast address excluded).
    #[arg(long, default_value = "10.88.0.0/16")]
    pod_cidr: PodCidr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();

    let runtime = FakeRuntime::new();
    runtime.set_pod_cidr(args.pod_cidr);
    for image in &args.images {
        runtime.add_image(image).with_context(|| format!("--image {image}"))?;
    }
    let server = FakeCriServer::start_with(runtime, args.listen.path())?;
    tracing::info!(endpoint = %args.listen, "fake-cri serving (it runs no containers)");

    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutting down");
    server.shutdown().await?;
    Ok(())
}
