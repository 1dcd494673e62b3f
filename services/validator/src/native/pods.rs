//! The built-in rules on a pod (`images`, `resources`, `podSecurity`) as
//! the CEL a pushed-down policy carries. Variables find the pod spec of a Pod,
//! a workload's template or a CronJob's job template (as
//! [`crate::pods::pod_spec`] does) and its containers in the webhook's
//! order; each rule is one validation whose message is the webhook's first
//! finding for it. The place of the first offending container is found
//! with `indexOf` only in the message, which is evaluated only when the
//! check fails, so that the check itself stays linear in the containers.

use k8s_openapi::api::admissionregistration::v1 as reg;

use super::builtin::{Dynamic, lit, quoted, validation};
use crate::pods::POD_SPECS;
use crate::rules::{Images, PodSecurity, Resources, Rules};

const POD_SPEC: &str = "portcullisPodSpec";
const POD_PATH: &str = "portcullisPodPath";
const INIT: &str = "portcullisInitContainers";
const REGULAR: &str = "portcullisContainers";
const EPHEMERAL: &str = "portcullisEphemeralContainers";
const BAD_IMAGES: &str = "portcullisBadImages";
const LACKING: &str = "portcullisLackingResources";
const HOST_NAMESPACES: &str = "portcullisHostNamespaces";
const HOST_PATHS: &str = "portcullisHostPathVolumes";
const INSECURE: &str = "portcullisInsecureContainers";

/// Characters Rust's `char::is_whitespace` takes for white space, as an
/// RE2 class (whose `\s` lacks `\v`, U+0085 and the Unicode spaces).
const WHITE_SPACE: &str = r"[\t\n\x0B\f\r\x{85}\p{Z}]";

/// The variables and validations of the pod rules in `rules`, in the
/// webhook's order (images, resources, pod security).
pub(super) fn as_cel(rules: &Rules) -> (Vec<reg::Variable>, Vec<reg::Validation>) {
    let images = rules.images.as_ref().map(images);
    let resources = rules.resources.as_ref().and_then(resources);
    let security = rules.pod_security.as_ref().and_then(pod_security);
    if images.is_none() && resources.is_none() && security.is_none() {
        return (Vec::new(), Vec::new());
    }
    let mut variables = containers();
    let mut validations = Vec::new();
    for (more, check) in [images, resources, security].into_iter().flatten() {
        variables.extend(more);
        validations.push(check);
    }
    (variables, validations)
}

/// The pod spec (or an empty map: `has()` guards every step, as the
/// webhook finds no spec where a step is missing), where messages say it
/// is, and its three lists of containers.
fn containers() -> Vec<reg::Variable> {
    let (mut spec, mut path) = ("{}".to_owned(), "''".to_owned());
    for (kind, shown, at) in POD_SPECS.iter().rev() {
        let guard: Vec<String> = (1..=at.len()).map(|depth| format!("has(object.{})", at[..depth].join("."))).collect();
        let condition = format!("request.kind.kind == {} && {}", lit(kind), guard.join(" && "));
        spec = format!("{condition} ? object.{} : {spec}", at.join("."));
        path = format!("request.kind.kind == {} ? {} : {path}", lit(kind), lit(shown));
    }
    let pod = format!("variables.{POD_SPEC}");
    let list = |field: &str| format!("has({pod}.{field}) ? {pod}.{field} : []");
    let variable = |name: &str, expression: String| reg::Variable { name: name.into(), expression };
    vec![
        variable(POD_SPEC, spec),
        variable(POD_PATH, path),
        variable(INIT, list("initContainers")),
        variable(REGULAR, list("containers")),
        variable(EPHEMERAL, list("ephemeralContainers")),
    ]
}

/// How the webhook names the container `c`, found at `i` in `lists`
/// (joined): `spec.template.spec.containers[1] (side)`.
fn named(c: &str, i: &str, lists: &[(&str, &str)]) -> String {
    let mut place = String::new();
    let mut before: Vec<String> = Vec::new();
    for (n, (variable, field)) in lists.iter().enumerate() {
        let offset = if before.is_empty() { String::new() } else { format!(" - ({})", before.join(" + ")) };
        let here = format!("'.{field}[' + string({i}{offset})");
        before.push(format!("size(variables.{variable})"));
        place = if n + 1 == lists.len() {
            format!("{place}{here}{}", ")".repeat(n))
        } else {
            format!("{place}{i} < {} ? {here} : (", before.join(" + "))
        };
    }
    format!("variables.{POD_PATH} + ({place}) + '] (' + (has({c}.name) ? {c}.name : '?') + ')'")
}

/// The joined lists, as CEL.
fn joined(lists: &[(&str, &str)]) -> String {
    let parts: Vec<String> = lists.iter().map(|(variable, _)| format!("variables.{variable}")).collect();
    format!("({})", parts.join(" + "))
}

/// `spec.rules.resources`: the first init or regular container lacking a
/// name, and the first name it lacks (requests, then limits, in order).
fn resources(rule: &Resources) -> Option<(Vec<reg::Variable>, reg::Validation)> {
    let required: Vec<(&str, &str)> = [("requests", &rule.requests), ("limits", &rule.limits)]
        .into_iter()
        .flat_map(|(kind, names)| names.iter().map(move |n| (kind, n.as_str())))
        .collect();
    if required.is_empty() {
        return None;
    }
    let lists = [(INIT, "initContainers"), (REGULAR, "containers")];
    let has = |c: &str, (kind, name): (&str, &str)| {
        format!("(has({c}.resources) && has({c}.resources.{kind}) && {} in {c}.resources.{kind})", lit(name))
    };
    let lacks_any = required.iter().map(|r| format!("!{}", has("c", *r))).collect::<Vec<_>>().join(" || ");
    let lacking =
        reg::Variable { name: LACKING.into(), expression: format!("{}.filter(c, {lacks_any})", joined(&lists)) };
    let c = format!("variables.{LACKING}[0]");
    let i = format!("{}.indexOf({c})", joined(&lists));
    let mut lacked = "''".to_owned();
    for r in required.iter().rev() {
        lacked = format!("!{} ? {} : {lacked}", has(&c, *r), lit(&format!("resources.{}.{}", r.0, r.1)));
    }
    let message = format!("{} + ': ' + ({lacked}) + ' is required'", named(&c, &i, &lists));
    Some((vec![lacking], validation(&format!("size(variables.{LACKING}) == 0"), Dynamic(message))))
}

/// `spec.rules.images`, read as [`portcullis_admission::image::parse`]
/// reads a reference: the first container (init, regular, ephemeral) whose
/// image breaks the rule, and its first finding (not a reference, not from
/// an allowed registry, latest or no tag, no digest).
fn images(rule: &Images) -> (Vec<reg::Variable>, reg::Validation) {
    let t = "@c.image";
    // The repository: a last path segment without `:` before any `@`.
    let valid = format!(
        "({t} != '' && !{t}.matches({}) && {t}.matches({}))",
        lit(WHITE_SPACE),
        lit(r"^([^@]*/)?[^/:@]+(:[^/@]*)?(@.*)?$")
    );
    let first = format!("{t}.split('/')[0]");
    let registry = format!(
        "({t}.matches({}) ? ({first} == 'index.docker.io' ? 'docker.io' : {first}) : 'docker.io')",
        lit(r"^([^/@]*[.:][^/@]*|localhost)/")
    );
    // A tag is what follows a `:` in the last segment, to the end or the
    // digest (a registry's port is not a tag).
    let tagged = format!("{t}.matches({})", lit(r"^([^@]*/)?[^/:@]+:[^/@]*(@.*)?$"));
    let latest = format!("{t}.matches({})", lit(r"^([^@]*/)?[^/:@]+:latest(@.*)?$"));
    let digest = format!("{t}.contains('@')");
    // Each finding: when it holds of `c.image`, and what the webhook says.
    let mut findings: Vec<(String, String)> = Vec::new();
    if !rule.allowed_registries.is_empty() {
        let allowed: Vec<String> = rule.allowed_registries.iter().map(|r| lit(r)).collect();
        let says = lit(&format!(" is not from an allowed registry ({})", rule.allowed_registries.join(", ")));
        findings.push((format!("!({registry} in [{}])", allowed.join(", ")), format!("'image ' + {t} + {says}")));
    }
    if rule.forbid_latest {
        findings.push((latest.clone(), format!("'image ' + {t} + ' uses the latest tag'")));
        findings.push((format!("!{tagged} && !{digest}"), format!("'image ' + {t} + ' has no tag (it means latest)'")));
    }
    if rule.require_digest {
        findings.push((format!("!{digest}"), format!("'image ' + {t} + ' is not pinned by digest (@sha256:...)'")));
    }
    let any = findings.iter().map(|(holds, _)| holds.as_str()).collect::<Vec<_>>().join(" || ");
    let breaks = if any.is_empty() { format!("!{valid}") } else { format!("!{valid} || {any}") };
    let lists = [(INIT, "initContainers"), (REGULAR, "containers"), (EPHEMERAL, "ephemeralContainers")];
    let bad = reg::Variable {
        name: BAD_IMAGES.into(),
        expression: format!("{}.filter(c, has(c.image) && ({}))", joined(&lists), breaks.replace("@c", "c")),
    };
    let c = format!("variables.{BAD_IMAGES}[0]");
    let on_c = |cel: &str| cel.replace("@c", &c);
    let invalid = format!("'image ' + {} + ' is not a valid image reference'", quoted(&format!("{c}.image")));
    let mut said = invalid.clone();
    for (holds, says) in findings.iter().rev() {
        said = format!("{} ? {} : {said}", on_c(holds), on_c(says));
    }
    said = format!("!{} ? {invalid} : {said}", on_c(&valid));
    let i = format!("{}.indexOf({c})", joined(&lists));
    let message = format!("{} + ': ' + ({said})", named(&c, &i, &lists));
    (vec![bad], validation(&format!("size(variables.{BAD_IMAGES}) == 0"), Dynamic(message)))
}

/// `spec.rules.podSecurity`: the host namespaces in use (hostNetwork,
/// hostPID, hostIPC), then the first hostPath volume, then the first
/// container (init, regular, ephemeral) that is privileged, adds a
/// capability not allowed (the first such), or may run as root (neither
/// it nor the pod says `runAsNonRoot: true`), in that order.
fn pod_security(rule: &PodSecurity) -> Option<(Vec<reg::Variable>, reg::Validation)> {
    let pod = format!("variables.{POD_SPEC}");
    let (mut variables, mut checks, mut says) = (Vec::new(), Vec::new(), Vec::new());
    let flag = |at: &str, field: &str| format!("(has({at}.{field}) && {at}.{field} == true)");
    if rule.forbid_host_namespaces {
        let used: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
            .iter()
            .map(|f| format!("({} ? [{}] : [])", flag(&pod, f), lit(f)))
            .collect();
        variables.push(reg::Variable { name: HOST_NAMESPACES.into(), expression: used.join(" + ") });
        checks.push(format!("size(variables.{HOST_NAMESPACES}) == 0"));
        says.push((
            format!("size(variables.{HOST_NAMESPACES}) > 0"),
            format!("variables.{POD_PATH} + '.' + variables.{HOST_NAMESPACES}[0] + ' is true'"),
        ));
    }
    if rule.forbid_host_path {
        let volumes = format!("(has({pod}.volumes) ? {pod}.volumes : [])");
        variables.push(reg::Variable {
            name: HOST_PATHS.into(),
            expression: format!("{volumes}.filter(v, has(v.hostPath))"),
        });
        checks.push(format!("size(variables.{HOST_PATHS}) == 0"));
        let v = format!("variables.{HOST_PATHS}[0]");
        says.push((
            format!("size(variables.{HOST_PATHS}) > 0"),
            format!(
                "variables.{POD_PATH} + '.volumes[' + string({volumes}.indexOf({v})) + '] (' + (has({v}.name) ? {v}.name : '?') + \
                 '): hostPath volumes are not allowed'"
            ),
        ));
    }
    // Each container finding: when it holds of the container `@c`, and
    // what it says.
    let context = "@c.securityContext";
    let mut findings: Vec<(String, String)> = Vec::new();
    if rule.forbid_privileged {
        findings.push((
            format!("(has({context}) && {})", flag(context, "privileged")),
            "'securityContext.privileged is true'".into(),
        ));
    }
    if let Some(allowed) = &rule.allowed_capabilities {
        let allowed_list = allowed.iter().map(|a| lit(a)).collect::<Vec<_>>().join(", ");
        let added = format!("{context}.capabilities.add");
        let has_added = format!("has({context}) && has({context}.capabilities) && has({added})");
        let shown = if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") };
        findings.push((
            format!("({has_added} && {added}.exists(a, !(a in [{allowed_list}])))"),
            format!(
                "'capability ' + {added}.filter(a, !(a in [{allowed_list}]))[0] + {}",
                lit(&format!(" may not be added (allowed: {shown})"))
            ),
        ));
    }
    if rule.require_run_as_non_root {
        let own = format!("has({context}) && has({context}.runAsNonRoot)");
        let pods = format!("has({pod}.securityContext) && has({pod}.securityContext.runAsNonRoot)");
        findings.push((
            format!(
                "(({own}) ? {context}.runAsNonRoot : (({pods}) ? {pod}.securityContext.runAsNonRoot : false)) != true"
            ),
            "'runAsNonRoot must be true (on the container or in the pod securityContext)'".into(),
        ));
    }
    if !findings.is_empty() {
        let lists = [(INIT, "initContainers"), (REGULAR, "containers"), (EPHEMERAL, "ephemeralContainers")];
        let any = findings.iter().map(|(holds, _)| holds.as_str()).collect::<Vec<_>>().join(" || ");
        let filter = format!("{}.filter(c, {})", joined(&lists), any.replace("@c", "c"));
        variables.push(reg::Variable { name: INSECURE.into(), expression: filter });
        checks.push(format!("size(variables.{INSECURE}) == 0"));
        let c = format!("variables.{INSECURE}[0]");
        let on_c = |cel: &str| cel.replace("@c", &c);
        let mut said = "''".to_owned();
        for (holds, message) in findings.iter().rev() {
            said = format!("{} ? {} : {said}", on_c(holds), on_c(message));
        }
        let i = format!("{}.indexOf({c})", joined(&lists));
        says.push((format!("size(variables.{INSECURE}) > 0"), format!("{} + ': ' + ({said})", named(&c, &i, &lists))));
    }
    if checks.is_empty() {
        return None;
    }
    let mut message = "''".to_owned();
    for (holds, said) in says.iter().rev() {
        message = format!("{holds} ? {said} : {message}");
    }
    Some((variables, validation(&checks.join(" && "), Dynamic(message))))
}
