/**
 * What a browser tells pages about itself: with stealth, a fingerprint a person's Chrome would
 * have (no `HeadlessChrome` in the UA or its client hints, a CPU count from a realistic table),
 * and for every browser the locale and timezone it was created with (or its proxy country's). It
 * is applied through CDP emulation on every page target (live-browser.ts), so the UA, client
 * hints, `Accept-Language`, `navigator.language(s)`, `Intl` and `Date` agree; nothing is patched
 * into the page (a patched getter is itself a tell a script can see).
 */
import { createHash } from 'node:crypto';
import { InvalidArgumentError } from '../../common/src/errors.js';

/** The part of a fingerprint that varies per browser. */
export interface Hardware {
  hardwareConcurrency: number;
}

/**
 * CPU thread counts of desktop machines, repeated by how common they are (roughly the share of
 * Chrome desktop users by core count in public hardware surveys: 8 and 4 most, then 12, 16, 6).
 * Only what CDP can set without a script is varied: the platform stays Linux and the GPU stays the
 * real one, since a UA that says Windows on Linux fonts and a Linux GPU is the easier tell.
 */
const HARDWARE: readonly Hardware[] = [4, 4, 4, 6, 8, 8, 8, 8, 12, 12, 16, 16].map((hardwareConcurrency) => ({ hardwareConcurrency }));

/** What one browser presents. */
export interface Identity {
  /** Null: stealth is off, the browser shows what headless Chromium shows (locale and timezone still apply). */
  hardware: Hardware | null;
  locale: string;
  timezone: string;
}

/** Defaults by proxy country (ISO 3166-1 alpha-2, lower case): its main locale and most populous timezone. */
const COUNTRY_DEFAULTS: Record<string, { locale: string; timezone: string }> = {
  us: { locale: 'en-US', timezone: 'America/New_York' },
  ca: { locale: 'en-CA', timezone: 'America/Toronto' },
  gb: { locale: 'en-GB', timezone: 'Europe/London' },
  ie: { locale: 'en-IE', timezone: 'Europe/Dublin' },
  de: { locale: 'de-DE', timezone: 'Europe/Berlin' },
  at: { locale: 'de-AT', timezone: 'Europe/Vienna' },
  ch: { locale: 'de-CH', timezone: 'Europe/Zurich' },
  fr: { locale: 'fr-FR', timezone: 'Europe/Paris' },
  es: { locale: 'es-ES', timezone: 'Europe/Madrid' },
  it: { locale: 'it-IT', timezone: 'Europe/Rome' },
  nl: { locale: 'nl-NL', timezone: 'Europe/Amsterdam' },
  pl: { locale: 'pl-PL', timezone: 'Europe/Warsaw' },
  se: { locale: 'sv-SE', timezone: 'Europe/Stockholm' },
  br: { locale: 'pt-BR', timezone: 'America/Sao_Paulo' },
  mx: { locale: 'es-MX', timezone: 'America/Mexico_City' },
  jp: { locale: 'ja-JP', timezone: 'Asia/Tokyo' },
  in: { locale: 'en-IN', timezone: 'Asia/Kolkata' },
  au: { locale: 'en-AU', timezone: 'Australia/Sydney' },
  sg: { locale: 'en-SG', timezone: 'Asia/Singapore' },
};

const DEFAULT_LOCALE = 'en-US';
const DEFAULT_TIMEZONE = 'UTC';

let zones: Set<string> | undefined;
function timezones(): Set<string> {
  zones ??= new Set([...Intl.supportedValuesOf('timeZone'), 'UTC', 'Etc/UTC']);
  return zones;
}

/** The locale and timezone a browser gets: the ones asked for, else its proxy country's, else en-US and UTC. INVALID_ARGUMENT for a bad one. */
export function localeAndTimezone(o: { locale?: string | undefined; timezone?: string | undefined; proxyCountryCode?: string | null | undefined }): { locale: string; timezone: string } {
  const country = o.proxyCountryCode ? COUNTRY_DEFAULTS[o.proxyCountryCode] : undefined;
  let locale = country?.locale ?? DEFAULT_LOCALE;
  if (o.locale) {
    let canonical: string[] = [];
    try {
      canonical = Intl.getCanonicalLocales(o.locale);
    } catch {
      /* refused below */
    }
    if (canonical.length !== 1 || !/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(canonical[0]!)) throw new InvalidArgumentError('locale must be a BCP 47 language tag such as en-US');
    locale = canonical[0]!;
  }
  const timezone = o.timezone ?? country?.timezone ?? DEFAULT_TIMEZONE;
  if (!timezones().has(timezone)) throw new InvalidArgumentError('timezone must be an IANA time zone name such as Europe/Berlin');
  return { locale, timezone };
}

/**
 * The hardware a stealth browser presents: a profile's is derived from its id, so the same
 * profile presents the same one every time; otherwise a random pick unlike `previous` (so two
 * browsers handed out one after the other never look alike).
 */
export function pickHardware(profileId: string | null, previous?: Hardware, random: () => number = Math.random): Hardware {
  if (profileId) return HARDWARE[createHash('sha256').update(profileId).digest().readUInt32BE(0) % HARDWARE.length]!;
  const others = HARDWARE.filter((h) => h.hardwareConcurrency !== previous?.hardwareConcurrency);
  return others[Math.floor(random() * others.length)]!;
}

/** `Accept-Language` as Chrome sends it for `locale` (Chrome adds the q-values): de-DE → "de-DE,de". */
export function acceptLanguage(locale: string): string {
  const lang = locale.split('-')[0]!;
  return lang === locale ? locale : `${locale},${lang}`;
}

/** The UA and client hints of a headed Chrome of the same version on the same platform, from what `Browser.getVersion` says. */
export function userAgentOverride(version: { product: string; userAgent: string }, identity: Identity): object {
  const full = version.product.split('/')[1] ?? '0.0.0.0';
  const major = full.split('.')[0]!;
  return {
    userAgent: version.userAgent.replace('HeadlessChrome/', 'Chrome/'),
    acceptLanguage: acceptLanguage(identity.locale),
    platform: 'Linux x86_64',
    userAgentMetadata: {
      // As Google Chrome of this version lists them (the UA string says Chrome): Chromium, Google
      // Chrome and the "greasy" brand Chromium 156 makes; most people's browser, not a rare Chromium.
      brands: [
        { brand: 'Chromium', version: major },
        { brand: 'Google Chrome', version: major },
        { brand: 'Not/A)Brand', version: '24' },
      ],
      fullVersionList: [
        { brand: 'Chromium', version: full },
        { brand: 'Google Chrome', version: full },
        { brand: 'Not/A)Brand', version: '24.0.0.0' },
      ],
      fullVersion: full,
      platform: 'Linux',
      platformVersion: '6.1.0',
      architecture: 'x86',
      model: '',
      mobile: false,
      bitness: '64',
      wow64: false,
    },
  };
}
