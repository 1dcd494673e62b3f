//! Per-object metrics of one replica: which objects it refused, and how
//! many it enforces.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::catalog::{Key, WatchedKind};
use crate::run::Remark;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Object {
    kind: String,
    namespace: String,
    name: String,
    reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// `portcullis_resource_refused{kind,namespace,name,reason}` (1 while an
/// object's current generation is refused) and
/// `portcullis_resources_enforced{kind}`.
#[derive(Debug, Clone, Default)]
pub struct ResourceMetrics {
    refused: Family<Object, Gauge>,
    enforced: Family<KindLabel, Gauge>,
}

impl ResourceMetrics {
    /// Registers the metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "portcullis_resource_refused",
            "1 while the current generation of a policy, exception or template is refused (its last good generation, if any, stays in force)",
            self.refused.clone(),
        );
        registry.register(
            "portcullis_resources_enforced",
            "Policies, exceptions or templates in force in this replica, by kind",
            self.enforced.clone(),
        );
    }

    /// Sets the metrics from what `kinds` hold now.
    pub(crate) fn update(&self, kinds: &[Arc<dyn WatchedKind>], remarks: &[Remark]) {
        self.refused.clear();
        for kind in kinds {
            let objects = kind.objects();
            let remark = |key: &Key| remarks.iter().find(|r| r.kind == kind.kind() && r.key == *key);
            let enforced =
                objects.iter().filter(|o| o.enforced.is_some() && remark(&o.key).is_none_or(|r| r.in_force)).count();
            self.enforced
                .get_or_create(&KindLabel { kind: kind.kind().to_owned() })
                .set(i64::try_from(enforced).unwrap_or(i64::MAX));
            for object in objects {
                let refusal = object.refusal.or_else(|| remark(&object.key).map(|r| r.refusal.clone()));
                if let Some(refusal) = refusal {
                    let labels = Object {
                        kind: kind.kind().to_owned(),
                        namespace: object.key.namespace.unwrap_or_default(),
                        name: object.key.name,
                        reason: refusal.reason,
                    };
                    self.refused.get_or_create(&labels).set(1);
                }
            }
        }
    }
}
