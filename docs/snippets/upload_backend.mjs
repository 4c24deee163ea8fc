// Your backend, in Node.js (18 or newer; no package needed): the status API called as the tenant
// role (SigV4, signed here with node:crypto) or with the local stack's bearer token; a signed
// upload minted for the page; a webhook's signature checked on its raw body.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

export function filejobsApi({ apiUrl, region, credentials, token }) {
  return async function call(method, path, body) {
    const url = new URL(apiUrl.replace(/\/$/, "") + path);
    const data = body === undefined ? "" : JSON.stringify(body);
    let headers = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    else headers = sigv4({ method, url, headers, data, region, credentials });
    const answer = await fetch(url, { method, headers, body: data || undefined });
    const text = await answer.text();
    if (!answer.ok) throw new Error(`${method} ${path}: ${answer.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

export async function mintUpload(call, filename, contentType) {
  return call("POST", "/uploads", { filename, content_type: contentType || null, expires_in: 600 });
}

export function verifyFilejobsSignature(header, rawBody, secret, toleranceSeconds = 300) {
  let timestamp = null;
  const signatures = [];
  for (const part of header.split(",")) {
    const [key, value = ""] = part.trim().split("=", 2);
    if (key === "t" && /^\d+$/.test(value)) timestamp = Number(value);
    else if (key === "v1") signatures.push(value);
  }
  if (timestamp === null || Math.abs(Date.now() / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = createHmac("sha256", secret).update(`${timestamp}.`).update(rawBody).digest();
  return signatures.some((signature) => {
    const given = Buffer.from(signature, "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const sha256 = (data) => createHash("sha256").update(data).digest("hex");
const hmac = (key, data) => createHmac("sha256", key).update(data).digest();
const encode = (text) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function sigv4({ method, url, headers, data, region, credentials, now = new Date() }) {
  const amzDate = now.toISOString().replace(/[-:]|\.\d{3}/g, ""); // 20261205T103000Z
  const day = amzDate.slice(0, 8);
  const signed = { ...headers, host: url.host, "x-amz-date": amzDate };
  if (credentials.sessionToken) signed["x-amz-security-token"] = credentials.sessionToken;
  const names = Object.keys(signed).sort();
  const query = [...url.searchParams]
    .map(([key, value]) => `${encode(key)}=${encode(value)}`)
    .sort()
    .join("&");
  const path = url.pathname.split("/").map((part) => encode(decodeURIComponent(part))).join("/");
  const canonical = [
    method,
    path,
    query,
    names.map((name) => `${name}:${String(signed[name]).trim()}\n`).join(""),
    names.join(";"),
    sha256(data),
  ].join("\n");
  const scope = `${day}/${region}/execute-api/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  let key = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const part of [region, "execute-api", "aws4_request"]) key = hmac(key, part);
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  const credential = `${credentials.accessKeyId}/${scope}`;
  signed.authorization =
    `AWS4-HMAC-SHA256 Credential=${credential}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return signed;
}
