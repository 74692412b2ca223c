//! Tests of the layout's own invariants.
