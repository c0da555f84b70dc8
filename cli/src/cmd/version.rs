//! `version`: the client's version and the server's `/version`, as kubectl prints them.

use crate::errors::Result;
use crate::factory::Factory;

/// The Kubernetes version this client speaks (kubectl's it matches).
pub const CLIENT_VERSION: &str = "v1.35.0";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// If true, shows client version only (no server required).
    #[arg(long)]
    pub client: bool,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    println!("Client Version: {CLIENT_VERSION}");
    println!("Kustomize Version: none");
    if a.client {
        return Ok(());
    }
    let v = f.get_json("/version").await?;
    println!("Server Version: {}", v["gitVersion"].as_str().unwrap_or_default());
    Ok(())
}
