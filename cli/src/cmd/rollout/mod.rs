//! `rollout`: the life of a Deployment, DaemonSet or StatefulSet rollout, as kubectl's
//! polymorphic helpers see it — [`status`] follows one until it is done, [`history`] lists
//! (and [`undo`] restores) the revisions its controller kept, [`pause`] pauses, resumes and
//! restarts it.

pub mod history;
pub mod pause;
pub mod status;
pub mod undo;

use serde_json::Value;

use crate::builder::{self, Info, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Show the status of the rollout.
    Status(status::Args),
    /// View rollout history.
    History(history::Args),
    /// Undo a previous rollout.
    Undo(undo::Args),
    /// Mark the provided resource as paused.
    Pause(Objects),
    /// Resume a paused resource.
    Resume(Objects),
    /// Restart a resource.
    Restart(Objects),
}

/// What every rollout subcommand acts on: `TYPE NAME`, `TYPE/NAME`, `-f`, `-l`.
#[derive(Debug, Clone, clap::Args)]
pub struct Objects {
    /// TYPE NAME... or TYPE/NAME...
    pub args: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    #[arg(short = 'R', long)]
    pub recursive: bool,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    match a.command {
        Command::Status(a) => status::run(f, a).await,
        Command::History(a) => history::run(f, a).await,
        Command::Undo(a) => undo::run(f, a).await,
        Command::Pause(o) => pause::run(f, pause::Action::Pause, o).await,
        Command::Resume(o) => pause::run(f, pause::Action::Resume, o).await,
        Command::Restart(o) => pause::run(f, pause::Action::Restart, o).await,
    }
}

/// The kinds a rollout is about, as kubectl's polymorphic helpers switch on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Deployment,
    DaemonSet,
    StatefulSet,
}

impl Workload {
    /// The workload an object's group and kind name, if any.
    pub fn of(info: &Info) -> Option<Workload> {
        match (info.resource.group.as_str(), info.resource.kind.as_str()) {
            ("apps", "Deployment") => Some(Workload::Deployment),
            ("apps", "DaemonSet") => Some(Workload::DaemonSet),
            ("apps", "StatefulSet") => Some(Workload::StatefulSet),
            _ => None,
        }
    }
}

/// apimachinery's `GroupKind.String()`: `Pod`, `ReplicaSet.apps`.
pub fn group_kind(info: &Info) -> String {
    if info.resource.group.is_empty() {
        info.resource.kind.clone()
    } else {
        format!("{}.{}", info.resource.kind, info.resource.group)
    }
}

/// The objects the arguments name (kubectl's `ResourceTypeOrNameArgs(true, …)`: a bare type
/// is every object of it), and the errors met on the way.
pub async fn infos(f: &Factory, o: &Objects) -> Result<(Vec<Info>, Vec<CliError>)> {
    if o.args.is_empty() && o.filenames.is_empty() {
        return Err(CliError::Usage("required resource not specified".into()));
    }
    let sel = Selection {
        filenames: o.filenames.clone(),
        recursive: o.recursive,
        args: o.args.clone(),
        selector: o.selector.clone(),
        ..Selection::default()
    };
    builder::infos(f, &sel).await
}

/// The object as the server has it now (kubectl's `Latest()`).
pub async fn latest(f: &Factory, info: &Info) -> Result<Value> {
    f.get_json(&info.url()).await
}

/// `metadata.annotations[key]` as a string.
pub fn annotation<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o["metadata"]["annotations"][key].as_str()
}
