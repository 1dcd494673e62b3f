//! Every shipped policy (built-in rules and CEL) over arbitrary objects of
//! the kinds they select, in arbitrary envelopes: never a panic, and an
//! answer that is a well-formed review.

#![no_main]

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use portcullis_admission::decode;
use portcullis_cel::budget::Limits;
use portcullis_fuzz::review::Envelope;
use portcullis_fuzz::{json, pod, validate};
use serde_json::Value;

fn object(u: &mut Unstructured<'_>, envelope: &Envelope) -> libfuzzer_sys::arbitrary::Result<Value> {
    if envelope.kind.2 == "Pod" && u.ratio(3, 4)? {
        return pod::pod(u);
    }
    let mut object = json::object(u, 4)?;
    object.remove("kind");
    object.remove("apiVersion");
    Ok(Value::Object(object))
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(envelope) = Envelope::arbitrary(&mut u) else { return };
    let (Ok(object), Ok(old)) = (object(&mut u, &envelope), object(&mut u, &envelope)) else { return };
    let old = (envelope.operation != "CREATE").then_some(&old);
    let Ok(req) = decode(&envelope.body(Some(&object), old)) else { return };
    // The shipped policies are cheap: no object may make them costly.
    let exceeded = validate(&req, Limits::default());
    assert!(exceeded.is_empty(), "{exceeded:?}");
});
