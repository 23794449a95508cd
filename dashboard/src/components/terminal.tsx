/**
 * A browsercode run's terminal transcript in xterm.js (loaded on first use): commands and their
 * output with ANSI colours intact, written as events arrive. Read-only; the text can be selected
 * and copied, and a screen reader reads it through xterm's accessibility mode.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Terminal } from '@xterm/xterm';
import type { FitAddon } from '@xterm/addon-fit';
import { usePrefersDark } from '../hooks.ts';
import { terminalChunk, type EventFacts } from '../lib/transcript.ts';

const THEMES = {
  dark: { background: '#0b0d12', foreground: '#e6e8eb', cursor: '#0b0d12', selectionBackground: '#3a4a66' },
  light: { background: '#fbfbfc', foreground: '#1a1d23', cursor: '#fbfbfc', selectionBackground: '#c8d8f5', black: '#1a1d23', brightBlack: '#57606a', yellow: '#7a5b00', brightYellow: '#7a5b00', white: '#57606a', brightWhite: '#1a1d23' },
};

export function TerminalView({ events }: { events: EventFacts[] }) {
  const box = useRef<HTMLDivElement>(null);
  const term = useRef<{ t: Terminal; fit: FitAddon } | null>(null);
  const written = useRef(0);
  const [ready, setReady] = useState(false);
  const [failed, setFailed] = useState(false);
  const dark = usePrefersDark();

  useEffect(() => {
    let disposed = false;
    let observer: ResizeObserver | undefined;
    Promise.all([import('@xterm/xterm'), import('@xterm/addon-fit'), import('@xterm/xterm/css/xterm.css')]).then(
      ([{ Terminal }, { FitAddon }]) => {
        if (disposed || !box.current) return;
        const t = new Terminal({
          convertEol: true,
          disableStdin: true,
          cursorBlink: false,
          cursorStyle: 'bar',
          cursorInactiveStyle: 'none',
          rows: 18,
          scrollback: 10000,
          fontSize: 13,
          fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
          screenReaderMode: true,
          theme: dark ? THEMES.dark : THEMES.light,
        });
        const fit = new FitAddon();
        t.loadAddon(fit);
        t.open(box.current);
        fit.fit();
        term.current = { t, fit };
        written.current = 0;
        observer = new ResizeObserver(() => fit.fit());
        observer.observe(box.current);
        setReady(true);
      },
      () => setFailed(true),
    );
    return () => {
      disposed = true;
      observer?.disconnect();
      term.current?.t.dispose();
      term.current = null;
    };
  }, []);

  useEffect(() => {
    if (term.current) term.current.t.options.theme = dark ? THEMES.dark : THEMES.light;
  }, [dark, ready]);

  useEffect(() => {
    const t = term.current?.t;
    if (!t) return;
    // Events only grow (the stream appends); a shorter list is a new run: start over.
    if (events.length < written.current) {
      t.reset();
      written.current = 0;
    }
    const text = events.slice(written.current).map(terminalChunk).join('');
    written.current = events.length;
    if (text) t.write(text);
  }, [events, ready]);

  if (failed) {
    return <pre class="terminal-fallback">{events.map(terminalChunk).join('').replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '')}</pre>;
  }
  return <div class="terminal" ref={box} role="region" aria-label="Terminal transcript" />;
}
