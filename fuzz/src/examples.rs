//! The configurations and policies the project ships and tests with, read
//! at build time: the fuzz targets judge what users run.

use std::path::Path;
use std::sync::LazyLock;

use portcullis_injector::config::Config;
use portcullis_validator::policy::PolicySet;

/// `InjectorConfig` files: the base deployment's and the tests'.
pub const INJECTOR_CONFIGS: &[(&str, &[u8])] = &[
    ("deploy/base/policies/injector.yaml", include_bytes!("../../deploy/base/policies/injector.yaml")),
    ("services/injector/tests/data/config.yaml", include_bytes!("../../services/injector/tests/data/config.yaml")),
    (
        "services/injector/tests/data/cel-config.yaml",
        include_bytes!("../../services/injector/tests/data/cel-config.yaml"),
    ),
];

/// `ValidatorPolicy` files: the base deployment's and the tests'.
pub const POLICIES: &[(&str, &[u8])] = &[
    ("deploy/base/policies/validator.yaml", include_bytes!("../../deploy/base/policies/validator.yaml")),
    (
        "services/validator/tests/data/policies.yaml",
        include_bytes!("../../services/validator/tests/data/policies.yaml"),
    ),
];

/// The base deployment's `CertManagerConfig`.
pub const CERT_MANAGER_CONFIG: (&str, &[u8]) =
    ("deploy/base/config/cert-manager.yaml", include_bytes!("../../deploy/base/config/cert-manager.yaml"));

/// Each shipped injector configuration, parsed.
pub static INJECTORS: LazyLock<Vec<Config>> = LazyLock::new(|| {
    INJECTOR_CONFIGS
        .iter()
        .map(|(path, bytes)| {
            Config::from_sources([(Path::new(path), *bytes)]).unwrap_or_else(|e| panic!("{path}: {e}"))
        })
        .collect()
});

/// Each shipped policy file, parsed.
pub static POLICY_SETS: LazyLock<Vec<PolicySet>> = LazyLock::new(|| {
    POLICIES
        .iter()
        .map(|(path, bytes)| {
            PolicySet::from_sources([(Path::new(path), *bytes)], portcullis_cel::cost::DEFAULT_LIMIT)
                .unwrap_or_else(|e| panic!("{path}: {e}"))
        })
        .collect()
});

/// The shipped cert-manager configuration, parsed.
pub static CERT_MANAGER: LazyLock<portcullis_cert_manager::config::Config> = LazyLock::new(|| {
    let (path, bytes) = CERT_MANAGER_CONFIG;
    portcullis_cert_manager::config::Config::from_sources([(Path::new(path), bytes)])
        .unwrap_or_else(|e| panic!("{path}: {e}"))
});
