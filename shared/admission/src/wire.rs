//! An `AdmissionReview` body as it arrives, read in one pass: `kube`'s
//! request envelope typed field by field, and `request.object` and
//! `request.oldObject` built as JSON with the [`Parts`] the reader asks
//! for. The parts are known only at run time (a configuration's), so the
//! review is read through seeds rather than a derived `Deserialize`; the
//! fields, their defaults and their errors are those a derived one has
//! (unknown fields ignored, a repeated one refused).

use std::fmt;

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::core::admission::Operation;
use kube::core::{GroupVersionKind, GroupVersionResource};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::parts::Parts;

/// The review's own fields.
#[derive(Debug, Default)]
pub(crate) struct ReceivedReview {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) request: Option<ReceivedRequest>,
}

/// The request's fields, the objects as JSON.
#[derive(Debug)]
pub(crate) struct ReceivedRequest {
    pub(crate) uid: String,
    pub(crate) kind: GroupVersionKind,
    pub(crate) resource: GroupVersionResource,
    pub(crate) sub_resource: Option<String>,
    pub(crate) request_kind: Option<GroupVersionKind>,
    pub(crate) request_resource: Option<GroupVersionResource>,
    pub(crate) request_sub_resource: Option<String>,
    pub(crate) name: String,
    pub(crate) namespace: Option<String>,
    pub(crate) operation: Operation,
    pub(crate) user_info: UserInfo,
    pub(crate) object: Option<Value>,
    pub(crate) old_object: Option<Value>,
    pub(crate) dry_run: bool,
    pub(crate) options: Option<RawExtension>,
}

/// Reads a review, building its objects with `parts`.
pub(crate) fn read(text: &str, parts: &Parts) -> Result<ReceivedReview, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let review = ReviewSeed(parts).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(review)
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ReviewField {
    ApiVersion,
    Kind,
    Request,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum RequestField {
    Uid,
    Kind,
    Resource,
    SubResource,
    RequestKind,
    RequestResource,
    RequestSubResource,
    Name,
    Namespace,
    Operation,
    UserInfo,
    Object,
    OldObject,
    DryRun,
    Options,
    #[serde(other)]
    Other,
}

struct ReviewSeed<'p>(&'p Parts);

impl<'de> DeserializeSeed<'de> for ReviewSeed<'_> {
    type Value = ReceivedReview;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReviewSeed<'_> {
    type Value = ReceivedReview;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionReview")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut api_version, mut kind, mut request) = (None, None, None);
        while let Some(field) = map.next_key()? {
            match field {
                ReviewField::ApiVersion => once(&mut api_version, "apiVersion", map.next_value()?)?,
                ReviewField::Kind => once(&mut kind, "kind", map.next_value()?)?,
                ReviewField::Request => {
                    once(&mut request, "request", map.next_value_seed(Nullable(RequestSeed(self.0)))?)?
                }
                ReviewField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ReceivedReview {
            api_version: api_version.unwrap_or_default(),
            kind: kind.unwrap_or_default(),
            request: request.flatten(),
        })
    }
}

struct RequestSeed<'p>(&'p Parts);

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = ReceivedRequest;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_> {
    type Value = ReceivedRequest;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionRequest")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut uid, mut kind, mut resource, mut sub_resource) = (None, None, None, None);
        let (mut request_kind, mut request_resource, mut request_sub_resource) = (None, None, None);
        let (mut name, mut namespace, mut operation, mut user_info) = (None, None, None, None);
        let (mut object, mut old_object, mut dry_run, mut options) = (None, None, None, None);
        while let Some(field) = map.next_key()? {
            match field {
                RequestField::Uid => once(&mut uid, "uid", map.next_value()?)?,
                RequestField::Kind => once(&mut kind, "kind", map.next_value()?)?,
                RequestField::Resource => once(&mut resource, "resource", map.next_value()?)?,
                RequestField::SubResource => once(&mut sub_resource, "subResource", map.next_value()?)?,
                RequestField::RequestKind => once(&mut request_kind, "requestKind", map.next_value()?)?,
                RequestField::RequestResource => once(&mut request_resource, "requestResource", map.next_value()?)?,
                RequestField::RequestSubResource => {
                    once(&mut request_sub_resource, "requestSubResource", map.next_value()?)?;
                }
                RequestField::Name => once(&mut name, "name", map.next_value()?)?,
                RequestField::Namespace => once(&mut namespace, "namespace", map.next_value()?)?,
                RequestField::Operation => once(&mut operation, "operation", map.next_value()?)?,
                RequestField::UserInfo => once(&mut user_info, "userInfo", map.next_value()?)?,
                RequestField::Object => once(&mut object, "object", map.next_value_seed(Nullable(self.0.seed()))?)?,
                RequestField::OldObject => {
                    once(&mut old_object, "oldObject", map.next_value_seed(Nullable(self.0.seed()))?)?
                }
                RequestField::DryRun => once(&mut dry_run, "dryRun", map.next_value()?)?,
                RequestField::Options => once(&mut options, "options", map.next_value()?)?,
                RequestField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ReceivedRequest {
            uid: uid.ok_or_else(|| de::Error::missing_field("uid"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            resource: resource.ok_or_else(|| de::Error::missing_field("resource"))?,
            sub_resource: sub_resource.flatten(),
            request_kind: request_kind.flatten(),
            request_resource: request_resource.flatten(),
            request_sub_resource: request_sub_resource.flatten(),
            name: name.unwrap_or_default(),
            namespace: namespace.flatten(),
            operation: operation.ok_or_else(|| de::Error::missing_field("operation"))?,
            user_info: user_info.ok_or_else(|| de::Error::missing_field("userInfo"))?,
            object: object.flatten(),
            old_object: old_object.flatten(),
            dry_run: dry_run.unwrap_or_default(),
            options: options.flatten(),
        })
    }
}

/// Fills `slot` with `value`, refusing a field given twice.
fn once<T, E: de::Error>(slot: &mut Option<T>, field: &'static str, value: T) -> Result<(), E> {
    if slot.replace(value).is_some() {
        return Err(E::duplicate_field(field));
    }
    Ok(())
}

/// A value read by a seed, or `null` (`None`), as `Option<T>` reads one.
#[derive(Clone, Copy)]
struct Nullable<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}
