//! What the CEL expressions of a policy set read of `object`, `oldObject`,
//! `request`, `params` and `namespaceObject`, found in their syntax trees at load, so that
//! each request converts only that into CEL values: an object's
//! `managedFields`, `status` or a `last-applied-configuration` annotation,
//! or a parameter ConfigMap's unread keys, cost nothing.
//!
//! An expression reads a variable by a chain of field selections
//! (`object.spec.template.spec.containers`, `has(object.metadata.labels)`);
//! the field at the end of a chain is read whole. A variable used in any
//! other way (compared, passed to a function, indexed, iterated, or
//! shadowed by a loop variable of the same name) is read whole. The values
//! on a chain are then only ever selected from by name, so a map that holds
//! just the fields chains select behaves for them exactly as the whole one.

use std::collections::BTreeMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::Expression;

/// How much of a value expressions read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reads {
    /// Only whether it is present (`has(a.b)`): any placeholder will do.
    Presence,
    /// Only these fields of it, each as far as its own [`Reads`] says.
    Fields(BTreeMap<String, Reads>),
    /// All of it.
    Whole,
}

impl Reads {
    /// Widens `self` to read what `other` reads too.
    pub fn merge(&mut self, other: Reads) {
        match (&mut *self, other) {
            (Reads::Whole, _) | (_, Reads::Presence) => {}
            (_, Reads::Whole) => *self = Reads::Whole,
            (Reads::Presence, fields) => *self = fields,
            (Reads::Fields(mine), Reads::Fields(theirs)) => {
                for (field, reads) in theirs {
                    match mine.get_mut(&field) {
                        Some(existing) => existing.merge(reads),
                        None => {
                            mine.insert(field, reads);
                        }
                    }
                }
            }
        }
    }

    /// Whether `field` is read (always, when the whole value is).
    pub fn field(&self, field: &str) -> Option<&Reads> {
        match self {
            Reads::Whole => Some(&Reads::Whole),
            Reads::Fields(fields) => fields.get(field),
            Reads::Presence => None,
        }
    }
}

/// What a set of expressions reads of each variable bound to request data;
/// `None`: not read at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataReads {
    /// Of `object`.
    pub object: Option<Reads>,
    /// Of `oldObject`.
    pub old_object: Option<Reads>,
    /// Of `request`.
    pub request: Option<Reads>,
    /// Of `params` (each parameter object, per policy).
    pub params: Option<Reads>,
    /// Of `namespaceObject` (the request's namespace).
    pub namespace_object: Option<Reads>,
    /// Of `variables`: which of a policy's variables (not request data, so
    /// never converted; what [`Expression::variables_read`] answers).
    pub variables: Option<Reads>,
}

impl DataReads {
    /// Everything: what a caller that knows nothing of the expressions uses.
    pub fn everything() -> Self {
        let whole = Some(Reads::Whole);
        Self {
            object: whole.clone(),
            old_object: whole.clone(),
            request: whole.clone(),
            params: whole.clone(),
            namespace_object: whole.clone(),
            variables: whole,
        }
    }

    /// Adds what `expression` reads.
    pub fn add(&mut self, expression: &Expression) {
        self.add_program(&expression.program);
    }

    pub(crate) fn add_program(&mut self, program: &cel::Program) {
        walk(program.expression(), self);
    }

    /// Widens `self` to read what `other` reads too.
    pub fn merge(&mut self, other: &DataReads) {
        for (mine, theirs) in [
            (&mut self.object, &other.object),
            (&mut self.old_object, &other.old_object),
            (&mut self.request, &other.request),
            (&mut self.params, &other.params),
            (&mut self.namespace_object, &other.namespace_object),
            (&mut self.variables, &other.variables),
        ] {
            if let Some(theirs) = theirs {
                match mine {
                    Some(mine) => mine.merge(theirs.clone()),
                    None => *mine = Some(theirs.clone()),
                }
            }
        }
    }

    fn slot(&mut self, variable: &str) -> Option<&mut Option<Reads>> {
        match variable {
            "object" => Some(&mut self.object),
            "oldObject" => Some(&mut self.old_object),
            "request" => Some(&mut self.request),
            "params" => Some(&mut self.params),
            "namespaceObject" => Some(&mut self.namespace_object),
            "variables" => Some(&mut self.variables),
            _ => None,
        }
    }

    /// Widens what `variable` reads; names other than the five pruned
    /// variables and `variables` (loop variables) are not kept.
    fn record(&mut self, variable: &str, reads: Reads) {
        if let Some(slot) = self.slot(variable) {
            match slot {
                Some(existing) => existing.merge(reads),
                None => *slot = Some(reads),
            }
        }
    }
}

fn walk(expr: &IdedExpr, into: &mut DataReads) {
    match &expr.expr {
        Expr::Ident(name) => into.record(name, Reads::Whole),
        Expr::Select(_) => match chain(expr) {
            Some((variable, reads)) => into.record(variable, reads),
            None => {
                if let Expr::Select(select) = &expr.expr {
                    walk(&select.operand, into);
                }
            }
        },
        Expr::Call(call) => {
            call.target.iter().for_each(|t| walk(t, into));
            call.args.iter().for_each(|a| walk(a, into));
        }
        Expr::List(list) => list.elements.iter().for_each(|e| walk(e, into)),
        Expr::Map(map) => map.entries.iter().for_each(|e| entry(&e.expr, into)),
        Expr::Struct(structure) => structure.entries.iter().for_each(|e| entry(&e.expr, into)),
        Expr::Comprehension(c) => {
            // A loop variable named like request data hides it in the loop:
            // read that variable whole rather than tell the two apart
            // (`record` ignores every other name).
            for name in [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)].into_iter().flatten() {
                into.record(name, Reads::Whole);
            }
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(part, into);
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(entry: &EntryExpr, into: &mut DataReads) {
    match entry {
        EntryExpr::StructField(field) => walk(&field.value, into),
        EntryExpr::MapEntry(e) => {
            walk(&e.key, into);
            walk(&e.value, into);
        }
    }
}

/// `variable.a.b.c` (or `has(variable.a.b.c)`) as the variable and what it
/// reads of it; `None` when the selections do not start at an identifier.
fn chain(expr: &IdedExpr) -> Option<(&str, Reads)> {
    let mut fields = Vec::new();
    let mut here = expr;
    let mut last = Reads::Whole;
    let mut first = true;
    loop {
        match &here.expr {
            Expr::Select(select) => {
                if first && select.test {
                    last = Reads::Presence;
                }
                first = false;
                fields.push(select.field.as_str());
                here = &select.operand;
            }
            Expr::Ident(name) => {
                let reads = fields
                    .into_iter()
                    .fold(last, |inner, field| Reads::Fields(BTreeMap::from([(field.to_owned(), inner)])));
                return Some((name.as_str(), reads));
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(sources: &[&str]) -> DataReads {
        let mut all = DataReads::default();
        for source in sources {
            all.add(&crate::compile(source, u64::MAX).unwrap());
        }
        all
    }

    fn fields(pairs: &[(&str, Reads)]) -> Reads {
        Reads::Fields(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
    }

    #[test]
    fn a_chain_of_selections_reads_its_last_field_whole() {
        let all = reads(&["object.spec.replicas <= 5", "object.metadata.name.matches('^a')"]);
        let expected =
            fields(&[("spec", fields(&[("replicas", Reads::Whole)])), ("metadata", fields(&[("name", Reads::Whole)]))]);
        assert_eq!(all.object, Some(expected));
        assert_eq!(all.old_object, None);
        assert_eq!(all.request, None);
    }

    #[test]
    fn has_reads_only_presence_unless_another_expression_reads_more() {
        let all = reads(&["has(object.metadata.annotations)"]);
        assert_eq!(all.object, Some(fields(&[("metadata", fields(&[("annotations", Reads::Presence)]))])));
        let all = reads(&["has(object.metadata.annotations)", "size(object.metadata.annotations) < 3"]);
        assert_eq!(all.object, Some(fields(&[("metadata", fields(&[("annotations", Reads::Whole)]))])));
    }

    #[test]
    fn a_variable_used_otherwise_is_read_whole() {
        assert_eq!(reads(&["oldObject == null"]).old_object, Some(Reads::Whole));
        for source in [
            "object.spec == oldObject.spec && object != null",
            "object['spec'].replicas > 1",
            "dyn(object).spec.replicas > 1",
            "[1].all(object, object > 0) && object.spec.replicas > 1",
        ] {
            let all = reads(&[source]);
            assert_eq!(all.object, Some(Reads::Whole), "{source}");
        }
    }

    #[test]
    fn loops_and_calls_are_searched_for_chains() {
        let all = reads(&[
            "object.spec.containers.all(c, c.image.startsWith('r/'))",
            "request.userInfo.groups.exists(g, g == 'x') || request.operation == 'CREATE'",
        ]);
        assert_eq!(all.object, Some(fields(&[("spec", fields(&[("containers", Reads::Whole)]))])));
        assert_eq!(
            all.request,
            Some(fields(&[("userInfo", fields(&[("groups", Reads::Whole)])), ("operation", Reads::Whole)]))
        );
    }

    #[test]
    fn merging_widens() {
        let mut a = fields(&[("x", Reads::Presence)]);
        a.merge(fields(&[("x", fields(&[("y", Reads::Whole)])), ("z", Reads::Whole)]));
        assert_eq!(a, fields(&[("x", fields(&[("y", Reads::Whole)])), ("z", Reads::Whole)]));
        a.merge(Reads::Whole);
        assert_eq!(a, Reads::Whole);
    }
}
