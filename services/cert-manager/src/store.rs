//! Where the CA state (see [`crate::authority`]) is kept: one file in a
//! directory (standalone) or one Secret (Kubernetes). Each is written whole,
//! so a reader never sees half a rotation; the Secret is written with its
//! resourceVersion, so two replicas cannot both write. Either also carries
//! an operator's request to rotate now: a file `rotate` in the directory,
//! the annotation `portcullis.dev/rotate` on the Secret.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use portcullis_admission::names::ROTATE_ANNOTATION;

/// The file in the CA directory that asks for a rotation.
pub const ROTATE_FILE: &str = "rotate";
/// The file in the CA directory that holds the state (keys: mode 0600).
pub const STATE_FILE: &str = "ca-state.json";

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not a map of strings.
    #[error("{path}")]
    Json {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: serde_json::Error,
    },
    /// The API server.
    #[error("the CA Secret")]
    Api(#[from] kube::Error),
}

/// The state as read, and what to write it over.
#[derive(Debug)]
pub struct Loaded {
    /// The state map.
    pub data: BTreeMap<String, String>,
    /// Whether an operator asked for a rotation.
    pub rotate_requested: bool,
    secret: Option<Secret>,
}

/// The state's home.
#[derive(Debug, Clone)]
pub enum Store {
    /// A directory (standalone mode; one cert-manager process per directory).
    Dir(PathBuf),
    /// A Secret (Kubernetes mode).
    Secret {
        /// The namespace's Secrets.
        api: Box<Api<Secret>>,
        /// The Secret's name.
        name: String,
    },
}

impl Store {
    /// The state, or `None` when there is none yet.
    pub async fn load(&self) -> Result<Option<Loaded>, StoreError> {
        match self {
            Self::Dir(dir) => {
                let path = dir.join(STATE_FILE);
                let data = match std::fs::read(&path) {
                    Ok(text) => serde_json::from_slice(&text).map_err(|source| StoreError::Json { path, source })?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(source) => return Err(StoreError::Io { path, source }),
                };
                Ok(Some(Loaded { data, rotate_requested: dir.join(ROTATE_FILE).exists(), secret: None }))
            }
            Self::Secret { api, name } => {
                let Some(secret) = api.get_opt(name).await? else { return Ok(None) };
                let data = secret
                    .data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
                    .collect();
                let rotate_requested =
                    secret.metadata.annotations.iter().flatten().any(|(k, _)| k == ROTATE_ANNOTATION);
                Ok(Some(Loaded { data, rotate_requested, secret: Some(secret) }))
            }
        }
    }

    /// Writes `data` in place of `over` (or as the first state, with
    /// `None`), taking back an operator's request to rotate. `Ok(false)`
    /// when somebody else wrote first: load again.
    pub async fn save(&self, data: &BTreeMap<String, String>, over: Option<&Loaded>) -> Result<bool, StoreError> {
        match self {
            Self::Dir(dir) => {
                write_private(dir, data)?;
                if over.is_some_and(|o| o.rotate_requested) {
                    let path = dir.join(ROTATE_FILE);
                    std::fs::remove_file(&path).map_err(|source| StoreError::Io { path, source })?;
                }
                Ok(true)
            }
            Self::Secret { api, name } => {
                let data = Some(data.iter().map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes()))).collect());
                let result = match over.and_then(|o| o.secret.clone()) {
                    Some(mut secret) => {
                        secret.data = data;
                        if let Some(annotations) = secret.metadata.annotations.as_mut() {
                            annotations.remove(ROTATE_ANNOTATION);
                        }
                        api.replace(name, &PostParams::default(), &secret).await
                    }
                    None => {
                        let secret = Secret {
                            metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
                            type_: Some("kubernetes.io/tls".into()),
                            data,
                            ..Secret::default()
                        };
                        api.create(&PostParams::default(), &secret).await
                    }
                };
                match result {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }
}

/// Asks the cert-manager whose `--ca-dir` is `dir` to rotate its CA. Refused
/// when the directory holds no CA: a typo must not pass silently.
pub fn request_rotation(dir: &Path) -> Result<(), StoreError> {
    let state = dir.join(STATE_FILE);
    if !state.exists() {
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no CA here (is this the --ca-dir?)");
        return Err(StoreError::Io { path: state, source });
    }
    let path = dir.join(ROTATE_FILE);
    std::fs::write(&path, "").map_err(|source| StoreError::Io { path, source })
}

/// Writes the state file whole: a new file (mode 0600) renamed over the old.
fn write_private(dir: &Path, data: &BTreeMap<String, String>) -> Result<(), StoreError> {
    use std::io::Write as _;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let (path, temporary) = (dir.join(STATE_FILE), dir.join(format!(".{STATE_FILE}.new")));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary).map_err(io(&temporary))?;
    let json = serde_json::to_vec_pretty(data).map_err(|source| StoreError::Json { path: path.clone(), source })?;
    file.write_all(&json).and_then(|()| file.sync_all()).map_err(io(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_directory_keeps_the_state_private_and_takes_rotation_requests() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::Dir(dir.path().join("ca"));
        assert!(store.load().await.unwrap().is_none());
        let data = BTreeMap::from([("tls.key".to_owned(), "secret".to_owned())]);
        assert!(store.save(&data, None).await.unwrap());
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.data, data);
        assert!(!loaded.rotate_requested);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("ca").join(STATE_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "the CA keys are readable by their owner only");
        }
        std::fs::write(dir.path().join("ca").join(ROTATE_FILE), "").unwrap();
        let loaded = store.load().await.unwrap().unwrap();
        assert!(loaded.rotate_requested);
        store.save(&data, Some(&loaded)).await.unwrap();
        assert!(!store.load().await.unwrap().unwrap().rotate_requested, "the request is taken once");
    }
}
