//! `describe`: each object a selection names, described as kubectl describes it (see
//! [`crate::describe`]); with `TYPE NAME` and no object of that name, every object whose
//! name starts with NAME, as kubectl's name-prefix matching.

use crate::builder::{self, Info, Selection};
use crate::describe::{self, Clock, Settings};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE [NAME_PREFIX], or TYPE/NAME.
    pub args: Vec<String>,
    /// Files identifying the resources to describe.
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    /// Process the directory used in -f recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// List the requested object(s) across all namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// If true, display events related to the described object.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub show_events: bool,
    /// Return large lists in chunks rather than all at once (0: all at once).
    #[arg(long, default_value_t = 500)]
    pub chunk_size: i64,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    if a.args.is_empty() && a.filenames.is_empty() {
        return Err(CliError::Usage(
            "You must specify the type of resource to describe. Use \"kubectl api-resources\" for a complete list of supported resources.".into(),
        ));
    }
    let settings = Settings { show_events: a.show_events, chunk_size: a.chunk_size };
    let sel = Selection {
        filenames: a.filenames.clone(),
        recursive: a.recursive,
        args: a.args.clone(),
        selector: a.selector.clone(),
        field_selector: None,
        all: false,
        all_namespaces: a.all_namespaces,
    };
    let (infos, mut errors) = builder::infos(f, &sel).await?;
    let clock = Clock::system();
    let mut printed = false;
    let mut described = 0usize;
    let one_name = a.filenames.is_empty() && a.args.len() == 2 && !a.args[1].contains('/');
    for info in &infos {
        match describe::describe(f, info, settings, &clock).await {
            Ok(text) => {
                described += 1;
                if printed {
                    print!("\n\n{text}");
                } else {
                    print!("{text}");
                }
                printed = true;
            }
            Err(e) if e.is_not_found() && one_name && infos.len() == 1 => {
                return by_prefix(f, info, &a.args[1], settings, &clock, e).await;
            }
            Err(e) => {
                if !errors.iter().any(|x| x.to_string() == e.to_string()) {
                    errors.push(e);
                }
            }
        }
    }
    if described == 0 && infos.is_empty() && errors.is_empty() {
        if a.all_namespaces {
            eprintln!("No resources found");
        } else {
            eprintln!("No resources found in {} namespace.", f.namespace().await?);
        }
    }
    crate::cmd::finish(errors)
}

/// kubectl's `DescribeMatchingResources`: every object of the type in the namespace whose name
/// starts with `prefix`, each followed by a blank line; none is the original error.
async fn by_prefix(
    f: &Factory,
    info: &Info,
    prefix: &str,
    settings: Settings,
    clock: &Clock,
    original: CliError,
) -> Result<()> {
    let collection =
        builder::Collection { resource: info.resource.clone(), namespace: info.namespace.clone() };
    let all = builder::list(f, &collection, &Selection::default()).await?;
    let mut found = false;
    for candidate in all.iter().filter(|i| i.name.starts_with(prefix)) {
        found = true;
        let text = describe::describe(f, candidate, settings, clock).await?;
        println!("{text}");
    }
    if found { Ok(()) } else { Err(original) }
}
