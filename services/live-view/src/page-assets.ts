/**
 * The live view page's files (HTML template, script, stylesheet), read once at start. They are
 * plain files beside the sources; the built service (dist/) reads them from the sources too.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { besideSource } from '../../common/src/source-file.js';

export interface PageAssets {
  /** HTML with {{placeholders}}. */
  template: string;
  script: Buffer;
  style: Buffer;
  /** Changes whenever a file changes (cache busting). */
  version: string;
}

function pageDir(): string {
  const html = besideSource(import.meta.url, path.join('page', 'live-view.html'));
  if (!fs.existsSync(html)) throw new Error(`live view page files not found (looked for ${html})`);
  return path.dirname(html);
}

export function loadPageAssets(dir = pageDir()): PageAssets {
  const template = fs.readFileSync(path.join(dir, 'live-view.html'), 'utf8');
  const script = fs.readFileSync(path.join(dir, 'live-view.js'));
  const style = fs.readFileSync(path.join(dir, 'live-view.css'));
  const version = createHash('sha256').update(template).update(script).update(style).digest('hex').slice(0, 12);
  return { template, script, style, version };
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Fills `{{name}}` placeholders with HTML-escaped values. */
export function renderTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_m, name: string) => (values[name] ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]!));
}
