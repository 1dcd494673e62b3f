//! Properties that hold for every input, checked on generated cases
//! (proptest): patches by diff apply to exactly the target, image
//! references normalise as the container runtime does, and label selectors
//! match as Kubernetes' own selector implementation does.

use kube::core::{Selector, SelectorExt};
use portcullis_admission::image;
use portcullis_admission::patch;
use portcullis_admission::selector::{LabelSelector, Operator, Requirement};
use portcullis_test_support::rfc6902;
use proptest::prelude::*;
use serde_json::Value;

/// JSON whose keys overlap between two draws and need escaping in a JSON
/// Pointer (`/`, `~`), so that diffs meet moved, nested and escaped keys.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        "[ab/~]{0,3}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[ab/~01\"\\\\\n]{0,2}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_patch_by_diff_gives_exactly_the_target(original in json(), target in json()) {
        let mut patched = original.clone();
        if let Some(written) = patch::diff(&original, &target) {
            let patch: Value = serde_json::from_slice(written.as_bytes()).unwrap();
            prop_assert_eq!(patch.as_array().map(Vec::len), Some(written.operations()));
            rfc6902::apply(&mut patched, &patch).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        prop_assert_eq!(patched, target);
    }

    #[test]
    fn equal_objects_have_no_patch(object in json()) {
        prop_assert!(patch::diff(&object, &object.clone()).is_none());
    }

    #[test]
    fn the_patch_has_the_operations_json_patch_computes(original in json(), target in json()) {
        let ours: Value = patch::diff(&original, &target)
            .map(|p| serde_json::from_slice(p.as_bytes()).unwrap())
            .unwrap_or_else(|| Value::Array(Vec::new()));
        prop_assert_eq!(ours, serde_json::to_value(json_patch::diff(&original, &target)).unwrap());
    }
}

/// A reference as users write it, with the repository the runtime pulls,
/// its tag and its digest.
fn image_reference() -> impl Strategy<Value = (String, String, Option<String>, Option<String>)> {
    let registry = prop::sample::select(vec![
        None,
        Some("docker.io"),
        Some("index.docker.io"),
        Some("localhost"),
        Some("localhost:5000"),
        Some("registry.local:5000"),
        Some("quay.io"),
        Some("mirror.example.internal"),
    ]);
    // A first component with a dot would be a registry's host name.
    let first = "[a-z0-9]{1,6}([_-][a-z0-9]{1,3})?";
    let path = (first, prop::collection::vec("[a-z0-9]{1,6}([._-][a-z0-9]{1,3})?", 0..3));
    let tag = prop::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}");
    let digest = prop::option::of("[0-9a-f]{8}".prop_map(|hex| format!("sha256:{hex}")));
    (registry, path, tag, digest).prop_map(|(registry, (first, rest), tag, digest)| {
        let path = [first].into_iter().chain(rest).collect::<Vec<_>>().join("/");
        let repository = match registry {
            None | Some("docker.io" | "index.docker.io") if !path.contains('/') => format!("docker.io/library/{path}"),
            None | Some("docker.io" | "index.docker.io") => format!("docker.io/{path}"),
            Some(registry) => format!("{registry}/{path}"),
        };
        let mut image = registry.map_or_else(|| path.clone(), |registry| format!("{registry}/{path}"));
        if let Some(tag) = &tag {
            image = format!("{image}:{tag}");
        }
        if let Some(digest) = &digest {
            image = format!("{image}@{digest}");
        }
        (image, repository, tag, digest)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn image_references_normalise_as_the_runtime_does((image, repository, tag, digest) in image_reference()) {
        let parsed = image::parse(&image).unwrap();
        prop_assert_eq!(&parsed.name, &repository, "{}", image);
        prop_assert_eq!(parsed.tag(), tag.as_deref());
        prop_assert_eq!(parsed.digest(), digest.as_deref());
        prop_assert!(image.ends_with(parsed.suffix));
        // The normalised name is a fixed point.
        let again = format!("{}{}", parsed.name, parsed.suffix);
        prop_assert_eq!(image::parse(&again).unwrap().name, repository);
    }
}

fn requirement() -> impl Strategy<Value = Requirement> {
    let operator = prop::sample::select(vec![Operator::In, Operator::NotIn, Operator::Exists, Operator::DoesNotExist]);
    (operator, "[abc]", prop::collection::vec("[xyz]", 1..3)).prop_map(|(operator, key, values)| {
        let values = if matches!(operator, Operator::In | Operator::NotIn) { values } else { Vec::new() };
        Requirement { key, operator, values }
    })
}

fn selector() -> impl Strategy<Value = LabelSelector> {
    (prop::collection::btree_map("[abc]", "[xyz]", 0..3), prop::collection::vec(requirement(), 0..4))
        .prop_map(|(match_labels, match_expressions)| LabelSelector { match_labels, match_expressions })
}

/// The same selector as Kubernetes' API type, for kube-core's own
/// implementation of the apimachinery semantics.
fn as_kubernetes(selector: &LabelSelector) -> Selector {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    let expressions = selector.match_expressions.iter().map(|r| meta::LabelSelectorRequirement {
        key: r.key.clone(),
        operator: format!("{:?}", r.operator),
        values: (!r.values.is_empty()).then(|| r.values.clone()),
    });
    let selector = meta::LabelSelector {
        match_labels: Some(selector.match_labels.clone()),
        match_expressions: Some(expressions.collect()),
    };
    Selector::try_from(selector).expect("a selector the strategy made valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn label_selectors_match_as_kubernetes_does(
        selector in selector(),
        labels in prop::collection::btree_map("[abcd]", "[xyzw]", 0..4),
    ) {
        prop_assert!(selector.check().is_ok());
        let ours = selector.matches(|key| labels.get(key).map(String::as_str));
        let kubernetes = as_kubernetes(&selector).matches(&labels);
        prop_assert_eq!(ours, kubernetes, "{:?} on {:?}", selector, labels);
    }
}
