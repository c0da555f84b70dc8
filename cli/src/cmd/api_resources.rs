//! `api-resources`: the served resources from discovery, as kubectl's table.

use crate::errors::Result;
use crate::factory::Factory;
use crate::printers::table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print only the resources of this API group.
    #[arg(long)]
    pub api_group: Option<String>,
    /// Resources that are namespaced (true) or not (false).
    #[arg(long)]
    pub namespaced: Option<bool>,
    /// Don't print headers.
    #[arg(long)]
    pub no_headers: bool,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let resources = f.resources().await?;
    // One version per group, the preferred (first discovered).
    let mut seen = std::collections::HashSet::new();
    let mut rows: Vec<Vec<String>> = resources
        .resources
        .iter()
        .filter(|r| seen.insert((r.group.clone(), r.plural.clone())))
        .filter(|r| a.api_group.as_ref().is_none_or(|g| &r.group == g))
        .filter(|r| a.namespaced.is_none_or(|n| r.namespaced == n))
        .map(|r| {
            vec![
                r.plural.clone(),
                r.short_names.join(","),
                r.api_version(),
                r.namespaced.to_string(),
                r.kind.clone(),
            ]
        })
        .collect();
    // kubectl sorts by group, then by name.
    rows.sort_by(|x, y| group_of(&x[2]).cmp(group_of(&y[2])).then(x[0].cmp(&y[0])));
    let mut lines = Vec::new();
    if !a.no_headers {
        lines.push(
            ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"].map(String::from).to_vec(),
        );
    }
    lines.extend(rows);
    print!("{}", table::align(&lines));
    Ok(())
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}
