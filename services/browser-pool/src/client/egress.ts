/**
 * What a browser's egress proxy tells the pages it serves, for the callers that drive browsers
 * (the run service's agents): its own answer when it could not reach a site carries this header,
 * whose value says why. The proxy drops the header from what sites send, so a page cannot fake it.
 */
export const EGRESS_FAILURE_HEADER = 'x-ats-egress-failure';

/**
 * Chromium's errors for a request its proxy could not carry: the proxy answered a CONNECT with
 * an error (https; Chromium shows nothing of the answer) or did not answer at all.
 */
export const PROXY_NET_ERRORS: Readonly<Record<string, string>> = {
  'net::ERR_TUNNEL_CONNECTION_FAILED': 'the name does not resolve or the site does not answer from where the service runs, or the network policy refuses it',
  'net::ERR_PROXY_CONNECTION_FAILED': 'the egress proxy itself did not answer',
};
