/**
 * CDP tokens: HMAC-signed, scoped to one browser, expiring with it. Format `<exp>.<sig>`; the
 * browser id is signed but travels in the URL path (`/cdp/{browserId}?token=…`).
 */
import type { Signer, Verdict } from '../../common/src/signing.js';

/** A token for one browser, valid until `expiresAtSec` (unix seconds). */
export function mintCdpToken(signer: Signer, browserId: string, expiresAtSec: number): string {
  return `${expiresAtSec}.${signer.sign(['cdp', browserId], expiresAtSec)}`;
}

/** 'ok' when `token` was minted for this browser and has not expired. */
export function verifyCdpToken(signer: Signer, browserId: string, token: string | undefined | null): Verdict {
  const m = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token ?? '');
  if (!m) return 'invalid';
  return signer.verify(['cdp', browserId], Number(m[1]), m[2]!);
}

/** The public CDP URL of a browser: `ws(s)://…/cdp/{id}?token=…`, valid until `expiresAtSec`. */
export function cdpUrl(wsBase: string, signer: Signer, browserId: string, expiresAtSec: number): string {
  return `${wsBase}/cdp/${encodeURIComponent(browserId)}?token=${mintCdpToken(signer, browserId, expiresAtSec)}`;
}
