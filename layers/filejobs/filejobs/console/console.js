// filejobs console: ES modules (this one; oauth.js signs in with a user pool), no framework,
// nothing from another origin (docs/CONSOLE.md).
//
// The page holds no data of its own: every view reads the status API on this origin with the
// caller's bearer token, and shows what the API answers (it alone decides what a caller sees).
// Views are routed by the URL fragment: #/overview, #/jobs?status=failed, #/job/<id>,
// #/files?prefix=..., #/file/<id>, #/failures, #/operations, #/operation/<id>.
// Every piece of data reaches the page through textContent or an attribute: never as HTML.
//
// How it signs in is the API's to say (GET console/config.json): through the stack's user pool
// (ApiAuth=COGNITO: oauth.js, the ID token sent as the Cognito authorizer takes it), or with a
// bearer token (the local stack's, or the secret of `filejobs console`'s signing proxy).

import { CognitoSignIn } from "./oauth.js";

const TOKEN_KEY = "filejobs.console.token";
const LIVE_SECONDS = 3;
// The API's routes are relative to the page: /console on a local stack, /{stage}/console on AWS.
const API_BASE = new URL(".", window.location.href);
const JOB_TYPES = [
  "thumbnail_generation", "video_thumbnail", "document_preview",
  "compression", "virus_scan", "deduplication_check",
];
const JOB_STATUSES = ["pending", "scheduled", "running", "completed", "failed", "cancelled"];
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const SEARCH_FIELDS = ["tenant", "job_type", "status", "error", "group", "since", "until"];
const IMAGE_NAME = /\.(png|jpe?g|gif|webp|avif)$/i;

const main = document.getElementById("main");
const updated = document.getElementById("updated");
const alerts = document.getElementById("alerts");
const signOut = document.getElementById("sign-out");
const who = document.getElementById("who");
// The user pool's sign-in (CognitoSignIn) when the API names one; null: a bearer token.
let cognito = null;

// --- small DOM helpers ----------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attrs);
  append(node, children);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAttributes(node, attrs);
  append(node, children);
  return node;
}

function setAttributes(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "text") {
      node.textContent = String(value);
    } else if (name === "className") {
      node.setAttribute("class", value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Replace a node's children (arrays flattened; null, undefined and false left out).
function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

// --- formatting -------------------------------------------------------------------------------

const numbers = new Intl.NumberFormat("en");
function fmtNum(value) {
  return value === null || value === undefined ? "–" : numbers.format(value);
}

function pad(n) {
  return String(n).padStart(2, "0");
}

function utc(iso) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return String(iso);
  return `${at.getUTCFullYear()}-${pad(at.getUTCMonth() + 1)}-${pad(at.getUTCDate())} `
    + `${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())}:${pad(at.getUTCSeconds())} UTC`;
}

function fmtTime(iso) {
  if (!iso) return "–";
  const local = new Date(iso);
  return h("time", { datetime: iso, title: Number.isNaN(local.getTime()) ? null : local.toString() }, utc(iso));
}

function hhmm(iso) {
  const at = new Date(iso);
  return `${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())}`;
}

function fmtSeconds(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  return fmtAge(seconds);
}

function fmtAge(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 1) return `${Math.round(seconds)} s`;
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} days ${hours % 24} h`;
}

function fmtBytes(size) {
  if (size === null || size === undefined) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = size;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

function shortId(id) {
  return id ? String(id).slice(0, 8) : "–";
}

function badge(value) {
  if (!value) return "–";
  return h("span", { className: `badge ${String(value).replace(/[^a-z_]/g, "")}` }, value);
}

function clip(text, length = 140) {
  if (!text) return "";
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// --- the token and the API --------------------------------------------------------------------

class SignInNeeded extends Error {}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function token() {
  return window.sessionStorage.getItem(TOKEN_KEY);
}

function signedIn() {
  return cognito ? cognito.signedIn() : Boolean(token());
}

// The Authorization header's value: the user pool's ID token as it is (what API Gateway's
// Cognito authorizer reads), renewed first when about to expire; or `Bearer <token>`.
async function authorization({ renew = false } = {}) {
  if (cognito) return cognito.idToken({ renew });
  const bearer = token();
  return bearer ? `Bearer ${bearer}` : null;
}

// What the console says of the session beside "Sign out".
function showSession() {
  const name = cognito && signedIn() ? cognito.who() : null;
  who.textContent = name ? `Signed in as ${name}` : "";
  who.hidden = !name;
  signOut.hidden = !signedIn();
}

function setToken(value) {
  if (value) window.sessionStorage.setItem(TOKEN_KEY, value);
  else window.sessionStorage.removeItem(TOKEN_KEY);
  signOut.hidden = !value;
}

// `#token=...` (which the browser never sends to a server): kept, then removed from the address
// bar and the history, so that it is neither bookmarked nor shown over a shoulder.
function takeTokenFromFragment() {
  const fragment = window.location.hash.slice(1);
  if (!fragment.startsWith("token=")) return;
  const found = new URLSearchParams(fragment).get("token");
  if (found) setToken(found);
  window.history.replaceState(null, "", `${window.location.pathname}${window.location.search}#/overview`);
}

async function send(path, init) {
  try {
    return await fetch(new URL(path, API_BASE), init);
  } catch (error) {
    throw new ApiError(0, "unreachable", `The API did not answer (${error.message}).`);
  }
}

// `filejobs console` opens the page at its one-time link, #handoff=...: traded once, on this
// origin, for the signing proxy's secret, so the secret itself is on no command line. False
// when the link was used already or expired.
async function takeHandoffFromFragment() {
  const fragment = window.location.hash.slice(1);
  if (!fragment.startsWith("handoff=")) return true;
  const handoff = new URLSearchParams(fragment).get("handoff");
  window.history.replaceState(null, "", `${window.location.pathname}${window.location.search}#/overview`);
  try {
    const response = await fetch(new URL("console/session", API_BASE), {
      method: "POST",
      cache: "no-store",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ handoff }),
    });
    if (!response.ok) return false;
    setToken((await response.json()).token);
    return true;
  } catch {
    return false;
  }
}

async function api(path, { method = "GET", body, headers = {} } = {}) {
  const credentials = await authorization();
  if (!credentials) {
    showSignIn(cognito ? "Your sign-in has ended: sign in again." : undefined);
    throw new SignInNeeded();
  }
  const init = {
    method,
    cache: "no-store",
    headers: { Accept: "application/json", Authorization: credentials, ...headers },
  };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response = await send(path, init);
  if (response.status === 401 && cognito) {
    // Revoked or expired early: one renewal, then the request once more.
    const renewed = await authorization({ renew: true });
    if (renewed) response = await send(path, { ...init, headers: { ...init.headers, Authorization: renewed } });
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.status === 401) {
    if (cognito) cognito.forget();
    else setToken(null);
    showSignIn(`The API did not accept ${cognito ? "your sign-in" : "the token"} (401). Sign in again.`);
    throw new SignInNeeded();
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    const message = error.message || (data && data.message) || response.statusText || "request failed";
    throw new ApiError(response.status, error.code || `http_${response.status}`, message);
  }
  return data;
}

function idempotencyKey() {
  if (window.crypto.randomUUID) return `console-${window.crypto.randomUUID()}`;
  const bytes = window.crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// --- alerts, the "updated" line, live refresh -------------------------------------------------

function showAlert(message) {
  const note = h("div", { className: "alert" },
    h("span", {}, message),
    h("button", { type: "button", className: "small quiet", onclick: () => note.remove() }, "Dismiss"));
  alerts.append(note);
  window.setTimeout(() => note.remove(), 12000);
}

function errorBox(error) {
  const status = error.status ? ` (${error.status} ${error.code})` : "";
  return h("div", { className: "error-box", role: "alert" }, `${error.message}${status}`);
}

function clock(at = new Date()) {
  return `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

function markUpdated() {
  const at = clock();
  updated.dataset.at = at;
  updated.textContent = `${live.refresh ? "Live · " : ""}updated ${at}`;
  for (const stale of main.querySelectorAll(".view-error")) stale.remove(); // answered again
}

// One refresher at a time (the current view's), every LIVE_SECONDS after the last one ended;
// none while the tab is hidden, and one at once when it shows again.
const live = { refresh: null, timer: null, busy: false };

function setLive(refresh) {
  live.refresh = refresh;
  scheduleLive();
}

function stopLive() {
  live.refresh = null;
  window.clearTimeout(live.timer);
  live.timer = null;
}

function scheduleLive() {
  window.clearTimeout(live.timer);
  live.timer = live.refresh ? window.setTimeout(runLive, LIVE_SECONDS * 1000) : null;
}

async function runLive() {
  const refresh = live.refresh;
  if (!refresh || live.busy) return;
  if (document.hidden) {
    updated.textContent = `Paused (tab hidden) · updated ${updated.dataset.at || "–"}`;
    return; // visibilitychange starts it again
  }
  live.busy = true;
  try {
    await refresh();
  } catch (error) {
    if (!(error instanceof SignInNeeded)) {
      updated.textContent = `Update failed at ${clock()}: ${error.message}`;
    }
  } finally {
    live.busy = false;
    if (live.refresh === refresh) scheduleLive();
  }
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && live.refresh) runLive();
});

// Replace a live region's content as the reader left it: the keyboard focus on the element of
// the same id, the same data tables open, the same tables scrolled sideways.
function replaceKeepingFocus(region, ...content) {
  const focused = document.activeElement;
  const focusedId = focused && region.contains(focused) ? focused.id : null;
  const open = [...region.querySelectorAll("details[id][open]")].map((d) => d.id);
  const scrolled = [...region.querySelectorAll(".table-wrap[id]")]
    .filter((w) => w.scrollLeft || w.scrollTop)
    .map((w) => [w.id, w.scrollLeft, w.scrollTop]);
  fill(region, content);
  for (const id of open) {
    const again = document.getElementById(id);
    if (again) again.open = true;
  }
  for (const [id, left, top] of scrolled) {
    const again = document.getElementById(id);
    if (again) again.scrollTo(left, top);
  }
  if (focusedId) {
    const again = document.getElementById(focusedId);
    if (again) again.focus({ preventScroll: true });
  }
}

// --- routing ----------------------------------------------------------------------------------

const ROUTES = [
  [/^\/?$/, () => overviewView],
  [/^\/overview$/, () => overviewView],
  [/^\/jobs$/, () => jobSearchView],
  [/^\/files$/, () => fileSearchView],
  [/^\/job\/([^/]+)$/, () => jobView],
  [/^\/file\/([^/]+)$/, () => fileView],
  [/^\/failures$/, () => failuresView],
  [/^\/operations$/, () => operationsView],
  [/^\/operation\/([^/]+)$/, () => operationView],
];
const NAV_OF = {
  overviewView: "overview", jobSearchView: "search", fileSearchView: "search",
  jobView: "search", fileView: "search", failuresView: "failures",
  operationsView: "operations", operationView: "operations",
};
let generation = 0;

function currentRoute() {
  const fragment = window.location.hash.slice(1);
  const [path, search] = fragment.split("?", 2);
  return { path: path || "/", params: new URLSearchParams(search || "") };
}

function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part; // malformed escapes: the API answers 400 or 404 for it
  }
}

function navigate(hash) {
  if (window.location.hash === hash) route({ focus: true });
  else window.location.hash = hash;
}

async function route({ focus = false } = {}) {
  const { path, params } = currentRoute();
  if (!path.startsWith("/")) return; // e.g. the skip link's #main: not a view
  stopLive();
  const mine = ++generation;
  const found = ROUTES.find(([pattern]) => pattern.test(path));
  const view = found ? found[1]() : notFoundView;
  const match = found ? path.match(found[0]) : null;
  const nav = NAV_OF[view.name];
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (!signedIn()) {
    showSignIn(cognito && cognito.takeSignedOut() ? "Signed out." : undefined);
    return;
  }
  showSession();
  const ctx = {
    params,
    arg: match && match[1] ? decoded(match[1]) : null,
    stale: () => mine !== generation,
  };
  try {
    await view(ctx);
  } catch (error) {
    if (error instanceof SignInNeeded || ctx.stale()) return;
    // The view's heading stays; a live view keeps trying (the API may answer again).
    if (main.querySelector("h1")) main.append(h("div", { className: "view-error" }, errorBox(error)));
    else fill(main, h("h1", { tabindex: "-1" }, "Something went wrong"), errorBox(error));
  }
  if (focus && !ctx.stale()) {
    const heading = main.querySelector("h1");
    if (heading) heading.focus();
  }
}

function page(title, ...content) {
  document.title = `${title} · filejobs console`;
  fill(main, h("div", { className: "page-head" }, h("h1", { tabindex: "-1" }, title)), ...content);
}

function notFoundView() {
  page("Not found", h("p", {}, "No such view. ", h("a", { href: "#/overview" }, "Back to the overview"), "."));
}

// --- sign-in ----------------------------------------------------------------------------------

function showSignIn(message) {
  stopLive();
  generation += 1;
  showSession();
  updated.textContent = "";
  document.title = "Sign in · filejobs console";
  if (cognito) {
    showUserPoolSignIn(message);
    return;
  }
  const input = h("input", {
    id: "signin-token", name: "token", type: "password", autocomplete: "off",
    required: true, spellcheck: "false", "aria-describedby": "signin-hint",
  });
  const form = h("form", {
    className: "signin-form",
    onsubmit: (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (!value) {
        input.focus();
        return;
      }
      setToken(value);
      route({ focus: true });
    },
  },
  h("div", { className: "field" }, h("label", { for: "signin-token" }, "API token"), input),
  h("p", { id: "signin-hint", className: "hint" },
    "The bearer token the API gave you, kept in this tab only. On AWS with IAM auth, ",
    h("code", {}, "filejobs console --stack-name STACK"),
    " opens this console signed in, through a local proxy that signs its requests. Locally, make demo prints the operator's console URL, and ",
    h("code", {}, "filejobs token --tenant T"), " mints a tenant's token."),
  h("div", { className: "form-actions" }, h("button", { type: "submit", className: "primary" }, "Sign in")));
  fill(main, h("section", { className: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in"),
    message ? h("p", { className: "error-box", role: "alert" }, message) : null,
    form));
}

// Signs in through the user pool's own pages, then back to the view the reader was on.
function showUserPoolSignIn(message) {
  const view = window.location.hash.startsWith("#/") ? window.location.hash : "#/overview";
  const start = h("button", {
    type: "button", id: "signin-start", className: "primary",
    onclick: async () => {
      start.disabled = true;
      await cognito.start(view);
    },
  }, "Sign in");
  fill(main, h("section", { className: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in"),
    message ? h("p", { className: "error-box", role: "alert" }, message) : null,
    h("p", { className: "hint" },
      "This console signs you in with the stack's user pool; your administrator creates your account. ",
      "Your session is kept in this tab only."),
    h("div", { className: "form-actions" }, start)));
}

signOut.addEventListener("click", () => {
  if (cognito) {
    signOut.disabled = true;
    cognito.signOut(); // leaves for the user pool's /logout, which comes back here
    return;
  }
  setToken(null);
  showSignIn("Signed out.");
  main.querySelector("input").focus();
});

// --- tables -----------------------------------------------------------------------------------

// columns: [{label, num}]; rows: arrays of cells, the first a row header (th scope=row).
function table({ caption, columns, rows, empty = "Nothing to show.", id, captionHidden = false }) {
  if (!rows.length) return h("p", { className: "empty", id }, empty);
  const head = h("tr", {}, columns.map((c) => h("th", { scope: "col", className: c.num ? "num" : null }, c.label)));
  const body = rows.map((row) => {
    const cells = row.cells || row;
    return h("tr", { className: row.className || null },
      cells.map((cell, index) => {
        const column = columns[index] || {};
        const classes = [column.num ? "num" : "", column.cls || ""].join(" ").trim() || null;
        return index === 0
          ? h("th", { scope: "row", className: classes }, cell)
          : h("td", { className: classes }, cell);
      }));
  });
  return h("div", { className: "table-wrap", tabindex: "0", role: "region", "aria-label": caption, id },
    h("table", {},
      h("caption", { className: captionHidden ? "visually-hidden" : null }, caption),
      h("thead", {}, head), h("tbody", {}, body)));
}

function facts(pairs) {
  return h("dl", { className: "facts" },
    pairs.filter(Boolean).flatMap(([term, value, id]) => [h("dt", {}, term), h("dd", { id }, value ?? "–")]));
}

function jobLink(job, id) {
  return h("a", { id, href: `#/job/${encodeURIComponent(job.id || job.job_id)}`, className: "mono" }, shortId(job.id || job.job_id));
}

function jobsTable(jobs, caption, id) {
  return table({
    caption,
    id,
    columns: [
      { label: "Job" }, { label: "Tenant" }, { label: "Type" }, { label: "Status" },
      { label: "Attempt", num: true }, { label: "Created", cls: "nowrap" }, { label: "Updated", cls: "nowrap" },
      { label: "Error", cls: "wrap" },
    ],
    rows: jobs.map((job) => [
      jobLink(job), job.tenant, job.job_type, badge(job.status), fmtNum(job.attempt),
      fmtTime(job.created_at), fmtTime(job.updated_at),
      clip(job.error_message || job.cancel_reason || (job.status === "running" ? progressText(job.progress) : "")),
    ]),
    empty: "No job matches.",
  });
}

// --- charts: inline SVG, each with a text alternative and its data as a table -----------------

let chartCount = 0;

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (value <= step * power) return step * power;
  }
  return 10 * power;
}

function lineChart({ title, summary, minutes, series, format }) {
  chartCount += 1;
  const titleId = `chart-${chartCount}-title`;
  const descId = `chart-${chartCount}-desc`;
  const width = 640;
  const height = 220;
  const left = 52;
  const right = 12;
  const top = 12;
  const bottom = 30;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const all = series.flatMap((line) => line.values).filter((v) => v !== null && v !== undefined);
  const yMax = niceMax(Math.max(0, ...all));
  const count = Math.max(minutes.length, 2);
  const x = (i) => left + (plotW * i) / (count - 1);
  const y = (v) => top + plotH - (plotH * v) / yMax;
  const grid = [];
  for (let tick = 0; tick <= 4; tick += 1) {
    const value = (yMax * tick) / 4;
    grid.push(s("line", { className: "grid", x1: left, x2: width - right, y1: y(value), y2: y(value) }));
    grid.push(s("text", { x: left - 6, y: y(value) + 4, "text-anchor": "end" }, format(value)));
  }
  minutes.forEach((minute, i) => {
    if (i % 15 === 0 || i === minutes.length - 1) {
      grid.push(s("text", { x: x(i), y: height - 10, "text-anchor": i === 0 ? "start" : i === minutes.length - 1 ? "end" : "middle" }, hhmm(minute)));
    }
  });
  const lines = series.flatMap((line) => {
    const segments = [];
    let points = [];
    line.values.forEach((value, i) => {
      if (value === null || value === undefined) {
        if (points.length) segments.push(points);
        points = [];
      } else {
        points.push([x(i), y(value)]);
      }
    });
    if (points.length) segments.push(points);
    return segments.map((pts) => (pts.length === 1
      ? s("circle", { className: `series ${line.cls}`, cx: pts[0][0], cy: pts[0][1], r: 2.5 })
      : s("polyline", { className: `series ${line.cls}`, points: pts.map((p) => p.map((n) => n.toFixed(1)).join(",")).join(" ") })));
  });
  const svg = s("svg", {
    viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${titleId} ${descId}`,
    preserveAspectRatio: "xMidYMid meet",
  },
  s("title", { id: titleId }, title),
  s("desc", { id: descId }, summary),
  grid,
  s("line", { className: "axis", x1: left, x2: left, y1: top, y2: top + plotH }),
  s("line", { className: "axis", x1: left, x2: width - right, y1: top + plotH, y2: top + plotH }),
  lines);
  const legend = h("ul", { className: "legend" }, series.map((line) => h("li", {},
    s("svg", { viewBox: "0 0 28 10", "aria-hidden": "true", focusable: "false" },
      s("line", { className: `series ${line.cls}`, x1: 1, x2: 27, y1: 5, y2: 5 })),
    line.label)));
  const data = table({
    id: `chart-${chartCount}-table`,
    caption: `${title}, minute by minute`,
    columns: [{ label: "Minute (UTC)" }, ...series.map((line) => ({ label: line.label, num: true }))],
    rows: minutes.map((minute, i) => [hhmm(minute), ...series.map((line) => (line.values[i] === null || line.values[i] === undefined ? "–" : format(line.values[i])))]),
    empty: "No data yet.",
  });
  return h("figure", { className: "chart" },
    h("figcaption", {}, title),
    svg,
    legend,
    h("p", { className: "hint" }, summary),
    h("details", { id: `chart-${chartCount}-data` }, h("summary", { id: `chart-${chartCount}-summary` }, "Show the data as a table"), data));
}

// --- overview ---------------------------------------------------------------------------------

function sumOf(rows, field) {
  return rows.reduce((total, row) => total + (row[field] || 0), 0);
}

function overviewContent(data) {
  const queues = data.queues || [];
  const series = data.series || [];
  const latency = data.latency_seconds;
  const minutes = series.map((point) => point.minute);
  const completed = series.map((point) => point.completed ?? 0);
  const failed = series.map((point) => point.failed ?? 0);
  const percentile = (name) => series.map((point) => (point.latency_seconds ? point.latency_seconds[name] : null));
  const peak = Math.max(0, ...completed);
  const peakAt = completed.indexOf(peak);
  const cards = [
    ["pending", "Pending", sumOf(queues, "pending")],
    ["scheduled", "Scheduled (retry)", sumOf(queues, "scheduled")],
    ["running", "Running", sumOf(queues, "running")],
    ["completed_last_hour", "Completed, last hour", sumOf(queues, "completed_last_hour")],
    ["failed_last_hour", "Failed, last hour", sumOf(queues, "failed_last_hour")],
    ["failed_last_day", "Failed, last 24 h", sumOf(queues, "failed_last_day")],
  ];
  const cardList = h("ul", { className: "cards", "aria-label": "Totals" },
    cards.map(([key, label, value]) => h("li", { className: "card" },
      h("span", { className: "label", id: `metric-${key}-label` }, label),
      h("span", { className: "value", id: `metric-${key}`, "data-metric": key, "aria-describedby": `metric-${key}-label` }, fmtNum(value)))),
    h("li", { className: "card" },
      h("span", { className: "label" }, "Latency p50 / p95 / p99, last hour"),
      h("span", { className: "value small", id: "metric-latency", "data-metric": "latency" },
        latency ? `${fmtSeconds(latency.p50)} / ${fmtSeconds(latency.p95)} / ${fmtSeconds(latency.p99)}` : "–")));

  const failedLink = (row, field) => {
    const value = row[field] || 0;
    if (!value) return fmtNum(value);
    return h("a", { id: `${field}-${row.job_type}-${row.lane}`, href: `#/jobs${query({ status: "failed", job_type: row.job_type, tenant: data.scope !== "all" ? data.scope : "" })}`, "aria-label": `${fmtNum(value)} failed ${row.job_type} jobs: search them` }, fmtNum(value));
  };
  const queueRows = queues.map((row) => [
    row.job_type, row.lane, fmtNum(row.pending), fmtNum(row.scheduled), fmtNum(row.running),
    fmtNum(row.completed_last_hour), failedLink(row, "failed_last_hour"), failedLink(row, "failed_last_day"),
  ]);
  if (queues.length > 1) {
    queueRows.push({
      className: "total",
      cells: ["Total", "", ...["pending", "scheduled", "running", "completed_last_hour", "failed_last_hour", "failed_last_day"].map((f) => fmtNum(sumOf(queues, f)))],
    });
  }
  const queueTable = table({
    caption: "Jobs by type and lane",
    id: "queues",
    columns: [
      { label: "Job type" }, { label: "Lane" }, { label: "Pending", num: true }, { label: "Scheduled", num: true },
      { label: "Running", num: true }, { label: "Completed (1 h)", num: true }, { label: "Failed (1 h)", num: true },
      { label: "Failed (24 h)", num: true },
    ],
    rows: queueRows,
    empty: "No job type reported yet.",
  });
  const deadLetters = data.dead_letters || [];
  const deadTable = table({
    caption: "Dead-letter queue depths",
    captionHidden: true,
    id: "dead-letters",
    columns: [{ label: "Queue" }, { label: "Messages", num: true }],
    rows: deadLetters.map((row) => [row.queue, fmtNum(row.depth)]),
    empty: "None reported (operators see the dead-letter queues).",
  });
  const throughput = lineChart({
    title: "Throughput: jobs finished per minute",
    summary: series.length
      ? `Last ${series.length} minutes: ${fmtNum(sumOf(series, "completed"))} completed, ${fmtNum(sumOf(series, "failed"))} failed`
        + (peak ? `; at most ${fmtNum(peak)} completed a minute (${hhmm(minutes[peakAt])} UTC).` : ".")
      : "No minute recorded yet.",
    minutes,
    format: (v) => fmtNum(Math.round(v * 10) / 10),
    series: [
      { label: "Completed", cls: "completed", values: completed },
      { label: "Failed", cls: "failed", values: failed },
    ],
  });
  const latencyChart = lineChart({
    title: "Latency from upload to a job's end (seconds)",
    summary: latency
      ? `Last hour: p50 ${fmtSeconds(latency.p50)}, p95 ${fmtSeconds(latency.p95)}, p99 ${fmtSeconds(latency.p99)}.`
      : "No job finished in the last hour.",
    minutes,
    format: (v) => (v >= 10 ? String(Math.round(v)) : String(Math.round(v * 100) / 100)),
    series: [
      { label: "p50", cls: "p50", values: percentile("p50") },
      { label: "p95", cls: "p95", values: percentile("p95") },
      { label: "p99", cls: "p99", values: percentile("p99") },
    ],
  });
  const byType = Object.entries(data.latency_by_type || {}).filter(([, value]) => value);
  const latencyTable = byType.length ? table({
    caption: "Latency by job type, last hour",
    id: "latency-by-type",
    columns: [{ label: "Job type" }, { label: "p50", num: true }, { label: "p95", num: true }, { label: "p99", num: true }],
    rows: byType.map(([type, value]) => [type, fmtSeconds(value.p50), fmtSeconds(value.p95), fmtSeconds(value.p99)]),
  }) : null;
  const scan = data.virus_scan || {};
  const definitions = scan.definitions;
  const stale = definitions && definitions.age_seconds > 86400;
  const verdicts = ["clean", "infected", "unscannable"];
  const scanSection = h("section", { "aria-labelledby": "scan-title" },
    h("h2", { id: "scan-title" }, "Virus scan"),
    facts([
      ["Definitions", definitions ? h("span", { className: "mono" }, definitions.version) : h("span", { className: "badge failed" }, "none current")],
      definitions && definitions.published_at ? ["Published", fmtTime(definitions.published_at)] : null,
      ["Definitions age", definitions ? [fmtAge(definitions.age_seconds), stale ? " " : null, stale ? h("span", { className: "badge failed" }, "stale") : null] : "–", "definitions-age"],
    ]),
    table({
      caption: "Verdicts",
      id: "verdicts",
      columns: [{ label: "Verdict" }, { label: "Last hour", num: true }, { label: "Last 24 h", num: true }],
      rows: verdicts.map((verdict) => [verdict, fmtNum((scan.verdicts_last_hour || {})[verdict] ?? 0), fmtNum((scan.verdicts_last_day || {})[verdict] ?? 0)]),
    }));
  return [
    h("p", { className: "hint" }, `Scope: ${data.scope === "all" ? "every tenant" : `tenant ${data.scope}`} · generated `, fmtTime(data.generated_at)),
    cardList,
    h("section", { "aria-labelledby": "queues-title" }, h("h2", { id: "queues-title" }, "Queues"), queueTable),
    h("section", { "aria-labelledby": "charts-title" },
      h("h2", { id: "charts-title" }, "The last 60 minutes"),
      h("div", { className: "grid-2" }, throughput, latencyChart),
      latencyTable),
    h("div", { className: "grid-2" },
      h("section", { "aria-labelledby": "dead-title" }, h("h2", { id: "dead-title" }, "Dead-letter queues"), deadTable),
      scanSection),
  ];
}

function tenantFilter(id, params, target) {
  const input = h("input", { id, name: "tenant", value: params.get("tenant") || "", autocomplete: "off", spellcheck: "false" });
  return h("form", {
    className: "toolbar",
    role: "search",
    "aria-label": "Tenant",
    onsubmit: (event) => {
      event.preventDefault();
      navigate(`${target}${query({ tenant: input.value.trim() })}`);
    },
  },
  h("label", { for: id }, "Tenant (operators; blank for every tenant)"),
  h("span", {}, input),
  h("button", { type: "submit" }, "Show"));
}

function unchanged(region, data, ignore = []) {
  const copy = { ...data };
  for (const field of ignore) delete copy[field];
  const text = JSON.stringify(copy);
  if (region.dataset.last === text) return true;
  region.dataset.last = text;
  return false;
}

async function overviewView(ctx) {
  const tenant = ctx.params.get("tenant") || "";
  const region = h("div", { id: "overview" }, h("p", { className: "loading" }, "Loading…"));
  page("Overview", tenantFilter("overview-tenant", ctx.params, "#/overview"), region);
  const load = async () => {
    const data = await api(`overview${query({ tenant })}`);
    if (ctx.stale()) return;
    if (!unchanged(region, data, ["generated_at"])) {
      chartCount = 0;
      replaceKeepingFocus(region, ...overviewContent(data));
      // When the page first showed its figures (the browser tests read it).
      if (!performance.getEntriesByName("filejobs:overview-drawn").length) performance.mark("filejobs:overview-drawn");
    }
    markUpdated();
  };
  setLive(load);
  await load();
}

// --- search: jobs and files -------------------------------------------------------------------

function field(id, label, control, hint) {
  return h("div", { className: "field" }, h("label", { for: id }, label), control,
    hint ? h("span", { className: "hint", id: `${id}-hint` }, hint) : null);
}

// datetime-local (read as UTC) <-> ISO 8601
function toIso(local) {
  return local ? `${local.length === 16 ? `${local}:00` : local}+00:00` : "";
}

function fromIso(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? "" : at.toISOString().slice(0, 16);
}

function searchTabs(current) {
  return h("nav", { className: "toolbar", "aria-label": "Search" },
    h("a", { href: "#/jobs", "aria-current": current === "jobs" ? "page" : null }, "Jobs"),
    " · ",
    h("a", { href: "#/files", "aria-current": current === "files" ? "page" : null }, "Files by key prefix"));
}

async function jobSearchView(ctx) {
  const params = ctx.params;
  const input = (name, attrs = {}) => h("input", { id: `search-${name}`, name, value: params.get(name) || "", autocomplete: "off", ...attrs });
  const statusSelect = h("select", { id: "search-status", name: "status" },
    h("option", { value: "" }, "any"),
    JOB_STATUSES.map((status) => h("option", { value: status, selected: params.get("status") === status }, status)));
  const since = h("input", { id: "search-since", name: "since", type: "datetime-local", value: fromIso(params.get("since")) });
  const until = h("input", { id: "search-until", name: "until", type: "datetime-local", value: fromIso(params.get("until")) });
  const form = h("form", {
    className: "search",
    id: "job-search",
    role: "search",
    "aria-label": "Jobs",
    onsubmit: (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const wanted = {};
      for (const name of SEARCH_FIELDS) wanted[name] = String(data.get(name) || "").trim();
      wanted.since = toIso(wanted.since);
      wanted.until = toIso(wanted.until);
      navigate(`#/jobs${query(wanted)}`);
    },
  },
  h("div", { className: "fields" },
    field("search-tenant", "Tenant (operators)", input("tenant", { spellcheck: "false" })),
    field("search-job_type", "Job type", input("job_type", { list: "job-types", spellcheck: "false" })),
    field("search-status", "Status", statusSelect),
    field("search-error", "Error text contains", input("error")),
    field("search-group", "Failure group", input("group", { spellcheck: "false" })),
    field("search-since", "Created since (UTC)", since),
    field("search-until", "Created until (UTC)", until)),
  h("datalist", { id: "job-types" }, JOB_TYPES.map((type) => h("option", { value: type }))),
  h("p", { className: "hint" }, "An operator names a tenant, a status or a failure group; a tenant sees its own jobs."),
  h("div", { className: "form-actions" },
    h("button", { type: "submit", className: "primary" }, "Search jobs"),
    h("a", { href: "#/jobs", className: "button" }, "Clear")));
  const results = h("section", { id: "results", "aria-labelledby": "results-title" });
  page("Search", searchTabs("jobs"), form, results);
  const filter = {};
  for (const name of SEARCH_FIELDS) if (params.get(name)) filter[name] = params.get(name);
  if (!Object.keys(filter).length) return;
  let pageNumber = 1;
  const tokens = [];
  const load = async (next) => {
    fill(results, h("h2", { id: "results-title" }, "Jobs"), h("p", { className: "loading" }, "Searching…"));
    let found;
    try {
      found = await api(`jobs${query({ ...filter, limit: 50, next_token: next })}`);
    } catch (error) {
      if (error instanceof SignInNeeded) throw error;
      fill(results, h("h2", { id: "results-title" }, "Jobs"), errorBox(error));
      return;
    }
    if (ctx.stale()) return;
    const jobs = found.jobs || [];
    const pager = h("div", { className: "pager" },
      h("span", { id: "results-page" }, `Page ${pageNumber} · ${fmtNum(jobs.length)} job${jobs.length === 1 ? "" : "s"}`),
      pageNumber > 1 ? h("button", {
        type: "button",
        onclick: () => { pageNumber = 1; tokens.length = 0; load(undefined); },
      }, "First page") : null,
      found.next_token ? h("button", {
        type: "button", id: "next-page",
        onclick: () => { pageNumber += 1; tokens.push(found.next_token); load(found.next_token).then(() => document.getElementById("results-title").focus()); },
      }, "Next page") : null);
    fill(results, 
      h("h2", { id: "results-title", tabindex: "-1" }, "Jobs"),
      h("div", { className: "toolbar" },
        h("button", {
          type: "button", id: "bulk-from-search",
          onclick: (event) => openBulk({ action: filter.status === "pending" || filter.status === "running" || filter.status === "scheduled" ? "cancel" : "retry", filter, opener: event.currentTarget }),
        }, "Bulk action on this search…")),
      jobsTable(jobs, "Jobs found", "job-results"),
      jobs.length === 0 && found.next_token ? h("p", { className: "hint" }, "This page read part of the index and found nothing yet: the next page continues.") : null,
      pager);
    markUpdated();
  };
  await load(undefined);
}

async function fileSearchView(ctx) {
  const params = ctx.params;
  const prefix = h("input", { id: "files-prefix", name: "prefix", value: params.get("prefix") || "", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "files-prefix-hint" });
  const tenant = h("input", { id: "files-tenant", name: "tenant", value: params.get("tenant") || "", autocomplete: "off", spellcheck: "false" });
  const form = h("form", {
    className: "search",
    id: "file-search",
    role: "search",
    "aria-label": "Files",
    onsubmit: (event) => {
      event.preventDefault();
      navigate(`#/files${query({ prefix: prefix.value.trim(), tenant: tenant.value.trim() })}`);
    },
  },
  h("div", { className: "fields" },
    field("files-prefix", "Key prefix", prefix, "The start of the object key, e.g. uploads/acme/contracts/"),
    field("files-tenant", "Tenant (operators)", tenant)),
  h("div", { className: "form-actions" }, h("button", { type: "submit", className: "primary" }, "Search files")));
  const results = h("section", { id: "results", "aria-labelledby": "results-title" });
  page("Search", searchTabs("files"), form, results);
  if (!params.has("prefix")) return;
  let pageNumber = 1;
  const load = async (next) => {
    let found;
    try {
      found = await api(`files${query({ prefix: params.get("prefix"), tenant: params.get("tenant"), limit: 50, next_token: next })}`);
    } catch (error) {
      if (error instanceof SignInNeeded) throw error;
      fill(results, h("h2", { id: "results-title" }, "Files"), errorBox(error));
      return;
    }
    if (ctx.stale()) return;
    const files = found.files || [];
    fill(results, 
      h("h2", { id: "results-title", tabindex: "-1" }, "Files"),
      table({
        caption: "Files found",
        id: "file-results",
        columns: [{ label: "Key" }, { label: "Tenant" }, { label: "Status" }, { label: "Scan" }, { label: "Size", num: true }, { label: "Type" }, { label: "Created", cls: "nowrap" }],
        rows: files.map((file) => [
          h("a", { href: `#/file/${encodeURIComponent(file.id)}` }, file.key), file.tenant, badge(file.status),
          badge(file.scan_status), fmtBytes(file.size), file.content_type || "–", fmtTime(file.created_at),
        ]),
        empty: "No file under this prefix.",
      }),
      h("div", { className: "pager" },
        h("span", {}, `Page ${pageNumber}`),
        found.next_token ? h("button", {
          type: "button", id: "next-page",
          onclick: () => { pageNumber += 1; load(found.next_token).then(() => document.getElementById("results-title").focus()); },
        }, "Next page") : null));
    markUpdated();
  };
  await load(undefined);
}

// --- a job, a file ----------------------------------------------------------------------------

function outputsList(job) {
  const outputs = job.outputs || [];
  if (!outputs.length) return h("p", { className: "empty" }, job.status === "completed" ? "This job wrote no file." : "No output until the job completes.");
  return h("ul", { className: "outputs" }, outputs.map((output) => h("li", {},
    h("figure", {},
      IMAGE_NAME.test(output.name || output.key)
        ? h("img", { src: output.url, alt: `${output.name}, written by ${job.job_type}`, loading: "lazy", decoding: "async", className: "output-image" })
        : null,
      h("figcaption", {},
        h("a", { href: output.url, rel: "noopener noreferrer", download: output.name }, `Download ${output.name}`),
        h("br"), h("span", { className: "hint" }, "Link valid until ", fmtTime(output.expires_at)))))));
}

// Every image a file's jobs wrote (thumbnails, posters, previews), shown inline.
function previews(jobs) {
  const images = jobs.flatMap((job) => (job.outputs || [])
    .filter((output) => IMAGE_NAME.test(output.name || output.key))
    .map((output) => ({ job, output })));
  if (!images.length) return null;
  return [
    h("h2", {}, "Outputs"),
    h("ul", { className: "outputs" }, images.map(({ job, output }) => h("li", {},
      h("figure", {},
        h("img", { src: output.url, alt: `${output.name}, written by ${job.job_type}`, loading: "lazy", decoding: "async", className: "output-image" }),
        h("figcaption", {}, h("a", { href: `#/job/${encodeURIComponent(job.id)}` }, `${job.job_type}: ${output.name}`)))))),
  ];
}

async function jobAction(job, action) {
  try {
    const body = action === "cancel" ? { reason: "cancelled from the console" } : undefined;
    await api(`jobs/${encodeURIComponent(job.id)}/${action}`, { method: "POST", body });
    route({ focus: false });
  } catch (error) {
    if (!(error instanceof SignInNeeded)) showAlert(`${action}: ${error.message}`);
  }
}

// A block of text that may scroll: focusable, so a keyboard can scroll it too.
function block(id, label, text) {
  return h("pre", { id, tabindex: "0", title: label }, text);
}

// "40% · encoded 12 of 30 s" from a job's progress or an attempt's record ("" when it said none).
function progressText(notes) {
  if (!notes) return "";
  const parts = [notes.percent == null ? "" : `${notes.percent}%`, notes.message || ""];
  return parts.filter(Boolean).join(" · ");
}

// The running attempt's progress as its last heartbeat carried it (a cancelled job keeps where
// its attempt stopped): a labelled <progress>, its text, and the log so far.
function progressSection(job) {
  const p = job.progress;
  if (!p) return null;
  const running = job.status === "running";
  const label = running ? `Attempt ${p.attempt}` : `Attempt ${p.attempt}, where it stopped`;
  const text = progressText(p) || "No fraction reported yet";
  const bar = p.fraction == null
    ? h("progress", { id: "job-progress", "aria-describedby": "job-progress-text" })
    : h("progress", { id: "job-progress", max: "1", value: String(p.fraction), "aria-describedby": "job-progress-text" }, `${p.percent}%`);
  return [
    h("h2", {}, "Progress"),
    h("div", { className: "field progress" },
      h("label", { for: "job-progress" }, label), bar,
      h("span", { id: "job-progress-text" }, text)),
    h("p", { className: "hint" }, `As of ${fmtTime(p.updated_at)}: a heartbeat carries it, every third of the lease.`),
    p.log && p.log.length ? block("job-progress-log", "Log so far", p.log.join("\n")) : null,
  ];
}

// Each attempt's log (GET /jobs/{id} only), newest attempt first, folded.
function attemptLogs(attempts) {
  const logged = attempts.filter((a) => (a.log || []).length).reverse();
  if (!logged.length) return h("p", { className: "empty", id: "attempt-logs" }, "No attempt logged a line.");
  return h("div", { id: "attempt-logs" }, logged.map((a, index) => h("details", { open: index === 0 },
    h("summary", {}, `Attempt ${a.number} (${a.outcome}): ${a.log.length} line${a.log.length === 1 ? "" : "s"}`
      + (a.log_lines_dropped ? `, ${fmtNum(a.log_lines_dropped)} left out` : "")),
    block(`attempt-${a.number}-log`, `Log of attempt ${a.number}`, a.log.join("\n")))));
}

function jobContent(job) {
  const attempts = job.attempts || [];
  const actions = [];
  if (job.status === "failed" || job.status === "cancelled") {
    actions.push(h("button", { type: "button", id: "job-retry", onclick: () => jobAction(job, "retry") }, "Retry this job"));
  }
  if (!TERMINAL.has(job.status)) {
    actions.push(h("button", { type: "button", id: "job-cancel", onclick: () => jobAction(job, "cancel") }, "Cancel this job"));
  }
  return [
    h("p", {}, badge(job.status), " ", job.job_type, " of file ",
      h("a", { href: `#/file/${encodeURIComponent(job.file_id)}`, id: "job-file-link" }, job.file_id)),
    actions.length ? h("div", { className: "toolbar" }, actions) : null,
    facts([
      ["Job id", h("span", { className: "mono" }, job.id)],
      ["Tenant", job.tenant],
      ["Status", badge(job.status), "job-status"],
      ["Priority", fmtNum(job.priority)],
      ["Attempt", `${fmtNum(job.attempt)} (retries ${fmtNum(job.retry_count)} of ${fmtNum(job.max_retries)})`],
      ["Created", fmtTime(job.created_at)],
      ["Started", fmtTime(job.started_at)],
      ["Completed", fmtTime(job.completed_at)],
      ["Duration", fmtSeconds(job.duration_seconds)],
      // A scheduled job that never ran is a delayed one: it starts then; one that ran retries then.
      job.next_retry_at ? [job.attempt ? "Next retry" : "Starts", fmtTime(job.next_retry_at)] : null,
      job.cancelled_by ? ["Cancelled by", `${job.cancelled_by}${job.cancel_reason ? `: ${job.cancel_reason}` : ""}`] : null,
      ["Updated", fmtTime(job.updated_at)],
    ]),
    progressSection(job),
    job.error_message ? [h("h2", {}, "Error"), block("job-error", "Error message", job.error_message)] : null,
    h("h2", {}, "Outputs"),
    outputsList(job),
    h("h2", {}, "Attempts"),
    table({
      caption: "Attempts",
      id: "attempts",
      columns: [{ label: "Attempt", num: true }, { label: "Started", cls: "nowrap" }, { label: "Ended", cls: "nowrap" }, { label: "Outcome" }, { label: "Progress", cls: "wrap" }, { label: "Error", cls: "wrap" }],
      rows: attempts.map((a) => [fmtNum(a.number), fmtTime(a.started_at), fmtTime(a.ended_at), badge(a.outcome), progressText(a), a.error || ""]),
      empty: "No attempt yet.",
    }),
    h("h2", {}, "Attempt logs"),
    attemptLogs(attempts),
    "input" in job ? [h("h2", {}, "Input"), block("job-input", "Input", pretty(job.input))] : null,
    h("h2", {}, "Result"),
    job.result ? block("job-result", "Result", pretty(job.result)) : h("p", { className: "empty" }, "No result."),
  ];
}

async function jobView(ctx) {
  const region = h("div", { id: "job" });
  page(`Job ${shortId(ctx.arg)}`, region);
  const load = async () => {
    const job = await api(`jobs/${encodeURIComponent(ctx.arg)}`);
    if (ctx.stale()) return;
    // Outputs carry fresh presigned URLs on every answer: compare without them.
    if (!unchanged(region, { ...job, outputs: (job.outputs || []).map((o) => o.key) })) {
      replaceKeepingFocus(region, ...jobContent(job));
    }
    if (TERMINAL.has(job.status)) stopLive();
    markUpdated();
  };
  setLive(load);
  await load();
}

async function fileView(ctx) {
  page(`File ${shortId(ctx.arg)}`, h("p", { className: "loading" }, "Loading…"));
  const file = await api(`files/${encodeURIComponent(ctx.arg)}`);
  if (ctx.stale()) return;
  const scan = file.scan;
  page(`File ${file.key.split("/").pop()}`,
    facts([
      ["File id", h("span", { className: "mono" }, file.id)],
      ["Key", h("span", { className: "mono" }, file.key)],
      ["Tenant", file.tenant],
      ["Status", [badge(file.status), file.status_reason ? ` ${file.status_reason}` : ""], "file-status"],
      ["Verdict", badge(file.scan_status), "file-verdict"],
      ["Size", fmtBytes(file.size)],
      ["Content type", file.content_type || "–"],
      ["SHA-256", file.sha256 ? h("span", { className: "mono" }, file.sha256) : "–"],
      ["Duplicate of", file.duplicate_of ? h("a", { href: `#/file/${encodeURIComponent(file.duplicate_of)}`, id: "duplicate-of" }, file.duplicate_of) : "–"],
      ["Bucket", file.bucket],
      ["Version", file.version_id || "–"],
      ["Created", fmtTime(file.created_at)],
      ["Updated", fmtTime(file.updated_at)],
    ]),
    h("h2", {}, "Jobs"),
    jobsTable(file.jobs || [], "Jobs of this file", "file-jobs"),
    previews(file.jobs || []),
    "duplicates" in file ? [
      h("h2", {}, "Files of the same content"),
      table({
        caption: "The tenant's other files of the same content",
        id: "file-duplicates",
        columns: [{ label: "Key" }, { label: "Created", cls: "nowrap" }],
        rows: (file.duplicates || []).map((other) => [
          h("a", { href: `#/file/${encodeURIComponent(other.id)}` }, other.key), fmtTime(other.created_at),
        ]),
        empty: "None: no other file of this tenant has the same bytes.",
      }),
    ] : null,
    h("h2", {}, "Virus scan"),
    scan ? facts([
      ["Verdict", badge(scan.verdict)],
      ["Scanned", fmtTime(scan.scanned_at)],
      ["By job", scan.job_id ? h("a", { href: `#/job/${encodeURIComponent(scan.job_id)}` }, shortId(scan.job_id)) : "–"],
      ["Engines", Object.entries(scan.engines || {}).map(([engine, version]) => `${engine} ${version}`).join(", ") || "–"],
      ["Definitions", scan.definitions_version || "–"],
      ["Signatures", (scan.signatures || []).join(", ") || "none"],
      scan.reason ? ["Reason", scan.reason] : null,
    ]) : h("p", { className: "empty" }, "Not scanned yet."));
  markUpdated();
}

// --- failure groups ---------------------------------------------------------------------------

function failureRows(groups) {
  return groups.map((group) => {
    const slug = group.id.replace(/[^A-Za-z0-9_-]/g, "-");
    const what = `${group.job_type}: ${group.fingerprint}`;
    const act = (action, label) => h("button", {
      type: "button", className: "small", id: `${action}-${slug}`, "data-group": group.id,
      "aria-label": `${label}: ${what}`,
      onclick: (event) => openBulk({ action, filter: { group: group.id }, opener: event.currentTarget, about: what }),
    }, label);
    const sample = group.sample || {};
    return [
      group.job_type,
      h("code", {}, group.fingerprint),
      fmtNum(group.count),
      group.total === undefined ? "–" : fmtNum(group.total),
      h("div", { className: "actions row-actions" },
        h("a", { id: `jobs-${slug}`, href: `#/jobs${query({ group: group.id })}`, className: "button small", "aria-label": `List the jobs of ${what}` }, "Jobs"),
        act("retry", "Retry group"), act("cancel", "Cancel"), act("delete", "Delete")),
      fmtTime(group.last_seen),
      fmtTime(group.first_seen),
      sample.job_id ? [jobLink(sample, `sample-${slug}`), sample.tenant ? ` (${sample.tenant})` : "", h("br"), h("span", { className: "hint" }, clip(sample.error_message, 120))] : "–",
    ];
  });
}

async function failuresView(ctx) {
  const tenant = ctx.params.get("tenant") || "";
  const region = h("div", { id: "failures" }, h("p", { className: "loading" }, "Loading…"));
  page("Failure groups",
    h("p", { className: "hint" }, "Jobs failed now (not since retried or deleted), grouped by job type and error, the largest group first."),
    tenantFilter("failures-tenant", ctx.params, "#/failures"),
    region);
  const load = async () => {
    const data = await api(`failures${query({ tenant, job_type: ctx.params.get("job_type") })}`);
    if (ctx.stale()) return;
    if (!unchanged(region, data)) {
      const groups = data.groups || [];
      replaceKeepingFocus(region, table({
        caption: "Failure groups",
        id: "groups",
        columns: [
          { label: "Job type" }, { label: "Error (fingerprint)", cls: "wrap" }, { label: "Failed now", num: true },
          { label: "Ever failed so", num: true }, { label: "Actions" },
          { label: "Last seen", cls: "nowrap" }, { label: "First seen", cls: "nowrap" }, { label: "Sample", cls: "wrap" },
        ],
        rows: failureRows(groups),
        empty: "No failed job: nothing to group.",
      }));
    }
    markUpdated();
  };
  setLive(load);
  await load();
}

// --- the bulk action dialog -------------------------------------------------------------------

const bulk = {
  dialog: document.getElementById("bulk-dialog"),
  form: document.getElementById("bulk-form"),
  action: document.getElementById("bulk-action"),
  filterList: document.getElementById("bulk-filter"),
  reason: document.getElementById("bulk-reason"),
  reasonError: document.getElementById("bulk-reason-error"),
  preview: document.getElementById("bulk-preview"),
  dryRun: document.getElementById("bulk-dry-run"),
  run: document.getElementById("bulk-run"),
  close: document.getElementById("bulk-close"),
  filter: {},
  key: null, // one Idempotency-Key per dialog and body: a double click makes one operation
  previewed: null,
  opener: null,
};

function openBulk({ action, filter, opener }) {
  bulk.filter = { ...filter };
  bulk.key = idempotencyKey();
  bulk.previewed = null;
  bulk.opener = opener ? opener.id : null;
  bulk.action.value = action;
  bulk.reason.value = "";
  bulk.reasonError.hidden = true;
  bulk.reason.removeAttribute("aria-invalid");
  fill(bulk.preview);
  bulk.run.disabled = true;
  bulk.run.textContent = "Run";
  bulk.dryRun.disabled = false;
  const entries = Object.entries(bulk.filter);
  fill(bulk.filterList, ...(entries.length
    ? entries.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { className: "mono" }, value)])
    : [h("dt", {}, "all"), h("dd", {}, "every job the caller may see")]));
  bulk.dialog.showModal();
  bulk.reason.focus();
}

function bulkBody(dryRun) {
  return { action: bulk.action.value, filter: bulk.filter, reason: bulk.reason.value.trim(), dry_run: dryRun };
}

function reasonGiven() {
  const ok = bulk.reason.value.trim().length > 0;
  bulk.reasonError.hidden = ok;
  if (ok) bulk.reason.removeAttribute("aria-invalid");
  else {
    bulk.reason.setAttribute("aria-invalid", "true");
    bulk.reason.focus();
  }
  return ok;
}

function bulkChanged() {
  // Another body: the next run is another request, under a key of its own.
  if (bulk.previewed) {
    bulk.previewed = null;
    bulk.run.disabled = true;
    bulk.run.textContent = "Run";
    fill(bulk.preview, h("p", {}, "Changed since the dry run: run the dry run again."));
  }
  bulk.key = idempotencyKey();
}

bulk.action.addEventListener("change", bulkChanged);
bulk.reason.addEventListener("input", bulkChanged);

bulk.dryRun.addEventListener("click", async () => {
  if (!reasonGiven()) return;
  bulk.dryRun.disabled = true;
  fill(bulk.preview, h("p", { className: "loading" }, "Counting the matching jobs…"));
  try {
    const body = bulkBody(true);
    const found = await api("operations", { method: "POST", body });
    bulk.previewed = body;
    const matched = found.matched || 0;
    const count = `${found.exact === false ? "at least " : ""}${fmtNum(matched)}`;
    fill(bulk.preview, 
      h("p", { className: "matched", id: "bulk-matched" }, `${count} job${matched === 1 ? "" : "s"} would be touched by ${found.action}.`),
      (found.sample || []).length ? table({
        caption: `A sample of the matching jobs (${found.sample.length})`,
        id: "bulk-sample",
        columns: [{ label: "Job" }, { label: "Tenant" }, { label: "Type" }, { label: "Status" }, { label: "Error", cls: "wrap" }],
        rows: found.sample.map((job) => [jobLink(job), job.tenant, job.job_type, badge(job.status), clip(job.error_message || "", 90)]),
      }) : null);
    bulk.run.disabled = matched === 0;
    bulk.run.textContent = matched === 0 ? "Nothing to run" : `Run ${found.action} on ${count} job${matched === 1 ? "" : "s"}`;
  } catch (error) {
    if (error instanceof SignInNeeded) {
      bulk.dialog.close();
      return;
    }
    fill(bulk.preview, errorBox(error));
  } finally {
    bulk.dryRun.disabled = false;
  }
});

bulk.run.addEventListener("click", async () => {
  if (!bulk.previewed || bulk.run.disabled || !reasonGiven()) return;
  bulk.run.disabled = true;
  bulk.dryRun.disabled = true;
  bulk.run.textContent = "Starting…";
  try {
    const operation = await api("operations", {
      method: "POST", body: bulkBody(false), headers: { "Idempotency-Key": bulk.key },
    });
    bulk.opener = null;
    bulk.dialog.close();
    navigate(`#/operation/${encodeURIComponent(operation.id)}`);
  } catch (error) {
    if (error instanceof SignInNeeded) {
      bulk.dialog.close();
      return;
    }
    bulk.preview.append(errorBox(error));
    bulk.run.disabled = false;
    bulk.run.textContent = "Run";
  } finally {
    bulk.dryRun.disabled = false;
  }
});

bulk.close.addEventListener("click", () => bulk.dialog.close());
bulk.dialog.addEventListener("close", () => {
  const opener = bulk.opener && document.getElementById(bulk.opener);
  if (opener) opener.focus();
});
bulk.form.addEventListener("submit", (event) => event.preventDefault());

// --- operations -------------------------------------------------------------------------------

function filterText(filter) {
  const entries = Object.entries(filter || {});
  return entries.length ? entries.map(([name, value]) => `${name}=${value}`).join(", ") : "every job";
}

function operationContent(op) {
  const matched = op.matched || 0;
  const processed = op.processed || 0;
  const percent = matched ? Math.min(100, Math.round((100 * processed) / matched)) : (op.status === "running" ? 0 : 100);
  return [
    h("p", {}, badge(op.status), ` ${op.action} · ${filterText(op.filter)}`),
    h("div", { className: "progress" },
      h("label", { for: "op-progress" }, "Progress"),
      h("progress", { id: "op-progress", max: Math.max(matched, 1), value: matched ? Math.min(processed, matched) : (op.status === "running" ? 0 : 1) }, `${percent}%`),
      h("p", { id: "op-progress-text" }, `${fmtNum(processed)} of ${fmtNum(matched)} processed (${percent}%)`)),
    facts([
      ["Status", badge(op.status), "op-status"],
      ["Matched (dry run at start)", fmtNum(op.matched), "op-matched"],
      ["Processed", fmtNum(op.processed), "op-processed"],
      ["Changed", fmtNum(op.changed), "op-changed"],
      ["Skipped (already so)", fmtNum(op.skipped), "op-skipped"],
      ["Errors", fmtNum(op.errors), "op-errors"],
      ["Action", op.action],
      ["Filter", h("span", { className: "mono" }, filterText(op.filter))],
      ["Reason", op.reason],
      ["Tenant", op.tenant || "every tenant"],
      ["By", op.created_by],
      ["Started", fmtTime(op.created_at)],
      ["Updated", fmtTime(op.updated_at)],
      ["Finished", fmtTime(op.finished_at)],
      op.error ? ["Error", op.error] : null,
    ]),
    op.filter && op.filter.group
      ? h("p", {}, h("a", { href: `#/jobs${query({ group: op.filter.group })}` }, "The group's jobs now"), " · ", h("a", { href: "#/failures" }, "Failure groups"))
      : null,
  ];
}

async function operationView(ctx) {
  const region = h("div", { id: "operation" });
  page(`Operation ${ctx.arg}`, region);
  const load = async () => {
    const op = await api(`operations/${encodeURIComponent(ctx.arg)}`);
    if (ctx.stale()) return;
    if (!unchanged(region, op)) replaceKeepingFocus(region, ...operationContent(op));
    if (op.status !== "running") stopLive();
    markUpdated();
  };
  setLive(load);
  await load();
}

async function operationsView(ctx) {
  const tenant = ctx.params.get("tenant") || "";
  const region = h("div", { id: "operations" });
  page("Operations",
    h("p", { className: "hint" }, "Every bulk action: who ran it, when, why, on which jobs, and what it did. Newest first."),
    tenantFilter("operations-tenant", ctx.params, "#/operations"),
    region);
  let pageNumber = 1;
  const load = async (next) => {
    const found = await api(`operations${query({ tenant, limit: 25, next_token: next })}`);
    if (ctx.stale()) return;
    const operations = found.operations || [];
    fill(region, 
      table({
        caption: "Operations",
        id: "operation-list",
        columns: [
          { label: "Operation" }, { label: "Started", cls: "nowrap" }, { label: "By" }, { label: "Action" },
          { label: "Filter", cls: "wrap" }, { label: "Reason", cls: "wrap" }, { label: "Status" },
          { label: "Matched", num: true }, { label: "Processed", num: true }, { label: "Changed", num: true },
          { label: "Skipped", num: true }, { label: "Errors", num: true },
        ],
        rows: operations.map((op) => [
          h("a", { href: `#/operation/${encodeURIComponent(op.id)}`, className: "mono" }, op.id),
          fmtTime(op.created_at), op.created_by, op.action, filterText(op.filter), op.reason, badge(op.status),
          fmtNum(op.matched), fmtNum(op.processed), fmtNum(op.changed), fmtNum(op.skipped), fmtNum(op.errors),
        ]),
        empty: "No operation yet.",
      }),
      h("div", { className: "pager" },
        h("span", {}, `Page ${pageNumber}`),
        found.next_token ? h("button", {
          type: "button", id: "next-page",
          onclick: () => { pageNumber += 1; load(found.next_token); },
        }, "Next page") : null));
    markUpdated();
  };
  await load(undefined);
}

// --- start ------------------------------------------------------------------------------------

document.getElementById("skip-link").addEventListener("click", (event) => {
  event.preventDefault();
  const heading = main.querySelector("h1");
  (heading || main).focus();
});

window.addEventListener("hashchange", () => {
  if (!cognito) takeTokenFromFragment(); // a #token=... pasted into the address bar of an open console
  route({ focus: true });
});

// How this API signs people in; an API that does not say (an older one) takes bearer tokens.
async function signInSettings() {
  try {
    const response = await fetch(new URL("console/config.json", API_BASE), { cache: "no-store" });
    return response.ok ? await response.json() : { sign_in: "token" };
  } catch {
    return { sign_in: "token" };
  }
}

// Back from the user pool with ?code&state (or ?error): the tokens taken, the query dropped
// from the address bar and the history, and the view the reader started from shown.
async function finishSignIn() {
  const params = new URLSearchParams(window.location.search);
  if (!params.has("code") && !params.has("error")) return true;
  try {
    const view = await cognito.finish(params);
    window.history.replaceState(null, "", `${window.location.pathname}${view}`);
    return true;
  } catch (error) {
    window.history.replaceState(null, "", `${window.location.pathname}#/overview`);
    showSignIn(error.message);
    return false;
  }
}

async function start() {
  const settings = await signInSettings();
  if (settings.sign_in === "cognito") {
    cognito = new CognitoSignIn(settings, new URL("console", API_BASE).href);
    if (!(await finishSignIn())) return;
  } else if (!(await takeHandoffFromFragment())) {
    showSignIn("This console link was used already or has expired: run filejobs console again for a new one.");
    return;
  } else {
    takeTokenFromFragment();
  }
  showSession();
  route();
}

start();
