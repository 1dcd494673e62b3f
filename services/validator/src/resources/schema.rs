//! Schemas of the fields whose Rust type is not what the API server should
//! see: a label selector of our own (metav1.LabelSelector's schema), a
//! timestamp, and `paramRef`, read as a raw value but described fully.

use schemars::{Schema, SchemaGenerator, json_schema};

/// `metav1.LabelSelector`, as the API server describes it.
pub(crate) fn label_selector(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>()
}

/// An RFC 3339 time.
pub(crate) fn timestamp(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "date-time"})
}

/// `paramRef`: kept as a raw value so that a mistake in it is refused
/// with the field named, but described as what it is.
pub(crate) fn param_ref(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<crate::params::ParamRefSpec>()
}
