// Sign-in through the user pool's hosted pages (ApiAuth=COGNITO; docs/CONSOLE.md): OAuth 2.0
// authorization code with PKCE (RFC 7636), as a public client keeps no secret.
//
// - start(): a fresh code verifier and state, kept in this tab's sessionStorage for the one
//   round trip, then off to the pool's /oauth2/authorize with the verifier's SHA-256 challenge.
// - finish(): back on the console with ?code&state: the state must be the one this tab sent
//   (else another page started the round trip: nothing is exchanged), and is used once; the
//   code is exchanged with the verifier at /oauth2/token.
// - idToken(): the ID token (what the API's Cognito authorizer takes), renewed with the refresh
//   token a minute before it expires; null once it can no longer be renewed.
// - signOut(): the refresh token revoked, the tab's tokens dropped, then the pool's /logout,
//   which ends its own session and comes back to the console.
// Tokens live in this tab's sessionStorage only: never in localStorage, a cookie or the URL.

const SESSION_KEY = "filejobs.console.session"; // {id_token, refresh_token, expires_at}
const PENDING_KEY = "filejobs.console.pending"; // {state, verifier, view}
const SIGNED_OUT_KEY = "filejobs.console.signed-out";
const RENEW_SECONDS = 60; // renew this long before the ID token expires

export class SignInError extends Error {}

export function base64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return window.btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// 32 random bytes: a 43-character verifier (RFC 7636 wants 43 to 128) or state.
export function randomString(byteCount = 32) {
  return base64url(window.crypto.getRandomValues(new Uint8Array(byteCount)));
}

export async function challengeOf(verifier) {
  const digest = await window.crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

// A JWT's claims, for the page's own use (when it expires, who it names): the API checks the
// signature, the page never trusts a claim for access.
export function claimsOf(jwt) {
  const part = String(jwt).split(".")[1] || "";
  const padded = part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "=");
  try {
    return JSON.parse(new TextDecoder().decode(Uint8Array.from(window.atob(padded), (c) => c.charCodeAt(0))));
  } catch {
    return {};
  }
}

function load(key) {
  try {
    return JSON.parse(window.sessionStorage.getItem(key) || "null");
  } catch {
    return null;
  }
}

function save(key, value) {
  if (value === null) window.sessionStorage.removeItem(key);
  else window.sessionStorage.setItem(key, JSON.stringify(value));
}

export class CognitoSignIn {
  // settings: GET console/config.json's {client_id, sign_in_url}; consoleUrl: the page's own URL,
  // the app client's one callback and logout URL.
  constructor(settings, consoleUrl) {
    this.clientId = settings.client_id;
    this.base = String(settings.sign_in_url).replace(/\/+$/, "");
    this.redirectUri = consoleUrl;
    this.renewing = null;
  }

  signedIn() {
    const session = load(SESSION_KEY);
    return Boolean(session && (session.refresh_token || session.expires_at > Date.now() / 1000));
  }

  // Who the ID token names (shown beside "Sign out"; the API decides what they may see).
  who() {
    const session = load(SESSION_KEY);
    if (!session) return null;
    const claims = claimsOf(session.id_token);
    const name = claims.email || claims["cognito:username"] || "signed in";
    const groups = [].concat(claims["cognito:groups"] || []);
    const role = groups.length ? groups.join(", ") : (claims["custom:tenant"] ? `tenant ${claims["custom:tenant"]}` : "");
    return role ? `${name} (${role})` : name;
  }

  // Whether the last visit ended with a sign-out (said once, on the sign-in page).
  takeSignedOut() {
    const was = window.sessionStorage.getItem(SIGNED_OUT_KEY) === "1";
    window.sessionStorage.removeItem(SIGNED_OUT_KEY);
    return was;
  }

  async start(view) {
    const verifier = randomString();
    const state = randomString();
    save(PENDING_KEY, { state, verifier, view: view || "#/overview" });
    const query = new URLSearchParams({
      response_type: "code",
      client_id: this.clientId,
      redirect_uri: this.redirectUri,
      scope: "openid email",
      state,
      code_challenge: await challengeOf(verifier),
      code_challenge_method: "S256",
    });
    window.location.assign(`${this.base}/oauth2/authorize?${query}`);
  }

  // The view to show once signed in; throws SignInError when the answer is not this tab's.
  async finish(params) {
    const pending = load(PENDING_KEY);
    save(PENDING_KEY, null); // one answer per round trip, whatever it says
    if (params.get("error")) {
      throw new SignInError(`The sign-in was not completed: ${params.get("error_description") || params.get("error")}.`);
    }
    const code = params.get("code");
    if (!pending || !code || params.get("state") !== pending.state) {
      throw new SignInError("That sign-in answer was not for this tab (its state does not match): sign in again.");
    }
    const tokens = await this.tokenRequest({
      grant_type: "authorization_code",
      client_id: this.clientId,
      code,
      redirect_uri: this.redirectUri,
      code_verifier: pending.verifier,
    });
    this.keep(tokens, null);
    return pending.view;
  }

  async idToken({ renew = false } = {}) {
    const session = load(SESSION_KEY);
    if (!session) return null;
    if (!renew && session.expires_at - RENEW_SECONDS > Date.now() / 1000) return session.id_token;
    if (!session.refresh_token) {
      this.forget();
      return null;
    }
    // One renewal at a time: every view's request waits for the same one.
    this.renewing = this.renewing || this.renew(session).finally(() => { this.renewing = null; });
    return this.renewing;
  }

  async renew(session) {
    try {
      const tokens = await this.tokenRequest({
        grant_type: "refresh_token",
        client_id: this.clientId,
        refresh_token: session.refresh_token,
      });
      return this.keep(tokens, session.refresh_token);
    } catch {
      this.forget();
      return null;
    }
  }

  async signOut() {
    const session = load(SESSION_KEY);
    this.forget();
    window.sessionStorage.setItem(SIGNED_OUT_KEY, "1");
    if (session && session.refresh_token) {
      try {
        await fetch(`${this.base}/oauth2/revoke`, {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token: session.refresh_token, client_id: this.clientId }),
        });
      } catch {
        // the pool's own session still ends at /logout; the refresh token expires by itself
      }
    }
    const query = new URLSearchParams({ client_id: this.clientId, logout_uri: this.redirectUri });
    window.location.assign(`${this.base}/logout?${query}`);
  }

  forget() {
    save(SESSION_KEY, null);
  }

  keep(tokens, refreshToken) {
    const claims = claimsOf(tokens.id_token);
    if (!tokens.id_token || !claims.exp) throw new SignInError("The user pool answered no ID token.");
    save(SESSION_KEY, {
      id_token: tokens.id_token,
      refresh_token: tokens.refresh_token || refreshToken,
      expires_at: claims.exp,
    });
    return tokens.id_token;
  }

  async tokenRequest(fields) {
    let response;
    try {
      response = await fetch(`${this.base}/oauth2/token`, {
        method: "POST",
        cache: "no-store",
        headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
        body: new URLSearchParams(fields),
      });
    } catch (error) {
      throw new SignInError(`The user pool did not answer (${error.message}).`);
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new SignInError(`The user pool refused the sign-in (${data.error || response.status}).`);
    return data;
  }
}
