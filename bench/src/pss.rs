//! The Pod Security Standards' restricted profile as a set of 17 policies,
//! one check each, as Kyverno's scaling page measures it (its
//! `pod-security` set: 11 baseline checks and 6 restricted ones), and a pod
//! that passes every one of them. The same checks are given to Portcullis'
//! validator as `ValidatorPolicy` objects, to the API server as
//! hand-written ValidatingAdmissionPolicies, and to `portcullis-validator
//! vap` to be pushed down; Kubernetes' own `PodSecurity` admission at
//! `restricted` is what they are measured against.

use serde_json::{Value, json};

use crate::fixtures;

/// Every container of the pod: regular, init and ephemeral, as the Pod
/// Security Standards check them.
const ALL_CONTAINERS: &str = "object.spec.containers \
    + (has(object.spec.initContainers) ? object.spec.initContainers : []) \
    + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])";

/// One check of the profile: its name (Kyverno's policy name), its
/// expression over `object` (and those of the set's variables it reads:
/// `allContainers`, `windows`, `userNamespace`, `podSeccompAllowed`) and
/// its message.
pub(crate) struct Check {
    pub name: &'static str,
    pub expression: &'static str,
    pub message: &'static str,
}

/// The 17 checks: the baseline profile's 11, then the restricted profile's 6,
/// as Kubernetes' `pod-security-admission` (1.36) judges at `restricted`,
/// latest: where Kyverno's set differs from it (a pod-level
/// `runAsNonRoot: false`, an empty AppArmor annotation, the sysctls and
/// volume types added since 1.27, Windows pods and user namespaces, which
/// skip some checks), these follow the built-in admission. Like Kyverno's,
/// the set has no check of probe and lifecycle hosts (baseline since 1.34).
pub(crate) const CHECKS: [Check; 17] = [
    Check {
        name: "disallow-capabilities",
        expression: "variables.windows || variables.allContainers.all(c, !has(c.securityContext) \
            || !has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) \
            || c.securityContext.capabilities.add.all(a, a in \
            ['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', \
            'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT']))",
        message: "Any capabilities added beyond the baseline list are disallowed.",
    },
    Check {
        name: "disallow-host-namespaces",
        expression: "(!has(object.spec.hostNetwork) || !object.spec.hostNetwork) \
            && (!has(object.spec.hostPID) || !object.spec.hostPID) \
            && (!has(object.spec.hostIPC) || !object.spec.hostIPC)",
        message: "Sharing the host namespaces is disallowed.",
    },
    Check {
        name: "disallow-host-path",
        expression: "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
        message: "HostPath volumes are forbidden.",
    },
    Check {
        name: "disallow-host-ports",
        expression: "variables.allContainers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
        message: "Use of host ports is disallowed.",
    },
    Check {
        name: "disallow-host-process",
        expression: "(!has(object.spec.securityContext) || !has(object.spec.securityContext.windowsOptions) \
            || !has(object.spec.securityContext.windowsOptions.hostProcess) \
            || !object.spec.securityContext.windowsOptions.hostProcess) \
            && variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.windowsOptions) \
            || !has(c.securityContext.windowsOptions.hostProcess) || !c.securityContext.windowsOptions.hostProcess)",
        message: "HostProcess containers are disallowed.",
    },
    Check {
        name: "disallow-privileged-containers",
        expression: "variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) \
            || !c.securityContext.privileged)",
        message: "Privileged mode is disallowed.",
    },
    Check {
        name: "disallow-proc-mount",
        expression: "variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.procMount) \
            || c.securityContext.procMount == 'Default')",
        message: "Changing the proc mount from the default is not allowed.",
    },
    Check {
        name: "disallow-selinux",
        expression: "(!has(object.spec.securityContext) || !has(object.spec.securityContext.seLinuxOptions) \
            || ((!has(object.spec.securityContext.seLinuxOptions.type) \
                || object.spec.securityContext.seLinuxOptions.type in \
                ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']) \
              && (!has(object.spec.securityContext.seLinuxOptions.user) \
                || object.spec.securityContext.seLinuxOptions.user == '') \
              && (!has(object.spec.securityContext.seLinuxOptions.role) \
                || object.spec.securityContext.seLinuxOptions.role == ''))) \
            && variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.seLinuxOptions) \
              || ((!has(c.securityContext.seLinuxOptions.type) || c.securityContext.seLinuxOptions.type in \
                ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']) \
              && (!has(c.securityContext.seLinuxOptions.user) || c.securityContext.seLinuxOptions.user == '') \
              && (!has(c.securityContext.seLinuxOptions.role) || c.securityContext.seLinuxOptions.role == '')))",
        message: "Setting the SELinux user or role is forbidden; the type must be one of the container types.",
    },
    Check {
        name: "restrict-apparmor-profiles",
        expression: "(!has(object.spec.securityContext) || !has(object.spec.securityContext.appArmorProfile) \
            || object.spec.securityContext.appArmorProfile.type in ['RuntimeDefault', 'Localhost']) \
            && variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.appArmorProfile) \
              || c.securityContext.appArmorProfile.type in ['RuntimeDefault', 'Localhost']) \
            && (!has(object.metadata.annotations) || object.metadata.annotations.all(k, \
              !k.startsWith('container.apparmor.security.beta.kubernetes.io/') \
              || object.metadata.annotations[k] in ['', 'runtime/default'] \
              || object.metadata.annotations[k].startsWith('localhost/')))",
        message: "AppArmor profiles other than RuntimeDefault and Localhost are forbidden.",
    },
    Check {
        name: "restrict-seccomp",
        expression: "variables.windows || (!has(object.spec.securityContext) \
            || !has(object.spec.securityContext.seccompProfile) \
            || object.spec.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost']) \
            && variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.seccompProfile) \
              || c.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost'])",
        message: "Seccomp profiles other than RuntimeDefault and Localhost are forbidden.",
    },
    Check {
        name: "restrict-sysctls",
        expression: "!has(object.spec.securityContext) || !has(object.spec.securityContext.sysctls) \
            || object.spec.securityContext.sysctls.all(s, s.name in ['kernel.shm_rmid_forced', \
            'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start', 'net.ipv4.tcp_syncookies', \
            'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time', \
            'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes', \
            'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'])",
        message: "Setting sysctls other than the safe ones is forbidden.",
    },
    Check {
        name: "disallow-capabilities-strict",
        expression: "variables.windows || variables.allContainers.all(c, has(c.securityContext) \
            && has(c.securityContext.capabilities) && has(c.securityContext.capabilities.drop) && 'ALL' in c.securityContext.capabilities.drop \
            && (!has(c.securityContext.capabilities.add) \
              || c.securityContext.capabilities.add.all(a, a == 'NET_BIND_SERVICE')))",
        message: "Containers must drop ALL capabilities and may add only NET_BIND_SERVICE.",
    },
    Check {
        name: "disallow-privilege-escalation",
        expression: "variables.windows || variables.allContainers.all(c, has(c.securityContext) \
            && has(c.securityContext.allowPrivilegeEscalation) && !c.securityContext.allowPrivilegeEscalation)",
        message: "Privilege escalation is disallowed: allowPrivilegeEscalation must be false.",
    },
    Check {
        name: "require-run-as-non-root-user",
        expression: "variables.userNamespace || (!has(object.spec.securityContext) \
            || !has(object.spec.securityContext.runAsUser) || object.spec.securityContext.runAsUser != 0) \
            && variables.allContainers.all(c, !has(c.securityContext) || !has(c.securityContext.runAsUser) \
              || c.securityContext.runAsUser != 0)",
        message: "Running as root (runAsUser 0) is not allowed.",
    },
    Check {
        name: "require-run-as-nonroot",
        expression: "variables.userNamespace || (!has(object.spec.securityContext) \
            || !has(object.spec.securityContext.runAsNonRoot) || object.spec.securityContext.runAsNonRoot) \
            && variables.allContainers.all(c, has(c.securityContext) && has(c.securityContext.runAsNonRoot) \
            ? c.securityContext.runAsNonRoot \
            : has(object.spec.securityContext) && has(object.spec.securityContext.runAsNonRoot) \
              && object.spec.securityContext.runAsNonRoot)",
        message: "Running as root is not allowed: runAsNonRoot must be true.",
    },
    Check {
        name: "restrict-seccomp-strict",
        expression: "variables.windows || variables.allContainers.all(c, has(c.securityContext) \
            && has(c.securityContext.seccompProfile) \
            ? c.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost'] \
            : variables.podSeccompAllowed)",
        message: "The seccomp profile must be RuntimeDefault or Localhost.",
    },
    Check {
        name: "restrict-volume-types",
        expression: "!has(object.spec.volumes) || object.spec.volumes.all(v, has(v.configMap) || has(v.csi) \
            || has(v.downwardAPI) || has(v.emptyDir) || has(v.ephemeral) || has(v.persistentVolumeClaim) \
            || has(v.projected) || has(v.secret) || has(v.image))",
        message: "Only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, projected \
            and secret volumes are allowed.",
    },
];

/// The label a pod carries to say which webhook replica judges it (three
/// webhooks, one per replica, each selecting one value): the API server's
/// calls spread evenly over the replicas, as a Service spreads them over
/// connections.
pub(crate) const SHARD_LABEL: &str = "bench.portcullis.dev/shard";

/// A pod that passes the restricted profile (Kyverno's load test's pod):
/// the benchmark pod ([`fixtures::pod`], `containers` containers) without
/// ports, environment, annotations or restart policy, hardened, labelled
/// for replica `shard`.
pub(crate) fn pod(containers: usize, shard: usize) -> Value {
    let mut pod = fixtures::pod(containers);
    pod["metadata"] = json!({"generateName": "pss-", "labels": {"app": "web", SHARD_LABEL: shard.to_string()}});
    let spec = &mut pod["spec"];
    spec["terminationGracePeriodSeconds"] = json!(0);
    spec["securityContext"] =
        json!({"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}});
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("restartPolicy");
    }
    for container in spec["containers"].as_array_mut().into_iter().flatten() {
        if let Some(container) = container.as_object_mut() {
            container.remove("ports");
            container.remove("env");
            let hardened = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
            container.insert("securityContext".to_owned(), hardened);
        }
    }
    pod
}

/// The same pod with a privileged container: what every enforcement of
/// the profile denies.
pub(crate) fn privileged_pod(containers: usize) -> Value {
    let mut pod = pod(containers, 0);
    // Privileged implies privilege escalation: the API server refuses the pair otherwise.
    pod["spec"]["containers"][0]["securityContext"] = json!({"privileged": true, "capabilities": {"drop": ["ALL"]}});
    pod
}

/// What a pod's own seccomp profile allows its containers to inherit: a
/// variable, so that it is judged once and not once per container.
const POD_SECCOMP_ALLOWED: &str = "has(object.spec.securityContext) && has(object.spec.securityContext.seccompProfile) \
    && object.spec.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost']";

/// The variables `expression` reads, of those the set shares (each policy
/// declares only its own, as Kyverno's do).
fn variables(expression: &str) -> Value {
    let shared = [
        ("allContainers", ALL_CONTAINERS),
        ("windows", "has(object.spec.os) && has(object.spec.os.name) && object.spec.os.name == 'windows'"),
        ("userNamespace", "has(object.spec.hostUsers) && !object.spec.hostUsers"),
        ("podSeccompAllowed", POD_SECCOMP_ALLOWED),
    ];
    shared
        .iter()
        .filter(|(name, _)| expression.contains(&format!("variables.{name}")))
        .map(|(name, definition)| json!({"name": name, "expression": definition}))
        .collect()
}

fn pod_rules() -> Value {
    json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}])
}

fn case_selector(case: &str) -> Value {
    json!({"matchLabels": {"e2e.portcullis.dev/case": case}})
}

/// The set as Portcullis `ValidatorPolicy` objects, named `pss-<check>`;
/// with a `case`, each matches only the namespaces labelled for it (what
/// `portcullis-validator vap` turns into the binding's selector).
pub(crate) fn validator_policies(case: Option<&str>) -> Vec<Value> {
    CHECKS
        .iter()
        .map(|check| {
            let mut matching =
                json!({"resources": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]});
            if let Some(case) = case {
                matching["namespaceSelector"] = case_selector(case);
            }
            json!({
                "apiVersion": "portcullis.dev/v1alpha1", "kind": "ValidatorPolicy",
                "metadata": {"name": format!("pss-{}", check.name)},
                "spec": {
                    "failurePolicy": "Fail", "match": matching, "variables": variables(check.expression),
                    "validations": [{"expression": check.expression, "message": check.message}],
                },
            })
        })
        .collect()
}

/// The set as hand-written ValidatingAdmissionPolicies with Deny bindings
/// for the namespaces labelled `e2e.portcullis.dev/case: case`.
pub(crate) fn admission_policies(case: &str) -> Vec<Value> {
    CHECKS
        .iter()
        .flat_map(|check| {
            let name = format!("{case}-{}", check.name);
            [
                json!({
                    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                    "metadata": {"name": name},
                    "spec": {
                        "failurePolicy": "Fail", "matchConstraints": {"resourceRules": pod_rules()},
                        "variables": variables(check.expression),
                        "validations": [{"expression": check.expression, "message": check.message}],
                    },
                }),
                json!({
                    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": name},
                    "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": case_selector(case)}},
                }),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use serde_json::json;

    /// `portcullis-validator check` on the set (its own load-time checks,
    /// the CEL cost estimate among them) and on `pod`: whether it passed,
    /// and what it printed.
    fn check(pod: &serde_json::Value) -> (bool, String) {
        let dir = tempfile::tempdir().unwrap();
        for policy in super::validator_policies(None) {
            let name = policy["metadata"]["name"].as_str().unwrap().to_owned();
            std::fs::write(dir.path().join(format!("{name}.json")), policy.to_string()).unwrap();
        }
        let mut pod = pod.clone();
        pod["metadata"]["name"] = json!("web");
        pod["metadata"]["namespace"] = json!("team-a");
        std::fs::write(dir.path().join("pod.json.in"), pod.to_string()).unwrap();
        let out = Command::new(portcullis_e2e::binaries().join("portcullis-validator"))
            .args(["check", "--policy"])
            .arg(dir.path())
            .arg("-f")
            .arg(dir.path().join("pod.json.in"))
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    #[test]
    fn the_restricted_pod_passes_every_check() {
        let (passed, text) = check(&super::pod(2, 1));
        assert!(passed, "{text}");
    }

    #[test]
    fn each_check_denies_what_it_is_about() {
        let breaking = [
            ("disallow-capabilities", "/spec/containers/0/securityContext/capabilities/add", json!(["SYS_ADMIN"])),
            ("disallow-host-namespaces", "/spec/hostPID", json!(true)),
            ("disallow-host-path", "/spec/volumes", json!([{"name": "h", "hostPath": {"path": "/"}}])),
            ("disallow-host-ports", "/spec/containers/1/ports", json!([{"containerPort": 80, "hostPort": 80}])),
            ("disallow-host-process", "/spec/securityContext/windowsOptions", json!({"hostProcess": true})),
            ("disallow-privileged-containers", "/spec/containers/0/securityContext/privileged", json!(true)),
            ("disallow-proc-mount", "/spec/containers/0/securityContext/procMount", json!("Unmasked")),
            ("disallow-selinux", "/spec/securityContext/seLinuxOptions", json!({"type": "spc_t"})),
            (
                "restrict-apparmor-profiles",
                "/metadata/annotations",
                json!({"container.apparmor.security.beta.kubernetes.io/app-0": "unconfined"}),
            ),
            ("restrict-seccomp", "/spec/containers/1/securityContext/seccompProfile", json!({"type": "Unconfined"})),
            ("restrict-sysctls", "/spec/securityContext/sysctls", json!([{"name": "kernel.msgmax", "value": "1"}])),
            ("disallow-capabilities-strict", "/spec/containers/1/securityContext/capabilities/drop", json!([])),
            (
                "disallow-privilege-escalation",
                "/spec/containers/0/securityContext/allowPrivilegeEscalation",
                json!(true),
            ),
            ("require-run-as-non-root-user", "/spec/containers/0/securityContext/runAsUser", json!(0)),
            ("require-run-as-nonroot", "/spec/containers/1/securityContext/runAsNonRoot", json!(false)),
            ("restrict-seccomp-strict", "/spec/securityContext", json!({"runAsNonRoot": true})),
            ("restrict-volume-types", "/spec/volumes", json!([{"name": "n", "nfs": {"server": "s", "path": "/"}}])),
        ];
        assert_eq!(breaking.len(), super::CHECKS.len());
        for (name, path, value) in breaking {
            let mut pod = super::pod(2, 0);
            json_patch::patch(
                &mut pod,
                &serde_json::from_value::<json_patch::Patch>(json!([{"op": "add", "path": path, "value": value}]))
                    .unwrap(),
            )
            .unwrap();
            let (passed, text) = check(&pod);
            assert!(!passed && text.contains(&format!("[pss-{name}]")), "{name}: {text}");
        }
    }
}
