//! Completion indexes as upstream writes them in `status.completedIndexes` and
//! `status.failedIndexes`: sorted intervals, `1,3-5,7`.

use std::collections::BTreeSet;

/// Parses an interval list; entries that do not parse, or lie outside `0..completions`, are
/// skipped (the field is the controller's own; a hand-edited one must not stop the Job).
pub fn parse(text: &str, completions: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        let (Ok(a), Ok(b)) = (a, b) else { continue };
        for i in a.max(0)..=b.min(completions.saturating_sub(1)) {
            out.insert(i);
        }
    }
    out
}

/// Formats indexes as intervals.
pub fn format(indexes: &BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_round_trip_and_bad_parts_are_skipped() {
        let set: BTreeSet<i32> = [1, 3, 4, 5, 7].into_iter().collect();
        assert_eq!(format(&set), "1,3-5,7");
        assert_eq!(parse("1,3-5,7", 10), set);
        assert_eq!(parse("x,2-1,8-20", 10), [8, 9].into_iter().collect());
        assert_eq!(format(&BTreeSet::new()), "");
    }
}
