//! The injector on arbitrary pods with each shipped configuration: never a
//! panic; the patch it answers (computed from the parts of the pod its
//! configuration reads and changes, `pod::parts_for`), applied by an RFC
//! 6902 implementation of our own, gives exactly the pod that the same mutation of the whole pod gives; and
//! a second pass over that pod changes nothing. Only a CEL mutation may
//! deny (its failure policy), and then the whole-pod mutation fails too.

#![no_main]

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use portcullis_admission::{Verdict, decode};
use portcullis_fuzz::review::Envelope;
use portcullis_fuzz::{answer, examples, pod};
use portcullis_injector::mutate::{mutate, mutated_whole};
use portcullis_injector::pod::{decode as read_pod, parts_for};
use portcullis_test_support::rfc6902;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let (Ok(config), Ok(pod)) = (u.choose(&examples::INJECTORS), pod::pod(&mut u)) else { return };
    let envelope = Envelope::pod_create();
    let body = envelope.body(Some(&pod), None);
    // The pod as sent, which the patch applies to; the injector reads only
    // its editable parts.
    let parts = parts_for(config);
    let (Ok(whole_req), Ok(req)) = (decode(&body), read_pod(&body, &parts)) else { return };
    let Some(original) = whole_req.object.clone() else { return };
    let decision = mutate(&req, config).decision;
    if let Verdict::Deny { .. } = decision.verdict {
        assert!(!config.mutations.is_empty(), "the injector denies only for a CEL mutation: {decision:?}");
        assert_eq!(mutated_whole(&whole_req, &original, config), None, "denied, yet the whole pod mutates");
        return;
    }
    let mutated = mutated_whole(&whole_req, &original, config).unwrap_or_else(|| original.clone());
    let mut patched = original.clone();
    if let Some(patch) = answer(decision, &req) {
        rfc6902::apply(&mut patched, &patch).unwrap_or_else(|e| panic!("the patch does not apply: {e}\n{patch}"));
    }
    assert_eq!(patched, mutated, "the patch does not give the mutated pod");

    let again =
        read_pod(&envelope.body(Some(&mutated), None), &parts).unwrap_or_else(|e| panic!("the mutated pod: {e}"));
    let second = answer(mutate(&again, config).decision, &again);
    assert_eq!(second, None::<Value>, "a second pass changed the pod\nfirst: {mutated}");
});
