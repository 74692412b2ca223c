//! The dependency graph of uncommitted patches in Graphviz `dot` format, for debugging
//! write orderings (Featherstitch §4.5: "we often found it useful to examine patch
//! dependency graphs visually").

use crate::graph::PatchGraph;
use crate::patch::{Flight, PatchKind};
use std::fmt::Write;

impl PatchGraph {
    /// Block patches are boxes (bold when hard), empty patches dashed ellipses; an edge runs
    /// from a patch to one it depends on, dotted for an implicit overlap dependency.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph patches {\n  node [fontname=\"monospace\"];\n");
        let mut live: Vec<(&u64, &crate::patch::Patch)> = self.patches.iter().collect();
        live.sort_unstable_by_key(|&(id, _)| *id);
        for &(id, p) in &live {
            let state = match p.flight {
                Flight::Pending => "pending",
                Flight::InFlight => "in flight",
            };
            // Writing into a String cannot fail.
            let _ = match &p.kind {
                PatchKind::Empty { .. } => {
                    writeln!(
                        out,
                        "  p{id} [shape=ellipse, style=dashed, label=\"#{id}\\nempty\\n{state}\"];"
                    )
                }
                PatchKind::Block {
                    block,
                    last,
                    range,
                    undo,
                } => {
                    let (hardness, style) = if undo.is_some() {
                        ("soft", "solid")
                    } else {
                        ("hard", "bold")
                    };
                    let blocks = if block == last {
                        format!("block {block}")
                    } else {
                        format!("blocks {block}-{last}")
                    };
                    writeln!(
                        out,
                        "  p{id} [shape=box, style={style}, label=\"#{id}\\n{blocks} [{}, {})\\n{state}\\n{hardness}\"];",
                        range.start, range.end
                    )
                }
            };
        }
        for &(id, p) in &live {
            for d in p.deps.iter().filter(|d| self.patches.contains_key(&d.id())) {
                let style = if d.is_overlap() {
                    " [style=dotted]"
                } else {
                    ""
                };
                let _ = writeln!(out, "  p{id} -> p{}{style};", d.id());
            }
        }
        out.push_str("}\n");
        out
    }
}
