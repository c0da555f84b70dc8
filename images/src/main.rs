//! `build-test-images --out DIR`: writes the offline test images as OCI archives and prints one
//! `<reference>\t<archive>` line per image.

use std::path::PathBuf;

use clap::Parser;

/// Builds the offline test images (busybox, busybox-httpd, grpc-health, pause) as OCI archives.
#[derive(Debug, Parser)]
struct Args {
    /// Directory to write the archives to.
    #[arg(long)]
    out: PathBuf,
    /// The static BusyBox binary to build from.
    #[arg(long, default_value = images::DEFAULT_BUSYBOX)]
    busybox: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    for (image, path) in images::write_archives(&args.out, &args.busybox)? {
        println!("{}\t{}", image.reference(), path.display());
    }
    Ok(())
}
