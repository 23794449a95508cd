/**
 * No SSRF: a webhook URL may not reach loopback, private, link-local, shared or reserved
 * addresses, nor this host's own interfaces, nor (with loopback allowed) a denied port. It is
 * checked when an endpoint is saved, and again at every delivery, on the very address the
 * connection uses (DNS may have changed in between), through the request's `lookup`.
 */
import dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import os from 'node:os';
import { InvalidArgumentError } from '../../common/src/errors.js';

export interface UrlPolicy {
  allowLoopback: boolean;
  deniedPorts: readonly number[];
}

/** A URL or address a webhook may not use. */
export class RefusedUrlError extends InvalidArgumentError {}

const blocked = new net.BlockList();
for (const [net4, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24],
  ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net4, bits, 'ipv4');
for (const [net6, bits] of [['::', 128], ['64:ff9b::', 96], ['100::', 64], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const) blocked.addSubnet(net6, bits, 'ipv6');
const loopback = new net.BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** This host's interface addresses (a receiver there would be this machine). */
function ownAddresses(): Set<string> {
  return new Set(Object.values(os.networkInterfaces()).flatMap((l) => (l ?? []).map((a) => a.address.toLowerCase())));
}

/** Why `address` may not be a receiver's, or undefined when it may. */
export function refusal(address: string, policy: UrlPolicy): string | undefined {
  let ip = address.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip);
  if (mapped) ip = mapped[1]!;
  const family = net.isIPv4(ip) ? 'ipv4' : net.isIPv6(ip) ? 'ipv6' : undefined;
  if (!family) return 'not an IP address';
  if (loopback.check(ip, family)) return policy.allowLoopback ? undefined : 'a loopback address';
  if (blocked.check(ip, family)) return 'a private, link-local or reserved address';
  if (ownAddresses().has(ip)) return "one of this service's own addresses";
  return undefined;
}

/** The URL, checked for its form: http(s), no credentials, a host, a port that is not denied. */
export function parseWebhookUrl(raw: string, policy: UrlPolicy): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new RefusedUrlError('url must be an absolute http or https URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new RefusedUrlError('url must be an http or https URL');
  if (u.username || u.password) throw new RefusedUrlError('url may not carry credentials');
  const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  if (policy.deniedPorts.includes(port)) throw new RefusedUrlError(`url may not name port ${port} (a port of this service)`);
  return u;
}

const hostOf = (u: URL) => u.hostname.replace(/^\[(.*)\]$/, '$1');

/** Resolves the URL's host; throws RefusedUrlError when it has no address or any it has is refused. */
export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<URL> {
  const u = parseWebhookUrl(raw, policy);
  const host = hostOf(u);
  let addrs: LookupAddress[];
  try {
    addrs = net.isIP(host) ? [{ address: host, family: net.isIPv6(host) ? 6 : 4 }] : await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    throw new RefusedUrlError(`url host ${host} does not resolve`);
  }
  for (const a of addrs) {
    const why = refusal(a.address, policy);
    if (why) throw new RefusedUrlError(`url resolves to ${why} (${a.address}); webhooks are delivered to public addresses only`);
  }
  return u;
}

/** A `lookup` for http.request that fails the connection when the host resolves to a refused address. */
export function guardedLookup(policy: UrlPolicy): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as unknown as LookupAddress[];
      const bad = list.map((a) => [a, refusal(a.address, policy)] as const).find(([, why]) => why);
      if (bad) return callback(Object.assign(new Error(`refused: the receiver's host resolves to ${bad[1]} (${bad[0].address})`), { code: 'EREFUSED' }), '', 4);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
}
