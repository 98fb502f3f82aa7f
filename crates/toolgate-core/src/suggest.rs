//! "Did you mean ...?": the closest known name to a misspelt one.
//!
//! One helper for every place a user names something from a known set (a
//! tool, a group, an argument field), so that a typo is an error that says
//! what was meant instead of a silent no-op.

/// The candidate closest to `name` by edit distance, if it is close enough
/// to be a likely typo: at most 2 edits, or a third of the candidate's
/// length for long names. Ties go to the alphabetically first candidate.
pub fn closest<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.chars().count() / 3))
        .min()
        .map(|(_, c)| c)
}

/// `; did you mean `X`?` for the closest candidate, or an empty string.
pub fn did_you_mean<'a, I>(name: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    match closest(name, candidates) {
        Some(near) => format!("; did you mean `{near}`?"),
        None => String::new(),
    }
}

/// Levenshtein distance over chars, one row at a time.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn typos_find_the_name_meant_and_strangers_find_nothing() {
        let tools = [
            "read",
            "write",
            "grep",
            "group:fs",
            "group:search",
            "section",
        ];
        let table = [
            ("raed", Some("read")),
            ("wirte", Some("write")),
            ("group:fss", Some("group:fs")),
            ("group:serch", Some("group:search")),
            ("heading", None),
            ("sectoin", Some("section")),
            ("kubectl", None),
            ("read", None),
        ];
        for (name, expected) in table {
            assert_eq!(closest(name, tools), expected, "{name}");
        }
        assert_eq!(did_you_mean("raed", tools), "; did you mean `read`?");
        assert_eq!(did_you_mean("zzz", tools), "");
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("raed", "read"), 2);
        assert_eq!(edit_distance("é", "e"), 1);
    }
}
