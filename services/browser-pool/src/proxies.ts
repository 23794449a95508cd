/**
 * Operator-configured proxies per country. The upstream URL (which may carry a user and password)
 * is handed to the browser's EgressProxy, which chains to it and adds the `Proxy-Authorization`
 * header Chromium's `--proxy-server` cannot carry.
 */
import { InvalidArgumentError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import { EgressProxy } from './egress-proxy.js';

/** The proxy of each configured country. */
export class Proxies {
  readonly #urls: Map<string, URL>;
  readonly #logger: Logger;
  readonly #forwarders = new Map<string, Promise<EgressProxy>>();
  #stopped = false;

  constructor(urls: Map<string, URL>, logger: Logger) {
    this.#urls = urls;
    this.#logger = logger;
  }

  /** Throws INVALID_ARGUMENT naming a country with no configured proxy. */
  check(countryCode: string): void {
    if (!this.#urls.has(countryCode)) throw new InvalidArgumentError(`No proxy is configured for country ${JSON.stringify(countryCode)}`);
  }

  /** The configured upstream URL of a country (credentials included) for `EgressProxy.setUpstream`; undefined when none is configured. */
  upstreamFor(countryCode: string): URL | undefined {
    const u = this.#urls.get(countryCode);
    return u ? new URL(u.href) : undefined;
  }

  /**
   * The `--proxy-server` value for a country: the proxy itself, or — when it needs credentials — a
   * shared local EgressProxy chained to it. Only until the pool launches every browser behind its
   * own EgressProxy (then `upstreamFor` is all it needs); this shared one enforces only the
   * always-refused destinations (metadata, link-local), it knows no service ports.
   */
  async serverFor(countryCode: string): Promise<string> {
    this.check(countryCode);
    const u = this.#urls.get(countryCode)!;
    if (!u.username) return `${u.protocol}//${u.host}`;
    if (this.#stopped) throw new InvalidArgumentError('Shutting down');
    let f = this.#forwarders.get(countryCode);
    if (!f) {
      f = EgressProxy.start({ policy: { allowPrivateNetworks: true, deniedLocalPorts: new Set() }, logger: this.#logger, upstream: u });
      f.catch(() => this.#forwarders.delete(countryCode));
      this.#forwarders.set(countryCode, f);
    }
    return `http://127.0.0.1:${(await f).port}`;
  }

  /** Stops every forwarder. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const all = [...this.#forwarders.values()];
    this.#forwarders.clear();
    await Promise.all(all.map((f) => f.then((x) => x.stop(), () => {})));
  }
}
