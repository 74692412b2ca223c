//! A table's layout: the stack of Anvil dTable modules its data goes through ("Modular Data
//! Storage with Anvil", SOSP 2009), written as a short string such as
//! `managed -> bloom(bits=10) -> btree(node=4096) -> linear`, parsed and checked here
//! ([`LayoutSpec`]). Pure code: no I/O, and nothing of the crate imported. The grammar, every
//! module with its parameters, and the stacking rules: `docs/layouts.md`.

mod spec;
pub(crate) mod vtree;

pub use spec::*;
