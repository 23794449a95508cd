/**
 * Operator-configured proxies per country. The upstream URL (which may carry a user and password)
 * is handed to the browser's EgressProxy, which chains to it and adds the `Proxy-Authorization`
 * header Chromium's `--proxy-server` cannot carry.
 */
import { InvalidArgumentError } from '../../common/src/errors.js';

/** The proxy of each configured country. */
export class Proxies {
  readonly #urls: Map<string, URL>;

  constructor(urls: Map<string, URL>) {
    this.#urls = urls;
  }

  /** Why a country cannot be used (no proxy configured for it); undefined when it can. */
  problem(countryCode: string): string | undefined {
    return this.#urls.has(countryCode) ? undefined : `No proxy is configured for country ${JSON.stringify(countryCode)}`;
  }

  /** Throws INVALID_ARGUMENT naming a country with no configured proxy. */
  check(countryCode: string): void {
    const problem = this.problem(countryCode);
    if (problem) throw new InvalidArgumentError(problem);
  }

  /** The configured upstream URL of a country (credentials included) for `EgressProxy.setUpstream`; undefined when none is configured. */
  upstreamFor(countryCode: string): URL | undefined {
    const u = this.#urls.get(countryCode);
    return u ? new URL(u.href) : undefined;
  }
}
