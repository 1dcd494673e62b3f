//! Any bytes as an AdmissionReview body: a request or a clear refusal, and
//! for a request, an answer from each webhook that is a well-formed review.
//! Each webhook reads the body as it does in production: the validator
//! whole, the injector only the pod's parts its configuration reads and
//! changes (`pod::parts_for`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_admission::decode;
use portcullis_cel::budget::Limits;
use portcullis_fuzz::{answer, examples, validate};

fuzz_target!(|body: &[u8]| {
    for config in examples::INJECTORS.iter() {
        if let Ok(req) = portcullis_injector::pod::decode(body, &portcullis_injector::pod::parts_for(config)) {
            answer(portcullis_injector::mutate::mutate(&req, config).decision, &req);
        }
    }
    if let Ok(req) = decode(body) {
        validate(&req, Limits::default());
    }
});
