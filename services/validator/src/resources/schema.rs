//! Schemas of the fields whose Rust type is not what the API server should
//! see: a label selector of our own (metav1.LabelSelector's schema) and a
//! timestamp.

use schemars::{Schema, SchemaGenerator, json_schema};

/// `metav1.LabelSelector`, as the API server describes it.
pub(crate) fn label_selector(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>()
}

/// An RFC 3339 time.
pub(crate) fn timestamp(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "date-time"})
}
