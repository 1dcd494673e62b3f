//! Sidecar templates: taking a previous injection out and putting the
//! current one in, with name clashes resolved in the pod's favour.

use serde_json::Value;

use crate::config::{Template, object_name};
use crate::pod;
use crate::status::Status;

/// Removes exactly what `previous` says an earlier pass injected.
pub fn remove(spec: &mut Value, previous: &Status) {
    pod::retain(spec, "containers", |c| !previous.containers.iter().any(|n| n == object_name(c)));
    pod::retain(spec, "initContainers", |c| !previous.init_containers.iter().any(|n| n == object_name(c)));
    pod::retain(spec, "volumes", |v| !previous.volumes.iter().any(|n| n == object_name(v)));
    pod::retain(spec, "imagePullSecrets", |s| !previous.image_pull_secrets.iter().any(|n| n == object_name(s)));
    for (container, mounts) in &previous.volume_mounts {
        for list in ["containers", "initContainers"] {
            if let Some(c) = pod::find_mut(spec, list, container) {
                pod::retain(c, "volumeMounts", |m| !mounts.iter().any(|n| n == object_name(m)));
            }
        }
    }
}

/// Adds `template` to the pod spec, recording what it added in `status`.
/// Anything whose name is already taken in the pod is left out, with a
/// warning: the pod's own definition always wins.
pub fn apply(spec: &mut Value, template: &Template, status: &mut Status, warnings: &mut Vec<String>) {
    let t = template.name.as_str();
    // Container names are unique across the lists, including those this
    // template adds: a scan of a pod's few containers, not a set of copies.
    let taken = |spec: &Value, name: &str| pod::CONTAINER_LISTS.iter().any(|list| pod::has_named(spec, list, name));
    for container in &template.init_containers {
        let name = object_name(container);
        if taken(spec, name) {
            warnings.push(format!("portcullis: template {t}: container {name:?} already exists; not injected"));
            continue;
        }
        // Injected init containers go first, in template order, so that a
        // native sidecar is up before the pod's own init containers run.
        let at = status.init_containers.len();
        let list = pod::list_mut(spec, "initContainers");
        list.insert(at.min(list.len()), container.clone());
        status.init_containers.push(name.to_owned());
    }
    for container in &template.containers {
        let name = object_name(container);
        if taken(spec, name) {
            warnings.push(format!("portcullis: template {t}: container {name:?} already exists; not injected"));
            continue;
        }
        pod::list_mut(spec, "containers").push(container.clone());
        status.containers.push(name.to_owned());
    }
    for volume in &template.volumes {
        let name = object_name(volume);
        if pod::has_named(spec, "volumes", name) {
            warnings.push(format!("portcullis: template {t}: volume {name:?} already exists; not injected"));
            continue;
        }
        pod::list_mut(spec, "volumes").push(volume.clone());
        status.volumes.push(name.to_owned());
    }
    if !template.volume_mounts.is_empty() {
        mount(spec, template, status, warnings);
    }
    for secret in &template.image_pull_secrets {
        if !pod::has_named(spec, "imagePullSecrets", secret) {
            pod::list_mut(spec, "imagePullSecrets").push(serde_json::json!({ "name": secret }));
            status.image_pull_secrets.push(secret.clone());
        }
    }
    status.templates.push(t.to_owned());
}

/// Adds the template's mounts to each of the pod's own containers (not to
/// injected ones), skipping a mount whose name or path is already used.
fn mount(spec: &mut Value, template: &Template, status: &mut Status, warnings: &mut Vec<String>) {
    let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) else {
        return;
    };
    for container in containers {
        let name = object_name(container).to_owned();
        if status.containers.contains(&name) {
            continue;
        }
        for m in &template.volume_mounts {
            let path = m.get("mountPath");
            let clash = pod::items(container, "volumeMounts")
                .any(|existing| object_name(existing) == object_name(m) || existing.get("mountPath") == path);
            if clash {
                warnings.push(format!(
                    "portcullis: template {}: container {name:?} already mounts {:?} or its path; not added",
                    template.name,
                    object_name(m)
                ));
                continue;
            }
            pod::list_mut(container, "volumeMounts").push(m.clone());
            status.volume_mounts.entry(name.clone()).or_default().push(object_name(m).to_owned());
        }
    }
}
