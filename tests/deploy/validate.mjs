// Validates Kubernetes manifests offline, strictly, the way an API server
// with strict field validation (kubectl's default) would judge them:
//
//  - built-in kinds against the official Kubernetes OpenAPI schema, through
//    two npm packages generated from it (pinned in package-lock.json):
//      @kubernetes/client-node 2.0.1 (the official client; its models carry
//      every field of every type, from the release-1.36 spec) decides which
//      fields exist: an unknown field is an error;
//      kubernetes-models 5.1.0 (its validators are compiled from the same
//      spec) decides types, formats and required fields;
//  - agent-sandbox's SandboxTemplate, SandboxWarmPool and SandboxClaim
//    against agent_sandbox_schema.mjs, with the core types they embed (the
//    pod spec, network policy rules, volume claim specs) checked as above;
//  - a few rules the API server enforces beyond the schema, and references
//    inside a manifest that would only fail once running (apiRules below).
//
// Usage: node validate.mjs --good FILE... --bad FILE...
// A good file must pass. A bad file must be rejected, and for the reason its
// `# expect: TEXT` lines name (each TEXT must appear in some error), so a
// broken test file cannot pass by failing for an unrelated reason. Prints
// one line per file and closes with "N passed, N failed"; exit 1 on any
// failure.

import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import * as clientModels from "@kubernetes/client-node/dist/gen/models/all.js";
import { kinds as sandboxKinds, upstream } from "./agent_sandbox_schema.mjs";

// ---------------------------------------------------------------- schemas --

// Built-in kinds the manifests may use: apiVersion/kind -> client-node
// model name. Another kind is an error until it is added here.
const builtins = {
  "v1/Namespace": "V1Namespace",
  "v1/ServiceAccount": "V1ServiceAccount",
  "v1/Secret": "V1Secret",
  "v1/ConfigMap": "V1ConfigMap",
  "v1/Service": "V1Service",
  "apps/v1/Deployment": "V1Deployment",
  "apps/v1/StatefulSet": "V1StatefulSet",
  "networking.k8s.io/v1/NetworkPolicy": "V1NetworkPolicy",
};

// client-node model name -> kubernetes-models validator module, for every
// type checked as a whole: the kinds above and the types the CRDs embed.
const validatorModules = {
  V1Namespace: "kubernetes-models/_schemas/IoK8sApiCoreV1Namespace",
  V1ServiceAccount: "kubernetes-models/_schemas/IoK8sApiCoreV1ServiceAccount",
  V1Secret: "kubernetes-models/_schemas/IoK8sApiCoreV1Secret",
  V1ConfigMap: "kubernetes-models/_schemas/IoK8sApiCoreV1ConfigMap",
  V1Service: "kubernetes-models/_schemas/IoK8sApiCoreV1Service",
  V1Deployment: "kubernetes-models/_schemas/IoK8sApiAppsV1Deployment",
  V1StatefulSet: "kubernetes-models/_schemas/IoK8sApiAppsV1StatefulSet",
  V1NetworkPolicy: "kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy",
  V1PodSpec: "kubernetes-models/_schemas/IoK8sApiCoreV1PodSpec",
  V1PersistentVolumeClaimSpec: "kubernetes-models/_schemas/IoK8sApiCoreV1PersistentVolumeClaimSpec",
  V1NetworkPolicyIngressRule: "kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicyIngressRule",
  V1NetworkPolicyEgressRule: "kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicyEgressRule",
  V1ObjectMeta: "@kubernetes-models/apimachinery/_schemas/IoK8sApimachineryPkgApisMetaV1ObjectMeta",
};
const validators = {};
for (const [model, module] of Object.entries(validatorModules)) validators[model] = (await import(module)).validate;

// ----------------------------------------------------------- the checkers --

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const at = (path, key) => (typeof key === "number" ? `${path}[${key}]` : path ? `${path}.${key}` : key);
const pointerToPath = (base, pointer) =>
  pointer
    .split("/")
    .slice(1)
    .reduce((p, part) => at(p, /^\d+$/.test(part) ? Number(part) : part.replace(/~1/g, "/").replace(/~0/g, "~")), base);

// Which fields exist: walks `value` along client-node's attribute maps.
function knownFields(value, type, path, errors) {
  let m;
  if ((m = /^Array<(.+)>$/.exec(type))) {
    if (Array.isArray(value)) value.forEach((item, i) => knownFields(item, m[1], at(path, i), errors));
    return;
  }
  if ((m = /^\{ \[key: string\]: (.+); \}$/.exec(type))) {
    if (isObject(value)) for (const [k, v] of Object.entries(value)) knownFields(v, m[1], at(path, k), errors);
    return;
  }
  const model = clientModels[type];
  if (!model?.attributeTypeMap || !isObject(value)) return;  // a scalar type, or a type error ajv reports
  const attributes = new Map(model.attributeTypeMap.map((a) => [a.baseName, a.type]));
  for (const [k, v] of Object.entries(value)) {
    if (!attributes.has(k)) errors.push(`${at(path, k)}: unknown field "${k}" (not in ${type})`);
    else knownFields(v, attributes.get(k), at(path, k), errors);
  }
}

// Types, formats, required fields: kubernetes-models' compiled validator.
function schemaErrors(value, model, path, errors) {
  const validate = validators[model];
  if (!validate) throw new Error(`no validator for ${model}`);
  if (validate(value)) return;
  for (const e of validate.errors ?? []) {
    const where = pointerToPath(path, e.instancePath);
    if (e.keyword === "required") errors.push(`${at(where, e.params.missingProperty)}: required field missing`);
    else errors.push(`${where || "(document)"}: ${e.keyword} ${JSON.stringify(e.params)}`);
  }
}

function checkK8s(value, model, path, errors) {
  knownFields(value, model, path, errors);
  schemaErrors(value, model, path, errors);
}

// agent-sandbox's resources: the node shapes of agent_sandbox_schema.mjs.
function checkNode(value, node, path, errors) {
  if (node.k8s) return checkK8s(value, node.k8s, path, errors);
  const where = path || "(document)";
  switch (node.type) {
    case "object":
      if (!isObject(value)) return errors.push(`${where}: must be an object`);
      if (node.values) {
        for (const [k, v] of Object.entries(value)) checkNode(v, node.values, at(path, k), errors);
        return;
      }
      for (const r of node.required ?? []) if (!(r in value)) errors.push(`${at(path, r)}: required field missing`);
      for (const [k, v] of Object.entries(value)) {
        if (!(k in node.properties)) errors.push(`${at(path, k)}: unknown field "${k}"`);
        else checkNode(v, node.properties[k], at(path, k), errors);
      }
      return;
    case "array":
      if (!Array.isArray(value)) return errors.push(`${where}: must be an array`);
      value.forEach((item, i) => checkNode(item, node.items, at(path, i), errors));
      return;
    case "string":
      if (typeof value !== "string") return errors.push(`${where}: must be a string`);
      if (node.enum && !node.enum.includes(value)) errors.push(`${where}: must be one of ${node.enum.join(", ")}`);
      if (node.format === "date-time" && Number.isNaN(Date.parse(value)))
        errors.push(`${where}: must be an RFC 3339 date-time`);
      return;
    case "integer":
      if (!Number.isInteger(value)) return errors.push(`${where}: must be an integer`);
      if (node.format === "int32" && (value < -(2 ** 31) || value >= 2 ** 31)) errors.push(`${where}: out of int32 range`);
      if (node.minimum !== undefined && value < node.minimum) errors.push(`${where}: must be >= ${node.minimum}`);
      return;
    case "boolean":
      if (typeof value !== "boolean") errors.push(`${where}: must be a boolean`);
      return;
    default:
      throw new Error(`schema node without a type at ${where}`);
  }
}

// ------------------------------------------------------ API server rules --

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const labelName = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const portName = /^(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?=[a-z0-9]))*$/;

function checkName(doc, errors) {
  const name = doc.metadata?.name;
  if (typeof name !== "string" || name === "") return errors.push("metadata.name: required field missing");
  const label = doc.kind === "Namespace" || doc.kind === "Service";
  const pattern = doc.kind === "Service" ? dns1035Label : label ? dns1123Label : dns1123Subdomain;
  if (!pattern.test(name) || name.length > (label ? 63 : 253))
    errors.push(`metadata.name: "${name}" is not a valid ${doc.kind} name`);
}

function checkLabels(labels, path, errors) {
  if (!isObject(labels)) return;
  for (const [k, v] of Object.entries(labels)) {
    if (!labelName.test(k) || k.split("/").at(-1).length > 63) errors.push(`${path}: invalid label key "${k}"`);
    if (typeof v === "string" && (!labelValue.test(v) || v.length > 63))
      errors.push(`${path}: invalid label value "${v}" for "${k}"`);
  }
}

// A pod spec's internal references, as the API server (or, for probes and
// $(VAR), the kubelet once the pod runs) would find them broken.
function checkPodSpec(spec, path, errors) {
  if (!isObject(spec)) return;
  const volumes = new Set((spec.volumes ?? []).map((v) => v?.name));
  for (const [i, v] of (spec.volumes ?? []).entries()) {
    for (const kind of ["secret", "configMap"]) {
      const mode = v?.[kind]?.defaultMode;
      if (Number.isInteger(mode) && (mode < 0 || mode > 0o777))
        errors.push(`${path}.volumes[${i}].${kind}.defaultMode: ${mode} is not a file mode (0 to 0777)`);
    }
  }
  const containerNames = new Set();
  for (const group of ["initContainers", "containers"]) {
    for (const [i, c] of (spec[group] ?? []).entries()) {
      if (!isObject(c)) continue;
      const where = `${path}.${group}[${i}]`;
      if (typeof c.name === "string") {
        if (!dns1123Label.test(c.name)) errors.push(`${where}.name: "${c.name}" is not a DNS-1123 label`);
        if (containerNames.has(c.name)) errors.push(`${where}.name: duplicate container name "${c.name}"`);
        containerNames.add(c.name);
      }
      for (const [j, m] of (c.volumeMounts ?? []).entries())
        if (m?.name !== undefined && !volumes.has(m.name))
          errors.push(`${where}.volumeMounts[${j}].name: no volume named "${m.name}"`);
      const ports = new Set();
      for (const [j, p] of (c.ports ?? []).entries()) {
        if (p?.name === undefined) continue;
        if (!portName.test(p.name) || p.name.length > 15)
          errors.push(`${where}.ports[${j}].name: "${p.name}" is not a valid port name`);
        ports.add(p.name);
      }
      for (const probe of ["readinessProbe", "livenessProbe", "startupProbe"]) {
        for (const handler of ["httpGet", "tcpSocket", "grpc"]) {
          const port = c[probe]?.[handler]?.port;
          if (typeof port === "string" && !ports.has(port))
            errors.push(`${where}.${probe}.${handler}.port: no container port named "${port}"`);
        }
      }
      const env = new Set((c.env ?? []).map((e) => e?.name));
      for (const field of ["command", "args"]) {
        for (const [j, arg] of (c[field] ?? []).entries()) {
          if (typeof arg !== "string") continue;
          for (const [, name] of arg.matchAll(/(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g))
            if (!env.has(name)) errors.push(`${where}.${field}[${j}]: $(${name}) names no env variable of the container`);
        }
      }
    }
  }
}

function matches(selector, labels) {
  return isObject(selector) && Object.keys(selector).length > 0 && isObject(labels) &&
    Object.entries(selector).every(([k, v]) => labels[k] === v);
}

// Pod templates of a document, with where they are and their namespace.
function podTemplates(doc) {
  if (doc.kind === "Deployment" || doc.kind === "StatefulSet")
    return [{ template: doc.spec?.template, path: "spec.template" }];
  if (doc.kind === "SandboxTemplate") return [{ template: doc.spec?.podTemplate, path: "spec.podTemplate" }];
  return [];
}

function apiRules(doc, errors) {
  checkName(doc, errors);
  checkLabels(doc.metadata?.labels, "metadata.labels", errors);
  for (const { template, path } of podTemplates(doc)) {
    checkLabels(template?.metadata?.labels, `${path}.metadata.labels`, errors);
    checkPodSpec(template?.spec, `${path}.spec`, errors);
  }
  if ((doc.kind === "Deployment" || doc.kind === "StatefulSet") && isObject(doc.spec)) {
    const selector = doc.spec.selector?.matchLabels;
    if (isObject(selector) && !matches(selector, doc.spec.template?.metadata?.labels))
      errors.push("spec.selector.matchLabels: does not match spec.template.metadata.labels");
  }
}

// Across the documents checked together: a Service must select the pods of
// some pod template in its namespace, by labels and by its named targetPort.
function crossRules(docs) {
  const out = new Map(docs.map((d) => [d, []]));
  for (const service of docs.filter((d) => d.doc.kind === "Service")) {
    const selector = service.doc.spec?.selector;
    if (!isObject(selector)) continue;
    const namespace = service.doc.metadata?.namespace;
    const selected = docs.flatMap((d) =>
      d.doc.metadata?.namespace === namespace ? podTemplates(d.doc).map((t) => t.template) : [],
    ).filter((t) => matches(selector, t?.metadata?.labels));
    if (selected.length === 0) {
      out.get(service).push("spec.selector: selects no pod template among the files checked together");
      continue;
    }
    for (const [i, p] of (service.doc.spec?.ports ?? []).entries()) {
      if (typeof p?.targetPort !== "string") continue;
      const named = selected.some((t) =>
        (t.spec?.containers ?? []).some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort)));
      if (!named) out.get(service).push(`spec.ports[${i}].targetPort: no selected container has a port named "${p.targetPort}"`);
    }
  }
  return out;
}

// ------------------------------------------------------------ per file ----

function checkDocument(doc) {
  const errors = [];
  if (!isObject(doc)) return { family: "unknown", errors: ["the document is not a mapping"] };
  const key = `${doc.apiVersion}/${doc.kind}`;
  let family;
  if (builtins[key]) {
    family = "kubernetes";
    checkK8s(doc, builtins[key], "", errors);
  } else if (sandboxKinds[doc.apiVersion]?.[doc.kind]) {
    family = "agent-sandbox";
    checkNode(doc, sandboxKinds[doc.apiVersion][doc.kind], "", errors);
  } else {
    return { family: "unknown", errors: [`no schema for apiVersion "${doc.apiVersion}" kind "${doc.kind}"`] };
  }
  apiRules(doc, errors);
  return { family, errors };
}

function loadFile(file) {
  const text = readFileSync(file, "utf8");
  // YAML 1.1, as kubectl reads manifests: 0440 is octal, `yes` a boolean.
  const parsed = parseAllDocuments(text, { version: "1.1", uniqueKeys: true, prettyErrors: true });
  const docs = [];
  const errors = [];
  for (const d of parsed) {
    for (const e of d.errors ?? []) errors.push(`YAML: ${e.message.split("\n")[0]}`);
    const value = d.toJS({ maxAliasCount: 0 });
    if (value !== null && value !== undefined) docs.push({ file, doc: value });
  }
  if (docs.length === 0 && errors.length === 0) errors.push("no document in the file");
  const expect = [...text.matchAll(/^# expect: (.+)$/gm)].map((m) => m[1].trim());
  return { file, docs, errors, expect };
}

function judge(files) {
  const loaded = files.map(loadFile);
  const results = new Map();
  for (const f of loaded) {
    const families = new Set();
    const errors = [...f.errors];
    for (const [i, d] of f.docs.entries()) {
      const r = checkDocument(d.doc);
      families.add(r.family);
      const label = f.docs.length > 1 ? `document ${i + 1} (${d.doc?.kind}): ` : `${d.doc?.kind ?? "document"}: `;
      errors.push(...r.errors.map((e) => label + e));
    }
    results.set(f, { families, errors });
  }
  return { loaded, results };
}

// ------------------------------------------------------------------ main --

const args = process.argv.slice(2);
const good = [];
const bad = [];
let list = null;
for (const a of args) {
  if (a === "--good") list = good;
  else if (a === "--bad") list = bad;
  else if (list) list.push(a);
  else throw new Error(`usage: node validate.mjs --good FILE... --bad FILE... (got ${a})`);
}

let passed = 0;
let failed = 0;
const pass = (line) => (passed++, console.log(`PASS ${line}`));
const fail = (line, errors = []) => {
  failed++;
  console.log(`FAIL ${line}`);
  for (const e of errors) console.log(`     ${e}`);
};

console.log(`schemas: Kubernetes API (client-node 2.0.1 from the release-1.36 OpenAPI spec; kubernetes-models 5.1.0); ` +
  `agent-sandbox ${upstream.release} ${upstream.version} (tests/deploy/agent_sandbox_schema.mjs)`);

// The good files are one set: their Services must select their pods.
{
  const { loaded, results } = judge(good);
  const cross = crossRules(loaded.flatMap((f) => f.docs));
  for (const f of loaded) {
    const errors = [...results.get(f).errors];
    for (const d of f.docs) errors.push(...cross.get(d).map((e) => `${d.doc.kind}: ${e}`));
    if (errors.length === 0) pass(`${f.file} (${f.docs.length} document${f.docs.length === 1 ? "" : "s"})`);
    else fail(f.file, errors);
  }
}

// Each bad file alone; it must be refused for the reason it expects.
const rejectedFamilies = new Set();
for (const file of bad) {
  const { loaded, results } = judge([file]);
  const f = loaded[0];
  const { families, errors } = results.get(f);
  for (const e of crossRules(f.docs).values()) errors.push(...e);
  if (f.expect.length === 0) {
    fail(`${file}: a bad manifest must say what it expects with "# expect: TEXT"`);
  } else if (errors.length === 0) {
    fail(`${file}: accepted, but it is a broken manifest (expected: ${f.expect.join("; ")})`);
  } else {
    const missing = f.expect.filter((x) => !errors.some((e) => e.includes(x)));
    if (missing.length) fail(`${file}: rejected, but not for the expected reason (${missing.join("; ")})`, errors);
    else {
      for (const fam of families) rejectedFamilies.add(fam);
      pass(`${file} rejected as expected: ${errors[0]}`);
    }
  }
}

// The validator must be able to fail in each schema family.
for (const family of ["kubernetes", "agent-sandbox"]) {
  if (rejectedFamilies.has(family)) pass(`a broken ${family} manifest is rejected`);
  else fail(`no broken ${family} manifest was rejected: the check cannot be shown to fail`);
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
