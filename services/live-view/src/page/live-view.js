// The live view page: draws the browser's frames scaled into the page, shows its tabs and URL,
// and (on an interactive link) sends mouse, wheel and keyboard input back in the browser's own
// CSS pixels. Protocol: services/live-view/src/viewer-protocol.ts.
'use strict';
(() => {
  const body = document.body;
  const app = document.getElementById('app');
  const stage = document.getElementById('stage');
  const canvas = document.getElementById('screen');
  const ctx = canvas.getContext('2d', { alpha: false });
  const message = document.getElementById('message');
  const urlInput = document.getElementById('url');
  const tabList = document.getElementById('tab-list');
  const interactive = app.dataset.mode === 'interactive';

  const MESSAGES = {
    connecting: ['Connecting to the browser…'],
    live: [''],
    reconnecting: ['Connection lost', 'Reconnecting…'],
    ended: ['This browser has stopped', 'There is nothing more to show.'],
    not_found: ['Browser not found', 'It has ended or the link is for another browser.'],
    expired: ['This live view link has expired', 'Ask for a new link.'],
    invalid: ['This live view link is not valid', 'Check that the whole link was copied.'],
    busy: ['Too many people are watching this browser', 'Try again later.'],
  };

  function setState(state) {
    body.dataset.state = state;
    const [title, detail] = MESSAGES[state] || [state];
    message.textContent = title;
    if (detail) {
      const small = document.createElement('small');
      small.textContent = detail;
      message.append(small);
    }
  }

  let toastTimer;
  function toast(text) {
    let el = document.getElementById('toast');
    if (!el) {
      el = document.createElement('div');
      el.id = 'toast';
      el.setAttribute('role', 'alert');
      el.style.cssText = 'position:absolute;left:50%;bottom:16px;transform:translateX(-50%);max-width:80%;padding:8px 12px;border-radius:8px;background:var(--chrome);color:var(--text);border:1px solid var(--border);';
      stage.append(el);
    }
    el.textContent = text;
    el.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => (el.hidden = true), 4000);
  }

  // Invalid or expired links are decided by the server before the page is sent.
  if (body.dataset.state !== 'connecting') {
    setState(body.dataset.state);
    return;
  }
  setState('connecting');

  const token = new URLSearchParams(location.search).get('token') || '';
  let ws;
  let final = false;
  let retryMs = 500;
  let frameW = 0;
  let frameH = 0;
  let seq = 0;
  let shown = 0;
  let gotFrame = false;

  function send(m) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m));
  }

  function connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const path = location.pathname.replace(/\/+$/, '') + '/ws';
    ws = new WebSocket(`${proto}//${location.host}${path}?token=${encodeURIComponent(token)}`);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => (retryMs = 500);
    ws.onmessage = (e) => (typeof e.data === 'string' ? onMessage(JSON.parse(e.data)) : onFrame(e.data));
    ws.onclose = (e) => {
      if (final) return;
      const state = { 4001: 'expired', 4003: 'invalid', 4004: 'not_found', 4008: 'busy' }[e.code];
      if (state) {
        final = true;
        setState(state);
        return;
      }
      setState(gotFrame ? 'reconnecting' : 'connecting');
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 8000);
    };
  }

  function onMessage(m) {
    if (m.t === 'state') renderState(m);
    else if (m.t === 'ended') {
      final = true;
      setState(m.reason === 'not_found' ? 'not_found' : 'ended');
    } else if (m.t === 'error') {
      body.dataset.lastError = m.code;
      if (m.code !== 'view_only') toast(m.message);
    }
  }

  // Frames: 16-byte header (kind, 0, width, height, 0, timestamp) then the JPEG. Each frame is
  // acked once drawn: the server sends no more than a couple ahead, so a slow device skips frames.
  function onFrame(buf) {
    const dv = new DataView(buf);
    const w = dv.getUint16(2, true);
    const h = dv.getUint16(4, true);
    const mine = ++seq;
    createImageBitmap(new Blob([new Uint8Array(buf, 16)], { type: 'image/jpeg' }))
      .then(
        (bmp) => {
          if (mine > shown) {
            shown = mine;
            draw(bmp, w, h);
          }
          bmp.close();
        },
        () => {},
      )
      .finally(() => send({ t: 'ack' }));
  }

  function draw(bmp, w, h) {
    if (canvas.width !== bmp.width || canvas.height !== bmp.height) {
      canvas.width = bmp.width;
      canvas.height = bmp.height;
    }
    ctx.drawImage(bmp, 0, 0);
    const fw = w || bmp.width;
    const fh = h || bmp.height;
    if (fw !== frameW || fh !== frameH) {
      frameW = fw;
      frameH = fh;
      layout();
    }
    if (!gotFrame || body.dataset.state !== 'live') {
      gotFrame = true;
      if (!final) setState('live');
    }
    body.dataset.frames = String(shown);
  }

  // The frame keeps its aspect ratio and fills the stage (up or down).
  function layout() {
    if (!frameW || !frameH) return;
    const r = stage.getBoundingClientRect();
    const scale = Math.min(r.width / frameW, r.height / frameH);
    canvas.style.width = `${Math.max(1, Math.floor(frameW * scale))}px`;
    canvas.style.height = `${Math.max(1, Math.floor(frameH * scale))}px`;
  }
  new ResizeObserver(layout).observe(stage);

  function renderState(s) {
    if (document.activeElement !== urlInput) urlInput.value = s.url === 'about:blank' ? '' : s.url;
    document.title = s.title ? `${s.title} — Live view` : 'Live view';
    tabList.replaceChildren(
      ...s.tabs.map((t) => {
        const tab = document.createElement('div');
        tab.className = t.active ? 'tab active' : 'tab';
        tab.setAttribute('role', 'tab');
        tab.setAttribute('aria-selected', String(t.active));
        tab.title = t.url;
        const title = document.createElement('span');
        title.className = 'tab-title';
        title.textContent = t.title || t.url || 'New tab';
        tab.append(title);
        if (interactive) {
          tab.addEventListener('click', () => send({ t: 'tab', action: 'activate', value: t.id }));
          const close = document.createElement('button');
          close.className = 'tab-close';
          close.type = 'button';
          close.title = 'Close tab';
          close.textContent = '×';
          close.addEventListener('click', (e) => {
            e.stopPropagation();
            send({ t: 'tab', action: 'close', value: t.id });
          });
          tab.append(close);
        }
        return tab;
      }),
    );
  }

  // The address form never submits itself (that would drop the token); view links cannot edit it.
  document.getElementById('url-form').addEventListener('submit', (e) => e.preventDefault());
  urlInput.readOnly = !interactive;
  if (interactive) bindInput();
  connect();

  function bindInput() {
    const BUTTONS = ['left', 'middle', 'right', 'back', 'forward'];
    const mods = (e) => (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
    // Page coordinates → the browser's CSS pixels: undo the scaling and the centring.
    const point = (e) => {
      const r = canvas.getBoundingClientRect();
      const x = ((e.clientX - r.left) * frameW) / r.width;
      const y = ((e.clientY - r.top) * frameH) / r.height;
      return { x: Math.max(0, Math.min(frameW, x)), y: Math.max(0, Math.min(frameH, y)) };
    };
    let pressed = null;
    let lastMove = null;
    let moveQueued = false;

    canvas.addEventListener('mousedown', (e) => {
      if (!frameW) return;
      e.preventDefault();
      canvas.focus();
      pressed = BUTTONS[e.button] || 'left';
      send({ t: 'mouse', type: 'down', ...point(e), button: pressed, clicks: Math.min(e.detail || 1, 3), mods: mods(e) });
    });
    window.addEventListener('mouseup', (e) => {
      if (!pressed) return;
      send({ t: 'mouse', type: 'up', ...point(e), button: BUTTONS[e.button] || pressed, clicks: Math.min(e.detail || 1, 3), mods: mods(e) });
      pressed = null;
    });
    canvas.addEventListener('mousemove', (e) => {
      if (!frameW) return;
      lastMove = e;
      if (moveQueued) return;
      moveQueued = true;
      requestAnimationFrame(() => {
        moveQueued = false;
        send({ t: 'mouse', type: 'move', ...point(lastMove), button: pressed || 'none', mods: mods(lastMove) });
      });
    });
    canvas.addEventListener('contextmenu', (e) => e.preventDefault());
    canvas.addEventListener(
      'wheel',
      (e) => {
        if (!frameW) return;
        e.preventDefault();
        const k = e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? frameH : 1;
        send({ t: 'wheel', ...point(e), dx: e.deltaX * k, dy: e.deltaY * k });
      },
      { passive: false },
    );
    canvas.addEventListener('keydown', (e) => {
      e.preventDefault();
      const text = e.key.length === 1 && !e.ctrlKey && !e.metaKey ? e.key : '';
      send({ t: 'key', type: 'down', key: e.key, code: e.code, text, mods: mods(e) });
    });
    canvas.addEventListener('keyup', (e) => {
      e.preventDefault();
      send({ t: 'key', type: 'up', key: e.key, code: e.code, mods: mods(e) });
    });
    canvas.addEventListener('paste', (e) => {
      e.preventDefault();
      const text = (e.clipboardData && e.clipboardData.getData('text/plain')) || '';
      for (const ch of Array.from(text).slice(0, 2000)) send({ t: 'key', type: 'char', key: ch, text: ch });
    });

    document.getElementById('back').addEventListener('click', () => send({ t: 'tab', action: 'back' }));
    document.getElementById('forward').addEventListener('click', () => send({ t: 'tab', action: 'forward' }));
    document.getElementById('reload').addEventListener('click', () => send({ t: 'tab', action: 'reload' }));
    document.getElementById('new-tab').addEventListener('click', () => send({ t: 'tab', action: 'new', value: '' }));
    document.getElementById('url-form').addEventListener('submit', () => {
      if (urlInput.value.trim()) send({ t: 'tab', action: 'navigate', value: urlInput.value.trim() });
      canvas.focus();
    });
  }
})();
