//! What of an object a MAP reads and may change, as the [`Parts`] a
//! webhook builds of it: what its expressions read (`portcullis_cel`'s
//! [`reads`](portcullis_cel::reads)) and what its mutations may change
//! ([`Changes`]). An apply configuration is followed through the kind's
//! schema, since an atomic map or struct is replaced whole, so all of it
//! must be built for the patch to remove what the replacement lacks. Run
//! on those parts, the MAP sees, changes and leaves exactly what it would
//! on the whole object, and the diff is the same.

use portcullis_admission::parts::Parts;
use portcullis_cel::changes::Changes;
use portcullis_cel::reads::Reads;

use super::{Mutation, NativeMutation, PatchType};
use crate::apply::{Schemas, Shape};

impl NativeMutation {
    /// The parts of an object of shape `shape` (`None`: the kind has no
    /// schema) that this MAP reads and may change.
    pub fn object_parts(&self, schemas: &Schemas, shape: Option<Shape<'_>>) -> Parts {
        let mut parts = self.data_reads.object.as_ref().map_or_else(|| Parts::fields([]), read);
        if self.matching.is_some() {
            // An objectSelector reads the labels.
            parts.merge(Parts::fields([("metadata", Parts::fields([("labels", Parts::All)]))]));
        }
        for mutation in &self.mutations {
            let changes = mutation.changes();
            parts.merge(match (mutation.patch_type, shape) {
                (PatchType::ApplyConfiguration, Some(shape)) => applied(schemas, shape, &changes),
                (PatchType::ApplyConfiguration, None) => Parts::All,
                (PatchType::JsonPatch | PatchType::JsonMergePatch, _) => changed(&changes),
            });
        }
        parts
    }

    /// Whether its mutations may change the object's top-level `field`.
    pub fn may_change(&self, field: &str) -> bool {
        self.mutations.iter().any(|mutation| match mutation.changes() {
            Changes::Whole => true,
            Changes::Fields(fields) => fields.contains_key(field),
        })
    }
}

impl Mutation {
    /// Where its result may change the object: a JSON Patch's paths, or
    /// the fields an `Object{...}` names.
    fn changes(&self) -> Changes {
        match self.patch_type {
            PatchType::JsonPatch => Changes::of_json_patch(&self.expression),
            PatchType::JsonMergePatch | PatchType::ApplyConfiguration => Changes::of_object(&self.expression),
        }
    }
}

/// What reading `reads` needs built; a field read only for its presence
/// is built as an empty object (or whole, when it is not an object).
fn read(reads: &Reads) -> Parts {
    match reads {
        Reads::Whole => Parts::All,
        Reads::Presence => Parts::fields([]),
        Reads::Fields(fields) => Parts::fields(fields.iter().map(|(name, reads)| (name.as_str(), read(reads)))),
    }
}

/// What changing `changes` needs built, where fields are replaced or
/// merged key by key (a JSON Patch, a merge patch).
fn changed(changes: &Changes) -> Parts {
    match changes {
        Changes::Whole => Parts::All,
        Changes::Fields(fields) => {
            Parts::fields(fields.iter().map(|(name, changes)| (name.as_str(), changed(changes))))
        }
    }
}

/// What merging an apply configuration that sets `changes` into a value
/// of shape `shape` needs built: below a granular object, the fields it
/// sets; anything else (an atomic map or struct, a list, a scalar) whole.
fn applied(schemas: &Schemas, shape: Shape<'_>, changes: &Changes) -> Parts {
    let Changes::Fields(fields) = changes else { return Parts::All };
    if !shape.is_object() || shape.atomic_map() {
        return Parts::All;
    }
    Parts::fields(fields.iter().map(|(name, changes)| {
        let parts = schemas.field(shape, name).map_or(Parts::All, |field| applied(schemas, field, changes));
        (name.as_str(), parts)
    }))
}
