//! Arbitrary objects in a valid envelope (v1 and v1beta1, any kind and
//! operation): `decode` refuses exactly the objects that are not JSON
//! objects or that state another kind, and both webhooks answer the rest.

#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use portcullis_admission::decode;
use portcullis_cel::budget::Limits;
use portcullis_fuzz::review::Envelope;
use portcullis_fuzz::{answer, examples, json, pod, validate};
use serde_json::Value;

fn object(u: &mut Unstructured<'_>, envelope: &Envelope) -> Result<Option<Value>> {
    Ok(match u.int_in_range(0..=4)? {
        0 => None,
        1 => Some(json::value(u, 3)?),
        2 => Some(pod::pod(u)?),
        _ => {
            let (group, version, kind, _) = envelope.kind;
            let mut object = json::object(u, 3)?;
            if u.ratio(3, 4)? {
                let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
                object.insert("apiVersion".to_owned(), api_version.into());
                object.insert("kind".to_owned(), kind.into());
            }
            Some(Value::Object(object))
        }
    })
}

/// Whether the API server could have sent `object` for `envelope`.
fn acceptable(envelope: &Envelope, object: Option<&Value>) -> bool {
    let Some(object) = object.filter(|o| !o.is_null()) else { return true };
    let (group, version, kind, _) = envelope.kind;
    let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    let stated = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
    object.is_object()
        && (stated("kind").is_empty() || stated("kind") == kind)
        && (stated("apiVersion").is_empty() || stated("apiVersion") == api_version)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(envelope) = Envelope::arbitrary(&mut u) else { return };
    let (Ok(object), Ok(old)) = (object(&mut u, &envelope), object(&mut u, &envelope)) else { return };
    let body = envelope.body(object.as_ref(), old.as_ref());
    let decoded = decode(&body);
    let expected = acceptable(&envelope, object.as_ref()) && acceptable(&envelope, old.as_ref());
    assert_eq!(decoded.is_ok(), expected, "{decoded:?} for {}", String::from_utf8_lossy(&body));
    let Ok(req) = decoded else { return };
    for config in examples::INJECTORS.iter() {
        answer(portcullis_injector::mutate::mutate(&req, config).decision, &req);
    }
    validate(&req, Limits::default());
});
