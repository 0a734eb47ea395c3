// rollup dashboard: a project's tree at a tick and a node's trend, read from the read API.
//
// Plain JavaScript, no build step. Everything the page shows is one view (project, node, tick,
// time range, step, aggregation, time zone, children comparison, refresh), carried by the URL
// fragment without the token. A change loads everything the new view needs first and shows
// it all at once, so the controls always describe what is shown; a load that fails leaves the
// last view on screen, says so, and a live view keeps retrying with backoff, saying since when
// its data is stale. The bearer token comes from the fragment (#token=…) or the form, lives in
// sessionStorage, and is sent only in the Authorization header of same-origin API calls; it
// is removed from the address bar at once and put in a shared link only when asked.
//
// Rendered numbers carry data-* attributes for tests: tree rows and children (data-node-id,
// data-online, data-reported, data-expected, data-complete, data-nodata, data-mismatch), the
// chart (data-points, data-gaps, data-incomplete, data-from, data-to, data-step, data-tier, data-agg,
// data-compare-ids), the readout (data-t, data-online); <body> has data-state, data-loads
// (views shown so far) and data-stale.
'use strict';

(() => {
  const TOKEN_KEY = 'rollup.token';
  const TICK_S = 300; // the server's tick (tree.DefaultTick)
  // Time ranges of the range buttons, shortest first. A longer one needs only a line here:
  // the automatic step is the finest with at most AUTO_POINTS points.
  const RANGES = [['1h', 3600], ['6h', 6 * 3600], ['24h', 86400], ['2d', 2 * 86400], ['7d', 7 * 86400], ['30d', 30 * 86400],
    ['90d', 90 * 86400], ['1y', 365 * 86400]];
  const RANGE_S = new Map(RANGES);
  const DEFAULT_RANGE = '24h';
  const STEPS = [['5m', 300], ['1h', 3600], ['1d', 86400]];
  const STEP_S = new Map(STEPS);
  const AUTO_POINTS = 1000;
  const MAX_POINTS = 10000; // api.MaxSeriesPoints
  const MAX_SPAN_S = 731 * 86400; // api.MaxSeriesWindow: two years
  const AGGS = ['max', 'min', 'mean', 'last'];
  // What each stored resolution is (the series answer's tier), for the resolution note.
  const TIER_TEXT = { '5m': '5-minute totals', '1h': 'hourly summaries', '1d': 'daily summaries (UTC days)' };
  const DEFAULT_AGG = 'max'; // as the API: peak players
  const REFRESHES = ['off', '10s', '30s', '1m', '5m'];
  const DEFAULT_REFRESH = '1m';
  const COMPARE = ['off', 'lines', 'stacked'];
  const COMPARE_NS = [3, 5, 10];
  const DEFAULT_N = 5;
  // "Why did it change?": compare the tick shown with one this far before (or a picked tick).
  const DIFF_BACK = new Map([['tick', TICK_S], ['1h', 3600], ['1d', 86400], ['1w', 7 * 86400]]);
  const DIFF_TEXT = { tick: 'the tick before', '1h': 'an hour before', '1d': 'a day before', '1w': 'a week before' };
  const DIFF_N = 20;
  // Colours of the annotations by kind (lines on the chart, marks in the list).
  const NOTE_COLOURS = { tree: '#7048e8', replay: '#0c8599', retention: '#868e96', outage: '#e03131', history_lost: '#d9480f' };
  const RETRY_FIRST_S = 5; // first retry after a failed load (at most the refresh interval)
  const RETRY_MAX_S = 60; // never longer than the default refresh: the page follows the API's return within a minute
  const TICK_LIST_S = 86400; // the tick picker lists the last day
  const CHILD_PAGE = 200; // children rendered per node before "show more"
  const PALETTE = ['#2f6fdb', '#e8590c', '#2b8a3e', '#ae3ec9', '#f08c00', '#1098ad', '#d6336c', '#74b816', '#4263eb', '#868e96'];

  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat('en-US');
  const nf1 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });
  // fmt formats a count; a mean over a step may be fractional.
  const fmt = (n) => (n == null ? '—' : Number.isInteger(n) ? nf.format(n) : nf1.format(n));

  const state = {
    token: '',
    projects: [],
    view: null, // the view shown; before anything is shown, the one asked for
    data: null, // what is shown: see fetchView
    expanded: new Set(),
    shown: new Map(),
    chart: null,
    loading: null, // AbortController of the load in flight
    failures: 0, // failed loads in a row of a live view or of the first view
    failingSince: 0, // ms
    lastError: '',
    retryAfter: 0, // seconds, from the last 503
    retryAt: 0, // ms
    timer: 0,
    overdue: false, // a refresh came due while the tab was hidden
    loads: 0,
    keyIdx: null, // the chart point the keyboard selected
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
  const floorTo = (s, step) => Math.floor(s / step) * step;
  const ceilTo = (s, step) => Math.ceil(s / step) * step;
  const nowS = () => Date.now() / 1000;
  const isComplete = (n) => n.reported >= n.expected;
  const noData = (n) => n.reported === 0; // nothing under the node reported: its 0 is no count
  const pct = (n) => (n.expected > 0 ? Math.floor((100 * n.reported) / n.expected) : 100);

  // ---- time in the view's zone: 'utc' or 'local' (the browser's)

  const p2 = (n) => String(n).padStart(2, '0');
  function tparts(s, tz) {
    const d = new Date(s * 1000);
    if (tz === 'local') {
      return { y: d.getFullYear(), mo: d.getMonth() + 1, d: d.getDate(), h: d.getHours(), mi: d.getMinutes(), se: d.getSeconds(), off: -d.getTimezoneOffset() };
    }
    return { y: d.getUTCFullYear(), mo: d.getUTCMonth() + 1, d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes(), se: d.getUTCSeconds(), off: 0 };
  }
  function tzName(s, tz) {
    const off = tparts(s, tz).off;
    if (tz !== 'local') return 'UTC';
    const a = Math.abs(off);
    return 'UTC' + (off < 0 ? '−' : '+') + p2(Math.floor(a / 60)) + ':' + p2(a % 60);
  }
  function fmtDay(s, tz) {
    const p = tparts(s, tz);
    return p.y + '-' + p2(p.mo) + '-' + p2(p.d);
  }
  function fmtHM(s, tz) {
    const p = tparts(s, tz);
    return p2(p.h) + ':' + p2(p.mi);
  }
  const fmtTime = (s, tz) => fmtDay(s, tz) + ' ' + fmtHM(s, tz);
  const fmtWhen = (s, tz) => fmtTime(s, tz) + ' ' + tzName(s, tz);
  function fmtClock(ms, tz) {
    const p = tparts(ms / 1000, tz);
    return p2(p.h) + ':' + p2(p.mi) + ':' + p2(p.se);
  }
  // toInput and fromInput convert to and from a custom range field (24-hour ISO, YYYY-MM-DD HH:MM) in tz.
  const toInput = (s, tz) => fmtDay(s, tz) + ' ' + fmtHM(s, tz);
  function fromInput(v, tz) {
    const m = /^\s*(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})\s*$/.exec(v || '');
    if (!m) return NaN;
    const [y, mo, d, h, mi] = m.slice(1).map(Number);
    const ms = tz === 'local' ? new Date(y, mo - 1, d, h, mi).getTime() : Date.UTC(y, mo - 1, d, h, mi);
    return ms / 1000;
  }

  function storeGet() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
  }
  function storeSet(tok) {
    try {
      if (tok) sessionStorage.setItem(TOKEN_KEY, tok);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch { /* storage disabled: the token lives in memory only */ }
  }

  // ---- views and the URL fragment

  function defaultView() {
    return {
      project: '', node: '', tick: '', range: { rel: DEFAULT_RANGE }, step: 'auto', agg: DEFAULT_AGG,
      tz: 'utc', cmp: 'off', n: DEFAULT_N, refresh: DEFAULT_REFRESH, diff: '',
    };
  }

  // refreshS is a refresh setting in seconds: off, or a number of seconds or minutes.
  function refreshS(r) {
    const m = /^([1-9]\d{0,4})(s|m)$/.exec(r || '');
    return m ? Number(m[1]) * (m[2] === 'm' ? 60 : 1) : 0;
  }

  const spanOf = (v) => (v.range.rel ? RANGE_S.get(v.range.rel) : v.range.to - v.range.from);
  const stepFits = (step, span) => span / STEP_S.get(step) <= MAX_POINTS;

  // normalize makes a view valid: a fixed step too fine for the range falls back to auto.
  function normalize(v) {
    if (v.step !== 'auto' && !stepFits(v.step, spanOf(v))) v.step = 'auto';
    return v;
  }

  // viewFromHash reads a view (and a token, if any) from the URL fragment; what is missing or
  // invalid gets its default. window= is the older name of range=.
  function viewFromHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    const v = defaultView();
    v.project = p.get('project') || '';
    v.node = p.get('node') || '';
    const tick = secs(p.get('tick') || '');
    v.tick = Number.isFinite(tick) ? iso(floorTo(tick, TICK_S)) : '';
    const rel = p.get('range') || p.get('window');
    const from = secs(p.get('from') || '');
    const to = secs(p.get('to') || '');
    if (Number.isFinite(from) && Number.isFinite(to) && from < to && to - from <= MAX_SPAN_S) {
      v.range = { from: floorTo(from, TICK_S), to: ceilTo(to, TICK_S) };
    } else if (RANGE_S.has(rel)) {
      v.range = { rel };
    } else if (!v.tick) {
      v.range = { rel: DEFAULT_RANGE, fit: true }; // the link names no range: fit the data (fitRange)
    }
    if (STEP_S.has(p.get('step'))) v.step = p.get('step');
    if (AGGS.includes(p.get('agg'))) v.agg = p.get('agg');
    if (p.get('tz') === 'local') v.tz = 'local';
    if (COMPARE.includes(p.get('cmp'))) v.cmp = p.get('cmp');
    const n = Number(p.get('n'));
    if (Number.isInteger(n) && n >= 1 && n <= 20) v.n = n;
    const r = p.get('refresh');
    if (r === 'off' || refreshS(r) > 0) v.refresh = r;
    const diff = p.get('diff') || '';
    const diffT = secs(diff);
    if (DIFF_BACK.has(diff)) v.diff = diff;
    else if (Number.isFinite(diffT)) v.diff = iso(floorTo(diffT, TICK_S));
    return { view: normalize(v), token: p.get('token') || '' };
  }

  // viewParams is the fragment of view v: only what differs from the defaults, and the token
  // only when given.
  function viewParams(v, token) {
    const p = new URLSearchParams();
    if (token) p.set('token', token);
    if (v.project) p.set('project', v.project);
    if (v.node) p.set('node', v.node);
    if (v.tick) p.set('tick', v.tick);
    if (v.range.rel) {
      if (v.range.rel !== DEFAULT_RANGE) p.set('range', v.range.rel);
    } else {
      p.set('from', iso(v.range.from));
      p.set('to', iso(v.range.to));
    }
    if (v.step !== 'auto') p.set('step', v.step);
    if (v.agg !== DEFAULT_AGG) p.set('agg', v.agg);
    if (v.tz !== 'utc') p.set('tz', v.tz);
    if (v.cmp !== 'off') p.set('cmp', v.cmp);
    if (v.n !== DEFAULT_N) p.set('n', String(v.n));
    if (v.refresh !== DEFAULT_REFRESH) p.set('refresh', v.refresh);
    if (v.diff) p.set('diff', v.diff);
    return p;
  }

  function writeHash() {
    const h = '#' + viewParams(state.view, '').toString();
    if (location.hash !== h) history.replaceState(null, '', h);
  }

  // shareLink is the link of the view shown; lock pins it to the time range and tick shown
  // (absolute from, to and tick), so an incident link shows the same data tomorrow.
  function shareLink(withToken, lock) {
    let v = state.view;
    const d = state.data;
    if (lock && d && !d.nodata) v = { ...v, range: { from: d.range.from, to: d.range.to }, tick: d.tree.tick };
    return location.origin + location.pathname + '#' + viewParams(v, withToken ? state.token : '').toString();
  }

  // live: the view follows the newest data (latest tick, range ending now).
  const isLive = (v) => !v.tick && !!v.range.rel;

  // ---- API

  class ApiError extends Error {
    constructor(status, code, message, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter || 0;
    }
  }
  // transient: worth retrying as is (the store, the network or the server is down).
  const transient = (e) => e instanceof ApiError && (e.status === 0 || e.status === 429 || e.status >= 500);

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
      throw new ApiError(0, 'network', 'cannot reach the server (' + e.message + ')');
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      const msg = (body && body.message) || res.statusText || 'HTTP ' + res.status;
      const ra = Number(res.headers.get('Retry-After')) || (body && body.retry_after_seconds) || 0;
      throw new ApiError(res.status, (body && body.error) || 'http_' + res.status, msg, ra);
    }
    return body;
  }

  const projectPath = (project, suffix) => 'v1/projects/' + encodeURIComponent(project) + suffix;

  // ---- loading a view

  // chartRange is the window of the chart for view v whose tree is at tick t (seconds): a
  // relative range ends with the current tick (or with t when t is a past tick outside it);
  // both ends are aligned to the step, as the API aligns them.
  function chartRange(v, t) {
    const span = spanOf(v);
    let step = v.step;
    if (step === 'auto') {
      step = STEPS.find(([, s]) => span / s <= AUTO_POINTS);
      step = step ? step[0] : STEPS[STEPS.length - 1][0];
    }
    const ss = STEP_S.get(step);
    if (v.range.rel) {
      let end = Math.max(floorTo(nowS(), TICK_S) + TICK_S, t + TICK_S);
      if (v.tick && (t < end - span || t >= end)) end = t + TICK_S;
      const to = ceilTo(end, ss);
      return { from: floorTo(to - span, ss), to, step, ss };
    }
    return { from: floorTo(v.range.from, ss), to: ceilTo(v.range.to, ss), step, ss };
  }

  // fitRange is the range a view whose link names none opens on: the shortest range button
  // that shows all the data of the last day (ticks: its ticks, from TICK_LIST_S ago) up to now,
  // or, with no tick in the last day, the newest tick (latest, seconds), so the chart is never
  // empty; DEFAULT_RANGE when the data fills the last day (it may go back further).
  function fitRange(ticks, latest) {
    const end = floorTo(nowS(), TICK_S) + TICK_S;
    const listFrom = floorTo(nowS(), TICK_S) - TICK_LIST_S;
    const first = ticks.length ? secs(ticks[0].tick) : latest;
    if (ticks.length && first <= listFrom) return DEFAULT_RANGE;
    const need = end - Math.min(first, latest);
    const fit = RANGES.find(([, span]) => span >= need);
    return fit ? fit[0] : RANGES[RANGES.length - 1][0];
  }

  // compareIds are the children of the node compared in v: its top v.n by online at the tick.
  function compareIds(v, byId) {
    const n = byId.get(v.node);
    if (v.cmp === 'off' || !n) return [];
    return sortedChildren(n, byId).slice(0, v.n).map((k) => k.id);
  }

  function sortedChildren(n, byId) {
    const kids = (n.children || []).map((id) => byId.get(id)).filter(Boolean);
    return kids.sort((a, b) => b.online - a.online || (a.id < b.id ? -1 : 1));
  }

  // prepareTree indexes a tree answer and finds its parents that are not the sum of their
  // children (a damaged tick, or a rollup still in progress).
  function prepareTree(tree) {
    const byId = new Map((tree.nodes || []).map((n) => [n.id, n]));
    const mismatch = new Map();
    for (const n of tree.nodes || []) {
      const kids = (n.children || []).map((id) => byId.get(id)).filter(Boolean);
      if (kids.length === 0) continue;
      const sum = { online: 0, reported: 0, expected: 0 };
      for (const k of kids) {
        sum.online += k.online;
        sum.reported += k.reported;
        sum.expected += k.expected;
      }
      if (sum.online !== n.online || sum.reported !== n.reported || sum.expected !== n.expected) mismatch.set(n.id, sum);
    }
    return { tree, byId, mismatch, root: tree.nodes && tree.nodes[0] };
  }

  // gapSeries is a series answer of range with no data.
  function gapSeries(node, range, agg) {
    const points = [];
    for (let t = range.from; t < range.to; t += range.ss) points.push({ t: iso(t), online: null, reported: 0, expected: 0, complete: false });
    return { node, type: '', step: range.step, agg, tier: '', points };
  }

  // fetchView reads what view v needs, reusing what is shown when reason is a user's change
  // (not a refresh, and no load is failing): { view, tree, byId, mismatch, root, ticks, range,
  // series, compare, cache, loadedAt, notices } or { view, nodata, loadedAt }. loadedAt is when
  // the oldest of it was read.
  async function fetchView(v, reason, signal) {
    const fresh = reason !== 'user' || state.failures > 0;
    const cur = state.data && state.view && state.view.project === v.project && !state.data.nodata && !fresh ? state.data : null;
    const loadedAt = cur ? cur.loadedAt : Date.now();
    let t;
    if (cur && state.view.tick === v.tick) {
      t = cur;
    } else {
      try {
        t = prepareTree(await api(projectPath(v.project, '/tree'), { tick: v.tick }, signal));
      } catch (e) {
        if (e instanceof ApiError && e.code === 'no_data' && !v.tick) return { view: v, nodata: e.message, loadedAt };
        throw e;
      }
    }
    if (!t.root) return { view: v, nodata: 'The tree of this tick is empty.', loadedAt };
    const notices = [];
    const tickS = secs(t.tree.tick);
    if (!t.byId.has(v.node)) {
      if (v.node) notices.push('Node "' + v.node + '" is not in the tree at ' + fmtWhen(tickS, v.tz) + '; showing the root.');
      v = { ...v, node: t.root.id };
    }
    let ticksP = cur ? cur.ticks : api(projectPath(v.project, '/ticks'),
      { from: iso(floorTo(nowS(), TICK_S) - TICK_LIST_S) }, signal).then((b) => (Array.isArray(b) ? b : []));
    if (v.range.fit) {
      const ticks = await ticksP;
      v = { ...v, range: { rel: fitRange(ticks, tickS) } };
      ticksP = Promise.resolve(ticks);
    }
    const range = chartRange(v, tickS);
    const cache = cur ? cur.cache : new Map();
    const used = new Map();
    const series = (node) => {
      const params = { node, from: iso(range.from), to: iso(range.to), step: range.step, agg: range.step === '5m' ? '' : v.agg };
      const key = JSON.stringify(params);
      const p = cache.get(key) || api(projectPath(v.project, '/series'), params, signal).catch((e) => {
        // A node of the tick's tree that no tree version of the range has (it came later):
        // a range of gaps, not an error.
        if (e instanceof ApiError && e.code === 'unknown_node') return gapSeries(node, range, v.agg);
        throw e;
      });
      used.set(key, p);
      return p;
    };
    const ids = compareIds(v, t.byId);
    const diffP = v.diff ? api(projectPath(v.project, '/diff'), { from: diffFrom(v.diff, tickS), to: iso(tickS), node: v.node, n: DIFF_N }, signal)
      .catch((e) => {
        if (e instanceof ApiError && (e.code === 'no_data' || e.code === 'unknown_node')) return { error: e.message };
        throw e;
      }) : Promise.resolve(null);
    // Annotations are an extra: a failure to read them does not fail the view.
    const notesP = api(projectPath(v.project, '/annotations'), { from: iso(range.from), to: iso(range.to) }, signal)
      .then((b) => (b && Array.isArray(b.annotations) ? b.annotations : []))
      .catch((e) => {
        if (e && e.name === 'AbortError') throw e;
        return [];
      });
    const [ticks, diff, notes, s, ...cmp] = await Promise.all([ticksP, diffP, notesP, series(v.node), ...ids.map(series)]);
    return {
      view: v, tree: t.tree, byId: t.byId, mismatch: t.mismatch, root: t.root, ticks, range, series: s,
      compare: cmp.map((c, i) => ({ id: ids[i], series: c })), cache: used, loadedAt, notices, diff, notes,
    };
  }

  // load shows view next once everything it needs is read. reason: 'user' (a change the
  // user made), 'start', 'refresh' or 'retry'.
  async function load(next, reason) {
    if (state.loading) state.loading.abort();
    const ctrl = new AbortController();
    state.loading = ctrl;
    document.body.dataset.busy = 'true';
    showLoading(next, reason);
    let d;
    try {
      d = await fetchView(next, reason, ctrl.signal);
    } catch (e) {
      if (state.loading !== ctrl) return; // superseded by a newer load
      state.loading = null;
      delete document.body.dataset.busy;
      hideLoading();
      failed(next, reason, e);
      return;
    }
    if (state.loading !== ctrl) return;
    state.loading = null;
    delete document.body.dataset.busy;
    hideLoading();
    commit(d);
  }

  // showLoading says at once (in the same task as the click) that a load is under way: a bar
  // over the page and, in the status, what is being loaded; for a user's change the control
  // asked for is marked pending and the content dimmed until the new view is shown.
  function showLoading(next, reason) {
    const box = $('loading');
    const user = reason === 'user' && state.data;
    box.textContent = user ? 'Loading ' + describeChange(next) + '…' : reason === 'refresh' ? 'Refreshing…' : 'Loading…';
    box.hidden = false;
    box.dataset.since = String(performance.now());
    $('app').classList.toggle('pending', !!user);
    for (const b of document.querySelectorAll('#ranges button')) {
      b.classList.toggle('pending', !!user && !!next.range.rel && b.dataset.range === next.range.rel && next.range.rel !== state.view.range.rel);
    }
    if (!state.data) setStatus('loading…');
  }

  function hideLoading() {
    $('loading').hidden = true;
    $('app').classList.remove('pending');
    for (const b of document.querySelectorAll('#ranges button.pending')) b.classList.remove('pending');
  }

  // retryDelayS is the wait before retry number failures (1, 2, …) of a view refreshed every
  // every seconds (0: off): doubling from RETRY_FIRST_S (or the refresh interval when it is
  // shorter) up to the refresh interval, never more than RETRY_MAX_S, and at least what a
  // 503's Retry-After asked for (capped the same way); the jitter never passes the cap. So the page
  // shows the API's return within one refresh interval (at most a minute).
  function retryDelayS(failures, every, retryAfter) {
    const first = Math.min(RETRY_FIRST_S, every || RETRY_FIRST_S);
    const cap = Math.min(RETRY_MAX_S, Math.max(every || RETRY_MAX_S, 2 * first));
    const backoff = first * 2 ** Math.min(16, failures - 1) * (1 + Math.random() * 0.2);
    return Math.min(cap, Math.max(retryAfter || 0, backoff));
  }

  function commit(d) {
    const projectChanged = !state.view || state.view.project !== d.view.project;
    if (projectChanged) {
      state.expanded.clear();
      state.shown.clear();
    }
    state.view = d.view;
    state.data = d;
    state.failures = 0;
    state.failingSince = 0;
    state.lastError = '';
    state.retryAfter = 0;
    state.loads++;
    document.body.dataset.loads = String(state.loads);
    document.body.dataset.state = d.nodata ? 'nodata' : 'ready';
    writeHash();
    if (d.notices && d.notices.length) showError(d.notices.join(' '));
    renderAll();
    schedule();
  }

  function failed(next, reason, e) {
    if (e instanceof ApiError && e.status === 401) {
      showLogin('The API refused the token: ' + e.message);
      return;
    }
    const msg = e && e.message ? e.message : String(e);
    if (reason === 'user') {
      // The change is not shown: the controls go back to the view on screen.
      showError('Could not show ' + describeChange(next) + ': ' + msg + (state.data ? ' — still showing the view below.' : ''));
      renderControls();
      renderStatus();
      schedule(); // the refresh this load may have replaced
      return;
    }
    if (!state.data) state.view = next; // nothing shown yet: keep trying the view asked for
    if (!transient(e)) {
      // A 4xx does not heal by itself: say so, and go on refreshing as usual.
      showError('Could not load the view: ' + msg);
      if (!state.data) document.body.dataset.state = 'error';
      renderControls();
      renderStatus();
      schedule();
      return;
    }
    state.failures++;
    if (!state.failingSince) state.failingSince = Date.now();
    state.lastError = msg;
    state.retryAfter = e.retryAfter || 0;
    if (!state.data) document.body.dataset.state = 'error';
    schedule();
    renderStatus();
  }

  // describeChange names what differs between the view shown and next, for an error.
  function describeChange(next) {
    const v = state.view;
    if (!v || !state.data) return 'the dashboard';
    const parts = [];
    if (next.project !== v.project) parts.push('project ' + next.project);
    if (next.node !== v.node) parts.push('node ' + next.node);
    if (next.tick !== v.tick) parts.push(next.tick ? 'the tick ' + fmtWhen(secs(next.tick), next.tz) : 'the latest tick');
    if (JSON.stringify(next.range) !== JSON.stringify(v.range)) parts.push(rangeText(next));
    if (next.step !== v.step) parts.push('step ' + next.step);
    if (next.agg !== v.agg) parts.push(next.agg + ' per step');
    if (next.cmp !== v.cmp || next.n !== v.n) parts.push('the comparison of children');
    if (next.diff !== v.diff) parts.push(next.diff ? 'the changes since ' + (DIFF_TEXT[next.diff] || fmtWhen(secs(next.diff), next.tz)) : 'no comparison');
    return parts.length ? parts.join(', ') : 'the view';
  }

  function rangeText(v) {
    if (v.range.rel) return 'the last ' + v.range.rel;
    return fmtTime(v.range.from, v.tz) + ' → ' + fmtTime(v.range.to, v.tz) + ' ' + tzName(v.range.from, v.tz);
  }

  // go shows the view shown with change applied.
  function go(change) {
    if (!state.view) return;
    clearError();
    load(normalize({ ...state.view, ...change }), 'user');
  }

  // ---- refresh and retry

  // schedule sets the timer of the next load: a retry with backoff after failures, else the
  // refresh of a live view.
  function schedule() {
    clearTimeout(state.timer);
    state.retryAt = 0;
    const every = refreshS(state.view && state.view.refresh);
    let ms;
    if (state.failures > 0) {
      ms = Math.round(retryDelayS(state.failures, every, state.retryAfter) * 1000);
      state.retryAt = Date.now() + ms;
    } else if (state.data && !state.data.nodata && isLive(state.view) && every > 0) {
      ms = every * 1000;
    } else if (state.data && state.data.nodata && every > 0) {
      ms = every * 1000; // waiting for the first tick
    } else {
      return;
    }
    state.timer = setTimeout(onTimer, ms);
  }

  function onTimer() {
    if (document.visibilityState === 'hidden') {
      state.overdue = true; // refreshed when the tab is shown again
      return;
    }
    reload(state.failures > 0 ? 'retry' : 'refresh');
  }

  function reload(reason) {
    state.overdue = false;
    if (state.projects.length === 0) start();
    else load(state.view, reason);
  }

  // ---- status, errors, login

  function setStatus(text) { $('status').textContent = text; }

  function showError(msg) {
    $('error-text').textContent = msg;
    $('error').hidden = false;
  }
  function clearError() { $('error').hidden = true; }

  // renderStatus says how fresh the data shown is: when it was loaded, whether it refreshes,
  // and, while loads fail, that it is stale, since when, why and when the next try is.
  function renderStatus() {
    const v = state.view;
    const tz = v ? v.tz : 'utc';
    const stale = state.failures > 0;
    document.body.dataset.stale = String(stale && !!state.data);
    $('stale-badge').hidden = !(stale && state.data);
    $('app').classList.toggle('stale', stale && !!state.data);
    if (stale) {
      const next = state.retryAt ? ' Next try at ' + fmtClock(state.retryAt, tz) + '.' : '';
      const text = state.data
        ? 'Stale: the data shown was loaded at ' + fmtClock(state.data.loadedAt, tz) + ' ' + tzName(state.data.loadedAt / 1000, tz) +
          ' and has not been updated since; loading fails since ' + fmtClock(state.failingSince, tz) + ': ' + state.lastError + '.' + next
        : 'Cannot load the dashboard (failing since ' + fmtClock(state.failingSince, tz) + ' ' + tzName(state.failingSince / 1000, tz) + '): ' +
          state.lastError + '.' + next;
      $('stale-text').textContent = text;
      $('stale').hidden = false;
      setStatus(state.data ? 'stale since ' + fmtClock(state.failingSince, tz) : 'not loaded');
      return;
    }
    $('stale').hidden = true;
    if (!state.data) return;
    let s = 'updated ' + fmtClock(state.data.loadedAt, tz) + ' ' + tzName(state.data.loadedAt / 1000, tz);
    const every = refreshS(v.refresh);
    if (state.data.nodata) s += every ? ' · checks every ' + v.refresh : ' · refresh off';
    else if (!isLive(v)) s += ' · a fixed time: not refreshing';
    else if (every) s += ' · refreshes every ' + v.refresh;
    else s += ' · refresh off';
    if (!state.data.nodata && isLive(v)) {
      const age = nowS() - secs(state.data.tree.tick);
      if (age > 3 * TICK_S) s += ' · ⚠ the newest tick is ' + Math.round(age / 60) + ' min old';
    }
    setStatus(s);
  }

  function showLogin(reason) {
    state.token = '';
    storeSet('');
    clearTimeout(state.timer);
    if (state.loading) state.loading.abort();
    state.loading = null;
    state.projects = [];
    state.data = null;
    state.failures = 0;
    document.body.dataset.state = 'login';
    $('app').hidden = true;
    $('controls').hidden = true;
    $('signout').hidden = true;
    $('stale').hidden = true;
    $('share').hidden = true;
    $('login').hidden = false;
    $('login-reason').textContent = reason || '';
    $('login-reason').hidden = !reason;
    setStatus('');
    $('token-input').focus();
  }

  // start reads the token's projects, then shows state.view.
  async function start() {
    clearError();
    if (!state.token) {
      // A shared link comes without the token (unless its sender chose otherwise): say so.
      const p = state.view && state.view.project;
      showLogin(location.hash.length > 1 || p
        ? 'This link carries no token: links to the dashboard are shared without one. Paste an API token of project ' + (p ? '"' + p + '"' : 'the link') +
          ' below — ask the project\'s owner for a read-only one (rollup token create --project ' + (p || 'NAME') + ' --read-only).'
        : '');
      return;
    }
    $('login').hidden = true;
    $('signout').hidden = false;
    if (!state.data) document.body.dataset.state = 'loading';
    setStatus('loading…');
    if (state.loading) state.loading.abort();
    const ctrl = new AbortController();
    state.loading = ctrl;
    let body;
    try {
      body = await api('v1/projects', null, ctrl.signal);
    } catch (e) {
      if (state.loading !== ctrl) return;
      state.loading = null;
      failed(state.view, 'start', e);
      return;
    }
    if (state.loading !== ctrl) return;
    state.loading = null;
    const list = Array.isArray(body) ? body : (body && body.projects) || [];
    state.projects = list.map((p) => (typeof p === 'string' ? p : p.name)).filter(Boolean);
    if (state.projects.length === 0) {
      showError('This token may read no project.');
      setStatus('');
      document.body.dataset.state = 'error';
      return;
    }
    if (!state.projects.includes(state.view.project)) {
      if (state.view.project) showError('Project "' + state.view.project + '" is not readable with this token; showing "' + state.projects[0] + '".');
      state.view = { ...state.view, project: state.projects[0], node: '', tick: '' };
    }
    $('controls').hidden = false;
    $('app').hidden = false;
    renderControls();
    load(state.view, 'start');
  }

  // ---- rendering

  function renderAll() {
    renderControls();
    if (state.data.nodata) {
      renderNoData(state.data.nodata);
    } else {
      renderTree();
      renderDetail();
      renderDiff();
      renderChart();
    }
    renderStatus();
    if (!$('share').hidden) renderShare();
  }

  function renderControls() {
    const v = state.view;
    if (!v) return;
    $('project').replaceChildren(...state.projects.map((p) => el('option', { value: p, text: p })));
    $('project').value = v.project;
    $('tz').value = v.tz;
    $('tz').title = 'local time is ' + tzName(nowS(), 'local') + ' now';
    const refreshes = REFRESHES.includes(v.refresh) ? REFRESHES : [...REFRESHES, v.refresh];
    $('refresh').replaceChildren(...refreshes.map((r) => el('option', { value: r, text: r })));
    $('refresh').value = v.refresh;
    renderTicks();
    renderRanges();
    const d = state.data && !state.data.nodata ? state.data : null;
    const r = d ? d.range : null;
    const span = spanOf(v);
    $('step').replaceChildren(
      el('option', { value: 'auto', text: 'auto' + (r && v.step === 'auto' ? ' (' + r.step + ')' : '') }),
      ...STEPS.map(([name]) => el('option', { value: name, text: name, disabled: !stepFits(name, span) })));
    $('step').value = v.step;
    $('agg').value = v.agg;
    $('agg-label').hidden = !r || r.step === '5m';
    const node = d && d.byId.get(v.node);
    const leaf = !node || (node.children || []).length === 0;
    $('cmp').value = v.cmp;
    $('cmp').disabled = !!node && leaf;
    $('cmp-n').replaceChildren(...COMPARE_NS.map((n) => el('option', { value: String(n), text: String(n) })));
    if (!COMPARE_NS.includes(v.n)) $('cmp-n').append(el('option', { value: String(v.n), text: String(v.n) }));
    $('cmp-n').value = String(v.n);
    $('cmp-n').disabled = v.cmp === 'off' || leaf;
    $('range-label').textContent = r ? fmtTime(r.from, v.tz) + ' → ' + fmtTime(r.to, v.tz) + ' ' + tzName(r.from, v.tz) : '';
    $('resolution').textContent = d ? resolutionText(d.range.step, d.series.tier) : '';
    $('custom-from').value = r ? toInput(r.from, v.tz) : '';
    $('custom-to').value = r ? toInput(r.to, v.tz) : '';
    $('custom-tz').textContent = tzName(r ? r.from : nowS(), v.tz);
    $('csv').disabled = !d;
  }

  // resolutionText says what one point of the chart is and where it comes from: 'one point
  // per hour, from hourly summaries'.
  function resolutionText(step, tier) {
    const per = { '5m': 'one point per 5 minutes', '1h': 'one point per hour', '1d': 'one point per UTC day' }[step] || step;
    return 'Resolution: ' + per + (TIER_TEXT[tier] ? ', from ' + TIER_TEXT[tier] : '');
  }

  function renderRanges() {
    const v = state.view;
    $('ranges').replaceChildren(...RANGES.map(([name]) => el('button', {
      type: 'button',
      'aria-pressed': String(v.range.rel === name),
      'data-range': name,
      text: name,
      onclick: () => {
        if (v.range.rel !== name) go({ range: { rel: name } });
      },
    })));
    $('custom-open').setAttribute('aria-pressed', String(!v.range.rel));
  }

  function renderNoData(why) {
    $('tree').replaceChildren(
      el('li', { class: 'nodata', text: why || 'No rolled-up tick yet for this project.' }),
      el('li', { class: 'hint', text: 'Totals appear once the project has a tree (rollup tree import) and agents have reported a tick.' }));
    $('tree-meta').textContent = '';
    $('tree-mismatch').hidden = true;
    $('orphans').hidden = true;
    $('detail').hidden = true;
    destroyChart();
  }

  // ---- rendering: tree

  function renderTree() {
    const d = state.data;
    const v = state.view;
    const t = d.tree;
    $('tree-meta').textContent = fmtWhen(secs(t.tick), v.tz) + ' · tree v' + t.tree_version + ' · ' + fmt(t.nodes.length) + ' nodes';
    const bad = d.mismatch.size;
    $('tree-mismatch').hidden = bad === 0;
    $('tree-mismatch').textContent = '⚠ ' + fmt(bad) + (bad === 1 ? ' total is' : ' totals are') +
      ' not the sum of their children at this tick (marked ⚠): the tick looks damaged, or its rollup is still running.';
    state.expanded.add(d.root.id);
    expandPath(v.node);
    const focused = document.activeElement && document.activeElement.closest('#tree li');
    $('tree').replaceChildren(treeItem(d.root, 1));
    if (focused) focusRow(focused.dataset.nodeId);
    const orphans = t.orphans || [];
    $('orphans').hidden = orphans.length === 0;
    $('orphans-title').textContent = fmt(orphans.length) + ' orphan' + (orphans.length === 1 ? '' : 's') + ' (not counted)';
    $('orphans-list').replaceChildren(...orphans.map((o) => el('li', { 'data-orphan-id': o.id, 'data-online': o.online },
      el('span', { text: o.id + ' (' + o.type + ')' }), el('span', { class: 'num', text: fmt(o.online) }))));
  }

  function expandPath(id) {
    const byId = state.data.byId;
    for (let n = byId.get(id); n; n = byId.get(n.parent)) {
      state.expanded.add(n.id);
      if (!n.parent) break;
    }
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

  // nodeAttrs are the data attributes of a node's numbers.
  function nodeAttrs(n) {
    return {
      'data-online': n.online,
      'data-reported': n.reported,
      'data-expected': n.expected,
      'data-complete': String(isComplete(n)),
      'data-nodata': String(noData(n)),
      'data-mismatch': String(state.data.mismatch.has(n.id)),
    };
  }

  // onlineText is a node's online as shown: "no data" when nothing under it reported.
  const onlineText = (n) => (noData(n) ? 'no data' : fmt(n.online));

  function treeItem(n, level) {
    const byId = state.data.byId;
    const kids = n.children || [];
    const open = kids.length > 0 && state.expanded.has(n.id);
    const selected = n.id === state.view.node;
    const bad = state.data.mismatch.get(n.id);
    const li = el('li', {
      role: 'treeitem',
      'aria-level': level,
      'aria-expanded': kids.length ? String(open) : null,
      'aria-selected': String(selected),
      'data-node-id': n.id,
      'data-type': n.type,
      ...nodeAttrs(n),
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
      class: 'row' + (selected ? ' selected' : '') + (isComplete(n) ? '' : ' incomplete') + (bad ? ' mismatch' : ''),
      tabindex: selected ? '0' : '-1',
      onkeydown: (ev) => rowKey(ev, n),
      title: n.id + ' · ' + n.type + ' · online ' + onlineText(n) + ' · ' + fmt(n.reported) + '/' + fmt(n.expected) + ' leaves reported' +
        (bad ? ' · ⚠ children sum to ' + fmt(bad.online) : ''),
      onclick: () => selectNode(n.id),
    },
    twisty,
    el('span', { class: 'node-name' }, n.id, el('span', { class: 'type', text: n.type })),
    el('span', { class: 'online' + (noData(n) ? ' nodata-value' : ''), 'data-field': 'online', text: (bad ? '⚠ ' : '') + onlineText(n) }),
    completenessCell(n));
    row.style.setProperty('--depth', String(level - 1));
    li.append(row);
    if (open) {
      const limit = state.shown.get(n.id) || CHILD_PAGE;
      const group = el('ul', { role: 'group' });
      for (const id of kids.slice(0, limit)) {
        const c = byId.get(id);
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

  function selectNode(id) {
    if (!state.data || !state.data.byId.has(id) || id === state.view.node) return;
    go({ node: id });
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

  // ---- rendering: the tick picker

  function renderTicks() {
    const v = state.view;
    const d = state.data && !state.data.nodata ? state.data : null;
    const sel = $('tick');
    const latest = d && !v.tick ? ' (' + fmtTime(secs(d.tree.tick), v.tz) + ')' : '';
    const opts = [el('option', { value: '', text: 'latest' + latest })];
    const seen = new Set();
    const rows = (d ? d.ticks : []).slice().sort((a, b) => secs(b.tick) - secs(a.tick));
    for (const r of rows) {
      const s = secs(r.tick);
      seen.add(s);
      const mark = (r.reported < r.expected ? ' ◐' : '') + (s + TICK_S > nowS() ? ' · open (provisional)' : '');
      opts.push(el('option', {
        value: iso(s),
        text: fmtTime(s, v.tz) + ' · ' + fmt(r.online) + ' online · ' + fmt(r.reported) + '/' + fmt(r.expected) + mark,
      }));
    }
    if (v.tick && !seen.has(secs(v.tick))) opts.splice(1, 0, el('option', { value: v.tick, text: fmtTime(secs(v.tick), v.tz) }));
    sel.replaceChildren(...opts);
    sel.value = v.tick;
  }

  // ---- rendering: the selected node

  function renderDetail() {
    const d = state.data;
    const v = state.view;
    const n = d.byId.get(v.node);
    if (!n) return;
    $('detail').hidden = false;
    const path = [];
    for (let p = d.byId.get(n.parent); p; p = d.byId.get(p.parent)) {
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
    for (const [k, val] of Object.entries(nodeAttrs(n))) summary.setAttribute(k, val);
    $('node-title').textContent = n.id;
    $('node-type').textContent = n.type;
    $('node-online').textContent = onlineText(n);
    $('node-online').classList.toggle('nodata-value', noData(n));
    const c = $('node-completeness');
    c.textContent = fmt(n.reported) + ' / ' + fmt(n.expected) + (isComplete(n) ? '' : ' · incomplete');
    c.classList.toggle('warn', !isComplete(n));
    // The open tick is provisional: agents may still overwrite its counts until it closes.
    const open = !!d.tree.open;
    summary.dataset.open = String(open);
    const prov = $('node-provisional');
    prov.hidden = !open;
    prov.textContent = open ? 'provisional: the tick is open until ' + fmtHM(secs(d.tree.closes_at), v.tz) + ' ' +
      tzName(secs(d.tree.closes_at), v.tz) + ', its counts may still change' : '';

    const bad = d.mismatch.get(n.id);
    const note = $('node-mismatch');
    note.hidden = !bad;
    if (bad) {
      const t = secs(d.tree.tick);
      const win = ' --project ' + v.project + ' --from ' + iso(t) + ' --to ' + iso(t + TICK_S);
      note.replaceChildren(
        el('b', { text: '⚠ Not the sum of its children. ' }),
        el('span', { text: 'This node shows ' + fmt(n.online) + ' online and ' + fmt(n.reported) + '/' + fmt(n.expected) +
          ' leaves; its children add up to ' + fmt(bad.online) + ' online and ' + fmt(bad.reported) + '/' + fmt(bad.expected) +
          '. The tick is damaged, or its rollup is still running. Check it with ' }),
        el('code', { text: 'rollup verify' + win }), el('span', { text: ' and repair it with ' }),
        el('code', { text: 'rollup replay' + win }), el('span', { text: '.' }));
    }

    const kids = sortedChildren(n, d.byId);
    const top = Math.max(1, ...kids.map((k) => k.online));
    const rows = kids.slice(0, CHILD_PAGE).map((k) => {
      const share = el('div', { class: 'share' });
      const fill = el('div');
      fill.style.width = ((100 * k.online) / top).toFixed(1) + '%';
      share.append(fill);
      return el('tr', {
        class: (isComplete(k) ? '' : 'incomplete') + (d.mismatch.has(k.id) ? ' mismatch' : ''),
        'data-child-id': k.id,
        ...nodeAttrs(k),
        tabindex: '0',
        'aria-label': k.id + ': ' + onlineText(k) + ' online, ' + fmt(k.reported) + ' of ' + fmt(k.expected) + ' leaves reported',
        onclick: () => selectNode(k.id),
        onkeydown: (ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            selectNode(k.id);
          }
        },
      },
      el('td', { class: 'id', text: k.id }),
      el('td', { class: 'type', text: k.type }),
      el('td', { class: 'num online' + (noData(k) ? ' nodata-value' : ''), text: (d.mismatch.has(k.id) ? '⚠ ' : '') + onlineText(k) }),
      el('td', { class: 'share-col' }, share),
      el('td', { class: 'num rep', text: fmt(k.reported) + '/' + fmt(k.expected) }));
    });
    if (kids.length > CHILD_PAGE) {
      rows.push(el('tr', {}, el('td', { colspan: 5, class: 'hint', text: fmt(kids.length - CHILD_PAGE) + ' more children: see the tree' })));
    }
    $('children-body').replaceChildren(...rows);
    $('children').hidden = kids.length === 0;
    $('children-empty').hidden = kids.length > 0;
  }

  // ---- rendering: why did it change?

  // diffFrom is the tick a diff of the tick at tickS compares with: diff is a DIFF_BACK key
  // or a tick.
  function diffFrom(diff, tickS) {
    return DIFF_BACK.has(diff) ? iso(tickS - DIFF_BACK.get(diff)) : diff;
  }

  function renderDiff() {
    const d = state.data;
    const v = state.view;
    const sel = $('diff-with');
    const opts = [el('option', { value: '', text: 'off' }), ...[...DIFF_BACK.keys()].map((k) => el('option', { value: k, text: DIFF_TEXT[k] }))];
    if (v.diff && !DIFF_BACK.has(v.diff)) opts.push(el('option', { value: v.diff, text: fmtWhen(secs(v.diff), v.tz) }));
    sel.replaceChildren(...opts);
    sel.value = v.diff;
    const box = $('diff');
    const r = d.diff;
    box.hidden = !r;
    delete box.dataset.rootChange;
    if (!r) return;
    if (r.error) {
      box.replaceChildren(el('p', { class: 'hint', text: 'Cannot compare: ' + r.error }));
      return;
    }
    box.dataset.from = r.from;
    box.dataset.to = r.to;
    box.dataset.rootChange = String(r.root.change);
    box.dataset.silentOnline = String(r.silent_online);
    const signed = (x) => (x > 0 ? '+' : x < 0 ? '−' : '±') + fmt(Math.abs(x));
    const pct = (x) => (x == null ? '—' : (100 * x).toFixed(0) + '%');
    const head = el('p', { class: 'diff-head' },
      el('b', { text: r.node + ' ' + signed(r.root.change) }),
      el('span', { text: ' from ' + fmtWhen(secs(r.from), v.tz) + ' (' + fmt(r.root.from) + ') to ' + fmtTime(secs(r.to), v.tz) + ' (' + fmt(r.root.to) + ')' }),
      r.silent_total ? el('span', { class: 'warn', text: ' · ' + fmt(r.silent_online) + ' of it is ' + fmt(r.silent_total) +
        ' leaves gone silent (missing reports, not players gone); the rest: ' + signed(r.root.reported_change) }) : null);
    const rows = r.nodes.map((n) => el('tr', { 'data-diff-id': n.id, 'data-change': String(n.change), class: n.silent_leaves && n.reported_change === 0 ? 'silent' : '' },
      el('td', { class: 'id' }, el('a', { href: '#', text: n.id, onclick: (ev) => { ev.preventDefault(); selectNode(n.id); } })),
      el('td', { class: 'type', text: n.type }),
      el('td', { class: 'num', text: fmt(n.from) }),
      el('td', { class: 'num', text: fmt(n.to) }),
      el('td', { class: 'num', text: signed(n.change) }),
      el('td', { class: 'num', text: pct(n.share) }),
      el('td', { class: 'num', text: n.silent_leaves ? signed(-n.silent_online) + ' (' + fmt(n.silent_leaves) + ' silent)' : '' })));
    const more = r.nodes_total > r.nodes.length ? el('p', { class: 'hint', text: fmt(r.nodes_total - r.nodes.length) + ' more changed nodes (smaller changes)' }) : null;
    const table = el('div', { class: 'table-wrap' }, el('table', { class: 'children diff-table' },
      el('thead', {}, el('tr', {}, ...['node', 'type', 'before', 'now', 'change', 'share', 'gone silent'].map((h, i) =>
        el('th', { scope: 'col', class: i >= 2 ? 'num' : '', text: h })))),
      el('tbody', {}, ...rows)));
    const silent = r.silent.length ? el('details', { class: 'diff-silent', open: true },
      el('summary', { text: fmt(r.silent_total) + ' leaves went silent: they reported ' + fmt(r.silent_online) + ' at ' + fmtTime(secs(r.from), v.tz) + ' and nothing since' }),
      el('ul', {}, ...r.silent.map((l) => el('li', { 'data-silent-id': l.id, text: l.id + ' (' + l.type + ', under ' + l.parent + '): ' + fmt(l.online) })))) : null;
    box.replaceChildren(head, r.nodes.length ? table : el('p', { class: 'hint', text: 'No node under ' + r.node + ' changed.' }), more, silent);
  }

  // ---- rendering: chart

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function destroyChart() {
    state.keyIdx = null;
    if (state.chart) {
      state.chart.destroy();
      state.chart = null;
    }
    $('chart').replaceChildren();
    $('readout').replaceChildren();
  }

  const pointsOf = (s) => (s && s.points) || [];

  // chartData is the chart's columns: x, the node's online, the incomplete points, and each
  // compared child's online.
  function chartData() {
    const d = state.data;
    const pts = pointsOf(d.series);
    const xs = pts.map((p) => secs(p.t));
    const ys = pts.map((p) => (p.online == null ? null : p.online));
    const inc = pts.map((p) => (p.online != null && !p.complete ? p.online : null));
    const open = pts.map((p) => !!p.open);
    const kids = d.compare.map((c) => {
      const byT = new Map(pointsOf(c.series).map((p) => [secs(p.t), p.online]));
      return xs.map((x) => (byT.has(x) ? byT.get(x) : null));
    });
    return { xs, ys, inc, open, kids };
  }

  function renderChart() {
    destroyChart();
    const d = state.data;
    const v = state.view;
    const r = d.range;
    const s = d.series;
    const box = $('chart');
    const { xs, ys, inc, open, kids } = chartData();
    const gaps = ys.filter((y) => y == null).length;
    const firstOpen = open.indexOf(true);
    const incomplete = inc.filter((y) => y != null).length;
    const mode = kids.length ? v.cmp : 'off';
    Object.assign(box.dataset, {
      seriesNode: s.node,
      step: s.step,
      tier: s.tier || '',
      agg: s.step === '5m' ? '' : s.agg || '',
      from: iso(r.from),
      to: iso(r.to),
      range: v.range.rel || 'custom',
      tz: v.tz,
      points: String(xs.length),
      gaps: String(gaps),
      incomplete: String(incomplete),
      compare: mode,
      compareIds: d.compare.map((c) => c.id).join(','),
      open: String(open.filter(Boolean).length),
      annotations: String((d.notes || []).length),
      openFrom: firstOpen < 0 ? '' : iso(xs[firstOpen]),
    });
    renderLegend(mode);
    renderNotes();
    if (xs.length === 0 || gaps === xs.length) {
      box.append(el('div', { class: 'empty', text: 'No data for ' + s.node + ' in this time range.' }));
    }
    if (typeof window.uPlot !== 'function') {
      box.append(el('div', { class: 'empty', text: 'The chart library did not load.' }));
      return;
    }
    const colors = {
      fg: cssVar('--muted'), grid: cssVar('--line'), accent: cssVar('--accent'), fill: cssVar('--accent-soft'),
      warn: cssVar('--warn'), warnSoft: cssVar('--warn-soft'), gap: cssVar('--gap'), sel: cssVar('--fg'),
      open: cssVar('--open-soft'), openLine: cssVar('--muted'),
    };
    const selTick = secs(d.tree.tick);

    // Bands behind the lines: grey where the node has no data, amber where it is incomplete.
    function drawBands(u) {
      const { ctx } = u;
      const top = u.bbox.top;
      const h = u.bbox.height;
      ctx.save();
      for (let i = 0; i < xs.length; i++) {
        const colour = ys[i] == null ? colors.gap : inc[i] != null ? colors.warnSoft : null;
        if (!colour) continue;
        const x0 = u.valToPos(xs[i], 'x', true);
        const x1 = u.valToPos(xs[i] + r.ss, 'x', true);
        ctx.fillStyle = colour;
        ctx.fillRect(x0, top, Math.max(1, x1 - x0), h);
      }
      // The open step (tick, hour or day not yet ended): hatched, labelled, left edge dashed.
      if (firstOpen >= 0) {
        const x0 = u.valToPos(xs[firstOpen], 'x', true);
        const x1 = u.valToPos(Math.min(r.to, xs[xs.length - 1] + r.ss), 'x', true);
        ctx.fillStyle = colors.open;
        ctx.fillRect(x0, top, Math.max(1, x1 - x0), h);
        ctx.strokeStyle = colors.openLine;
        ctx.lineWidth = 1;
        ctx.setLineDash([2, 3]);
        ctx.beginPath();
        ctx.moveTo(Math.round(x0) + 0.5, top);
        ctx.lineTo(Math.round(x0) + 0.5, top + h);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = colors.openLine;
        ctx.font = (10 * devicePixelRatio) + 'px system-ui, sans-serif';
        ctx.textAlign = 'right';
        ctx.fillText('provisional', x1 - 3 * devicePixelRatio, top + 12 * devicePixelRatio);
      }
      // rollup's own records: a tinted span for a window (a replay), a line at its start.
      for (const a of d.notes || []) {
        const t0 = Math.max(r.from, secs(a.time));
        const t1 = Math.min(r.to, secs(a.time_end));
        const colour = NOTE_COLOURS[a.kind] || colors.fg;
        const x0 = Math.round(u.valToPos(t0, 'x', true)) + 0.5;
        if (t1 > t0) {
          ctx.fillStyle = colour + '22';
          ctx.fillRect(x0, top, Math.max(1, u.valToPos(t1, 'x', true) - x0), h);
        }
        ctx.strokeStyle = colour;
        ctx.lineWidth = 1.5 * devicePixelRatio;
        ctx.setLineDash([]);
        ctx.beginPath();
        ctx.moveTo(x0, top);
        ctx.lineTo(x0, top + h);
        ctx.stroke();
      }
      if (selTick >= r.from && selTick < r.to) {
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
    const isolated = (col) => (u, si, show) => {
      if (show) return null;
      const out = [];
      for (let i = 0; i < col.length; i++) {
        if (col[i] != null && (i === 0 || col[i - 1] == null) && (i === col.length - 1 || col[i + 1] == null)) out.push(i);
      }
      return out;
    };

    const series = [{}];
    const data = [xs];
    const bands = [];
    if (mode === 'off') {
      series.push(
        { label: s.node, stroke: colors.accent, fill: colors.fill, width: 2, spanGaps: false,
          points: { size: 5, fill: colors.accent, stroke: colors.accent, filter: isolated(ys) } },
        { label: 'incomplete', stroke: colors.warn, width: 0, paths: () => null,
          points: { show: true, size: 7, width: 1, stroke: colors.warn, fill: colors.warn } });
      data.push(ys, inc);
    } else if (mode === 'lines') {
      kids.forEach((col, k) => {
        series.push({ label: d.compare[k].id, stroke: PALETTE[k % PALETTE.length], width: 2, spanGaps: false,
          points: { size: 5, fill: PALETTE[k % PALETTE.length], filter: isolated(col) } });
        data.push(col);
      });
    } else {
      // Stacked: each child on top of the ones before (a null counts 0 unless every child is
      // null there), and the node's own total as a dashed line over them.
      const acc = xs.map(() => 0);
      kids.forEach((col, k) => {
        const stacked = xs.map((x, i) => {
          acc[i] += col[i] == null ? 0 : col[i];
          return kids.every((c) => c[i] == null) ? null : acc[i];
        });
        const colour = PALETTE[k % PALETTE.length];
        series.push({ label: d.compare[k].id, stroke: colour, fill: colour + '55', width: 1, spanGaps: false, points: { show: false } });
        data.push(stacked);
        if (k > 0) bands.push({ series: [k + 1, k], fill: colour + '55' });
      });
      // "other": the children not in the top N, from the top of the stack up to the total, so
      // the stack always reaches the node's total.
      const otherCol = xs.map((x, i) => (ys[i] == null ? null : Math.max(acc[i], ys[i])));
      series.push({ label: 'other', stroke: colors.fg, fill: colors.gap, width: 1, spanGaps: false, points: { show: false } });
      data.push(otherCol);
      bands.push({ series: [kids.length + 1, kids.length], fill: colors.gap });
      series.push({ label: s.node + ' (total)', stroke: colors.sel, width: 1.5, dash: [6, 4], spanGaps: false,
        points: { size: 4, fill: colors.sel, filter: isolated(ys) } });
      data.push(ys);
    }

    const tzDate = v.tz === 'local' ? (ts) => new Date(ts * 1000) : (ts) => window.uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC');
    let down = null; // where the mouse went down on the chart: a drag is no click
    const opts = {
      width: chartWidth(),
      height: chartHeight(),
      tzDate,
      legend: { show: false },
      bands,
      cursor: {
        drag: { x: true, y: false, setScale: false },
        points: { size: 7 },
        bind: {
          mousedown: (u, targ, handler) => (e) => {
            down = { x: e.clientX, y: e.clientY };
            return handler(e);
          },
          dblclick: () => (e) => {
            e.preventDefault();
            zoomOut();
            return null;
          },
        },
      },
      scales: {
        x: { time: true, range: () => [r.from, r.to] },
        y: { range: (u, min, max) => [0, max > 0 ? Math.ceil(max * 1.12) : 1] },
      },
      axes: [
        { stroke: colors.fg, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.grid }, values: timeLabels(v.tz) },
        {
          stroke: colors.fg, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.grid }, size: 64,
          label: 'players online' + (s.step === '5m' ? '' : ' (' + (s.agg || DEFAULT_AGG) + ' per ' + s.step + ')'), labelSize: 18,
          values: (u, vals) => vals.map((x) => fmt(x)),
        },
      ],
      series,
      hooks: {
        drawClear: [drawBands],
        setCursor: [(u) => renderReadout(u.cursor.idx)],
        setSelect: [(u) => {
          const w = u.select.width;
          if (w < 5) return;
          const a = u.posToVal(u.select.left, 'x');
          const b = u.posToVal(u.select.left + w, 'x');
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          zoomTo(a, b);
        }],
      },
    };
    const u = new window.uPlot(opts, data, box);
    state.chart = u;
    u.over.addEventListener('click', (e) => {
      const moved = down && Math.hypot(e.clientX - down.x, e.clientY - down.y) > 4;
      down = null;
      const i = u.cursor.idx;
      if (moved || i == null || s.step !== '5m' || ys[i] == null) return;
      const t = iso(xs[i]);
      if (t !== v.tick) go({ tick: t });
    });
    pinchZoom(u);
    u.over.title = (s.step === '5m' ? 'Click a point to show the tree at that tick. ' : '') +
      (touchOnly() ? 'Pinch to zoom in or out.' : 'Drag to zoom in, double-click to zoom out (or pinch on a touch screen).');
    renderReadout(null);
  }

  // chartKey moves the chart's selected point with the keyboard and reads it in a live region.
  function chartKey(ev) {
    const u = state.chart;
    const d = state.data;
    if (!u || !d) return;
    const n = pointsOf(d.series).length;
    if (n === 0) return;
    let i = state.keyIdx;
    if (i == null || i >= n) {
      const t = secs(d.tree.tick);
      i = t >= d.range.from && t < d.range.to ? Math.floor((t - d.range.from) / d.range.ss) : n - 1;
    }
    switch (ev.key) {
      case 'ArrowLeft': i = Math.max(0, i - 1); break;
      case 'ArrowRight': i = Math.min(n - 1, i + 1); break;
      case 'Home': i = 0; break;
      case 'End': i = n - 1; break;
      case 'Enter': {
        const p = pointsOf(d.series)[i];
        if (d.range.step === '5m' && p && p.online != null && p.t !== state.view.tick) go({ tick: p.t });
        ev.preventDefault();
        return;
      }
      default: return;
    }
    ev.preventDefault();
    state.keyIdx = i;
    const x = u.valToPos(u.data[0][i], 'x');
    const yv = u.data[1][i];
    u.setCursor({ left: x, top: yv == null ? u.bbox.height / devicePixelRatio / 2 : u.valToPos(yv, 'y') });
    renderReadout(i);
    $('chart-live').textContent = $('readout').textContent;
    $('chart').dataset.keyIdx = String(i);
  }

  // touchOnly: a device without a fine pointer (a phone), where drag-zoom is not offered.
  function touchOnly() {
    return window.matchMedia('(pointer: coarse)').matches && !window.matchMedia('(any-pointer: fine)').matches;
  }

  function chartWidth() { return Math.max(240, $('chart').clientWidth); }
  function chartHeight() { return window.innerWidth < 600 ? 220 : 300; }

  function renderLegend(mode) {
    const d = state.data;
    const items = [];
    if (mode === 'off') {
      items.push(el('span', { 'data-legend-id': d.series.node, 'data-stats': statsText(pointsOf(d.series)) }, el('i', { class: 'sw sw-line' }),
        'online', el('span', { class: 'stats', text: ' ' + statsText(pointsOf(d.series)) })));
    } else {
      d.compare.forEach((c, k) => {
        const sw = el('i', { class: 'sw' });
        sw.style.background = PALETTE[k % PALETTE.length];
        const st = statsText(pointsOf(c.series));
        items.push(el('span', { 'data-legend-id': c.id, 'data-stats': st }, sw, c.id, el('span', { class: 'stats', text: ' ' + st })));
      });
      if (mode === 'stacked') items.push(el('span', { 'data-legend-id': 'other' }, el('i', { class: 'sw sw-other' }), 'other children'));
      if (mode === 'stacked') items.push(el('span', {}, el('i', { class: 'sw sw-total' }), d.series.node + ' (total)'));
      const all = (d.byId.get(state.view.node).children || []).length;
      items.push(el('span', { class: 'hint', text: 'top ' + d.compare.length + ' of ' + all + ' children by online at ' +
        fmtTime(secs(d.tree.tick), state.view.tz) }));
    }
    if (pointsOf(d.series).some((p) => p.open)) {
      items.push(el('span', { 'data-legend': 'open' }, el('i', { class: 'sw sw-open' }),
        'provisional (the open ' + ({ '5m': 'tick', '1h': 'hour', '1d': 'day' }[d.range.step] || 'step') + ': may still change)'));
    }
    items.push(
      el('span', {}, el('i', { class: 'sw sw-inc' }), 'incomplete (some leaves not reported)'),
      el('span', {}, el('i', { class: 'sw sw-gap' }), 'no data'),
      el('span', {}, el('i', { class: 'sw sw-sel' }), 'selected tick'),
      el('span', { class: 'hint', 'data-hint': 'chart', text: touchOnly()
        ? (d.range.step === '5m' ? 'tap: pick a tick · ' : '') + 'pinch: zoom in or out'
        : (d.range.step === '5m' ? 'click: pick a tick · ' : '') + 'drag: zoom in · double-click: zoom out · arrow keys on the chart: move the point' }));
    $('legend').replaceChildren(...items);
  }

  // statsText is a series' min, max, mean and last over its points with data.
  function statsText(pts) {
    const vals = pts.filter((p) => p.online != null).map((p) => p.online);
    if (vals.length === 0) return 'no data';
    const mean = vals.reduce((a, b) => a + b, 0) / vals.length;
    return 'min ' + fmt(Math.min(...vals)) + ' · max ' + fmt(Math.max(...vals)) + ' · mean ' + fmt(Math.round(mean * 10) / 10) +
      ' · last ' + fmt(vals[vals.length - 1]);
  }

  // renderNotes lists the annotations of the range under the chart: what rollup recorded.
  function renderNotes() {
    const d = state.data;
    const v = state.view;
    const notes = d.notes || [];
    $('annotations').hidden = notes.length === 0;
    $('annotations-list').replaceChildren(...notes.map((a) => {
      const sw = el('i', { class: 'sw' });
      sw.style.background = NOTE_COLOURS[a.kind] || '';
      const t0 = secs(a.time);
      const t1 = secs(a.time_end);
      const when = fmtTime(t0, v.tz) + (t1 > t0 ? ' → ' + fmtTime(t1, v.tz) : '') + ' ' + tzName(t0, v.tz);
      return el('li', { 'data-kind': a.kind, 'data-time': a.time }, sw, el('b', { text: a.title }), ' · ' + when + ' · ' + a.text);
    }));
  }

  // timeLabels labels the x axis in tz, 24-hour, with the date under the first label of a day.
  function timeLabels(tz) {
    return (u, splits, axis, space, incr) => {
      let prevDay = '';
      let prevYear = '';
      return splits.map((x) => {
        const full = fmtDay(x, tz);
        const day = full.slice(5);
        const year = full.slice(0, 4);
        // Days: the year under the first label of each year, so a year-long axis says which.
        const label = incr >= 86400 ? (year !== prevYear ? day + '\n' + year : day)
          : day !== prevDay ? fmtHM(x, tz) + '\n' + day : fmtHM(x, tz);
        prevDay = day;
        prevYear = year;
        return label;
      });
    };
  }

  // completenessText says how complete point p is: at 5m its leaves, at 1h and 1d its ticks
  // (a sum of leaves over ticks would read 2,400/2,400 for a 200-leaf tree), "so far" while
  // the step is open.
  function completenessText(p, step) {
    if (step === '5m' || p.ticks === 1) return 'leaves ' + fmt(p.reported) + '/' + fmt(p.expected);
    const due = p.ticks_due != null ? p.ticks_due : p.ticks;
    let s = 'ticks complete ' + fmt(p.ticks_complete || 0) + '/' + fmt(due);
    if (due < p.ticks) s += ' so far (of ' + fmt(p.ticks) + ')';
    return s;
  }

  // renderReadout shows the values at point idx of the chart, or without one (the cursor is
  // not on the chart) at the selected tick, or the last point with data.
  function renderReadout(idx) {
    const d = state.data;
    const v = state.view;
    const pts = pointsOf(d.series);
    let i = idx;
    let what = '';
    if (i == null) {
      const t = secs(d.tree.tick);
      if (t >= d.range.from && t < d.range.to) {
        i = Math.floor((t - d.range.from) / d.range.ss);
        what = d.range.step === '5m' ? 'selected tick: ' : 'selected tick ' + fmtHM(t, v.tz) + ' in ';
      } else {
        for (i = pts.length - 1; i >= 0 && pts[i].online == null; i--);
        what = 'last point: ';
      }
    }
    const p = pts[i];
    const box = $('readout');
    if (!p) {
      box.replaceChildren();
      delete box.dataset.t;
      return;
    }
    box.dataset.t = p.t;
    box.dataset.online = p.online == null ? '' : String(p.online);
    const ps = secs(p.t);
    const when = d.range.step === '5m' ? fmtWhen(ps, v.tz)
      : fmtTime(ps, v.tz) + '–' + (d.range.step === '1d' ? fmtTime(ps + d.range.ss, v.tz) : fmtHM(ps + d.range.ss, v.tz)) + ' ' +
        tzName(ps, v.tz) + ' (' + d.series.agg + ' per ' + d.range.step + ')';
    const parts = [el('span', { text: what + when + ' · ' + d.series.node + ' ' })];
    box.dataset.open = String(!!p.open);
    box.dataset.completeness = completenessText(p, d.range.step);
    if (p.online == null) {
      parts.push(el('span', { class: 'warn', text: 'no data' }));
    } else {
      parts.push(el('b', { text: fmt(p.online) }), el('span', { text: ' online · ' + box.dataset.completeness }));
      if (!p.complete) parts.push(el('span', { class: 'warn', text: ' · incomplete' }));
      else if (p.open) parts.push(el('span', { text: ' · complete so far' }));
    }
    if (p.open && p.closes_at) {
      const c = secs(p.closes_at);
      const what = { '5m': 'tick', '1h': 'hour', '1d': 'day' }[d.range.step] || 'step';
      parts.push(el('span', { class: 'provisional', 'data-closes-at': p.closes_at,
        text: ' · provisional: the ' + what + ' is open until ' + (d.range.step === '1d' ? fmtTime(c, v.tz) : fmtHM(c, v.tz)) + ' ' + tzName(c, v.tz) }));
    }
    const line = [el('div', {}, parts)];
    if (d.compare.length) {
      const kids = d.compare.map((c, k) => {
        const q = pointsOf(c.series).find((x) => x.t === p.t);
        const sw = el('i', { class: 'sw' });
        sw.style.background = PALETTE[k % PALETTE.length];
        const val = q && q.online != null ? fmt(q.online) : 'no data';
        return el('span', { class: 'kid', 'data-child-id': c.id, 'data-online': q && q.online != null ? String(q.online) : '' },
          sw, c.id + ' ', el('b', { text: val }), q && q.online != null && !q.complete ? el('span', { class: 'warn', text: ' ◐' }) : null);
      });
      line.push(el('div', { class: 'kids' }, kids));
    }
    box.replaceChildren(...line);
  }

  // ---- zoom and custom ranges

  function zoomTo(a, b) {
    const from = floorTo(a, TICK_S);
    const to = Math.max(from + TICK_S, ceilTo(b, TICK_S));
    go({ range: { from, to } });
  }

  // pinchZoom zooms chart u with two fingers, as drag-zoom does with a mouse: the times under
  // the fingers when they touch stay under them, and on release the chart shows the range
  // they then span across its width (fingers apart: zoom in; together: zoom out), at least a
  // tick, at most MAX_SPAN_S, never past the current tick. While pinching, the hint says what
  // the release will show. One finger scrolls the page (touch-action: pan-y) or taps a point.
  function pinchZoom(u) {
    const over = u.over;
    let start = null; // the two touches' ids and the times under them
    let next = null; // the range a release shows
    let said = null; // the hint's text before the pinch
    const hint = () => document.querySelector('#legend [data-hint="chart"]');
    const xOf = (t) => t.clientX - over.getBoundingClientRect().left;
    over.addEventListener('touchstart', (e) => {
      start = null;
      next = null;
      if (e.touches.length !== 2) return;
      e.preventDefault();
      const [p, q] = [...e.touches];
      if (Math.abs(xOf(p) - xOf(q)) < 8) return;
      start = { ids: [p.identifier, q.identifier], ta: u.posToVal(xOf(p), 'x'), tb: u.posToVal(xOf(q), 'x') };
      if (said == null && hint()) said = hint().textContent;
    }, { passive: false });
    over.addEventListener('touchmove', (e) => {
      if (!start || e.touches.length !== 2) return;
      e.preventDefault();
      const xs = new Map([...e.touches].map((t) => [t.identifier, xOf(t)]));
      const p = xs.get(start.ids[0]);
      const q = xs.get(start.ids[1]);
      if (p == null || q == null || Math.abs(p - q) < 8) return;
      const per = (start.tb - start.ta) / (q - p); // seconds per pixel
      if (!(per > 0)) return;
      next = clampRange(start.ta - p * per, start.ta + (over.clientWidth - p) * per);
      const tz = state.view.tz;
      if (hint()) hint().textContent = 'release: show ' + fmtTime(next.from, tz) + ' → ' + fmtTime(next.to, tz) + ' ' + tzName(next.to, tz);
    }, { passive: false });
    over.addEventListener('touchend', (e) => {
      if (!start || e.touches.length >= 2) return;
      const n = next;
      start = null;
      next = null;
      const r = state.data && state.data.range;
      // A two-finger tap (or a pinch of a few pixels) changes nothing.
      if (!n || !r || (Math.abs(n.from - r.from) < TICK_S && Math.abs(n.to - r.to) < TICK_S)) {
        if (said != null && hint()) hint().textContent = said;
        said = null;
        return;
      }
      said = null;
      go({ range: n });
    });
    over.addEventListener('touchcancel', () => {
      if (said != null && hint()) hint().textContent = said;
      start = null;
      next = null;
      said = null;
    });
  }

  // clampRange aligns [a, b) to ticks and keeps it between a tick and MAX_SPAN_S long and
  // not past the current tick (moved back, not cut).
  function clampRange(a, b) {
    const end = floorTo(nowS(), TICK_S) + TICK_S;
    const span = Math.min(MAX_SPAN_S, Math.max(TICK_S, ceilTo(b, TICK_S) - floorTo(a, TICK_S)));
    const to = Math.min(end, floorTo(a, TICK_S) + span);
    const from = Math.max(0, to - span);
    return { from, to: from + span };
  }

  // zoomOut doubles the time range around its middle, up to the current tick.
  function zoomOut() {
    if (!state.data || state.data.nodata) return;
    const r = state.data.range;
    const span = Math.min(MAX_SPAN_S, 2 * (r.to - r.from));
    const end = floorTo(nowS(), TICK_S) + TICK_S;
    let to = Math.min(end, ceilTo((r.from + r.to) / 2 + span / 2, TICK_S));
    const from = Math.max(0, to - span);
    to = from + span;
    go({ range: { from, to } });
  }

  function applyCustom(ev) {
    ev.preventDefault();
    const tz = state.view.tz;
    const from = fromInput($('custom-from').value, tz);
    const to = fromInput($('custom-to').value, tz);
    let err = '';
    if (!Number.isFinite(from) || !Number.isFinite(to)) err = 'Give both times.';
    else if (from >= to) err = '"From" must be before "To".';
    else if (to - from > MAX_SPAN_S) err = 'At most 731 days (two years).';
    $('custom-error').textContent = err;
    if (err) return;
    $('custom').hidden = true;
    $('custom-open').setAttribute('aria-expanded', 'false');
    go({ range: { from: floorTo(from, TICK_S), to: ceilTo(to, TICK_S) } });
  }

  // ---- CSV export

  // csvText is the series shown (the node's and each compared child's) as CSV, one row per
  // node and point; t is the point's start in RFC 3339 UTC, online empty for no data.
  function csvText() {
    const d = state.data;
    const rows = ['t,node,online,reported,expected,complete'];
    for (const s of [d.series, ...d.compare.map((c) => c.series)]) {
      for (const p of pointsOf(s)) {
        rows.push([iso(secs(p.t)), s.node, p.online == null ? '' : String(p.online), p.reported, p.expected, p.complete].join(','));
      }
    }
    return rows.join('\r\n') + '\r\n';
  }

  function downloadCSV() {
    const d = state.data;
    if (!d || d.nodata) return;
    const stamp = (s) => iso(s).replace(/[-:]/g, '').slice(0, 13) + 'Z'; // 20240501T1005Z
    const agg = d.range.step === '5m' ? '' : '-' + d.series.agg;
    const name = 'rollup-' + state.view.project + '-' + d.series.node + '-' + stamp(d.range.from) + '-' + stamp(d.range.to) + '-' + d.range.step + agg + '.csv';
    const url = URL.createObjectURL(new Blob([csvText()], { type: 'text/csv' }));
    const a = el('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // ---- share

  function renderShare() {
    $('share-link').value = shareLink($('share-token').checked, $('share-lock').checked);
    $('share-copied').textContent = '';
  }

  function toggleShare(open) {
    $('share').hidden = !open;
    $('share-open').setAttribute('aria-expanded', String(open));
    if (!open) return;
    $('share-token').checked = false;
    renderShare();
    $('share-link').focus();
    $('share-link').select();
  }

  async function copyShare() {
    const link = $('share-link').value;
    try {
      await navigator.clipboard.writeText(link);
      $('share-copied').textContent = 'copied';
    } catch {
      $('share-link').focus();
      $('share-link').select();
      $('share-copied').textContent = 'selected: press Ctrl+C (⌘C) to copy';
    }
  }

  // ---- wiring

  function init() {
    const h = viewFromHash();
    state.view = h.view;
    if (h.token) {
      state.token = h.token;
      storeSet(h.token);
    } else {
      state.token = storeGet();
    }
    writeHash(); // drops the token from the address bar and history entry

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
    $('retry-now').addEventListener('click', () => reload('retry'));
    $('refresh-now').addEventListener('click', () => reload(state.failures > 0 ? 'retry' : 'refresh'));
    window.addEventListener('online', () => { if (state.failures > 0) reload('retry'); });
    $('project').addEventListener('change', (ev) => go({ project: ev.target.value, node: '', tick: '' }));
    $('tick').addEventListener('change', (ev) => go({ tick: ev.target.value }));
    $('tz').addEventListener('change', (ev) => go({ tz: ev.target.value }));
    $('refresh').addEventListener('change', (ev) => go({ refresh: ev.target.value }));
    $('step').addEventListener('change', (ev) => go({ step: ev.target.value }));
    $('agg').addEventListener('change', (ev) => go({ agg: ev.target.value }));
    $('cmp').addEventListener('change', (ev) => go({ cmp: ev.target.value }));
    $('cmp-n').addEventListener('change', (ev) => go({ n: Number(ev.target.value) }));
    $('diff-with').addEventListener('change', (ev) => go({ diff: ev.target.value }));
    $('chart').addEventListener('keydown', chartKey);
    $('zoom-out').addEventListener('click', zoomOut);
    $('custom-open').addEventListener('click', () => {
      const open = $('custom').hidden;
      $('custom').hidden = !open;
      $('custom-open').setAttribute('aria-expanded', String(open));
      $('custom-error').textContent = '';
    });
    $('custom').addEventListener('submit', applyCustom);
    $('csv').addEventListener('click', downloadCSV);
    $('share-open').addEventListener('click', () => toggleShare($('share').hidden));
    $('share-close').addEventListener('click', () => toggleShare(false));
    $('share-token').addEventListener('change', renderShare);
    $('share-lock').addEventListener('change', renderShare);
    $('share-copy').addEventListener('click', copyShare);
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && !$('share').hidden) toggleShare(false);
    });
    window.addEventListener('hashchange', () => {
      // A link pasted into this tab: show its view.
      const next = viewFromHash();
      if (next.token) {
        state.token = next.token;
        storeSet(next.token);
      }
      if (!state.token) state.token = storeGet();
      if (state.projects.includes(next.view.project)) {
        load(next.view, 'user');
      } else {
        state.view = next.view;
        start();
      }
    });
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible' && state.overdue) reload(state.failures > 0 ? 'retry' : 'refresh');
    });
    let resizeTimer = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        if (state.chart) state.chart.setSize({ width: chartWidth(), height: chartHeight() });
      }, 100);
    });
    start();
  }

  // For the browser test: the retry policy as a pure function.
  window.rollupDashboard = { retryDelayS };

  init();
})();
