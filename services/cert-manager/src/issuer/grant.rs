//! What is checked before anything is signed, and what comes out of it: a
//! [`Grant`]. Both modes decide here: the check of a caller's request
//! ([`check`]) and the signer's check of an approved
//! CertificateSigningRequest ([`check_approved`]) share the key, usage,
//! CA and lifetime rules, so that one request gets one certificate.

use std::time::Duration;

use rcgen::{
    CertificateSigningRequestParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa,
    KeyUsagePurpose, SanType,
};

use super::Refusal;
use crate::config::{Client, MIN_LIFETIME};

/// A usage a leaf certificate may have, named as the Kubernetes CSR API
/// names it (`spec.usages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Usage {
    /// Key usage digitalSignature.
    DigitalSignature,
    /// Key usage keyEncipherment: RSA key exchange (TLS 1.2 RSA suites).
    KeyEncipherment,
    /// Extended key usage serverAuth.
    ServerAuth,
}

impl Usage {
    /// The name in a CertificateSigningRequest's `spec.usages`.
    pub fn kubernetes_name(self) -> &'static str {
        match self {
            Self::DigitalSignature => "digital signature",
            Self::KeyEncipherment => "key encipherment",
            Self::ServerAuth => "server auth",
        }
    }

    /// The usage of a `spec.usages` name; `None` for any usage never granted.
    pub fn from_kubernetes_name(name: &str) -> Option<Self> {
        [Self::DigitalSignature, Self::KeyEncipherment, Self::ServerAuth]
            .into_iter()
            .find(|u| u.kubernetes_name() == name)
    }

    /// What a certificate for `key` gets: keyEncipherment for RSA only,
    /// since only an RSA key can encipher a TLS 1.2 key exchange.
    pub fn for_key(key: KeyKind) -> Vec<Self> {
        match key {
            KeyKind::Rsa => vec![Self::DigitalSignature, Self::KeyEncipherment, Self::ServerAuth],
            _ => vec![Self::DigitalSignature, Self::ServerAuth],
        }
    }
}

/// The accepted keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on P-256.
    EcdsaP256,
    /// ECDSA on P-384.
    EcdsaP384,
    /// Ed25519.
    Ed25519,
    /// RSA. (Under 2048 bits a request never gets this far: ring verifies
    /// no such signature, so it is malformed.)
    Rsa,
}

/// The lifetimes a grant may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// When none is asked for.
    pub default: Duration,
    /// The cap: a CA rotation relies on no leaf outliving it.
    pub max: Duration,
}

impl Lifetimes {
    /// The granted lifetime: the default when none (or 0) is asked for,
    /// at least the Kubernetes minimum, capped at the maximum (the cap wins:
    /// the fields are public, and a CA rotation relies on it).
    pub fn grant(&self, requested: Option<Duration>) -> Duration {
        match requested.filter(|r| !r.is_zero()) {
            None => self.default,
            Some(asked) => asked.max(MIN_LIFETIME).min(self.max),
        }
    }
}

/// A request that passed every check: what will be signed.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Who it is for (the CSR's common name falls back to it).
    pub identity: String,
    /// The subject: only attributes the caller may have; a common name always.
    pub subject: DistinguishedName,
    /// The names (DNS names and IP addresses), as requested.
    pub names: Vec<SanType>,
    /// The usages.
    pub usages: Vec<Usage>,
    /// The lifetime.
    pub lifetime: Duration,
    /// The caller's public key.
    pub public_key: rcgen::PublicKey,
    /// The caller's PKCS#10 request (PEM), the proof that it holds the key:
    /// what a CertificateSigningRequest must carry.
    pub csr_pem: String,
}

/// A parsed request whose key, usages and CA flag are acceptable.
struct Accepted {
    subject: DistinguishedName,
    names: Vec<SanType>,
    key: KeyKind,
    public_key: rcgen::PublicKey,
}

/// Checks `csr_pem` from `client` and decides what to sign, for
/// `requested` (0: the default).
pub fn check(csr_pem: &str, client: &Client, requested_seconds: u32, lifetimes: &Lifetimes) -> Result<Grant, Refusal> {
    let accepted = accept(csr_pem, std::iter::empty())?;
    let allowed = || {
        client
            .dns_names
            .iter()
            .cloned()
            .chain(client.ip_addresses.iter().map(ToString::to_string))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let refuse = |name: String| Refusal::Name { identity: client.identity.clone(), name, allowed: allowed() };
    for san in &accepted.names {
        match san {
            SanType::DnsName(name) => {
                let name = name.as_str();
                if !client.dns_names.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                    return Err(refuse(name.to_owned()));
                }
            }
            SanType::IpAddress(ip) => {
                if !client.ip_addresses.contains(ip) {
                    return Err(refuse(ip.to_string()));
                }
            }
            other => return Err(refuse(format!("{other:?}"))),
        }
    }
    for (kind, value) in accepted.subject.iter() {
        let text = text(value);
        let allowed = match kind {
            DnType::CommonName => {
                client.subject.common_name.as_deref() == Some(text.as_str())
                    || client.dns_names.iter().any(|d| d.eq_ignore_ascii_case(&text))
            }
            DnType::OrganizationName => client.subject.organizations.contains(&text),
            _ => false,
        };
        if !allowed {
            let attribute = format!("{kind:?} {text:?}");
            return Err(Refusal::Subject { identity: client.identity.clone(), attribute });
        }
    }
    let requested = Duration::from_secs(u64::from(requested_seconds));
    Ok(grant(accepted, &client.identity, lifetimes.grant(Some(requested)), csr_pem))
}

/// The signer's check of a CertificateSigningRequest somebody approved:
/// the names and subject are the approver's decision (the cert-manager's
/// own check, for the requests it makes); the key, the CA flag, the usages
/// of the PKCS#10 request and of `usages` (`spec.usages`), and the lifetime
/// are the profile's.
pub fn check_approved<'a>(
    csr_pem: &str,
    usages: impl IntoIterator<Item = &'a str>,
    expiration_seconds: Option<i32>,
    identity: &str,
    lifetimes: &Lifetimes,
) -> Result<Grant, Refusal> {
    let accepted = accept(csr_pem, usages)?;
    if let Some(other) = accepted.names.iter().find(|n| !matches!(n, SanType::DnsName(_) | SanType::IpAddress(_))) {
        let allowed = "DNS names and IP addresses".to_owned();
        return Err(Refusal::Name { identity: identity.to_owned(), name: format!("{other:?}"), allowed });
    }
    let requested = expiration_seconds.map(|s| Duration::from_secs(u64::try_from(s).unwrap_or_default()));
    Ok(grant(accepted, identity, lifetimes.grant(requested), csr_pem))
}

/// The rules every request follows: a valid PKCS#10 request, not a CA,
/// server-auth usages only (in the request and in `usages`), an accepted
/// key, at least one name.
fn accept<'a>(csr_pem: &str, usages: impl IntoIterator<Item = &'a str>) -> Result<Accepted, Refusal> {
    let csr = CertificateSigningRequestParams::from_pem(csr_pem).map_err(|e| Refusal::Malformed(e.to_string()))?;
    let requested = csr.params;
    if !matches!(requested.is_ca, IsCa::NoCa | IsCa::ExplicitNoCa) {
        return Err(Refusal::Ca);
    }
    if let Some(other) = requested.extended_key_usages.iter().find(|u| **u != ExtendedKeyUsagePurpose::ServerAuth) {
        return Err(Refusal::Usage(format!("{other:?}")));
    }
    let leaf_usages = [KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    if let Some(other) = requested.key_usages.iter().find(|u| !leaf_usages.contains(u)) {
        return Err(Refusal::Usage(format!("{other:?}")));
    }
    if let Some(other) = usages.into_iter().find(|u| Usage::from_kubernetes_name(u).is_none()) {
        return Err(Refusal::Usage(format!("{other:?}")));
    }
    let key = key_kind(&csr.public_key)?;
    if requested.subject_alt_names.is_empty() {
        return Err(Refusal::NoNames);
    }
    Ok(Accepted {
        subject: requested.distinguished_name,
        names: requested.subject_alt_names,
        key,
        public_key: csr.public_key,
    })
}

/// The grant of an accepted request: its subject as text, with a common
/// name (the first DNS name, else the identity) when it has none.
fn grant(accepted: Accepted, identity: &str, lifetime: Duration, csr_pem: &str) -> Grant {
    let mut subject = DistinguishedName::new();
    for (kind, value) in accepted.subject.iter() {
        subject.push(kind.clone(), text(value));
    }
    if subject.get(&DnType::CommonName).is_none() {
        let common_name = accepted.names.iter().find_map(|s| match s {
            SanType::DnsName(name) => Some(name.as_str().to_owned()),
            _ => None,
        });
        subject.push(DnType::CommonName, common_name.unwrap_or_else(|| identity.to_owned()));
    }
    Grant {
        identity: identity.to_owned(),
        subject,
        names: accepted.names,
        usages: Usage::for_key(accepted.key),
        lifetime,
        public_key: accepted.public_key,
        csr_pem: csr_pem.to_owned(),
    }
}

fn text(value: &DnValue) -> String {
    match value {
        DnValue::Utf8String(s) => s.clone(),
        DnValue::PrintableString(s) => s.as_str().to_owned(),
        DnValue::Ia5String(s) => s.as_str().to_owned(),
        other => format!("{other:?}"),
    }
}

/// The kind of an accepted key. rcgen parses only requests signed with
/// these algorithms (P-521 only with its `aws_lc_rs` feature, which is not
/// enabled), and ring verifies no RSA signature under 2048 bits: anything
/// else is already malformed, and the last branch refuses an algorithm a
/// future rcgen might add.
fn key_kind(key: &rcgen::PublicKey) -> Result<KeyKind, Refusal> {
    let alg = key.algorithm();
    if alg == &rcgen::PKCS_ECDSA_P256_SHA256 {
        Ok(KeyKind::EcdsaP256)
    } else if alg == &rcgen::PKCS_ECDSA_P384_SHA384 {
        Ok(KeyKind::EcdsaP384)
    } else if alg == &rcgen::PKCS_ED25519 {
        Ok(KeyKind::Ed25519)
    } else if [&rcgen::PKCS_RSA_SHA256, &rcgen::PKCS_RSA_SHA384, &rcgen::PKCS_RSA_SHA512].contains(&alg) {
        Ok(KeyKind::Rsa)
    } else {
        Err(Refusal::Key(format!("{alg:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use rcgen::{BasicConstraints, CertificateParams, KeyPair};
    use rstest::rstest;

    fn config() -> Config {
        let yaml = "apiVersion: portcullis.dev/v1alpha1\nkind: CertManagerConfig\nspec:\n  defaultLifetimeSeconds: 3600\n  maxLifetimeSeconds: 86400\n  clients:\n    - identity: portcullis-system/portcullis-injector\n      dnsNames: [portcullis-injector.portcullis-system.svc, localhost]\n      ipAddresses: [127.0.0.1]\n      subject: {commonName: \"system:node:portcullis-injector\", organizations: [system:nodes]}\n";
        Config::from_sources([(std::path::Path::new("c.yaml"), yaml.as_bytes())]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn csr(names: &[&str], edit: impl FnOnce(&mut CertificateParams), key: &KeyPair) -> String {
        let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap_or_else(|e| panic!("{e}"));
        params.distinguished_name = DistinguishedName::new(); // as the webhooks' client sends it
        edit(&mut params);
        params.serialize_request(key).and_then(|c| c.pem()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(pem: &str, lifetime: u32) -> Result<Grant, Refusal> {
        let config = config();
        check(pem, &config.clients[0], lifetime, &config.lifetimes())
    }

    #[test]
    fn approves_allowed_names_for_server_auth_only() {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let approved = run(&csr(&["localhost", "127.0.0.1"], |_| {}, &key), 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(approved.usages, [Usage::DigitalSignature, Usage::ServerAuth]);
        assert_eq!(approved.names.len(), 2);
        assert_eq!(approved.lifetime, Duration::from_secs(3600));
    }

    #[rstest]
    #[case::default(0, 3600)]
    #[case::capped(10_000_000, 86400)]
    #[case::at_least_the_csr_api_minimum(60, 600)]
    #[case::as_asked(7200, 7200)]
    fn lifetimes(#[case] asked: u64, #[case] granted: u64) {
        let asked = Duration::from_secs(asked);
        assert_eq!(config().lifetimes().grant(Some(asked)), Duration::from_secs(granted));
    }

    #[test]
    fn a_cap_under_the_minimum_is_the_cap_not_a_panic() {
        let lifetimes = Lifetimes { default: Duration::from_secs(60), max: Duration::from_secs(60) };
        assert_eq!(lifetimes.grant(Some(Duration::from_secs(3600))), Duration::from_secs(60));
        assert_eq!(lifetimes.grant(Some(Duration::from_secs(1))), Duration::from_secs(60));
    }

    #[test]
    fn every_refusal_says_why() {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let other = run(&csr(&["evil.example.com"], |_| {}, &key), 0).map(|_| ()).expect_err("refused");
        assert_eq!(
            other.to_string(),
            "portcullis-system/portcullis-injector may not have the name evil.example.com \
             (it may have: portcullis-injector.portcullis-system.svc, localhost, 127.0.0.1)"
        );
        assert!(other.is_permission());
        let ip = run(&csr(&["10.0.0.1"], |_| {}, &key), 0).map(|_| ()).expect_err("refused");
        assert!(matches!(ip, Refusal::Name { ref name, .. } if name == "10.0.0.1"), "{ip}");
        let ca = run(&csr(&["localhost"], |p| p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained), &key), 0);
        assert_eq!(ca.map(|_| ()), Err(Refusal::Ca));
        let client_auth =
            run(&csr(&["localhost"], |p| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth], &key), 0);
        assert_eq!(client_auth.map(|_| ()), Err(Refusal::Usage("ClientAuth".into())));
        let nothing = run(&csr(&[], |_| {}, &key), 0);
        assert_eq!(nothing.map(|_| ()), Err(Refusal::NoNames));
        let garbage = run("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n", 0);
        assert!(matches!(garbage, Err(Refusal::Malformed(_))));
        assert!(matches!(run("not pem", 0), Err(Refusal::Malformed(_))));
        let node = run(
            &csr(&["localhost"], |p| p.distinguished_name.push(DnType::CommonName, "system:node:worker-1"), &key),
            0,
        );
        let refusal = node.map(|_| ()).expect_err("refused");
        assert_eq!(
            refusal.to_string(),
            "portcullis-system/portcullis-injector may not have CommonName \"system:node:worker-1\" in its subject \
             (see subject in its CertManagerConfig client)"
        );
        assert!(refusal.is_permission());
        let admin = run(
            &csr(&["localhost"], |p| p.distinguished_name.push(DnType::OrganizationName, "system:masters"), &key),
            0,
        );
        assert!(matches!(admin, Err(Refusal::Subject { ref attribute, .. }) if attribute.contains("system:masters")));
    }

    #[test]
    fn grants_the_configured_subject_for_signers_that_need_one() {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let kubelet_style = |p: &mut CertificateParams| {
            p.distinguished_name.push(DnType::OrganizationName, "system:nodes");
            p.distinguished_name.push(DnType::CommonName, "system:node:portcullis-injector");
        };
        let approved = run(&csr(&["localhost"], kubelet_style, &key), 0).unwrap_or_else(|e| panic!("{e}"));
        let subject = &approved.subject;
        assert_eq!(subject.get(&DnType::CommonName), Some(&DnValue::from("system:node:portcullis-injector")));
        assert_eq!(subject.get(&DnType::OrganizationName), Some(&DnValue::from("system:nodes")));
        let plain = run(&csr(&["localhost"], |_| {}, &key), 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain.subject.get(&DnType::CommonName), Some(&DnValue::from("localhost")));
    }

    #[test]
    fn accepts_ed25519_keys() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap_or_else(|e| panic!("{e}"));
        assert!(run(&csr(&["localhost"], |_| {}, &key), 0).is_ok());
    }
}

#[cfg(test)]
mod signer_checks {
    use super::*;
    use rcgen::{CertificateParams, KeyPair};

    fn lifetimes() -> Lifetimes {
        Lifetimes { default: Duration::from_secs(86_400), max: Duration::from_secs(7 * 86_400) }
    }

    fn csr(edit: impl FnOnce(&mut CertificateParams)) -> String {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut params = CertificateParams::new(vec!["a.example".to_owned()]).unwrap_or_else(|e| panic!("{e}"));
        edit(&mut params);
        params.serialize_request(&key).and_then(|c| c.pem()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_approved_request_gets_the_profile_whatever_its_approver_allowed() {
        let pem = csr(|_| {});
        let usages = ["digital signature", "key encipherment", "server auth"];
        let grant = check_approved(&pem, usages, None, "someone", &lifetimes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(grant.usages, [Usage::DigitalSignature, Usage::ServerAuth], "no keyEncipherment for ECDSA");
        assert_eq!(grant.lifetime, Duration::from_secs(86_400), "the configured default");
        let long = check_approved(&pem, [], Some(i32::MAX), "someone", &lifetimes()).map(|g| g.lifetime);
        assert_eq!(long, Ok(Duration::from_secs(7 * 86_400)), "capped");
        let client_auth = check_approved(&pem, ["client auth"], None, "someone", &lifetimes()).map(|_| ());
        assert_eq!(client_auth, Err(Refusal::Usage("\"client auth\"".into())));
        let ca = csr(|p| p.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained));
        assert_eq!(check_approved(&ca, [], None, "someone", &lifetimes()).map(|_| ()), Err(Refusal::Ca));
        let signing = csr(|p| p.key_usages = vec![KeyUsagePurpose::KeyCertSign]);
        let refused = check_approved(&signing, [], None, "someone", &lifetimes()).map(|_| ());
        assert_eq!(refused, Err(Refusal::Usage("KeyCertSign".into())));
        assert!(matches!(check_approved("x", [], None, "someone", &lifetimes()), Err(Refusal::Malformed(_))));
        let uri = csr(|p| p.subject_alt_names.push(SanType::URI("spiffe://cluster/ns/x".try_into().unwrap())));
        let refused = check_approved(&uri, [], None, "someone", &lifetimes()).map(|_| ()).unwrap_err();
        assert!(refused.to_string().contains("may have: DNS names and IP addresses"), "{refused}");
    }
}
