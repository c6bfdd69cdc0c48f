// The structural schema of agent-sandbox's extension resources, written for
// this repository from a reading of the upstream CRDs; no package (Debian or
// npm) ships them, and nothing but those two registries may be used here.
//
// Matches: kubernetes-sigs/agent-sandbox release v0.5.6, API group
// extensions.agents.x-k8s.io, version v1beta1 (the storage version; v1alpha1
// is deprecated there). Only what a manifest may set is described: `status`
// is the controller's, so a manifest carrying one is refused.
//
// Node shapes (read by validate.mjs):
//   { type: "object", properties: {...}, required: [...] }   closed object
//   { type: "object", values: NODE }                          map of NODE
//   { type: "array", items: NODE }
//   { type: "string", enum?, format? }  { type: "integer", format, minimum? }
//   { type: "boolean" }
//   { k8s: "V1PodSpec" }   a Kubernetes API type, checked as validate.mjs
//                          checks any built-in object (the CRDs embed the
//                          core types whole)
//
// When agent-sandbox publishes a new release, compare its
// k8s/crds/extensions.agents.x-k8s.io_*.yaml with this file and bump
// `upstream` below.

export const upstream = { project: "kubernetes-sigs/agent-sandbox", release: "v0.5.6", version: "v1beta1" };

const string = { type: "string" };
const stringMap = { type: "object", values: string };
const int32 = (minimum) => ({ type: "integer", format: "int32", ...(minimum === undefined ? {} : { minimum }) });
const oneOf = (...values) => ({ type: "string", enum: values });
const object = (properties, required = []) => ({ type: "object", properties, required });
const named = object({ name: string }, ["name"]);

// Labels and annotations only: the pod's other metadata is the controller's.
const podMetadata = object({ labels: stringMap, annotations: stringMap });

// A volume claim template: a name, labels and annotations, and a PVC spec.
const volumeClaimTemplate = object(
  {
    metadata: object({ name: string, labels: stringMap, annotations: stringMap }),
    spec: { k8s: "V1PersistentVolumeClaimSpec" },
  },
  ["spec"],
);

// What a SandboxTemplate shares with a Sandbox: the pod, its claims, and
// whether a headless Service is made for it.
const blueprint = {
  podTemplate: object({ metadata: podMetadata, spec: { k8s: "V1PodSpec" } }, ["spec"]),
  volumeClaimTemplates: { type: "array", items: volumeClaimTemplate },
  service: { type: "boolean" },
};

// A subset of a NetworkPolicy spec: the rules only. The controller sets the
// pod selector and both policy types itself, so those fields do not exist.
const templateNetworkPolicy = object({
  ingress: { type: "array", items: { k8s: "V1NetworkPolicyIngressRule" } },
  egress: { type: "array", items: { k8s: "V1NetworkPolicyEgressRule" } },
});

const resource = (spec) => object({ apiVersion: string, kind: string, metadata: { k8s: "V1ObjectMeta" }, spec }, ["spec"]);

export const kinds = {
  "extensions.agents.x-k8s.io/v1beta1": {
    SandboxTemplate: resource(
      object(
        {
          ...blueprint,
          networkPolicy: templateNetworkPolicy,
          networkPolicyManagement: oneOf("Managed", "Unmanaged"),
          envVarsInjectionPolicy: oneOf("Allowed", "Overrides", "Disallowed"),
          volumeClaimTemplatesPolicy: oneOf("Disallowed", "Allowed", "Overrides"),
        },
        ["podTemplate"],
      ),
    ),
    SandboxWarmPool: resource(
      object(
        {
          replicas: int32(0),
          sandboxTemplateRef: named,
          updateStrategy: object({ type: oneOf("Recreate", "OnReplenish") }),
        },
        ["sandboxTemplateRef"],
      ),
    ),
    SandboxClaim: resource(
      object(
        {
          warmPoolRef: named,
          lifecycle: object({
            shutdownTime: { type: "string", format: "date-time" },
            ttlSecondsAfterFinished: int32(0),
            shutdownPolicy: oneOf("Delete", "DeleteForeground", "Retain"),
          }),
          additionalPodMetadata: podMetadata,
          env: { type: "array", items: object({ name: string, value: string, containerName: string }, ["name", "value"]) },
          volumeClaimTemplates: { type: "array", items: volumeClaimTemplate },
        },
        ["warmPoolRef"],
      ),
    ),
  },
};

