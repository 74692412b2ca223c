//! Lists commands.

use super::Spec;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[];
