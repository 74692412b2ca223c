//! [`Session`]: GlueSQL's [`Glue`] over a [`StitchStorage`], with `UPDATE` and `DELETE` by
//! primary key narrowed to the one row.
//!
//! GlueSQL 0.20 plans a primary-key lookup for `SELECT ... WHERE pk = value`, but `UPDATE`
//! and `DELETE` always scan the whole table and filter each row (its `fetch`). A session
//! looks at each planned `UPDATE` or `DELETE` first: when its `WHERE` is `pk = constant`, or
//! a conjunction with such a term, the table's next scan (the statement's own) yields only
//! the row of that key. GlueSQL still evaluates the whole `WHERE` on it, so the statement
//! changes exactly the rows it would have: only rows other than that key are skipped, and
//! they cannot match.
//!
//! GlueSQL has no prepared statements: `Glue` parses a statement's text every time it runs
//! (sqlparser's tokenizer and parser: most of a short statement's time). A session keeps
//! the parsed statements of the last texts it ran (parameters are bound after parsing, as
//! a prepared statement's are), and translates and plans them anew each time.

use crate::storage::StitchStorage;
use gluesql_core::ast::{BinaryOperator, UnaryOperator};
use gluesql_core::data::Key;
use gluesql_core::executor::evaluate_stateless;
use gluesql_core::parse_sql::parse;
use gluesql_core::plan::{ExprPlan, StatementPlan};
use gluesql_core::prelude::{Glue, Payload, Result};
use gluesql_core::sqlparser::ast::Statement as SqlStatement;
use gluesql_core::store::{Planner, Store};
use gluesql_core::translate::{translate_with_params, IntoParamLiteral, ParamLiteral};
use std::collections::HashMap;
use std::rc::Rc;

/// Statement texts whose parse a session keeps (all are dropped when it fills).
const PARSED_TEXTS: usize = 256;

/// A SQL session: GlueSQL over a [`StitchStorage`], with primary-key `UPDATE` and `DELETE`
/// narrowed to their row and statements parsed once per text (see the module docs;
/// [`set_pushdown`](Self::set_pushdown) and [`set_parse_cache`](Self::set_parse_cache) turn
/// those off).
pub struct Session {
    glue: Glue<StitchStorage>,
    pushdown: bool,
    /// Parsed statements by text (`None`: every text is parsed each time it runs).
    parsed: Option<HashMap<String, Rc<Vec<SqlStatement>>>>,
}

impl Session {
    /// A session over `storage`.
    pub fn new(storage: StitchStorage) -> Session {
        Session {
            glue: Glue::new(storage),
            pushdown: true,
            parsed: Some(HashMap::new()),
        }
    }

    /// Whether statements are parsed once per text (on by default); off, every run parses
    /// its text, as `Glue` does.
    pub fn set_parse_cache(&mut self, on: bool) {
        self.parsed = on.then(HashMap::new);
    }

    /// Whether `UPDATE` and `DELETE` by primary key read only their row (on by default); off,
    /// they scan their table as GlueSQL alone does.
    pub fn set_pushdown(&mut self, on: bool) {
        self.pushdown = on;
    }

    /// The storage.
    pub fn storage(&self) -> &StitchStorage {
        &self.glue.storage
    }

    /// The storage, to change.
    pub fn storage_mut(&mut self) -> &mut StitchStorage {
        &mut self.glue.storage
    }

    /// The storage, ending the session (an open transaction stays open in it).
    pub fn into_storage(self) -> StitchStorage {
        self.glue.storage
    }

    /// Runs every statement of `sql`.
    pub fn execute(&mut self, sql: impl AsRef<str>) -> Result<Vec<Payload>> {
        self.execute_with_params(sql, std::iter::empty::<ParamLiteral>())
    }

    /// Runs every statement of `sql`, its placeholders (`$1`, `$2`, ...) bound to `params`.
    pub fn execute_with_params<I, P>(
        &mut self,
        sql: impl AsRef<str>,
        params: I,
    ) -> Result<Vec<Payload>>
    where
        I: IntoIterator<Item = P>,
        P: IntoParamLiteral,
    {
        let plans = self.plan(sql.as_ref(), params)?;
        let mut payloads = Vec::with_capacity(plans.len());
        for plan in &plans {
            if self.pushdown {
                if let Some((table, key)) = self.key_of(plan) {
                    self.glue.storage.set_hint(table, key);
                }
            }
            let payload = self.glue.execute_stmt(plan);
            self.glue.storage.clear_hint();
            payloads.push(payload?);
        }
        Ok(payloads)
    }

    /// The plans of the statements of `sql`, as `Glue::plan_with_params` makes them, from
    /// the parse kept for the text if there is one.
    fn plan<I, P>(&mut self, sql: &str, params: I) -> Result<Vec<StatementPlan>>
    where
        I: IntoIterator<Item = P>,
        P: IntoParamLiteral,
    {
        let params: Vec<ParamLiteral> = params
            .into_iter()
            .map(IntoParamLiteral::into_param_literal)
            .collect();
        let parsed = match &mut self.parsed {
            None => Rc::new(parse(sql)?),
            Some(cache) => match cache.get(sql) {
                Some(parsed) => parsed.clone(),
                None => {
                    let parsed = Rc::new(parse(sql)?);
                    if cache.len() >= PARSED_TEXTS {
                        cache.clear();
                    }
                    cache.insert(sql.to_owned(), parsed.clone());
                    parsed
                }
            },
        };
        parsed
            .iter()
            .map(|statement| {
                let statement = translate_with_params(statement, &params)?;
                self.glue.storage.plan(statement.into())
            })
            .collect()
    }

    /// The table and primary key an `UPDATE` or `DELETE` can only change the row of.
    fn key_of<'p>(&self, plan: &'p StatementPlan) -> Option<(&'p str, Key)> {
        let (table, selection) = match plan {
            StatementPlan::Update {
                table_name,
                selection: Some(selection),
                ..
            }
            | StatementPlan::Delete {
                table_name,
                selection: Some(selection),
            } => (table_name.as_str(), selection),
            _ => return None,
        };
        let schema = self.glue.storage.fetch_schema(table).ok()??;
        let (_, column) = crate::catalog::primary_key(&schema)?;
        let constant = pk_term(selection, table, &column.name)?;
        let value = evaluate_stateless(None, constant)
            .ok()?
            .try_into_value(&column.data_type, false)
            .ok()?;
        Some((table, Key::try_from(value).ok()?))
    }
}

/// The constant `c` of a term `pk = c` (or `c = pk`) that `expr` implies: `expr` itself, or
/// a conjunct of it.
fn pk_term<'e>(expr: &'e ExprPlan, table: &str, pk: &str) -> Option<&'e ExprPlan> {
    match expr {
        ExprPlan::Nested(inner) => pk_term(inner, table, pk),
        ExprPlan::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => pk_term(left, table, pk).or_else(|| pk_term(right, table, pk)),
        ExprPlan::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            if is_column(left, table, pk) && is_constant(right) {
                Some(right)
            } else if is_column(right, table, pk) && is_constant(left) {
                Some(left)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether `expr` names column `pk` of `table`.
fn is_column(expr: &ExprPlan, table: &str, pk: &str) -> bool {
    match expr {
        ExprPlan::Identifier(name) => name == pk,
        ExprPlan::CompoundIdentifier { alias, ident } => alias == table && ident == pk,
        ExprPlan::Nested(inner) => is_column(inner, table, pk),
        _ => false,
    }
}

/// Whether `expr` is a literal (perhaps negated): the same value however often evaluated.
fn is_constant(expr: &ExprPlan) -> bool {
    match expr {
        ExprPlan::Literal(_) | ExprPlan::Value(_) | ExprPlan::TypedString { .. } => true,
        ExprPlan::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        }
        | ExprPlan::Nested(expr) => is_constant(expr),
        _ => false,
    }
}
