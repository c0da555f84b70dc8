//! An in-memory apiserver for the hermetic tests: implements [`Client`] for every kind, keeps
//! objects as JSON by (kind, namespace, name), assigns names for `generateName`, UIDs,
//! resourceVersions and generations, applies owner patches, logs every call, and fails calls on
//! request. [`FakeApi::deliver`] copies its state into an informer, as a watch would (tests
//! decide when: a lagging watch is a test that does not deliver).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Mutex;

use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::client::{ApiError, Client, OwnerPatch, Propagation, Verb};
use crate::informers::Informer;

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<(String, String, String), Value>,
    revision: u64,
    names: u64,
    actions: Vec<String>,
    failures: Vec<(Verb, String, usize)>,
}

#[derive(Debug, Default)]
pub struct FakeApi {
    state: Mutex<State>,
}

fn kind<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

impl FakeApi {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next call of `verb` on `kind` fails with a 403-like refusal.
    pub fn fail_next(&self, verb: Verb, kind: &str) {
        self.fail_nth(verb, kind, 0);
    }

    /// The call of `verb` on `kind` after `skip` more succeed fails.
    pub fn fail_nth(&self, verb: Verb, kind: &str, skip: usize) {
        self.lock().failures.push((verb, kind.to_string(), skip));
    }

    /// Whether this call fails (consuming the failure), counting down skips.
    fn should_fail(s: &mut State, verb: Verb, k: &str) -> bool {
        let Some(i) = s.failures.iter().position(|(v, kk, _)| *v == verb && kk == k) else {
            return false;
        };
        if s.failures[i].2 > 0 {
            s.failures[i].2 -= 1;
            return false;
        }
        s.failures.remove(i);
        true
    }

    /// Every call so far, as `verb kind ns/name`, and forgets them.
    pub fn take_actions(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().actions)
    }

    /// Stores an object as a client would have created it (through `create`).
    pub fn put<K: Resource<DynamicType = ()> + Serialize + DeserializeOwned>(&self, obj: &K) -> K {
        let created = self.store(obj, Verb::Create);
        self.lock().actions.pop();
        created.unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn list<K: Resource<DynamicType = ()> + DeserializeOwned>(&self) -> Vec<K> {
        let k = kind::<K>();
        self.lock()
            .objects
            .iter()
            .filter(|((kk, _, _), _)| *kk == k)
            .filter_map(|(_, v)| serde_json::from_value(v.clone()).ok())
            .collect()
    }

    pub fn object<K: Resource<DynamicType = ()> + DeserializeOwned>(
        &self,
        ns: &str,
        name: &str,
    ) -> Option<K> {
        let v =
            self.lock().objects.get(&(kind::<K>(), ns.to_string(), name.to_string())).cloned()?;
        serde_json::from_value(v).ok()
    }

    /// Mutates a stored object in place (a kubelet reporting status, a user editing).
    pub fn edit<K: Resource<DynamicType = ()> + Serialize + DeserializeOwned>(
        &self,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut K),
    ) {
        let Some(mut obj) = self.object::<K>(ns, name) else { return };
        f(&mut obj);
        let mut s = self.lock();
        s.revision += 1;
        let rv = s.revision;
        let mut v = serde_json::to_value(&obj).unwrap_or_default();
        v["metadata"]["resourceVersion"] = json!(rv.to_string());
        s.objects.insert((kind::<K>(), ns.to_string(), name.to_string()), v);
    }

    /// Removes an object (a pod deleted by someone else).
    pub fn remove<K: Resource<DynamicType = ()>>(&self, ns: &str, name: &str) {
        self.lock().objects.remove(&(kind::<K>(), ns.to_string(), name.to_string()));
    }

    /// Makes the informer hold exactly what the fake holds, as a watch would.
    pub fn deliver<K>(&self, informer: &Informer<K>)
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned,
    {
        let now: Vec<K> = self.list();
        let names: std::collections::HashSet<(String, String)> =
            now.iter().map(|o| (o.namespace().unwrap_or_default(), o.name_any())).collect();
        for old in informer.cache().list_all() {
            if !names.contains(&(old.namespace().unwrap_or_default(), old.name_any())) {
                informer.delete(&old);
            }
        }
        for obj in now {
            informer.apply(obj);
        }
        informer.mark_synced();
    }

    fn fail(&self, verb: Verb, k: &str, key: &str) -> Result<(), ApiError> {
        let mut s = self.lock();
        s.actions.push(format!("{verb} {k} {key}"));
        if Self::should_fail(&mut s, verb, k) {
            return Err(ApiError::Rejected {
                verb,
                kind: k.to_string(),
                key: key.to_string(),
                code: 403,
                message: "forbidden: exceeded quota".into(),
            });
        }
        Ok(())
    }

    fn store<K: Resource<DynamicType = ()> + Serialize + DeserializeOwned>(
        &self,
        obj: &K,
        verb: Verb,
    ) -> Result<K, ApiError> {
        let k = kind::<K>();
        let mut v = serde_json::to_value(obj).unwrap_or_default();
        let ns = obj.namespace().unwrap_or_default();
        let mut s = self.lock();
        let name = match obj.meta().name.clone() {
            Some(n) => n,
            None => {
                s.names += 1;
                let suffix: String = format!("{:05}", s.names)
                    .chars()
                    .map(|c| (b'a' + (c as u8 - b'0')) as char)
                    .collect();
                format!("{}{suffix}", obj.meta().generate_name.clone().unwrap_or_default())
            }
        };
        let id = (k.clone(), ns.clone(), name.clone());
        let key = format!("{ns}/{name}");
        s.actions.push(format!("{verb} {k} {key}"));
        s.revision += 1;
        let rv = s.revision.to_string();
        match verb {
            Verb::Create => {
                if s.objects.contains_key(&id) {
                    return Err(ApiError::AlreadyExists { verb, kind: k, key });
                }
                v["metadata"]["name"] = json!(name);
                v["metadata"]["uid"] = json!(format!("uid-{k}-{name}"));
                v["metadata"]["generation"] = json!(1);
                if v["metadata"]["creationTimestamp"].is_null() {
                    v["metadata"]["creationTimestamp"] = json!(jiff::Timestamp::now().to_string());
                }
            }
            _ => {
                let Some(old) = s.objects.get(&id).cloned() else {
                    return Err(ApiError::NotFound { verb, kind: k, key });
                };
                if v["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"] {
                    return Err(ApiError::Conflict {
                        verb,
                        kind: k,
                        key,
                        message: "the object has been modified".into(),
                    });
                }
                let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
                if verb == Verb::UpdateStatus {
                    let status = v["status"].clone();
                    v = old.clone();
                    v["status"] = status;
                } else {
                    v["status"] = old["status"].clone();
                    let changed = v["spec"] != old["spec"];
                    v["metadata"]["generation"] = json!(generation + i64::from(changed));
                }
                v["metadata"]["uid"] = old["metadata"]["uid"].clone();
            }
        }
        v["metadata"]["resourceVersion"] = json!(rv);
        s.objects.insert(id, v.clone());
        serde_json::from_value(v).map_err(|e| ApiError::Rejected {
            verb,
            kind: k.clone(),
            key: String::new(),
            code: 400,
            message: e.to_string(),
        })
    }
}

impl<K> Client<K> for FakeApi
where
    K: Resource<DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    async fn get(&self, ns: &str, name: &str) -> Result<K, ApiError> {
        let key = format!("{ns}/{name}");
        self.fail(Verb::Get, &kind::<K>(), &key)?;
        self.object(ns, name).ok_or(ApiError::NotFound { verb: Verb::Get, kind: kind::<K>(), key })
    }

    async fn create(&self, obj: &K) -> Result<K, ApiError> {
        let key = format!(
            "{}/{}",
            obj.namespace().unwrap_or_default(),
            obj.meta().generate_name.clone().or(obj.meta().name.clone()).unwrap_or_default()
        );
        {
            let mut s = self.lock();
            if Self::should_fail(&mut s, Verb::Create, &kind::<K>()) {
                s.actions.push(format!("{} {} {key}", Verb::Create, kind::<K>()));
                return Err(ApiError::Rejected {
                    verb: Verb::Create,
                    kind: kind::<K>(),
                    key,
                    code: 403,
                    message: "forbidden: exceeded quota".into(),
                });
            }
        }
        self.store(obj, Verb::Create)
    }

    async fn replace(&self, obj: &K) -> Result<K, ApiError> {
        self.store(obj, Verb::Update)
    }

    async fn replace_status(&self, obj: &K) -> Result<K, ApiError> {
        self.store(obj, Verb::UpdateStatus)
    }

    async fn patch_owner(&self, ns: &str, name: &str, patch: &OwnerPatch) -> Result<K, ApiError> {
        let key = format!("{ns}/{name}");
        self.fail(Verb::Patch, &kind::<K>(), &key)?;
        let Some(mut obj) = self.object::<K>(ns, name) else {
            return Err(ApiError::NotFound { verb: Verb::Patch, kind: kind::<K>(), key });
        };
        let refs = obj.meta_mut().owner_references.get_or_insert_default();
        match patch {
            OwnerPatch::Adopt { owner, .. } => {
                refs.retain(|r| r.uid != owner.uid);
                refs.push(owner.clone());
            }
            OwnerPatch::Release { owner_uid, .. } => refs.retain(|r| r.uid != *owner_uid),
        }
        let mut s = self.lock();
        s.revision += 1;
        obj.meta_mut().resource_version = Some(s.revision.to_string());
        s.objects.insert(
            (kind::<K>(), ns.to_string(), name.to_string()),
            serde_json::to_value(&obj).unwrap_or_default(),
        );
        Ok(obj)
    }

    async fn delete(&self, ns: &str, name: &str, _uid: Option<&str>) -> Result<(), ApiError> {
        let key = format!("{ns}/{name}");
        self.fail(Verb::Delete, &kind::<K>(), &key)?;
        match self.lock().objects.remove(&(kind::<K>(), ns.to_string(), name.to_string())) {
            Some(_) => Ok(()),
            None => Err(ApiError::NotFound { verb: Verb::Delete, kind: kind::<K>(), key }),
        }
    }

    async fn remove_finalizer(&self, ns: &str, name: &str, finalizer: &str) -> Result<K, ApiError> {
        let key = format!("{ns}/{name}");
        self.fail(Verb::Patch, &kind::<K>(), &key)?;
        let Some(mut obj) = self.object::<K>(ns, name) else {
            return Err(ApiError::NotFound { verb: Verb::Patch, kind: kind::<K>(), key });
        };
        if let Some(f) = obj.meta_mut().finalizers.as_mut() {
            f.retain(|x| x != finalizer);
        }
        let mut s = self.lock();
        s.revision += 1;
        obj.meta_mut().resource_version = Some(s.revision.to_string());
        s.objects.insert(
            (kind::<K>(), ns.to_string(), name.to_string()),
            serde_json::to_value(&obj).unwrap_or_default(),
        );
        Ok(obj)
    }

    /// Logged as `delete <Kind> ns/name <policy>`; the object is removed at once (the garbage
    /// collector's part is not the fake's).
    async fn delete_propagating(
        &self,
        ns: &str,
        name: &str,
        _uid: &str,
        policy: Propagation,
    ) -> Result<(), ApiError> {
        let key = format!("{ns}/{name}");
        self.fail(Verb::Delete, &kind::<K>(), &format!("{key} {policy:?}"))?;
        match self.lock().objects.remove(&(kind::<K>(), ns.to_string(), name.to_string())) {
            Some(_) => Ok(()),
            None => Err(ApiError::NotFound { verb: Verb::Delete, kind: kind::<K>(), key }),
        }
    }
}
