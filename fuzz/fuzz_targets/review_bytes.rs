//! Any bytes as an AdmissionReview body: a request or a clear refusal, and
//! for a request, an answer from each webhook that is a well-formed review.

#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_admission::decode;
use portcullis_fuzz::{answer, examples, validate};
use portcullis_validator::budget::Limits;

fuzz_target!(|body: &[u8]| {
    let Ok(req) = decode(body) else { return };
    for config in examples::INJECTORS.iter() {
        answer(portcullis_injector::mutate::mutate(&req, config).decision, &req);
    }
    validate(&req, Limits::default());
});
