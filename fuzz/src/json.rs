//! Arbitrary JSON values, biased towards the keys and strings Kubernetes
//! objects and Portcullis' rules use, so that a few mutations reach deep
//! code instead of being refused at the first field.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// Keys the services read, and a few that need escaping in a JSON Pointer.
pub const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "template",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "image",
    "imagePullPolicy",
    "volumes",
    "volumeMounts",
    "imagePullSecrets",
    "env",
    "ports",
    "securityContext",
    "privileged",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "hostPath",
    "replicas",
    "type",
    "externalIPs",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "capabilities",
    "add",
    "drop",
    "restartPolicy",
    "enableServiceLinks",
    "selector",
    "data",
    "status",
    "team",
    "app",
    "example.com/owner",
    "portcullis.dev/inject",
    "portcullis.dev/status",
    "portcullis.dev/templates",
    "kubernetes.io/config.mirror",
    "a/b~c",
    "~1",
    "",
];

/// Values the services compare against.
pub const STRINGS: &[&str] = &[
    "nginx",
    "nginx:latest",
    "nginx:1.25",
    "docker.io/library/nginx:1.25",
    "ghcr.io/example/app@sha256:abc",
    "registry.local:5000/team/app:v1",
    "localhost/app",
    ":tag",
    "portcullis-proxy",
    "proxy",
    "log-shipper",
    "app",
    "false",
    "true",
    "Always",
    "IfNotPresent",
    "LoadBalancer",
    "NodePort",
    "ClusterIP",
    "100m",
    "1Gi",
    "NET_BIND_SERVICE",
    "SYS_ADMIN",
    "ALL",
    "demo",
    "kube-system",
    "Pod",
    "v1",
    "apps/v1",
    "Deployment",
    "{}",
    "{\"templates\":[\"proxy\"],\"initContainers\":[\"portcullis-proxy\"]}",
    "proxy,log-shipper,nope",
];

/// Any JSON value, at most `depth` containers deep.
pub fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let last = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=last)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => number(u)?,
        3 => Value::String(string(u)?),
        4 => Value::String((*u.choose(STRINGS)?).to_owned()),
        5 => Value::Array(list(u, depth - 1)?),
        _ => Value::Object(object(u, depth - 1)?),
    })
}

/// A map of up to eight entries.
pub fn object(u: &mut Unstructured<'_>, depth: u32) -> Result<Map<String, Value>> {
    let mut map = Map::new();
    for _ in 0..u.int_in_range(0..=8)? {
        map.insert(key(u)?, value(u, depth)?);
    }
    Ok(map)
}

/// A list of up to eight values.
pub fn list(u: &mut Unstructured<'_>, depth: u32) -> Result<Vec<Value>> {
    (0..u.int_in_range(0..=8)?).map(|_| value(u, depth)).collect()
}

/// A key the services read, most of the time.
pub fn key(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(3, 4)? { Ok((*u.choose(KEYS)?).to_owned()) } else { string(u) }
}

/// A string the services compare against, or any string.
pub fn text(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 2)? { Ok((*u.choose(STRINGS)?).to_owned()) } else { string(u) }
}

/// Any string.
pub fn string(u: &mut Unstructured<'_>) -> Result<String> {
    u.arbitrary::<String>()
}

fn number(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=2)? {
        0 => Value::from(u.arbitrary::<i64>()?),
        1 => Value::from(u.arbitrary::<u64>()?),
        // NaN and infinities are not JSON.
        _ => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
    })
}
