//! 1,000 policies applied at once: every one becomes Ready, none is lost;
//! the load time and the validator's memory are printed for
//! docs/BENCHMARKS.md. Its own control plane: its validator is the only
//! replica reporting.

use std::time::Instant;

use portcullis_e2e::webhook::{Kind, Webhook};
use portcullis_e2e::{cluster, memory_kib, ok};

const POLICIES: usize = 1000;

#[tokio::test]
async fn a_thousand_policies_applied_at_once_all_become_ready() {
    cluster().install_kinds();
    let validator = Webhook::start_watching(Kind::Validator, &[]).await;
    let idle = memory_kib(validator.pid(), "VmRSS:");
    let documents: Vec<String> = (0..POLICIES)
        .map(|i| {
            format!(
                "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: scale-{i:04}, labels: {{e2e.portcullis.dev/scale: 'yes'}}}}\n\
                 spec:\n  action: Audit\n  match:\n    resources: [{{apiGroups: [''], resources: [configmaps]}}]\n\
                 \x20 validations:\n    - expression: \"!has(object.data) || !('key-{i}' in object.data)\"\n      message: no key-{i}\n"
            )
        })
        .collect();
    let started = Instant::now();
    ok(cluster().kubectl_stdin(&["apply", "--server-side", "-f", "-"], &documents.join("---\n")));
    let applied = started.elapsed();
    // Polled with one list: `kubectl wait` on 1,000 objects waits for them
    // one by one and measures itself more than the validator.
    let states = || {
        let out = ok(cluster().kubectl(&[
            "get",
            "validatorpolicy",
            "-l",
            "e2e.portcullis.dev/scale=yes",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[0].status}{\"\\n\"}{end}",
        ]));
        out.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    portcullis_e2e::eventually("every policy is Ready", std::time::Duration::from_secs(600), || {
        let states = states();
        (states.len() == POLICIES && states.iter().all(|s| s == "True")).then_some(())
    })
    .await;
    let ready = started.elapsed();
    assert_eq!(states().len(), POLICIES, "none is lost");
    let loaded = memory_kib(validator.pid(), "VmRSS:");
    println!(
        "{POLICIES} policies: applied in {applied:?}, all Ready {ready:?} after the apply began; \
         validator resident memory {idle} KiB before, {loaded} KiB with them ({} KiB more)",
        loaded.saturating_sub(idle)
    );
}
