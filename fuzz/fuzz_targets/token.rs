//! Any `authorization` metadata on a gRPC call to the cert-manager: a bearer
//! token exactly as sent (trimmed, never empty), or a precise refusal.

#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_cert_manager::grpc::bearer;
use tonic::Code;
use tonic::metadata::{MetadataMap, MetadataValue};

fuzz_target!(|header: &[u8]| {
    let mut metadata = MetadataMap::new();
    if let Ok(value) = MetadataValue::try_from(header) {
        metadata.insert("authorization", value);
    }
    match bearer(&metadata) {
        Ok(token) => {
            let text = std::str::from_utf8(header).unwrap_or_else(|e| panic!("a token from non-text: {e}"));
            assert_eq!(Some(token.as_str()), text.strip_prefix("Bearer ").map(str::trim));
            assert!(!token.is_empty());
        }
        Err(status) => {
            assert_eq!(status.code(), Code::Unauthenticated);
            assert!(status.message().contains("Bearer"), "{}", status.message());
        }
    }
});
