//! `--token-auth-file`: bearer tokens from upstream's CSV (`token,user,uid,"group1,group2"`).

use std::collections::HashMap;
use std::path::Path;

use super::User;

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}:{line}: want token,user,uid[,\"group1,group2\"]")]
    Format { path: String, line: usize },
}

/// Splits one CSV line, honouring double quotes.
fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    out.push(field);
    out
}

/// The users of a token file, by token.
pub fn read(path: &Path) -> Result<HashMap<String, User>, TokenFileError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| TokenFileError::Read { path: p.clone(), source })?;
    let mut tokens = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let f = csv_fields(line);
        if f.len() < 3 || f[0].is_empty() || f[1].is_empty() {
            return Err(TokenFileError::Format { path: p, line: i + 1 });
        }
        let groups = f
            .get(3)
            .map(|g| {
                g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_string).collect()
            })
            .unwrap_or_default();
        let user = User { name: f[1].clone(), uid: f[2].clone(), groups, ..User::default() };
        tokens.insert(f[0].clone(), user);
    }
    Ok(tokens)
}
