//! Patch carried by Portcullis: the evaluation of what the macros of
//! cel-go's extensions expand to (`parser/ext_macros.rs`): a comprehension
//! with two variables, `cel.@mapInsert` and `@sortByAssociatedKeys`, with
//! cel-go's semantics and error messages.

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::common::ast::{CallExpr, ComprehensionExpr};
use crate::common::types::{CelInt, CelList, CelMap, CelMapKey};
use crate::common::value::Val;
use crate::context::Context;
use crate::accumulate;
use crate::objects::Value;
use crate::ExecutionError;

/// A comprehension binding two variables on each pass: over a list the
/// index and the element, over a map the key and its value.
pub(crate) fn two_variables<'a>(
    loop_: &'a ComprehensionExpr,
    second: &'a str,
    ctx: &'a Context<'a>,
) -> Result<Cow<'a, dyn Val>, ExecutionError> {
    let accu_init = Value::resolve_val(&loop_.accu_init, ctx)?;
    let range = Value::resolve_val(&loop_.iter_range, ctx)?;
    let mut scope = ctx.new_inner_scope();
    scope.add_variable_as_val(&loop_.accu_var, accu_init.into_owned());
    let mut pending = None;
    if let Some(list) = range.downcast_ref::<CelList>() {
        for (index, item) in list.inner().iter().enumerate() {
            let index = i64::try_from(index).map_err(|_| ExecutionError::NoSuchOverload)?;
            scope.add_variable_as_val(&loop_.iter_var, Box::new(CelInt::from(index)));
            scope.add_variable_borrowed(second, item.as_ref());
            if !accumulate::pass(loop_, &mut scope, &mut pending)? {
                break;
            }
        }
    } else if let Some(map) = range.downcast_ref::<CelMap>() {
        for (key, value) in map.inner() {
            scope.add_variable_borrowed(&loop_.iter_var, key.inner());
            scope.add_variable_borrowed(second, value.as_ref());
            if !accumulate::pass(loop_, &mut scope, &mut pending)? {
                break;
            }
        }
    } else {
        return Err(ExecutionError::NoSuchOverload);
    }
    accumulate::settle(loop_, &scope, pending)?;
    Ok(Cow::Owned(
        Value::resolve_val(&loop_.result, &scope)?.into_owned(),
    ))
}

/// `cel.@mapInsert(map, key, value)` and `cel.@mapInsert(map, entries)`:
/// the map with the new entries; a key already there is an error, as in
/// cel-go. The map is copied only when something else still shares it.
pub(crate) fn map_insert<'a>(
    call: &'a CallExpr,
    ctx: &'a Context<'a>,
) -> Result<Cow<'a, dyn Val>, ExecutionError> {
    let (target, rest) = call
        .args
        .split_first()
        .ok_or(ExecutionError::NoSuchOverload)?;
    let mut map = {
        let target = Value::resolve_val(target, ctx)?;
        target
            .downcast_ref::<CelMap>()
            .ok_or(ExecutionError::NoSuchOverload)?
            .share()
    };
    match rest {
        [key, value] => {
            let key = CelMapKey::try_from(Value::resolve_val(key, ctx)?.into_owned())?;
            let value = Value::resolve_val(value, ctx)?.into_owned();
            insert_new(&mut map, key, value)?;
        }
        [entries] => {
            let entries = Value::resolve_val(entries, ctx)?;
            let entries = entries
                .downcast_ref::<CelMap>()
                .ok_or(ExecutionError::NoSuchOverload)?;
            for (key, value) in entries.inner() {
                insert_new(&mut map, key.clone(), value.clone_as_boxed())?;
            }
        }
        _ => return Err(ExecutionError::NoSuchOverload),
    }
    let map: Box<dyn Val> = Box::new(map);
    Ok(Cow::Owned(map))
}

pub(crate) fn insert_new(map: &mut CelMap, key: CelMapKey, value: Box<dyn Val>) -> Result<(), ExecutionError> {
    // cel-go finds 1 and 1u the same key.
    let twin = match &key {
        CelMapKey::Int(i) => u64::try_from(*i.inner())
            .ok()
            .map(|u| CelMapKey::UInt(u.into())),
        CelMapKey::UInt(u) => i64::try_from(*u.inner())
            .ok()
            .map(|i| CelMapKey::Int(i.into())),
        _ => None,
    };
    if map.contains_key(&key) || twin.is_some_and(|twin| map.contains_key(&twin)) {
        let shown = match &key {
            CelMapKey::Bool(b) => b.inner().to_string(),
            CelMapKey::Int(i) => i.inner().to_string(),
            CelMapKey::String(s) => s.inner().to_string(),
            CelMapKey::UInt(u) => u.inner().to_string(),
        };
        return Err(ExecutionError::function_error(
            crate::parser::MAP_INSERT,
            format!("insert failed: key {shown} already exists"),
        ));
    }
    map.insert(key, value);
    Ok(())
}

/// `list.@sortByAssociatedKeys(keys)`: the list's elements in the order of
/// their keys (the key of element `i` at index `i`). Keys must be of one
/// comparable type, as cel-go requires; elements with equal keys end in
/// the order Go's `sort.Slice` leaves them (which keeps theirs up to 12).
pub(crate) fn sort_by_associated_keys<'a>(
    call: &'a CallExpr,
    ctx: &'a Context<'a>,
) -> Result<Cow<'a, dyn Val>, ExecutionError> {
    let (Some(target), [keys]) = (&call.target, call.args.as_slice()) else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let list = Value::resolve_val(target, ctx)?;
    let list = list
        .downcast_ref::<CelList>()
        .ok_or(ExecutionError::NoSuchOverload)?;
    let keys = Value::resolve_val(keys, ctx)?;
    let keys = keys
        .downcast_ref::<CelList>()
        .ok_or(ExecutionError::NoSuchOverload)?;
    let failed = |message: String| {
        ExecutionError::function_error(crate::parser::SORT_BY_ASSOCIATED_KEYS, message)
    };
    if list.len() != keys.len() {
        return Err(failed(format!(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, but got {} and {} elements respectively",
            list.len(),
            keys.len()
        )));
    }
    let Some(first) = keys.first() else {
        let list: Box<dyn Val> = Box::new(list.share());
        return Ok(Cow::Owned(list));
    };
    if first.as_comparer().is_none() {
        return Err(failed("list elements must be comparable".to_string()));
    }
    let kind = first.get_type();
    if keys.iter().any(|key| key.get_type() != kind) {
        return Err(failed("list elements must have the same type".to_string()));
    }
    // As cel-go's `sort.Slice`: an element goes before another when its
    // key compares less; keys that do not compare (NaN) are not less.
    let less = |a: usize, b: usize| {
        keys[a]
            .as_comparer()
            .is_some_and(|key| key.compare(keys[b].as_ref()) == Ok(Ordering::Less))
    };
    let order = crate::go_sort::sort_slice(keys.len(), less);
    let sorted: Vec<Box<dyn Val>> = order.iter().map(|&i| list[i].clone_as_boxed()).collect();
    let sorted: Box<dyn Val> = Box::new(CelList::from(sorted));
    Ok(Cow::Owned(sorted))
}
