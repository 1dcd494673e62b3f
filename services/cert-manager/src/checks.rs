//! What is checked before anything is signed. Every refusal says why.

use std::time::Duration;

use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose,
    IsCa, KeyUsagePurpose, SanType, SignatureAlgorithm,
};

use crate::config::{Client, Config, MIN_LIFETIME};

/// A request that passed every check: what will be signed.
#[derive(Debug)]
pub struct Approved {
    /// The certificate's contents: the checked names, server auth only.
    pub params: CertificateParams,
    /// The caller's public key.
    pub public_key: rcgen::PublicKey,
    /// The granted lifetime.
    pub lifetime: Duration,
}

/// Why a request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// Not a PKCS#10 request, or its signature does not verify.
    #[error("the certificate request is not a valid, self-signed PKCS#10 request ({0})")]
    Malformed(String),
    /// The request asks to be a CA.
    #[error("the certificate request asks for CA:true; only leaf certificates are issued")]
    Ca,
    /// The request asks for a usage other than server authentication.
    #[error("the certificate request asks for {0} usage; only server authentication is granted")]
    Usage(String),
    /// The key type or size is not accepted.
    #[error("the key type {0} is not accepted; use ECDSA P-256 or P-384, Ed25519, or RSA of at least 2048 bits")]
    Key(String),
    /// A subject attribute the caller may not have.
    #[error("{identity} may not have {attribute} in its subject (see subject in its CertManagerConfig client)")]
    Subject {
        /// The caller.
        identity: String,
        /// The attribute it asked for.
        attribute: String,
    },
    /// No DNS name or IP address.
    #[error("the certificate request names no DNS name or IP address")]
    NoNames,
    /// A name the caller may not have.
    #[error("{identity} may not have the name {name} (it may have: {allowed})")]
    Name {
        /// The caller.
        identity: String,
        /// The name it asked for.
        name: String,
        /// What it may have.
        allowed: String,
    },
}

impl Refusal {
    /// A bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::Ca => "ca",
            Self::Usage(_) => "usage",
            Self::Key(_) => "key",
            Self::NoNames => "no_names",
            Self::Name { .. } => "name_not_allowed",
            Self::Subject { .. } => "subject_not_allowed",
        }
    }

    /// Whether the caller asked for something it is not allowed (as opposed
    /// to sending an unusable request).
    pub fn is_permission(&self) -> bool {
        matches!(self, Self::Name { .. } | Self::Subject { .. })
    }
}

/// Checks `csr_pem` from `client` and decides what to sign.
pub fn check(csr_pem: &str, client: &Client, requested_seconds: u32, config: &Config) -> Result<Approved, Refusal> {
    let csr = CertificateSigningRequestParams::from_pem(csr_pem).map_err(|e| Refusal::Malformed(e.to_string()))?;
    let requested = csr.params;
    if !matches!(requested.is_ca, IsCa::NoCa | IsCa::ExplicitNoCa) {
        return Err(Refusal::Ca);
    }
    if let Some(other) = requested.extended_key_usages.iter().find(|u| **u != ExtendedKeyUsagePurpose::ServerAuth) {
        return Err(Refusal::Usage(format!("{other:?}")));
    }
    let rsa = check_key(&csr.public_key)?;
    if requested.subject_alt_names.is_empty() {
        return Err(Refusal::NoNames);
    }
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
    for san in &requested.subject_alt_names {
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
    let lifetime = lifetime(requested_seconds, config);
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(&requested.distinguished_name, client)?;
    params.subject_alt_names = requested.subject_alt_names;
    if params.distinguished_name.get(&DnType::CommonName).is_none() {
        let common_name = params.subject_alt_names.iter().find_map(|s| match s {
            SanType::DnsName(name) => Some(name.as_str().to_owned()),
            _ => None,
        });
        params.distinguished_name.push(DnType::CommonName, common_name.unwrap_or_else(|| client.identity.clone()));
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = if rsa {
        vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment]
    } else {
        vec![KeyUsagePurpose::DigitalSignature]
    };
    params.use_authority_key_identifier_extension = true;
    let now = time::OffsetDateTime::now_utc();
    // A little backdating tolerates clock skew between nodes.
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + lifetime;
    Ok(Approved { params, public_key: csr.public_key, lifetime })
}

/// The requested subject, if `client` may have it: a common name that is
/// one of its DNS names or its configured common name, and configured
/// organizations; nothing else.
fn subject(requested: &DistinguishedName, client: &Client) -> Result<DistinguishedName, Refusal> {
    let mut granted = DistinguishedName::new();
    for (kind, value) in requested.iter() {
        let text = match value {
            DnValue::Utf8String(s) => s.clone(),
            DnValue::PrintableString(s) => s.as_str().to_owned(),
            DnValue::Ia5String(s) => s.as_str().to_owned(),
            other => format!("{other:?}"),
        };
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
        granted.push(kind.clone(), text);
    }
    Ok(granted)
}

/// The granted lifetime: the default for 0, capped at the maximum, at
/// least the Kubernetes minimum.
pub fn lifetime(requested_seconds: u32, config: &Config) -> Duration {
    let seconds = match u64::from(requested_seconds) {
        0 => config.default_lifetime_seconds,
        s => s.clamp(MIN_LIFETIME.as_secs(), config.max_lifetime_seconds),
    };
    Duration::from_secs(seconds)
}

/// Accepts ECDSA P-256/P-384, Ed25519 and RSA of 2048 bits or more;
/// returns whether the key is RSA.
fn check_key(key: &rcgen::PublicKey) -> Result<bool, Refusal> {
    use rcgen::PublicKeyData as _;
    let alg: &SignatureAlgorithm = key.algorithm();
    if [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ECDSA_P384_SHA384, &rcgen::PKCS_ED25519].contains(&alg) {
        return Ok(false);
    }
    if [&rcgen::PKCS_RSA_SHA256, &rcgen::PKCS_RSA_SHA384, &rcgen::PKCS_RSA_SHA512].contains(&alg) {
        // The DER RSAPublicKey of a 2048-bit key is 270 bytes.
        let raw = key.der_bytes().len();
        return if raw >= 266 { Ok(true) } else { Err(Refusal::Key(format!("RSA ({} bits or so)", (raw - 14) * 8))) };
    }
    Err(Refusal::Key(format!("{alg:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, KeyPair};
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

    fn run(pem: &str, lifetime: u32) -> Result<Approved, Refusal> {
        let config = config();
        check(pem, &config.clients[0], lifetime, &config)
    }

    #[test]
    fn approves_allowed_names_for_server_auth_only() {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let approved = run(&csr(&["localhost", "127.0.0.1"], |_| {}, &key), 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(approved.params.extended_key_usages, [ExtendedKeyUsagePurpose::ServerAuth]);
        assert_eq!(approved.params.is_ca, IsCa::ExplicitNoCa);
        assert_eq!(approved.params.subject_alt_names.len(), 2);
        assert_eq!(approved.lifetime, Duration::from_secs(3600));
    }

    #[rstest]
    #[case::default(0, 3600)]
    #[case::capped(10_000_000, 86400)]
    #[case::at_least_the_csr_api_minimum(60, 600)]
    #[case::as_asked(7200, 7200)]
    fn lifetimes(#[case] asked: u32, #[case] granted: u64) {
        assert_eq!(lifetime(asked, &config()), Duration::from_secs(granted));
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
        let subject = &approved.params.distinguished_name;
        assert_eq!(subject.get(&DnType::CommonName), Some(&DnValue::from("system:node:portcullis-injector")));
        assert_eq!(subject.get(&DnType::OrganizationName), Some(&DnValue::from("system:nodes")));
        let plain = run(&csr(&["localhost"], |_| {}, &key), 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain.params.distinguished_name.get(&DnType::CommonName), Some(&DnValue::from("localhost")));
    }

    #[test]
    fn accepts_ed25519_keys() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap_or_else(|e| panic!("{e}"));
        assert!(run(&csr(&["localhost"], |_| {}, &key), 0).is_ok());
    }
}
