#![allow(clippy::module_inception)]
#[allow(clippy::all)]
mod gen;

pub mod references;

pub use crate::common::ast::IdedExpr as Expression;

mod ext_macros;
mod macros;
mod parse;
#[allow(non_snake_case)]
mod parser;

pub use ext_macros::{MAP_INSERT, SORT_BY_ASSOCIATED_KEYS};
pub use parser::*;
pub use references::ExpressionReferences;
