// Signing in on the OIDC issuer's own page (docs/web.md "Signing in"): where the web front names an issuer and a
// client id (GET /api/auth), the sign-in form offers "Sign in with your account": the authorization code flow with
// PKCE; back on the page with the code, POST /api/auth/token exchanges it and the token is kept like a pasted one.
// Uses app.js's globals: $, el, state.
"use strict";

const OIDC_WORDS = {
  en: { withAccount: "Sign in with your account", refused: "Sign-in did not complete" },
  zh: { withAccount: "用你的账户登录", refused: "登录没有完成" },
};
const oidcSay = (key) => (OIDC_WORDS[state.locale] || OIDC_WORDS.en)[key];
const base64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const randomText = () => base64url(crypto.getRandomValues(new Uint8Array(32)));
const redirectUri = () => `${location.origin}${location.pathname}`;

async function startSignIn(config) {
  const verifier = randomText();
  const stateValue = randomText();
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  sessionStorage.setItem("covelOidc", JSON.stringify({ verifier, state: stateValue }));
  const query = new URLSearchParams({ response_type: "code", client_id: config.clientId, redirect_uri: redirectUri(),
    scope: config.scope, state: stateValue, code_challenge: challenge, code_challenge_method: "S256" });
  location.assign(`${config.authorizationEndpoint}?${query}`);
}

// Back from the issuer: ?code&state (or ?error). The code is spent once; the address is cleaned either way.
async function finishSignIn() {
  const query = new URLSearchParams(location.search);
  if (!query.has("code") && !query.has("error")) return false;
  const kept = JSON.parse(sessionStorage.getItem("covelOidc") || "{}");
  sessionStorage.removeItem("covelOidc");
  history.replaceState(null, "", `${location.pathname}${location.hash}`);
  const failed = (why) => { $("signin").hidden = false; $("signin-error").textContent = `${oidcSay("refused")}: ${why}`; return false; };
  if (query.has("error")) return failed(query.get("error_description") || query.get("error"));
  if (!kept.state || kept.state !== query.get("state")) return failed("state mismatch");
  const response = await fetch("/api/auth/token", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ code: query.get("code"), codeVerifier: kept.verifier, redirectUri: redirectUri() }) });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok || !answer.token) return failed(answer.message || `HTTP ${response.status}`);
  localStorage.setItem("covelToken", answer.token);
  return true;
}

async function offerSignIn() {
  if (await finishSignIn()) { location.reload(); return; }
  const config = ((await fetch("/api/auth").then((r) => r.json()).catch(() => ({}))) || {}).oidc;
  if (!config || !config.authorizationEndpoint) return;
  $("signin").append(el("p", {}, el("button", { type: "button", id: "signin-oidc", onclick: () => startSignIn(config) }, oidcSay("withAccount"))));
}

offerSignIn();
