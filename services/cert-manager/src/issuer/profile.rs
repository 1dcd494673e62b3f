//! The one certificate profile: every leaf certificate, in either mode, is
//! built from its [`Grant`] here and nowhere else.

use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose};
use time::OffsetDateTime;

use super::{Grant, Usage};

/// Clocks of different machines disagree a little: a leaf is valid from
/// this long before it is signed.
pub const BACKDATE: time::Duration = time::Duration::minutes(5);

/// The leaf certificate of `grant`, signed at `now`: its subject and
/// names, its usages, never a CA, the issuer's key identifier, valid from
/// [`BACKDATE`] before `now` for the granted lifetime after it.
pub fn leaf(grant: &Grant, now: OffsetDateTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = grant.subject.clone();
    params.subject_alt_names = grant.names.clone();
    params.is_ca = IsCa::ExplicitNoCa;
    for usage in &grant.usages {
        match usage {
            Usage::DigitalSignature => params.key_usages.push(KeyUsagePurpose::DigitalSignature),
            Usage::KeyEncipherment => params.key_usages.push(KeyUsagePurpose::KeyEncipherment),
            Usage::ServerAuth => params.extended_key_usages.push(ExtendedKeyUsagePurpose::ServerAuth),
        }
    }
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - BACKDATE;
    params.not_after = now + grant.lifetime;
    params
}
