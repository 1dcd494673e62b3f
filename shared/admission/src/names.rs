//! Every name users see, in one place: labels, annotations, the signer,
//! default namespace and Lease names. The services use these constants and
//! docs/names.md lists them; a test checks that the two agree.

/// The prefix of every label and annotation Portcullis reads or writes.
pub const PREFIX: &str = "portcullis.dev/";

/// `apiVersion` of the configuration documents (`InjectorConfig`,
/// `ValidatorPolicy`, `CertManagerConfig`).
pub const API_VERSION: &str = "portcullis.dev/v1alpha1";

/// Namespace label that opts a namespace's pods into injection (the shipped
/// MutatingWebhookConfiguration's `namespaceSelector`), with the value
/// [`INJECT_ENABLED`].
pub const INJECT_LABEL: &str = "portcullis.dev/inject";

/// The value of [`INJECT_LABEL`] that opts a namespace in.
pub const INJECT_ENABLED: &str = "enabled";

/// Pod annotation: with the value `"false"` the injector leaves the pod alone.
pub const INJECT_ANNOTATION: &str = "portcullis.dev/inject";

/// Pod annotation where the injector records what it did (JSON).
pub const STATUS_ANNOTATION: &str = "portcullis.dev/status";

/// Pod annotation: comma-separated template names that replace
/// `defaultTemplates` for the pod.
pub const TEMPLATES_ANNOTATION: &str = "portcullis.dev/templates";

/// Label selector of the webhook configurations whose `caBundle` the
/// cert-manager keeps current.
pub const INJECT_CA_SELECTOR: &str = "portcullis.dev/inject-ca=true";

/// The cert-manager's own CertificateSigningRequest signer.
pub const OWN_SIGNER: &str = "portcullis.dev/webhook-serving";

/// CSR annotation naming the service account a certificate was asked for.
pub const IDENTITY_ANNOTATION: &str = "portcullis.dev/identity";

/// CSR annotation carrying the W3C trace context of the request that
/// created it, so the signer's work joins the same trace.
pub const TRACEPARENT_ANNOTATION: &str = "portcullis.dev/traceparent";

/// Annotation on the CA Secret that asks the cert-manager to rotate the CA.
pub const ROTATE_ANNOTATION: &str = "portcullis.dev/rotate";

/// The namespace Portcullis runs in by default (`--portcullis-namespace`).
pub const DEFAULT_NAMESPACE: &str = "portcullis-system";

/// The Lease that elects the cert-manager replica that signs and keeps
/// `caBundle`s.
pub const CERT_MANAGER_LEASE: &str = "portcullis-cert-manager";

/// The Lease that elects the validator replica that audits.
pub const AUDIT_LEASE: &str = "portcullis-validator-audit";

/// The prefix of the native ValidatingAdmissionPolicy and binding that
/// `portcullis-validator vap` generates for a policy: `portcullis.NAME`.
pub const GENERATED_PREFIX: &str = "portcullis.";

/// The `app.kubernetes.io/managed-by` value of what Portcullis generates
/// and of the audit's reports.
pub const MANAGED_BY: &str = "portcullis-validator";

/// All of the above with their docs/names.md row names, for the check that
/// the page lists every one.
pub const ALL: [(&str, &str); 17] = [
    ("PREFIX", PREFIX),
    ("API_VERSION", API_VERSION),
    ("INJECT_LABEL", INJECT_LABEL),
    ("INJECT_ENABLED", INJECT_ENABLED),
    ("INJECT_ANNOTATION", INJECT_ANNOTATION),
    ("STATUS_ANNOTATION", STATUS_ANNOTATION),
    ("TEMPLATES_ANNOTATION", TEMPLATES_ANNOTATION),
    ("INJECT_CA_SELECTOR", INJECT_CA_SELECTOR),
    ("OWN_SIGNER", OWN_SIGNER),
    ("IDENTITY_ANNOTATION", IDENTITY_ANNOTATION),
    ("TRACEPARENT_ANNOTATION", TRACEPARENT_ANNOTATION),
    ("ROTATE_ANNOTATION", ROTATE_ANNOTATION),
    ("DEFAULT_NAMESPACE", DEFAULT_NAMESPACE),
    ("CERT_MANAGER_LEASE", CERT_MANAGER_LEASE),
    ("AUDIT_LEASE", AUDIT_LEASE),
    ("GENERATED_PREFIX", GENERATED_PREFIX),
    ("MANAGED_BY", MANAGED_BY),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_names_lists_every_name_and_nothing_else() {
        let page = include_str!("../../../docs/names.md");
        let rows: Vec<(&str, &str)> = page
            .lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                match cells.as_slice() {
                    ["", constant, value, ..] if constant.starts_with('`') && value.starts_with('`') => {
                        Some((constant.trim_matches('`'), value.trim_matches('`')))
                    }
                    _ => None,
                }
            })
            .collect();
        assert_eq!(rows, ALL.to_vec(), "docs/names.md and portcullis_admission::names differ");
        for (_, name) in
            ALL.iter().filter(|(constant, _)| constant.ends_with("ANNOTATION") || constant.ends_with("LABEL"))
        {
            assert!(name.starts_with(PREFIX), "{name}");
        }
    }
}
