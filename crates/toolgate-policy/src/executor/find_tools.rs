//! Deferred tools and `mcp_find_tools`, the one tool that reaches them.
//!
//! With hundreds of external tools, listing every schema costs a model
//! most of its context before it does anything. The deferred ones are kept
//! out of the list; `mcp_find_tools` advertises what there is (which
//! servers, how many tools each) and activates at most
//! [`FIND_TOOLS_LIMIT`] tools per search, ranked by BM25 over their names
//! and descriptions. Activation is sticky for the executor's life (one
//! session) and changes [`super::Executor::tool_generation`], so surfaces
//! can tell their clients that the list changed.
//!
//! The catalogue holds only the deferred tools that the access layer
//! admits (preset, tool lists, access policy, effect-class cap), decided
//! once when the executor is built. A tool the access layer would refuse
//! is never listed, found or activated: a search must not become a way to
//! learn or reach what the policy hides.

mod bm25;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::watch;
use toolgate_core::{
    CallContext, EffectClass, Tool, ToolError, ToolHandler, ToolOrigin, ToolOutput, ToolSpec,
};

use bm25::Bm25;

/// The name of the tool that finds and activates deferred tools.
pub const FIND_TOOLS: &str = "mcp_find_tools";

/// The most tools one search activates: what a model sees stays about as
/// small with 500 external tools as with 10.
pub const FIND_TOOLS_LIMIT: usize = 8;

/// The query that lists every tool instead of searching.
const EVERYTHING: &str = "*";

/// How many servers the description names before it says "and N more".
const NAMED_SERVERS: usize = 20;

/// Longest one-line description in a search result.
const SUMMARY_CHARS: usize = 120;

/// One deferred tool the access layer admits.
#[derive(Debug)]
struct Entry {
    name: String,
    server: Option<String>,
    summary: String,
}

/// The deferred tools a session may activate, their index, and which are
/// activated.
pub(super) struct Catalogue {
    /// By name.
    entries: Vec<Entry>,
    index: Bm25,
    activated: RwLock<BTreeSet<String>>,
    /// Bumped on every activation; watchers wait on it.
    generation: watch::Sender<u64>,
}

/// What one search found.
struct Found<'c> {
    /// The matches shown, best first, each with whether this search
    /// activated it.
    shown: Vec<(&'c Entry, bool)>,
    /// How many tools matched in all.
    matched: usize,
    /// Whether the query was `*` (nothing is activated then).
    listing: bool,
}

impl Catalogue {
    /// A catalogue of `specs` (the admitted deferred tools).
    pub(super) fn new<'s>(specs: impl IntoIterator<Item = &'s ToolSpec>) -> Self {
        let mut entries: Vec<Entry> = specs
            .into_iter()
            .map(|spec| Entry {
                name: spec.name.clone(),
                server: match &spec.origin {
                    ToolOrigin::Mcp { server } => Some(server.clone()),
                    _ => None,
                },
                summary: summary(&spec.description),
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        // The name counts twice: a tool called `create_issue` is a better
        // answer to "create issue" than one that mentions both in passing.
        let index = Bm25::new(entries.iter().map(|entry| {
            let name = bm25::tokens(&entry.name);
            let mut words = name.clone();
            words.extend(name);
            words.extend(bm25::tokens(&entry.summary));
            words
        }));
        Catalogue {
            entries,
            index,
            activated: RwLock::new(BTreeSet::new()),
            generation: watch::Sender::new(0),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `name` is an admitted deferred tool.
    pub(super) fn admits(&self, name: &str) -> bool {
        self.entry(name).is_some()
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    pub(super) fn is_activated(&self, name: &str) -> bool {
        self.activated
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(name)
    }

    /// The activated tools, by name.
    pub(super) fn activated(&self) -> Vec<String> {
        let activated = self
            .activated
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        activated.iter().cloned().collect()
    }

    /// Activates those of `names` that the catalogue admits; returns the
    /// ones that were not active before.
    pub(super) fn activate<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Vec<String> {
        let mut activated = self
            .activated
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let newly: Vec<String> = names
            .into_iter()
            .filter(|name| self.admits(name) && activated.insert((*name).to_owned()))
            .map(str::to_owned)
            .collect();
        drop(activated);
        if !newly.is_empty() {
            self.generation.send_modify(|g| *g += 1);
        }
        newly
    }

    pub(super) fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Waits until the generation is not `seen`; returns the new one.
    pub(super) async fn changed_since(&self, seen: u64) -> u64 {
        let mut watcher = self.generation.subscribe();
        // The sender lives as long as `self`, so this only ends by a change.
        let changed = watcher.wait_for(|g| *g != seen).await.map(|g| *g);
        match changed {
            Ok(generation) => generation,
            Err(_) => std::future::pending().await,
        }
    }

    /// Finds the tools for `query` and activates the best `limit` of them
    /// (none for `*`, which lists every tool).
    fn search(&self, query: &str, limit: usize) -> Found<'_> {
        if query.trim() == EVERYTHING {
            return Found {
                shown: self.entries.iter().map(|e| (e, false)).collect(),
                matched: self.entries.len(),
                listing: true,
            };
        }
        // Exact names first, in the order asked: a model that knows the
        // tool it wants (from `*`, or an earlier session) gets that one.
        let mut order: Vec<usize> = query
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter_map(|word| {
                self.entries
                    .binary_search_by(|e| e.name.as_str().cmp(word))
                    .ok()
            })
            .collect();
        for (doc, _) in self.index.search(query) {
            order.push(doc);
        }
        let mut seen = BTreeSet::new();
        order.retain(|doc| seen.insert(*doc));
        let matched = order.len();
        order.truncate(limit);
        let newly: BTreeSet<String> = self
            .activate(order.iter().map(|&doc| self.entries[doc].name.as_str()))
            .into_iter()
            .collect();
        Found {
            shown: order
                .into_iter()
                .map(|doc| {
                    let entry = &self.entries[doc];
                    (entry, newly.contains(&entry.name))
                })
                .collect(),
            matched,
            listing: false,
        }
    }

    /// Tools per server, by server name; tools of no server under `None`.
    fn inventory(&self) -> BTreeMap<Option<&str>, usize> {
        let mut servers = BTreeMap::new();
        for entry in &self.entries {
            *servers.entry(entry.server.as_deref()).or_default() += 1;
        }
        servers
    }

    /// "github (40 tools), linear (12 tools)".
    fn servers_line(&self) -> String {
        let inventory = self.inventory();
        let named: Vec<(&str, usize)> = inventory
            .iter()
            .filter_map(|(server, count)| server.map(|s| (s, *count)))
            .collect();
        let mut parts: Vec<String> = named
            .iter()
            .take(NAMED_SERVERS)
            .map(|(server, count)| format!("{server} ({})", tools(*count)))
            .collect();
        if named.len() > NAMED_SERVERS {
            parts.push(format!("and {} more servers", named.len() - NAMED_SERVERS));
        }
        if let Some(count) = inventory.get(&None) {
            parts.push(format!("{} of toolgate's own", tools(*count)));
        }
        parts.join(", ")
    }

    /// The spec of `mcp_find_tools` over this catalogue: its description
    /// is the inventory a model decides from.
    pub(super) fn spec(&self) -> ToolSpec {
        let description = format!(
            "Finds tools of the external MCP servers connected to toolgate and makes them \
             callable. {} are kept out of your tool list until needed: {}. Pass keywords \
             (searched in tool names and descriptions, best matches first) or exact tool names; \
             up to {FIND_TOOLS_LIMIT} matching tools per search become callable from your next \
             step and stay callable for this session. `*` lists every tool without activating \
             any.",
            tools(self.entries.len()),
            self.servers_line(),
        );
        ToolSpec::new(FIND_TOOLS, description, EffectClass::Read)
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Keywords for what the tool should do (`create issue`), \
                                        exact tool names, or `*` to list every tool."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": FIND_TOOLS_LIMIT,
                        "description": format!(
                            "How many matching tools to activate (default and most: \
                             {FIND_TOOLS_LIMIT})."
                        )
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }))
            .output_schema(output_schema())
            .parallel_safe(true)
    }
}

fn tools(count: usize) -> String {
    match count {
        1 => "1 tool".to_owned(),
        n => format!("{n} tools"),
    }
}

/// The first line of a description, at most [`SUMMARY_CHARS`] characters.
fn summary(description: &str) -> String {
    let line = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= SUMMARY_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(SUMMARY_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "matched": {"type": "integer", "minimum": 0},
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "server": {"type": ["string", "null"]},
                        "description": {"type": "string"},
                        "active": {"type": "boolean"},
                        "newly_activated": {"type": "boolean"}
                    },
                    "required": ["name", "server", "description", "active", "newly_activated"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["query", "matched", "tools"],
        "additionalProperties": false
    })
}

/// `mcp_find_tools`.
pub(super) struct FindTools {
    spec: ToolSpec,
    catalogue: Arc<Catalogue>,
}

impl FindTools {
    pub(super) fn new(catalogue: Arc<Catalogue>) -> Self {
        FindTools {
            spec: catalogue.spec(),
            catalogue,
        }
    }
}

impl Tool for FindTools {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

#[async_trait]
impl ToolHandler for FindTools {
    async fn call(&self, args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let query = args["query"].as_str().unwrap_or_default().trim();
        if query.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`query` is empty: pass keywords, exact tool names or `*`".to_owned(),
            ));
        }
        let limit = args["limit"]
            .as_u64()
            .map_or(FIND_TOOLS_LIMIT, |l| {
                usize::try_from(l).unwrap_or(FIND_TOOLS_LIMIT)
            })
            .clamp(1, FIND_TOOLS_LIMIT);
        let found = self.catalogue.search(query, limit);
        Ok(self.output(query, &found))
    }
}

impl FindTools {
    fn output(&self, query: &str, found: &Found<'_>) -> ToolOutput {
        let catalogue = &self.catalogue;
        let mut text = String::new();
        let newly = found.shown.iter().filter(|(_, newly)| *newly).count();
        if found.listing {
            let _ = writeln!(
                text,
                "{} (none activated by this listing; search with keywords or exact names to \
                 activate up to {FIND_TOOLS_LIMIT}):",
                tools(found.matched)
            );
        } else if found.shown.is_empty() {
            let _ = writeln!(
                text,
                "No tool matches `{query}`. There are {}: {}. Try other keywords, or `*` to list \
                 every tool.",
                tools(catalogue.entries.len()),
                catalogue.servers_line()
            );
        } else {
            let _ = writeln!(
                text,
                "{} of {} matching `{query}`; {newly} newly activated. They are callable from \
                 your next step:",
                found.shown.len(),
                tools(found.matched),
            );
        }
        let mut rows = Vec::new();
        for (entry, newly) in &found.shown {
            let active = catalogue.is_activated(&entry.name);
            let server = entry
                .server
                .as_deref()
                .map_or_else(String::new, |s| format!(" ({s})"));
            let state = match (found.listing, active, newly) {
                (_, _, true) => "",
                (true, false, _) => " [not active]",
                (_, true, false) => " [already active]",
                (false, false, false) => "",
            };
            let _ = writeln!(text, "- {}{server}{state}: {}", entry.name, entry.summary);
            rows.push(json!({
                "name": entry.name,
                "server": entry.server,
                "description": entry.summary,
                "active": active,
                "newly_activated": newly,
            }));
        }
        if !found.listing && found.matched > found.shown.len() {
            let _ = writeln!(
                text,
                "{} more match; narrow the keywords to reach them.",
                found.matched - found.shown.len()
            );
        }
        ToolOutput::text(text.trim_end()).with_structured(json!({
            "query": query,
            "matched": found.matched,
            "tools": rows,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use toolgate_core::{Idempotency, InputValidator};

    fn spec(server: &str, tool: &str, description: &str) -> ToolSpec {
        ToolSpec::new(
            format!("mcp__{server}__{tool}"),
            description,
            EffectClass::MutateIrreversible,
        )
        .idempotency(Idempotency::AtMostOnce)
        .mcp(server)
    }

    fn catalogue(specs: &[ToolSpec]) -> Catalogue {
        Catalogue::new(specs)
    }

    fn names(found: &Found<'_>) -> Vec<(String, bool)> {
        found
            .shown
            .iter()
            .map(|(e, newly)| (e.name.clone(), *newly))
            .collect()
    }

    #[test]
    fn names_count_more_than_descriptions_and_exact_names_come_first() {
        let c = catalogue(&[
            spec("gh", "create_issue", "Opens an issue."),
            spec(
                "gh",
                "list_issues",
                "Lists the issues; create filters with labels.",
            ),
            spec(
                "gh",
                "get_file",
                "Reads a file; create an issue about it elsewhere.",
            ),
        ]);
        let found = c.search("create issue", 8);
        assert_eq!(
            names(&found),
            vec![
                ("mcp__gh__create_issue".to_owned(), true),
                ("mcp__gh__list_issues".to_owned(), true),
                ("mcp__gh__get_file".to_owned(), true),
            ]
        );
        let found = c.search("mcp__gh__get_file", 1);
        assert_eq!(names(&found), vec![("mcp__gh__get_file".to_owned(), false)]);
    }

    #[test]
    fn the_listing_activates_nothing_and_the_spec_names_the_inventory() {
        let c = catalogue(&[
            spec("gh", "a", "One."),
            spec("gh", "b", "Two."),
            spec("linear", "c", "Three.\nMore detail."),
        ]);
        let found = c.search(" * ", 8);
        assert_eq!(found.matched, 3);
        assert!(found.listing);
        assert!(c.activated().is_empty());
        let description = c.spec().description;
        assert!(
            description.contains("3 tools are kept out of your tool list until needed: gh (2 tools), linear (1 tool)."),
            "{description}"
        );
        assert_eq!(
            c.entry("mcp__linear__c").map(|e| e.summary.as_str()),
            Some("Three.")
        );
    }

    #[test]
    fn a_summary_is_one_bounded_line() {
        assert_eq!(summary("\n  First line.  \nSecond."), "First line.");
        let long = "word ".repeat(100);
        let cut = summary(&long);
        assert_eq!(cut.chars().count(), SUMMARY_CHARS);
        assert!(cut.ends_with("word…"), "{cut}");
    }

    #[tokio::test]
    async fn the_output_fits_its_schema() {
        let specs: Vec<ToolSpec> = (0..20)
            .map(|i| spec("srv", &format!("tool_{i}"), "Does a thing."))
            .collect();
        let c = Arc::new(catalogue(&specs));
        let tool = FindTools::new(c.clone());
        let validator = InputValidator::new(&output_schema()).unwrap();
        let ctx = CallContext::new("c", "t", std::path::PathBuf::from("/"));
        for args in [
            json!({"query": "thing"}),
            json!({"query": "*"}),
            json!({"query": "nothing here"}),
            json!({"query": "thing", "limit": 3}),
        ] {
            let out = tool.call(args.clone(), &ctx).await.unwrap();
            let structured = out.structured.clone().unwrap();
            validator
                .check(structured.clone(), toolgate_core::InputMode::Strict)
                .unwrap_or_else(|e| panic!("{args}: {e}: {structured}"));
        }
        // The first search activated 8; the one with limit 3 found them active.
        assert_eq!(c.activated().len(), 8);
        let again = tool
            .call(json!({"query": "thing", "limit": 3}), &ctx)
            .await
            .unwrap();
        assert!(
            again.joined_text().contains("0 newly activated"),
            "{}",
            again.joined_text()
        );
        assert!(
            again.joined_text().contains("[already active]"),
            "{}",
            again.joined_text()
        );
        assert!(
            again.joined_text().contains("17 more match"),
            "{}",
            again.joined_text()
        );
    }

    #[tokio::test]
    async fn activation_bumps_the_generation_once_per_change() {
        let c = Arc::new(catalogue(&[spec("s", "a", "A."), spec("s", "b", "B.")]));
        assert_eq!(c.generation(), 0);
        let watcher = {
            let c = c.clone();
            tokio::spawn(async move { c.changed_since(0).await })
        };
        assert_eq!(c.activate(["mcp__s__a", "mcp__nope"]), vec!["mcp__s__a"]);
        assert_eq!(watcher.await.unwrap(), 1);
        // Activating what is active changes nothing.
        assert!(c.activate(["mcp__s__a"]).is_empty());
        assert_eq!(c.generation(), 1);
    }
}
