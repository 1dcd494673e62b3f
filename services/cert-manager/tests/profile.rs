//! One request, one certificate: a table of requests run through both
//! modes. Standalone, the grant is signed by the CA in hand; in Kubernetes
//! mode it becomes the CertificateSigningRequest the cert-manager creates
//! (as the API server stores it, approved), and the signer grants and signs
//! that. The certificates must agree in everything a client checks. A
//! caller's request is checked by the same issuer in both modes, so what
//! differs for a refused one is the signer, which sees CSRs anyone may have
//! created and approved: it refuses what the profile refuses, and leaves
//! names and subject to the approver.
//!
//! `tests/data/rsa-2048.key` is a throwaway test key (ring cannot make RSA
//! keys): `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`;
//! ring cannot sign with a 1024-bit one, so that request is made by openssl
//! too: `tests/data/rsa-1024-localhost.csr`.

use std::time::Duration;

use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use portcullis_admission::names::OWN_SIGNER;
use portcullis_cert_manager::ca::LocalCa;
use portcullis_cert_manager::config::Config;
use portcullis_cert_manager::issuer::{Refusal, check};
use portcullis_cert_manager::kubernetes::{csr, signer};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use rstest::rstest;
use x509_parser::prelude::{FromDer as _, X509Certificate};

const MAX: u32 = 7 * 86_400;

fn config() -> Config {
    let yaml = "apiVersion: portcullis.dev/v1alpha1\nkind: CertManagerConfig\nspec:\n  defaultLifetimeSeconds: 3600\n  maxLifetimeSeconds: 604800\n  clients:\n    - identity: portcullis-system/webhook\n      dnsNames: [webhook.portcullis-system.svc, localhost]\n      ipAddresses: [127.0.0.1]\n      subject: {organizations: [portcullis]}\n";
    Config::from_sources([(std::path::Path::new("c.yaml"), yaml.as_bytes())]).unwrap_or_else(|e| panic!("{e}"))
}

#[derive(Debug, Clone, Copy)]
enum Key {
    P256,
    P384,
    Ed25519,
    Rsa2048,
    Rsa1024,
}

fn key(kind: Key) -> KeyPair {
    let rsa = |file: &str| {
        let pem =
            std::fs::read_to_string(format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"))).expect("a test key");
        KeyPair::from_pem(&pem).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    match kind {
        Key::P256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a P-256 key"),
        Key::P384 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("a P-384 key"),
        Key::Ed25519 => KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("an Ed25519 key"),
        Key::Rsa2048 => rsa("rsa-2048.key"),
        Key::Rsa1024 => unreachable!("ring refuses RSA keys this small: see tests/data/rsa-1024-localhost.csr"),
    }
}

/// A request for `names` as the webhooks' client makes it (no subject),
/// changed by `edit`.
fn request(kind: Key, names: &[&str], edit: impl FnOnce(&mut CertificateParams)) -> String {
    if let Key::Rsa1024 = kind {
        assert_eq!(names, ["localhost"], "the one request made with a 1024-bit key");
        return std::fs::read_to_string(format!("{}/tests/data/rsa-1024-localhost.csr", env!("CARGO_MANIFEST_DIR")))
            .expect("the 1024-bit request");
    }
    let mut params =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("request parameters");
    params.distinguished_name = rcgen::DistinguishedName::new();
    edit(&mut params);
    params.serialize_request(&key(kind)).and_then(|r| r.pem()).expect("a PKCS#10 request")
}

/// Standalone: the checked grant signed by the CA in hand.
fn standalone(ca: &LocalCa, pem: &str, seconds: u32) -> Result<String, Refusal> {
    let config = config();
    let grant = check(pem, &config.clients[0], seconds, &config.lifetimes())?;
    Ok(ca.sign(&grant).expect("the CA signs"))
}

/// Who the API server says created the cert-manager's CSRs.
const CERT_MANAGER: &str = "system:serviceaccount:portcullis-system:portcullis-cert-manager";

/// Kubernetes mode: the same check, the CSR object made of the grant, as
/// stored (the API server sets `spec.username` to its creator) and
/// approved, granted again by the signer and signed.
fn kubernetes(ca: &LocalCa, pem: &str, seconds: u32) -> Result<String, Refusal> {
    let config = config();
    let grant = check(pem, &config.clients[0], seconds, &config.lifetimes())?;
    let object = serde_json::to_value(csr::request_object(&grant, OWN_SIGNER)).expect("a CSR object as JSON");
    let mut stored: CertificateSigningRequest = serde_json::from_value(object).expect("the CSR object as stored");
    stored.spec.username = Some(CERT_MANAGER.into());
    approve(&mut stored);
    assert!(signer::pending(&stored));
    let grant = signer::grant_of(&stored, &config.lifetimes())?;
    Ok(ca.sign(&grant).expect("the CA signs"))
}

/// The signer's verdict on `pem` in a CSR somebody else created (no
/// identity annotation) and approved.
fn approved_elsewhere(pem: &str) -> Result<(), Refusal> {
    let mut object = CertificateSigningRequest::default();
    object.spec.request = k8s_openapi::ByteString(pem.as_bytes().to_vec());
    object.spec.signer_name = OWN_SIGNER.into();
    object.spec.username = Some("system:serviceaccount:team:someone".into());
    approve(&mut object);
    signer::grant_of(&object, &config().lifetimes()).map(|_| ())
}

fn approve(csr: &mut CertificateSigningRequest) {
    let approved = CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        ..CertificateSigningRequestCondition::default()
    };
    csr.status.get_or_insert_default().conditions = Some(vec![approved]);
}

/// What a client checks of a certificate.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    subject: String,
    issuer: String,
    names: Vec<String>,
    key_usage: Option<String>,
    extended_key_usage: Option<String>,
    basic_constraints: Option<String>,
    lifetime: i64,
}

fn seen(pem: &str) -> Seen {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM");
    let (_, cert) = X509Certificate::from_der(&pem.contents).expect("a certificate");
    let names = cert
        .subject_alternative_name()
        .expect("a valid SAN extension")
        .map(|san| san.value.general_names.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    Seen {
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        names,
        key_usage: cert.key_usage().expect("a valid key usage extension").map(|u| u.value.to_string()),
        extended_key_usage: cert
            .extended_key_usage()
            .expect("a valid extended key usage extension")
            .map(|u| format!("{:?}", u.value)),
        basic_constraints: cert
            .basic_constraints()
            .expect("a valid basic constraints extension")
            .map(|c| format!("{:?}", c.value)),
        lifetime: cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp(),
    }
}

/// The lifetime a certificate of `granted` seconds shows (it is backdated).
fn shown(granted: i64) -> i64 {
    granted + 300
}

enum Expect {
    /// Issued, with this CN, these key usages and this lifetime.
    Issued { common_name: &'static str, key_encipherment: bool, lifetime: i64 },
    /// Refused by the check of a caller's request (either mode).
    Refused(fn(&Refusal) -> bool),
}

#[rstest]
#[case::ecdsa_p256(Key::P256, &["localhost", "127.0.0.1"], |_: &mut CertificateParams| {}, 0,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: 3600 })]
#[case::ecdsa_p384(Key::P384, &["webhook.portcullis-system.svc"], |_: &mut CertificateParams| {}, 7200,
    Expect::Issued { common_name: "webhook.portcullis-system.svc", key_encipherment: false, lifetime: 7200 })]
#[case::ed25519(Key::Ed25519, &["localhost"], |_: &mut CertificateParams| {}, 0,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: 3600 })]
#[case::rsa_gets_key_encipherment(Key::Rsa2048, &["localhost"], |_: &mut CertificateParams| {}, 0,
    Expect::Issued { common_name: "localhost", key_encipherment: true, lifetime: 3600 })]
#[case::rsa_asking_for_key_encipherment(Key::Rsa2048, &["localhost"],
    |p: &mut CertificateParams| p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment], 0,
    Expect::Issued { common_name: "localhost", key_encipherment: true, lifetime: 3600 })]
#[case::ecdsa_asking_for_key_encipherment(Key::P256, &["localhost"],
    |p: &mut CertificateParams| p.key_usages = vec![KeyUsagePurpose::KeyEncipherment], 0,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: 3600 })]
#[case::server_auth_asked(Key::P256, &["localhost"],
    |p: &mut CertificateParams| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth], 0,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: 3600 })]
// No DNS name and no common name: the common name falls back to the
// caller's identity, standalone from the client, in the signer from the
// CSR's identity annotation (not spec.username, the cert-manager itself).
#[case::ip_address_only(Key::P256, &["127.0.0.1"], |_: &mut CertificateParams| {}, 0,
    Expect::Issued { common_name: "portcullis-system/webhook", key_encipherment: false, lifetime: 3600 })]
#[case::allowed_subject(Key::P256, &["localhost"],
    |p: &mut CertificateParams| p.distinguished_name.push(DnType::OrganizationName, "portcullis"), 0,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: 3600 })]
#[case::lifetime_at_the_cap(Key::P256, &["localhost"], |_: &mut CertificateParams| {}, MAX,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: MAX as i64 })]
#[case::lifetime_over_the_cap(Key::P256, &["localhost"], |_: &mut CertificateParams| {}, MAX * 4,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: MAX as i64 })]
#[case::lifetime_under_the_minimum(Key::P256, &["localhost"], |_: &mut CertificateParams| {}, 60,
    Expect::Issued { common_name: "localhost", key_encipherment: false, lifetime: 600 })]
#[case::name_not_allowed(Key::P256, &["localhost", "kubernetes.default.svc"], |_: &mut CertificateParams| {}, 0,
    Expect::Refused(|r| matches!(r, Refusal::Name { name, .. } if name == "kubernetes.default.svc")))]
#[case::ip_not_allowed(Key::Rsa2048, &["10.0.0.1"], |_: &mut CertificateParams| {}, 0,
    Expect::Refused(|r| matches!(r, Refusal::Name { .. })))]
#[case::subject_not_allowed(Key::P256, &["localhost"],
    |p: &mut CertificateParams| p.distinguished_name.push(DnType::OrganizationName, "system:masters"), 0,
    Expect::Refused(|r| matches!(r, Refusal::Subject { .. })))]
#[case::ca_flag(Key::P256, &["localhost"], |p: &mut CertificateParams| p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained), 0,
    Expect::Refused(|r| *r == Refusal::Ca))]
#[case::client_auth(Key::P256, &["localhost"],
    |p: &mut CertificateParams| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth], 0,
    Expect::Refused(|r| matches!(r, Refusal::Usage(_))))]
#[case::certificate_signing(Key::Rsa2048, &["localhost"],
    |p: &mut CertificateParams| p.key_usages = vec![KeyUsagePurpose::KeyCertSign], 0,
    Expect::Refused(|r| matches!(r, Refusal::Usage(_))))]
// ring verifies no RSA signature under 2048 bits, so rcgen does not parse
// the request: it is refused as malformed before its key is looked at.
#[case::rsa_too_small(Key::Rsa1024, &["localhost"], |_: &mut CertificateParams| {}, 0,
    Expect::Refused(|r| matches!(r, Refusal::Malformed(m) if m.contains("signature"))))]
#[case::no_names(Key::P256, &[], |_: &mut CertificateParams| {}, 0,
    Expect::Refused(|r| *r == Refusal::NoNames))]
fn both_modes_issue_the_same_certificate(
    #[case] kind: Key,
    #[case] names: &[&str],
    #[case] edit: fn(&mut CertificateParams),
    #[case] seconds: u32,
    #[case] expect: Expect,
) {
    let (cert, key) = LocalCa::generate(Duration::from_secs(365 * 86_400)).unwrap();
    let ca = LocalCa::from_pem(&cert, &key).unwrap();
    let pem = request(kind, names, edit);
    let one = standalone(&ca, &pem, seconds);
    match expect {
        Expect::Issued { common_name, key_encipherment, lifetime } => {
            let (one, other) = (seen(&one.unwrap()), seen(&kubernetes(&ca, &pem, seconds).unwrap()));
            assert_eq!(one, other, "the same certificate in both modes");
            assert!(one.subject.contains(&format!("CN={common_name}")), "{}", one.subject);
            assert_eq!(one.issuer, seen(&cert).subject);
            assert_eq!(one.lifetime, shown(lifetime));
            let usage = one.key_usage.unwrap();
            let expected = if key_encipherment { "Digital Signature, Key Encipherment" } else { "Digital Signature" };
            assert_eq!(usage, expected);
            let extended = one.extended_key_usage.unwrap();
            assert!(extended.contains("server_auth: true") && extended.contains("client_auth: false"), "{extended}");
            assert!(one.basic_constraints.unwrap().contains("ca: false"));
        }
        Expect::Refused(what) => {
            let refusal = one.map(|_| ()).unwrap_err();
            assert!(what(&refusal), "{refusal:?}");
            let verdict = approved_elsewhere(&pem);
            if refusal.is_permission() {
                assert_eq!(verdict, Ok(()), "names and subject are the approver's decision");
            } else {
                assert_eq!(verdict, Err(refusal), "the signer holds the profile whoever approved");
            }
        }
    }
}

#[test]
fn the_signer_refuses_usages_beyond_server_auth_and_caps_what_others_approved() {
    let (cert, key) = LocalCa::generate(Duration::from_secs(365 * 86_400)).unwrap();
    let ca = LocalCa::from_pem(&cert, &key).unwrap();
    let mut object = CertificateSigningRequest::default();
    object.spec.request = k8s_openapi::ByteString(request(Key::Rsa2048, &["anything.example"], |_| {}).into_bytes());
    object.spec.signer_name = OWN_SIGNER.into();
    object.spec.expiration_seconds = Some(i32::MAX);
    assert!(!signer::pending(&object), "not approved yet");
    approve(&mut object);
    let grant = signer::grant_of(&object, &config().lifetimes()).unwrap();
    let seen = seen(&ca.sign(&grant).unwrap());
    assert_eq!(seen.lifetime, shown(i64::from(MAX)), "capped at maxLifetimeSeconds");
    assert_eq!(seen.key_usage.unwrap(), "Digital Signature, Key Encipherment");
    object.spec.usages = Some(vec!["server auth".into(), "client auth".into()]);
    assert!(matches!(signer::grant_of(&object, &config().lifetimes()), Err(Refusal::Usage(_))));
}
