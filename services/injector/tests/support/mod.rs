//! Shared test helpers: run a review through the injector as the API
//! server would, and apply the returned patch independently.

#![allow(dead_code, clippy::unwrap_used)]

pub(crate) use portcullis_test_support::rfc6902;

use std::path::{Path, PathBuf};

use portcullis_admission::encode;
use portcullis_injector::webhook::Injector;
use portcullis_server::webhook::Webhook;
use serde_json::Value;

pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

pub(crate) fn injector() -> Injector {
    let contents = portcullis_server::watch::read_all(&[data("config.yaml")]).unwrap();
    Injector::new(portcullis_injector::serve::parse(&contents).unwrap())
}

/// What the API server would get back, and the object after the patch.
pub(crate) struct Admitted {
    pub response: Value,
    pub original: Value,
    pub object: Value,
}

impl Admitted {
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.response["response"]["warnings"]
            .as_array()
            .map(|w| w.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }

    pub(crate) fn patch(&self) -> Option<Value> {
        // As the API documents it: base64 of the JSON Patch, a string.
        use base64::Engine as _;
        let text = self.response["response"]["patch"].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).expect("response.patch is base64");
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    pub(crate) fn status(&self) -> Value {
        let text = self.object["metadata"]["annotations"]["portcullis.dev/status"].as_str().unwrap_or("null");
        serde_json::from_str(text).unwrap()
    }
}

/// Runs `review` through the injector's decision and applies its patch.
pub(crate) fn admit(injector: &Injector, review: &Value) -> Admitted {
    // Read as the server reads it: the injector's own `Webhook::decode`.
    let req = Webhook::decode(injector, &serde_json::to_vec(review).unwrap()).unwrap();
    let (response, _) = injector.decide(&req).respond(&req);
    let response: Value = serde_json::from_slice(&encode(response)).unwrap();
    let original = review["request"]["object"].clone();
    let mut admitted = Admitted { response, original: original.clone(), object: original };
    if let Some(patch) = admitted.patch() {
        assert_eq!(admitted.response["response"]["patchType"], "JSONPatch");
        rfc6902::apply(&mut admitted.object, &patch).unwrap();
    }
    admitted
}

pub(crate) fn review(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(data(name)).unwrap()).unwrap()
}

/// The same review with `object` as the request's object (a second pass).
pub(crate) fn again(review: &Value, object: &Value) -> Value {
    let mut next = review.clone();
    next["request"]["object"] = object.clone();
    next
}

pub(crate) fn names(list: &Value) -> Vec<&str> {
    list.as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect()
}
