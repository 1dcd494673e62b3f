//! The cert-manager's checks on what a caller asks to have signed. Any DER
//! as a PKCS#10 request: a precise refusal or a grant, never a panic. Real
//! requests (made with rcgen) for arbitrary names, subjects, usages and
//! lifetimes: a grant holds only names and a subject the caller may have,
//! server authentication only, never a CA, within the maximum lifetime; and
//! a request that asks for nothing more than that is granted.

#![no_main]

use std::net::IpAddr;
use std::sync::LazyLock;
use std::time::Duration;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use portcullis_cert_manager::config::Client;
use portcullis_cert_manager::issuer::{check, profile};
use portcullis_fuzz::examples::CERT_MANAGER;
use rcgen::{CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType};

static KEY: LazyLock<KeyPair> = LazyLock::new(|| KeyPair::generate().unwrap_or_else(|e| panic!("{e}")));

fn pem(der: &[u8]) -> String {
    let body = der.chunks(48).map(|c| base64(c) + "\n").collect::<String>();
    format!("-----BEGIN CERTIFICATE REQUEST-----\n{body}-----END CERTIFICATE REQUEST-----\n")
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What the request asks for, and whether the caller may have all of it.
fn request(u: &mut Unstructured<'_>, client: &Client) -> Result<(CertificateParams, bool)> {
    let mut params = CertificateParams::default();
    // rcgen's default subject is a common name no caller may have.
    params.distinguished_name = DistinguishedName::new();
    let mut allowed = true;
    for _ in 0..u.int_in_range(0..=3)? {
        let san = match u.int_in_range(0..=3)? {
            0 => SanType::DnsName(u.choose(&client.dns_names)?.as_str().try_into().map_err(|_| arbitrary())?),
            1 => SanType::DnsName(u.arbitrary::<String>()?.try_into().map_err(|_| arbitrary())?),
            2 => SanType::IpAddress(IpAddr::from(u.arbitrary::<[u8; 4]>()?)),
            _ => SanType::URI(u.arbitrary::<String>()?.try_into().map_err(|_| arbitrary())?),
        };
        allowed &= may_have(client, &san);
        params.subject_alt_names.push(san);
    }
    allowed &= !params.subject_alt_names.is_empty();
    if u.ratio(1, 4)? {
        let (kind, value) = match u.int_in_range(0..=2)? {
            0 => (DnType::CommonName, u.choose(&client.dns_names)?.clone()),
            1 => (DnType::OrganizationName, u.arbitrary()?),
            _ => (DnType::CountryName, u.arbitrary()?),
        };
        allowed &= kind == DnType::CommonName;
        params.distinguished_name.push(kind, value);
    }
    if u.ratio(1, 8)? {
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        allowed = false;
    }
    if u.ratio(1, 8)? {
        let usage = u.choose(&[ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth])?;
        allowed &= *usage == ExtendedKeyUsagePurpose::ServerAuth;
        params.extended_key_usages.push(usage.clone());
    }
    Ok((params, allowed))
}

fn arbitrary() -> libfuzzer_sys::arbitrary::Error {
    libfuzzer_sys::arbitrary::Error::IncorrectFormat
}

fn may_have(client: &Client, san: &SanType) -> bool {
    match san {
        SanType::DnsName(name) => client.dns_names.iter().any(|d| d.eq_ignore_ascii_case(name.as_str())),
        SanType::IpAddress(ip) => client.ip_addresses.contains(ip),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let config = &*CERT_MANAGER;
    let mut u = Unstructured::new(data);
    let (Ok(client), Ok(seconds), Ok(raw)) = (u.choose(&config.clients), u.arbitrary::<u32>(), u.arbitrary::<bool>())
    else {
        return;
    };
    if raw {
        if let Ok(granted) = check(&pem(u.take_rest()), client, seconds, &config.lifetimes()) {
            assert!(granted.names.iter().all(|san| may_have(client, san)));
        }
        return;
    }
    let Ok((params, allowed)) = request(&mut u, client) else { return };
    let Ok(pem) = params.serialize_request(&*KEY).and_then(|r| r.pem()) else { return };
    match check(&pem, client, seconds, &config.lifetimes()) {
        Ok(granted) => {
            assert!(allowed, "granted what {} may not have: {:?}", client.identity, params);
            assert!(granted.names.iter().all(|san| may_have(client, san)));
            // What the one profile makes of it, in either mode.
            let leaf = profile::leaf(&granted, time::OffsetDateTime::UNIX_EPOCH);
            assert_eq!(leaf.is_ca, IsCa::ExplicitNoCa);
            assert_eq!(leaf.extended_key_usages, [ExtendedKeyUsagePurpose::ServerAuth]);
            assert!(granted.lifetime <= Duration::from_secs(config.max_lifetime_seconds));
        }
        Err(refusal) => assert!(!allowed, "refused an allowed request ({refusal}): {params:?}"),
    }
});
