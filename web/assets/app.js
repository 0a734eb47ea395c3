// rollup dashboard: a project's tree at a tick and a node's trend, read from the read API.
//
// Plain JavaScript, no build step. The bearer token comes from the URL fragment
// (#token=…&project=…&node=…&tick=…&window=…) or the form, lives in sessionStorage, and is sent
// only in the Authorization header of same-origin API calls; it is removed from the address
// bar at once. Rendered numbers carry data-* attributes (data-node-id, data-online,
// data-reported, data-expected, data-complete; the chart's data-points, data-gaps,
// data-incomplete) for tests.
'use strict';

(() => {
  const TOKEN_KEY = 'rollup.token';
  const TICK_S = 300; // the server's tick (tree.DefaultTick)
  const WINDOWS = [['1h', 3600], ['6h', 6 * 3600], ['24h', 86400], ['2d', 2 * 86400], ['7d', 7 * 86400], ['30d', 30 * 86400]];
  const WINDOW_S = new Map(WINDOWS);
  const DEFAULT_WINDOW = '24h';
  const STEP_S = { '5m': 300, '1h': 3600 };
  const TICK_LIST_S = 86400; // the tick picker lists the last day
  const CHILD_PAGE = 200; // children rendered per node before "show more"
  const REFRESH_MS = 60000; // auto-refresh while the latest tick is shown

  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat('en-US');
  const nf1 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });
  // fmt formats a count; a mean over a step may be fractional.
  const fmt = (n) => (n == null ? '—' : Number.isInteger(n) ? nf.format(n) : nf1.format(n));

  const state = {
    token: '',
    projects: [],
    project: '',
    tick: '', // '' = the latest tick with a root document
    ticks: [],
    tree: null,
    byId: new Map(),
    expanded: new Set(),
    shown: new Map(),
    node: '',
    window: DEFAULT_WINDOW,
    agg: 'mean',
    anchor: null, // exclusive end of the chart window, unix seconds
    chart: null,
    series: null,
    loads: {},
    refreshTimer: 0,
  };

  // ---- small helpers

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of kids.flat()) if (c != null) e.append(c);
    return e;
  }

  const secs = (rfc) => Date.parse(rfc) / 1000;
  const iso = (s) => new Date(s * 1000).toISOString().replace('.000Z', 'Z');
  function fmtTime(s, withDate = true) {
    const t = iso(s);
    return withDate ? t.slice(0, 10) + ' ' + t.slice(11, 16) : t.slice(11, 16);
  }
  const isComplete = (n) => n.reported >= n.expected;
  const pct = (n) => (n.expected > 0 ? Math.floor((100 * n.reported) / n.expected) : 100);

  function storeGet() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
  }
  function storeSet(tok) {
    try {
      if (tok) sessionStorage.setItem(TOKEN_KEY, tok);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch { /* storage disabled: the token lives in memory only */ }
  }

  // ---- URL fragment: the shareable view (never the token once read)

  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    const tok = p.get('token');
    if (tok) {
      state.token = tok;
      storeSet(tok);
    }
    state.project = p.get('project') || '';
    state.node = p.get('node') || '';
    state.tick = p.get('tick') || '';
    state.window = WINDOW_S.has(p.get('window')) ? p.get('window') : DEFAULT_WINDOW;
    state.anchor = null;
  }

  function writeHash() {
    const p = new URLSearchParams();
    if (state.project) p.set('project', state.project);
    if (state.node) p.set('node', state.node);
    if (state.tick) p.set('tick', state.tick);
    if (state.window !== DEFAULT_WINDOW) p.set('window', state.window);
    const h = '#' + p.toString();
    if (location.hash !== h) history.replaceState(null, '', h);
  }

  // ---- API

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // begin aborts the previous load of the same kind and returns the new one's signal, so a
  // slow answer never overwrites a newer one.
  function begin(kind) {
    if (state.loads[kind]) state.loads[kind].abort();
    const c = new AbortController();
    state.loads[kind] = c;
    return c.signal;
  }

  async function api(path, params, signal) {
    const u = new URL(path, document.baseURI);
    for (const [k, v] of Object.entries(params || {})) if (v != null && v !== '') u.searchParams.set(k, v);
    let res;
    try {
      res = await fetch(u, {
        headers: { Authorization: 'Bearer ' + state.token, Accept: 'application/json' },
        cache: 'no-store',
        credentials: 'omit',
        signal,
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', 'cannot reach the API (' + e.message + ')');
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      const msg = (body && body.message) || res.statusText || 'HTTP ' + res.status;
      throw new ApiError(res.status, (body && body.error) || 'http_' + res.status, msg);
    }
    return body;
  }

  const projectPath = (suffix) => 'v1/projects/' + encodeURIComponent(state.project) + suffix;

  // list accepts an array or an object holding one under key.
  function list(body, key) {
    if (Array.isArray(body)) return body;
    if (body && Array.isArray(body[key])) return body[key];
    return [];
  }

  // ---- status, errors, login

  function setStatus(text) { $('status').textContent = text; }

  function showError(msg) {
    $('error-text').textContent = msg;
    $('error').hidden = false;
  }
  function clearError() { $('error').hidden = true; }

  function fail(err, what) {
    if (err && err.name === 'AbortError') return;
    if (err instanceof ApiError && err.status === 401) {
      showLogin('The API refused the token: ' + err.message);
      return;
    }
    showError(what + ': ' + (err && err.message ? err.message : String(err)));
    setStatus('');
  }

  function showLogin(reason) {
    state.token = '';
    storeSet('');
    clearTimeout(state.refreshTimer);
    $('app').hidden = true;
    $('controls').hidden = true;
    $('signout').hidden = true;
    $('login').hidden = false;
    $('login-reason').textContent = reason || '';
    $('login-reason').hidden = !reason;
    setStatus('');
    $('token-input').focus();
  }

  // ---- loading

  async function start() {
    clearError();
    if (!state.token) {
      showLogin('');
      return;
    }
    $('login').hidden = true;
    $('signout').hidden = false;
    setStatus('loading…');
    try {
      const body = await api('v1/projects', null, begin('projects'));
      state.projects = list(body, 'projects')
        .map((p) => (typeof p === 'string' ? p : p.project || p.name || p.id))
        .filter(Boolean);
    } catch (e) {
      fail(e, 'projects');
      return;
    }
    if (state.projects.length === 0) {
      showError('This token may read no project.');
      setStatus('');
      return;
    }
    if (!state.projects.includes(state.project)) {
      if (state.project) showError('Project "' + state.project + '" is not readable with this token; showing "' + state.projects[0] + '".');
      state.project = state.projects[0];
    }
    $('project').replaceChildren(...state.projects.map((p) => el('option', { value: p, text: p })));
    $('project').value = state.project;
    $('controls').hidden = false;
    $('app').hidden = false;
    await loadView();
  }

  // loadView loads the tree of the selected tick, then the ticks and the series.
  async function loadView() {
    writeHash();
    setStatus('loading…');
    const ok = await loadTree();
    if (!ok) return;
    await Promise.all([loadTicks(), loadSeries()]);
    setStatus('updated ' + fmtTime(Date.now() / 1000, false) + ' UTC' + (state.tick ? '' : ' · refreshes every minute'));
    scheduleRefresh();
  }

  async function loadTree() {
    let t;
    try {
      t = await api(projectPath('/tree'), { tick: state.tick }, begin('tree'));
    } catch (e) {
      if (e instanceof ApiError && e.code === 'no_data' && !state.tick) {
        // Nothing rolled up yet: say so and look again later.
        state.tree = null;
        renderNoData(e.message);
        setStatus('waiting for data · checks every minute');
        scheduleRefresh();
        return false;
      }
      fail(e, 'tree');
      return false;
    }
    state.tree = t;
    state.byId = new Map((t.nodes || []).map((n) => [n.id, n]));
    const root = t.nodes && t.nodes[0];
    if (!root) {
      renderNoData('The tree of this tick is empty.');
      return false;
    }
    if (!state.byId.has(state.node)) {
      if (state.node) showError('Node "' + state.node + '" is not in the tree at ' + fmtTime(secs(t.tick)) + ' UTC; showing the root.');
      state.node = root.id;
    }
    state.expanded.add(root.id);
    expandPath(state.node);
    writeHash();
    renderTree();
    renderDetail();
    return true;
  }

  async function loadTicks() {
    // The last day up to the server's current tick (to defaults to it); an older selected
    // tick is added to the list by renderTicks.
    const from = Math.floor(Date.now() / 1000 / TICK_S) * TICK_S - TICK_LIST_S;
    let rows = [];
    try {
      const body = await api(projectPath('/ticks'), { from: iso(from) }, begin('ticks'));
      rows = list(body, 'ticks');
    } catch (e) {
      fail(e, 'ticks');
    }
    state.ticks = rows;
    renderTicks();
  }

  function seriesRange() {
    const w = WINDOW_S.get(state.window);
    const step = w <= 2 * 86400 ? '5m' : '1h';
    const ss = STEP_S[step];
    const t = secs(state.tree.tick);
    let end = state.anchor;
    if (end == null || t < end - w || t >= end) end = t + TICK_S;
    end = Math.ceil(end / ss) * ss;
    state.anchor = end;
    return { from: end - w, to: end, step, ss };
  }

  async function loadSeries() {
    const r = seriesRange();
    const node = state.node;
    const params = { node, from: iso(r.from), to: iso(r.to), step: r.step };
    if (r.step !== '5m') params.agg = state.agg;
    $('agg-label').hidden = r.step === '5m';
    $('step-label').textContent = r.step;
    let s;
    try {
      s = await api(projectPath('/series'), params, begin('series'));
    } catch (e) {
      fail(e, 'series');
      return;
    }
    state.series = s;
    renderChart(s, r);
  }

  function scheduleRefresh() {
    clearTimeout(state.refreshTimer);
    if (state.tick) return;
    state.refreshTimer = setTimeout(() => {
      if (document.visibilityState === 'visible' && !state.tick) {
        state.anchor = null;
        loadView();
      } else {
        scheduleRefresh();
      }
    }, REFRESH_MS);
  }

  // ---- selection

  function expandPath(id) {
    for (let n = state.byId.get(id); n; n = state.byId.get(n.parent)) {
      state.expanded.add(n.id);
      if (!n.parent) break;
    }
  }

  function selectNode(id) {
    if (!state.byId.has(id) || id === state.node) return;
    state.node = id;
    expandPath(id);
    writeHash();
    renderTree();
    renderDetail();
    loadSeries();
    const row = document.querySelector('#tree li[data-node-id="' + CSS.escape(id) + '"] > .row');
    if (row) row.scrollIntoView({ block: 'nearest' });
  }

  function selectTick(value) {
    state.tick = value;
    if (!value) state.anchor = null; // back to latest: the chart ends there again
    loadView();
  }

  // ---- rendering: tree

  function renderNoData(why) {
    $('tree').replaceChildren(
      el('li', { class: 'nodata', text: why || 'No rolled-up tick yet for this project.' }),
      el('li', { class: 'hint', text: 'Totals appear once the project has a tree (rollup tree import) and agents have reported a tick.' }));
    $('tree-meta').textContent = '';
    $('orphans').hidden = true;
    $('detail').hidden = true;
    $('tick').replaceChildren(el('option', { value: '', text: 'latest' }));
    destroyChart();
  }

  function renderTree() {
    const t = state.tree;
    $('tree-meta').textContent = fmtTime(secs(t.tick)) + ' UTC · tree v' + t.tree_version + ' · ' + fmt(t.nodes.length) + ' nodes';
    $('tree').replaceChildren(treeItem(t.nodes[0], 1));
    const orphans = t.orphans || [];
    $('orphans').hidden = orphans.length === 0;
    $('orphans-title').textContent = fmt(orphans.length) + ' orphan' + (orphans.length === 1 ? '' : 's') + ' (not counted)';
    $('orphans-list').replaceChildren(...orphans.map((o) => el('li', { 'data-orphan-id': o.id, 'data-online': o.online },
      el('span', { text: o.id + ' (' + o.type + ')' }), el('span', { class: 'num', text: fmt(o.online) }))));
  }

  function completenessCell(n) {
    const p = pct(n);
    return el('span', { class: 'compl', title: fmt(n.reported) + ' of ' + fmt(n.expected) + ' leaves reported' },
      el('span', { text: p + '%' }),
      el('span', { class: 'bar-track' }, barFill(p)));
  }

  function barFill(p) {
    const f = el('span', { class: 'bar-fill' });
    f.style.display = 'block';
    f.style.width = Math.max(0, Math.min(100, p)) + '%';
    return f;
  }

  function treeItem(n, level) {
    const kids = n.children || [];
    const open = kids.length > 0 && state.expanded.has(n.id);
    const selected = n.id === state.node;
    const li = el('li', {
      role: 'treeitem',
      'aria-level': level,
      'aria-expanded': kids.length ? String(open) : null,
      'aria-selected': String(selected),
      'data-node-id': n.id,
      'data-type': n.type,
      'data-online': n.online,
      'data-reported': n.reported,
      'data-expected': n.expected,
      'data-complete': String(isComplete(n)),
    });
    const twisty = el('button', {
      type: 'button',
      class: 'twisty' + (kids.length ? '' : ' leaf'),
      'aria-label': (open ? 'Collapse ' : 'Expand ') + n.id,
      'aria-expanded': kids.length ? String(open) : null,
      tabindex: '-1', // the row has the keyboard (rowKey)
      text: '▶',
      onclick: (ev) => {
        ev.stopPropagation();
        if (state.expanded.has(n.id)) state.expanded.delete(n.id);
        else state.expanded.add(n.id);
        renderTree();
      },
    });
    const row = el('div', {
      class: 'row' + (selected ? ' selected' : '') + (isComplete(n) ? '' : ' incomplete'),
      tabindex: selected ? '0' : '-1',
      onkeydown: (ev) => rowKey(ev, n),
      title: n.id + ' · ' + n.type + ' · online ' + fmt(n.online) + ' · ' + fmt(n.reported) + '/' + fmt(n.expected) + ' leaves reported',
      onclick: () => selectNode(n.id),
    },
    twisty,
    el('span', { class: 'node-name' }, n.id, el('span', { class: 'type', text: n.type })),
    el('span', { class: 'online', 'data-field': 'online', text: fmt(n.online) }),
    completenessCell(n));
    row.style.setProperty('--depth', String(level - 1));
    li.append(row);
    if (open) {
      const limit = state.shown.get(n.id) || CHILD_PAGE;
      const group = el('ul', { role: 'group' });
      for (const id of kids.slice(0, limit)) {
        const c = state.byId.get(id);
        if (c) group.append(treeItem(c, level + 1));
      }
      li.append(group);
      if (kids.length > limit) {
        const more = el('button', {
          type: 'button',
          class: 'ghost more',
          text: 'show ' + fmt(Math.min(CHILD_PAGE, kids.length - limit)) + ' more of ' + fmt(kids.length - limit),
          onclick: () => {
            state.shown.set(n.id, limit + CHILD_PAGE);
            renderTree();
          },
        });
        more.style.setProperty('--depth', String(level));
        li.append(more);
      }
    }
    return li;
  }

  // rowKey is the tree's keyboard: Enter or Space selects, → expands or goes to the first
  // child, ← collapses or goes to the parent, ↑ and ↓ move between visible rows.
  function rowKey(ev, n) {
    const kids = n.children || [];
    const rows = Array.from(document.querySelectorAll('#tree .row'));
    const i = rows.indexOf(ev.currentTarget);
    let focus = null;
    switch (ev.key) {
      case 'Enter':
      case ' ':
        selectNode(n.id);
        focus = n.id;
        break;
      case 'ArrowRight':
        if (kids.length && !state.expanded.has(n.id)) {
          state.expanded.add(n.id);
          renderTree();
          focus = n.id;
        } else if (kids.length) {
          focus = kids[0];
        }
        break;
      case 'ArrowLeft':
        if (kids.length && state.expanded.has(n.id)) {
          state.expanded.delete(n.id);
          renderTree();
          focus = n.id;
        } else if (n.parent) {
          focus = n.parent;
        }
        break;
      case 'ArrowDown':
      case 'ArrowUp': {
        const next = rows[i + (ev.key === 'ArrowDown' ? 1 : -1)];
        if (next) focus = next.parentElement.dataset.nodeId;
        break;
      }
      default:
        return;
    }
    ev.preventDefault();
    if (focus) focusRow(focus);
  }

  function focusRow(id) {
    const row = document.querySelector('#tree li[data-node-id="' + CSS.escape(id) + '"] > .row');
    if (!row) return;
    for (const r of document.querySelectorAll('#tree .row[tabindex="0"]')) r.tabIndex = -1;
    row.tabIndex = 0;
    row.focus();
  }

  // ---- rendering: ticks

  function renderTicks() {
    const sel = $('tick');
    const latest = state.tree ? ' (' + fmtTime(secs(state.tree.tick)) + ')' : '';
    const opts = [el('option', { value: '', text: 'latest' + (state.tick ? '' : latest) })];
    const seen = new Set();
    const rows = state.ticks.slice().sort((a, b) => secs(b.tick) - secs(a.tick));
    for (const r of rows) {
      const s = secs(r.tick);
      seen.add(s);
      const mark = r.reported < r.expected ? ' ◐' : '';
      opts.push(el('option', {
        value: r.tick,
        text: fmtTime(s) + ' · ' + fmt(r.online) + ' online · ' + fmt(r.reported) + '/' + fmt(r.expected) + mark,
      }));
    }
    if (state.tick && !seen.has(secs(state.tick))) {
      opts.splice(1, 0, el('option', { value: state.tick, text: fmtTime(secs(state.tick)) }));
    }
    sel.replaceChildren(...opts);
    if (state.tick) {
      const s = secs(state.tick);
      const o = opts.find((x) => x.value && secs(x.value) === s);
      sel.value = o ? o.value : '';
    } else {
      sel.value = '';
    }
  }

  // ---- rendering: selected node

  function renderDetail() {
    const n = state.byId.get(state.node);
    if (!n) return;
    $('detail').hidden = false;
    const path = [];
    for (let p = state.byId.get(n.parent); p; p = state.byId.get(p.parent)) {
      path.unshift(p);
      if (!p.parent) break;
    }
    const crumbs = [];
    for (const p of path) {
      crumbs.push(el('a', { href: '#', text: p.id, onclick: (ev) => { ev.preventDefault(); selectNode(p.id); } }));
      crumbs.push(el('span', { class: 'sep', text: '›' }));
    }
    crumbs.push(el('span', { text: n.id }));
    $('crumbs').replaceChildren(...crumbs);

    const summary = $('summary');
    summary.dataset.nodeId = n.id;
    summary.dataset.online = n.online;
    summary.dataset.reported = n.reported;
    summary.dataset.expected = n.expected;
    summary.dataset.complete = String(isComplete(n));
    $('node-title').textContent = n.id;
    $('node-type').textContent = n.type;
    $('node-online').textContent = fmt(n.online);
    const c = $('node-completeness');
    c.textContent = fmt(n.reported) + ' / ' + fmt(n.expected) + (isComplete(n) ? '' : ' · incomplete');
    c.classList.toggle('warn', !isComplete(n));

    const kids = (n.children || []).map((id) => state.byId.get(id)).filter(Boolean);
    kids.sort((a, b) => b.online - a.online || (a.id < b.id ? -1 : 1));
    const top = Math.max(1, ...kids.map((k) => k.online));
    const rows = kids.slice(0, CHILD_PAGE).map((k) => {
      const share = el('div', { class: 'share' });
      const fill = el('div');
      fill.style.width = ((100 * k.online) / top).toFixed(1) + '%';
      share.append(fill);
      return el('tr', {
        class: isComplete(k) ? '' : 'incomplete',
        'data-child-id': k.id,
        'data-online': k.online,
        'data-reported': k.reported,
        'data-expected': k.expected,
        'data-complete': String(isComplete(k)),
        onclick: () => selectNode(k.id),
      },
      el('td', { class: 'id', text: k.id }),
      el('td', { class: 'type', text: k.type }),
      el('td', { class: 'num online', text: fmt(k.online) }),
      el('td', {}, share),
      el('td', { class: 'num rep', text: fmt(k.reported) + '/' + fmt(k.expected) }));
    });
    if (kids.length > CHILD_PAGE) {
      rows.push(el('tr', {}, el('td', { colspan: 5, class: 'hint', text: fmt(kids.length - CHILD_PAGE) + ' more children: see the tree' })));
    }
    $('children-body').replaceChildren(...rows);
    $('children').hidden = kids.length === 0;
    $('children-empty').hidden = kids.length > 0;
  }

  // ---- rendering: chart

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function destroyChart() {
    if (state.chart) {
      state.chart.destroy();
      state.chart = null;
    }
    $('chart').replaceChildren();
    $('readout').replaceChildren();
  }

  function renderChart(s, r) {
    destroyChart();
    const box = $('chart');
    const pts = s.points || [];
    const xs = new Array(pts.length);
    const ys = new Array(pts.length);
    const inc = new Array(pts.length);
    let gaps = 0;
    let incomplete = 0;
    for (let i = 0; i < pts.length; i++) {
      const p = pts[i];
      xs[i] = secs(p.t);
      ys[i] = p.online == null ? null : p.online;
      const bad = p.online != null && !p.complete;
      inc[i] = bad ? p.online : null;
      if (p.online == null) gaps++;
      if (bad) incomplete++;
    }
    Object.assign(box.dataset, {
      seriesNode: s.node,
      step: s.step,
      agg: s.agg || '',
      from: iso(r.from),
      to: iso(r.to),
      points: String(pts.length),
      gaps: String(gaps),
      incomplete: String(incomplete),
    });
    if (pts.length === 0 || gaps === pts.length) {
      box.append(el('div', { class: 'empty', text: 'No data for ' + s.node + ' in this window.' }));
    }
    if (typeof window.uPlot !== 'function') {
      box.append(el('div', { class: 'empty', text: 'The chart library did not load.' }));
      return;
    }
    const step = STEP_S[s.step] || r.ss;
    const colors = {
      fg: cssVar('--muted'), grid: cssVar('--line'), accent: cssVar('--accent'), fill: cssVar('--accent-soft'),
      warn: cssVar('--warn'), warnSoft: cssVar('--warn-soft'), gap: cssVar('--gap'), sel: cssVar('--fg'),
    };
    const selTick = state.tree ? secs(state.tree.tick) : null;

    // Bands behind the line: grey where a point has no data, amber where a tick is incomplete.
    function drawBands(u) {
      const { ctx } = u;
      const top = u.bbox.top;
      const h = u.bbox.height;
      ctx.save();
      for (let i = 0; i < xs.length; i++) {
        const colour = ys[i] == null ? colors.gap : inc[i] != null ? colors.warnSoft : null;
        if (!colour) continue;
        const x0 = u.valToPos(xs[i], 'x', true);
        const x1 = u.valToPos(xs[i] + step, 'x', true);
        ctx.fillStyle = colour;
        ctx.fillRect(x0, top, Math.max(1, x1 - x0), h);
      }
      if (selTick != null && selTick >= r.from && selTick < r.to) {
        const x = Math.round(u.valToPos(selTick, 'x', true)) + 0.5;
        ctx.strokeStyle = colors.sel;
        ctx.lineWidth = 1;
        ctx.setLineDash([4, 3]);
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, top + h);
        ctx.stroke();
      }
      ctx.restore();
    }

    // Points on their own between two gaps would draw nothing as a line: show them as dots.
    function isolated(u, si, show) {
      if (show) return null;
      const out = [];
      for (let i = 0; i < ys.length; i++) {
        if (ys[i] != null && (i === 0 || ys[i - 1] == null) && (i === ys.length - 1 || ys[i + 1] == null)) out.push(i);
      }
      return out;
    }

    const opts = {
      width: Math.max(300, box.clientWidth),
      height: 300,
      tzDate: (ts) => window.uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 7 } },
      scales: {
        x: { time: true, range: () => [r.from, r.to] },
        y: { range: (u, min, max) => [0, max > 0 ? Math.ceil(max * 1.12) : 1] },
      },
      axes: [
        { stroke: colors.fg, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.grid }, values: timeLabels },
        {
          stroke: colors.fg, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.grid }, size: 64,
          values: (u, vals) => vals.map((v) => fmt(v)),
        },
      ],
      series: [
        {},
        {
          label: 'online', stroke: colors.accent, fill: colors.fill, width: 2, spanGaps: false,
          points: { size: 5, fill: colors.accent, stroke: colors.accent, filter: isolated },
        },
        {
          label: 'incomplete', stroke: colors.warn, width: 0, paths: () => null,
          points: { show: true, size: 7, width: 1, stroke: colors.warn, fill: colors.warn },
        },
      ],
      hooks: {
        drawClear: [drawBands],
        setCursor: [(u) => renderReadout(u.cursor.idx)],
      },
    };
    const u = new window.uPlot(opts, [xs, ys, inc], box);
    state.chart = u;
    u.over.addEventListener('click', () => {
      const i = u.cursor.idx;
      if (i == null || s.step !== '5m' || ys[i] == null) return;
      state.tick = iso(xs[i]);
      loadView();
    });
    u.over.title = s.step === '5m' ? 'Click a point to show the tree at that tick' : '';
    renderReadout(null);
  }

  // timeLabels labels the x axis in UTC, 24-hour, with the date under the first label of a day.
  function timeLabels(u, splits, axis, space, incr) {
    let prevDay = '';
    return splits.map((v) => {
      const t = iso(v);
      const day = t.slice(5, 10);
      const label = incr >= 86400 ? day : day !== prevDay ? t.slice(11, 16) + '\n' + day : t.slice(11, 16);
      prevDay = day;
      return label;
    });
  }

  function renderReadout(idx) {
    const s = state.series;
    const pts = (s && s.points) || [];
    let i = idx;
    if (i == null) {
      for (i = pts.length - 1; i >= 0 && pts[i].online == null; i--);
      if (i < 0) {
        $('readout').replaceChildren();
        return;
      }
    }
    const p = pts[i];
    if (!p) return;
    const label = s.step === '5m' ? '' : ' (' + s.agg + ' per ' + s.step + ')';
    const parts = [el('span', { text: fmtTime(secs(p.t)) + ' UTC' + label + ' · ' })];
    if (p.online == null) {
      parts.push(el('span', { class: 'warn', text: 'no data' }));
    } else {
      parts.push(el('span', { text: 'online ' }), el('b', { text: fmt(p.online) }),
        el('span', { text: ' · leaves ' + fmt(p.reported) + '/' + fmt(p.expected) }));
      if (!p.complete) parts.push(el('span', { class: 'warn', text: ' · incomplete' }));
    }
    if (idx == null) parts.unshift(el('span', { text: 'last point: ' }));
    $('readout').replaceChildren(...parts);
  }

  function renderWindows() {
    $('windows').replaceChildren(...WINDOWS.map(([name]) => el('button', {
      type: 'button',
      'aria-pressed': String(name === state.window),
      'data-window': name,
      text: name,
      onclick: () => {
        if (name === state.window) return;
        state.window = name;
        state.anchor = null;
        renderWindows();
        writeHash();
        if (state.tree) loadSeries();
      },
    })));
  }

  // ---- wiring

  function init() {
    readHash();
    if (!state.token) state.token = storeGet();
    writeHash(); // drops the token from the address bar and history entry
    renderWindows();
    $('agg').value = state.agg;

    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const tok = $('token-input').value.trim();
      if (!tok) return;
      $('token-input').value = '';
      state.token = tok;
      storeSet(tok);
      start();
    });
    $('signout').addEventListener('click', () => showLogin(''));
    $('error-close').addEventListener('click', clearError);
    $('project').addEventListener('change', (ev) => {
      state.project = ev.target.value;
      state.node = '';
      state.tick = '';
      state.anchor = null;
      state.expanded.clear();
      state.shown.clear();
      clearError();
      loadView();
    });
    $('tick').addEventListener('change', (ev) => selectTick(ev.target.value));
    $('agg').addEventListener('change', (ev) => {
      state.agg = ev.target.value;
      loadSeries();
    });
    window.addEventListener('hashchange', () => {
      const before = state.project;
      readHash();
      if (!state.token) state.token = storeGet();
      if (state.project !== before) start();
      else loadView();
    });
    let resizeTimer = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        if (state.chart) state.chart.setSize({ width: Math.max(300, $('chart').clientWidth), height: 300 });
      }, 100);
    });
    start();
  }

  init();
})();
