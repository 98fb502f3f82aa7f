//! Okapi BM25 over short documents (a tool's name and description): the
//! ranking a model's keywords get in `mcp_find_tools`.
//!
//! Small on purpose: a few hundred documents of a few dozen words, built
//! once per session, searched a handful of times. An inverted index keeps
//! a search proportional to the documents that share a word with the
//! query, not to the whole inventory.

use std::collections::{BTreeSet, HashMap};

/// Term-frequency saturation: the tenth "issue" in a description adds
/// little over the second.
const K1: f64 = 1.2;
/// Length normalisation: a long description does not win by being long.
const B: f64 = 0.75;

/// The words of `text`: runs of letters and digits, lowercased, split at
/// `_`, `-`, any other non-alphanumeric and at camelCase humps
/// (`createIssue` is `create issue`), with plurals folded (`issues` is
/// `issue`) so that a model's wording meets a server's.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            flush(&mut word, &mut out);
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            flush(&mut word, &mut out);
        }
        prev_lower = c.is_lowercase() || c.is_numeric();
        word.extend(c.to_lowercase());
    }
    flush(&mut word, &mut out);
    out
}

fn flush(word: &mut String, out: &mut Vec<String>) {
    if word.is_empty() {
        return;
    }
    let mut w = std::mem::take(word);
    // Plural folding, the same on both sides of a match: `issues` and
    // `files` meet `issue` and `file`; `status`, `address`, `analysis`
    // stay whole.
    if let Some(stem) = w.strip_suffix("ies")
        && stem.chars().count() >= 2
    {
        w = format!("{stem}y");
    } else if w.chars().count() > 3
        && w.ends_with('s')
        && !(w.ends_with("ss") || w.ends_with("us") || w.ends_with("is"))
    {
        w.pop();
    }
    out.push(w);
}

/// An index of documents, each a list of words.
#[derive(Debug, Default)]
pub(crate) struct Bm25 {
    /// For each word, the documents that have it and how often.
    postings: HashMap<String, Vec<(usize, u32)>>,
    /// Each document's length in words.
    lengths: Vec<u32>,
    average: f64,
}

impl Bm25 {
    /// An index of `documents`, in order: a search names them by position.
    pub(crate) fn new(documents: impl IntoIterator<Item = Vec<String>>) -> Self {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut lengths = Vec::new();
        for (doc, words) in documents.into_iter().enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            for word in &words {
                *counts.entry(word.clone()).or_default() += 1;
            }
            for (word, count) in counts {
                postings.entry(word).or_default().push((doc, count));
            }
            lengths.push(u32::try_from(words.len()).unwrap_or(u32::MAX));
        }
        let total: f64 = lengths.iter().map(|&l| f64::from(l)).sum();
        let average = if lengths.is_empty() {
            0.0
        } else {
            total / lengths.len() as f64
        };
        Bm25 {
            postings,
            lengths,
            average,
        }
    }

    /// The documents that share a word with `query`, best first (ties in
    /// document order), with their scores, all above zero.
    pub(crate) fn search(&self, query: &str) -> Vec<(usize, f64)> {
        let n = self.lengths.len() as f64;
        let words: BTreeSet<String> = tokens(query).into_iter().collect();
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for word in &words {
            let Some(postings) = self.postings.get(word) else {
                continue;
            };
            let df = postings.len() as f64;
            // The "+1" form of the IDF: never negative, so a word that is in
            // most documents (`mcp`, a server's name) still counts a little
            // instead of pushing its documents down.
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in postings {
                let tf = f64::from(tf);
                let length = f64::from(self.lengths[doc]);
                let norm = if self.average > 0.0 {
                    1.0 - B + B * length / self.average
                } else {
                    1.0
                };
                *scores.entry(doc).or_default() += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores.into_iter().filter(|(_, s)| *s > 0.0).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn words_split_at_punctuation_case_humps_and_fold_plurals() {
        let cases = [
            (
                "mcp__github__create_issue",
                vec!["mcp", "github", "create", "issue"],
            ),
            ("createPullRequest", vec!["create", "pull", "request"]),
            ("list-repositories", vec!["list", "repository"]),
            (
                "Get the STATUS of 2 files.",
                vec!["get", "the", "status", "of", "2", "file"],
            ),
            ("HTTPServer v2api", vec!["httpserver", "v2api"]),
            ("address analysis bus", vec!["address", "analysis", "bus"]),
            ("", vec![]),
            ("  --__  ", vec![]),
        ];
        for (text, expected) in cases {
            assert_eq!(tokens(text), expected, "{text:?}");
        }
    }

    fn index(docs: &[&str]) -> Bm25 {
        Bm25::new(docs.iter().map(|d| tokens(d)))
    }

    #[test]
    fn rarer_words_and_more_occurrences_rank_higher() {
        let bm25 = index(&[
            "list issues of a repository",
            "create an issue in a repository",
            "create a pull request in a repository",
            "delete a repository",
        ]);
        // `issue` is in two documents, `create` in two: the one with both wins.
        let ranked: Vec<usize> = bm25.search("create issue").iter().map(|r| r.0).collect();
        assert_eq!(ranked, vec![1, 0, 2]);
        // A word in every document still matches, but ranks shorter
        // documents first (length normalisation).
        let ranked: Vec<usize> = bm25.search("repository").iter().map(|r| r.0).collect();
        assert_eq!(ranked, vec![3, 0, 1, 2]);
        assert!(bm25.search("weather forecast").is_empty());
    }

    #[test]
    fn repeated_words_saturate() {
        let bm25 = index(&["fetch fetch fetch fetch fetch page", "fetch page url"]);
        let scores = bm25.search("fetch");
        let (once, many) = (scores[1].1, scores[0].1);
        assert!(many > once, "{scores:?}");
        // Five times the occurrences is far from five times the score.
        assert!(many < 2.0 * once, "{scores:?}");
    }

    #[test]
    fn an_empty_index_or_query_finds_nothing() {
        assert!(index(&[]).search("anything").is_empty());
        assert!(index(&["a tool"]).search("").is_empty());
        assert!(index(&["a tool"]).search("!!").is_empty());
    }
}
